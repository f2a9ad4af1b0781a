"""Which fields of a dataclass hold data (tensors, shaped objects) and which hold configuration.

The split is made once per class from the fields' type annotations, never from the values
an instance happens to hold: a field annotated `Tensor`, a dataclass type, `Any`, or a
container or union that may contain one of those is *data*; a field whose annotation can
only ever describe numbers, strings, enums, shapes, slices, callables or types is *config*.
The fields `variable_attrs` and `value_attrs` are *special*: they list attribute names
(meta-information for optimisers and tracers) and are neither data nor config.

Tree functions (`stack`, `slice_`, ...) transform the data fields of an instance and copy
its config fields unchanged, so a wrong classification shows up as a config field that
was not sliced or a data field compared for equality. Annotations that cannot be resolved
count as data, which is the safe side: data fields are traversed, not compared.
"""

import collections.abc
import dataclasses
import enum
import sys
import types
import typing
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..backend import DType
from ._shape import Shape

SPECIAL_FIELD_NAMES = frozenset({'variable_attrs', 'value_attrs'})

# Values of these types (and their subclasses) cannot hold a tensor, directly or nested.
_CONFIG_TYPES = (int, float, complex, bool, str, bytes, type(None), enum.Enum, Shape, slice, range, DType, type,
                 types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_CONFIG_ORIGINS = (collections.abc.Callable, type, typing.Literal)
_UNIONS = (typing.Union, types.UnionType)


class _Classification(NamedTuple):
    data: tuple[dataclasses.Field, ...]
    config: tuple[dataclasses.Field, ...]
    special: tuple[dataclasses.Field, ...]
    non_data: tuple[dataclasses.Field, ...]
    names: frozenset  # names of all fields


_CLASSIFIED: 'weakref.WeakKeyDictionary[type, _Classification]' = weakref.WeakKeyDictionary()


def is_data_annotation(annotation) -> bool:
    """Whether a field annotated with `annotation` may hold a Tensor or a shaped object.

    Args:
        annotation: a resolved type annotation. A str or `typing.ForwardRef` (an annotation that
            could not be resolved) counts as data, as do `Any`, unknown classes, dataclasses and
            `Tensor`.

    Returns:
        False only if every value the annotation admits is config: numbers, str, bytes, None,
        enums, `Shape`, slices, dtypes, callables, types, literals, or containers and unions
        of only those.
    """
    if annotation is None or annotation is Ellipsis:
        return False
    if isinstance(annotation, (str, typing.ForwardRef)) or annotation is Any:
        return True
    if isinstance(annotation, typing.NewType):
        return is_data_annotation(annotation.__supertype__)
    if isinstance(annotation, typing.TypeVar):
        bounds = annotation.__constraints__ or ((annotation.__bound__,) if annotation.__bound__ else ())
        return not bounds or any(is_data_annotation(b) for b in bounds)
    origin = typing.get_origin(annotation)
    if origin is None:
        if isinstance(annotation, type):
            return not issubclass(annotation, _CONFIG_TYPES) and annotation is not collections.abc.Callable
        return True  # some typing construct we do not know: assume it may hold data
    args = typing.get_args(annotation)
    if origin is typing.Annotated or origin is typing.Final:
        return is_data_annotation(args[0])
    if origin in _UNIONS:
        return any(is_data_annotation(a) for a in args)
    if origin in _CONFIG_ORIGINS:
        return False
    if not isinstance(origin, type):
        return True
    if issubclass(origin, collections.abc.Mapping):
        # keys are hashable, which tensors are not: only the value type matters
        return is_data_annotation(args[-1]) if args else True
    if issubclass(origin, collections.abc.Iterable) and not issubclass(origin, (str, bytes)):
        return any(is_data_annotation(a) for a in args) if args else True
    return is_data_annotation(origin)  # a generic class such as a parametrised dataclass


def resolved_annotations(cls: type) -> dict[str, Any]:
    """Resolved annotation of every field of `cls`; where evaluation fails, the annotation as written."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError, SyntaxError, AttributeError):
        pass  # some annotation is unresolvable: resolve the fields one by one below
    hints = {}
    for f in dataclasses.fields(cls):
        hints[f.name] = _resolve_one(cls, f) if isinstance(f.type, (str, typing.ForwardRef)) else f.type
    return hints


def _resolve_one(cls: type, f: dataclasses.Field):
    owner = next((c for c in cls.__mro__ if f.name in vars(c).get('__annotations__', {})), cls)
    module = sys.modules.get(owner.__module__)
    local_names = {**vars(owner), owner.__name__: owner, cls.__name__: cls}
    holder = types.SimpleNamespace(__annotations__={f.name: f.type})
    try:
        return typing.get_type_hints(holder, globalns=getattr(module, '__dict__', {}), localns=local_names,
                                     include_extras=True)[f.name]
    except (NameError, TypeError, SyntaxError, AttributeError):
        return f.type  # a str or ForwardRef, which is_data_annotation counts as data


def _classification(obj) -> _Classification:
    cls = obj if isinstance(obj, type) else type(obj)
    result = _CLASSIFIED.get(cls)
    if result is None:
        result = _CLASSIFIED[cls] = _classify(cls, obj)
    return result


def _classify(cls: type, obj) -> _Classification:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"Field classification needs a dataclass type or instance, but got {obj!r} of type "
                        f"{type(obj).__module__}.{type(obj).__qualname__}")
    fields = dataclasses.fields(cls)
    hints = resolved_annotations(cls)
    data, config, special = [], [], []
    for f in fields:
        if f.name in SPECIAL_FIELD_NAMES:
            special.append(f)
        elif is_data_annotation(hints.get(f.name, f.type)):
            data.append(f)
        else:
            config.append(f)
    non_data = tuple(f for f in fields if f not in data)
    return _Classification(tuple(data), tuple(config), tuple(special), non_data, frozenset(f.name for f in fields))


def data_fields(obj) -> Sequence[dataclasses.Field]:
    """Fields of a dataclass that may hold, directly or nested, Tensors or shaped objects.

    Args:
        obj: dataclass type or instance.

    Returns:
        The fields, in definition order.

    Raises:
        TypeError: `obj` is not a dataclass or dataclass instance.
    """
    return _classification(obj).data


def config_fields(obj) -> Sequence[dataclasses.Field]:
    """Fields of a dataclass that cannot hold Tensors or shaped objects, special fields excluded.

    Args:
        obj: dataclass type or instance.

    Raises:
        TypeError: `obj` is not a dataclass or dataclass instance.
    """
    return _classification(obj).config


def special_fields(obj) -> Sequence[dataclasses.Field]:
    """The meta-information fields `variable_attrs` and `value_attrs` a dataclass declares.

    Args:
        obj: dataclass type or instance.

    Raises:
        TypeError: `obj` is not a dataclass or dataclass instance.
    """
    return _classification(obj).special


def non_data_fields(obj) -> Sequence[dataclasses.Field]:
    """All fields of a dataclass that are not data fields: config fields and special fields.

    Args:
        obj: dataclass type or instance.

    Raises:
        TypeError: `obj` is not a dataclass or dataclass instance.
    """
    return _classification(obj).non_data


def field_names(obj) -> frozenset:
    """Names of all fields of a dataclass type or instance."""
    return _classification(obj).names


def dataclass_data_items(obj) -> list[tuple[str, Any]]:
    """(name, value) of every data field of a dataclass instance, in definition order.

    Raises:
        TypeError: `obj` is not a dataclass instance.
    """
    if isinstance(obj, type):
        raise TypeError(f"dataclass_data_items() needs a dataclass instance, but got the class {obj.__qualname__}")
    return [(f.name, getattr(obj, f.name)) for f in _classification(obj).data]
