"""`@checked`: validate the dims and dtypes that `Annotated` field annotations declare, at construction.

    @checked
    @dataclass(frozen=True)
    class Grid:
        values: Annotated[Tensor, spatial('x,y'), channel(vector='x,y'), float]
        mask: Annotated[Tensor | None, 'x:s,y:s', bool] = None

The metadata of an `Annotated` field may hold Shapes (dims with their types, and sizes or
labels where given), dim specs like `'x:s,y:s'` (names and types only), a dtype kind
(`float`, `int`, `complex`, `bool`) or a `DType` (exact). A value must have every listed
dim, with the listed type, size and labels; besides those it may only have batch dims.
None passes where the annotation admits None. Fields without such metadata are not checked.
"""

import dataclasses
import functools
import types
import typing
import weakref
from typing import Any, NamedTuple

from ..backend import DType
from ..math import BATCH, EMPTY_SHAPE, Shape, concat_shapes, shape
from ..math.kinds import parse_dim_spec, resolved_annotations

_KINDS = (float, int, complex, bool)
_UNIONS = (typing.Union, types.UnionType)


class AnnotationMismatch(ValueError):
    """A field's value does not have the dims its `Annotated` annotation declares."""


class AnnotationTypeMismatch(AnnotationMismatch, TypeError):
    """A field's value is not of the type or dtype its `Annotated` annotation declares."""


class _FieldSpec(NamedTuple):
    name: str
    base: Any  # the annotated type, None if it names no class to check with isinstance
    dims: Shape
    dtype: Any  # a kind from _KINDS, a DType, or None
    optional: bool


_SPECS: 'weakref.WeakKeyDictionary[type, tuple[_FieldSpec, ...]]' = weakref.WeakKeyDictionary()


def checked(cls: type) -> type:
    """Class decorator validating the `Annotated` dims and dtypes of a dataclass's fields at construction.

    The check runs once the generated `__init__` has set the fields and before the class's own
    `__post_init__` body, which may therefore rely on the declared dims. Without a `__post_init__`
    it runs at the end of `__init__`. Copies made by slicing, stacking or pytree unflattening do not
    run `__init__` and are not checked; `dataclasses.replace` is. Dataclass subclasses are checked
    against their own annotations.

    Raises:
        TypeError: `cls` is not a dataclass (put `@checked` above `@dataclass`), or an annotation's
            metadata cannot be read (when the first instance is made).
        AnnotationMismatch: (a ValueError) at construction, for a value lacking a declared dim, having it with
            another type, size or labels, or having non-batch dims the annotation does not list.
        AnnotationTypeMismatch: (a ValueError and TypeError) at construction, for a value of the wrong type or dtype.
    """
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise TypeError(f"@checked decorates dataclasses, but got {cls!r}. Put it above @dataclass: "
                        f"@checked\\n@dataclass\\nclass {getattr(cls, '__name__', 'Name')}: ...")
    post_init = getattr(cls, '__post_init__', None)
    if post_init is not None:
        @functools.wraps(post_init)
        def __post_init__(self, *init_vars):
            check_fields(self)
            post_init(self, *init_vars)
        cls.__post_init__ = __post_init__
    else:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            check_fields(self)
        cls.__init__ = __init__
        cls.__post_init__ = check_fields  # called by the __init__ that @dataclass writes for subclasses
    return cls


def check_fields(obj) -> None:
    """Validate every field of dataclass instance `obj` whose annotation declares dims or a dtype.

    Raises:
        AnnotationMismatch, AnnotationTypeMismatch: see `checked`.
    """
    for spec in _field_specs(type(obj)):
        _check(type(obj), spec, getattr(obj, spec.name))


def _field_specs(cls: type) -> tuple[_FieldSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        hints = resolved_annotations(cls)
        specs = tuple(s for s in (_parse(cls, f.name, hints.get(f.name, f.type)) for f in dataclasses.fields(cls))
                      if s is not None)
        _SPECS[cls] = specs
    return specs


def _parse(cls: type, name: str, annotation) -> _FieldSpec | None:
    """The checks an annotation declares, or None if it declares none."""
    optional = False
    if typing.get_origin(annotation) in _UNIONS:  # Optional[Annotated[...]]
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) != 1:
            return None
        annotation = members[0]
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    base, *metadata = typing.get_args(annotation)
    if typing.get_origin(base) in _UNIONS:  # Annotated[Tensor | None, ...]
        members = [a for a in typing.get_args(base) if a is not type(None)]
        optional = optional or len(members) < len(typing.get_args(base))
        base = members[0] if len(members) == 1 else None
    shapes, dtype = [], None
    for item in metadata:
        if isinstance(item, Shape):
            shapes.append(item)
        elif isinstance(item, str):
            try:
                shapes.append(parse_dim_spec(item))
            except ValueError as err:
                raise TypeError(f"{cls.__qualname__}.{name}: the annotation metadata {item!r} is no dim spec: "
                                f"{err}") from None
        elif item in _KINDS or isinstance(item, DType):
            dtype = item
    if not shapes and dtype is None:
        return None
    dims = concat_shapes(*shapes) if shapes else EMPTY_SHAPE
    return _FieldSpec(name, base if isinstance(base, type) else None, dims, dtype, optional)


def _check(cls: type, spec: _FieldSpec, value) -> None:
    where = f"{cls.__qualname__}.{spec.name}"
    expected = _describe(spec)
    if value is None and spec.optional:
        return
    if spec.base is not None and not isinstance(value, spec.base):
        raise AnnotationTypeMismatch(f"{where} must be {expected}, but got {value!r} of type "
                                     f"{type(value).__qualname__}")
    try:
        actual = shape(value)
    except TypeError:
        raise AnnotationTypeMismatch(f"{where} must be {expected}, but got {value!r} of type "
                                     f"{type(value).__qualname__}, which has no Shape") from None
    problem = _dim_problem(spec.dims, actual)
    if problem:
        raise AnnotationMismatch(f"{where} must be {expected}, but got shape {actual}: {problem}")
    if spec.dtype is not None:
        dtype = getattr(value, 'dtype', None)
        if not isinstance(dtype, DType) or not _dtype_matches(spec.dtype, dtype):
            raise AnnotationTypeMismatch(f"{where} must be {expected}, but got dtype {dtype} (shape {actual})")


def _dim_problem(declared: Shape, actual: Shape) -> str | None:
    for name, size, dim_type, labels in zip(declared.names, declared.sizes, declared.types, declared.labels,
                                            strict=True):
        if name not in actual.names:
            return f"dim {name!r} is missing"
        if actual.get_type(name) != dim_type:
            return f"dim {name!r} is {actual.get_type(name)}, not {dim_type}"
        if size is not None and actual.get_size(name) != size:
            return f"dim {name!r} has size {actual.get_size(name)}, not {size}"
        if labels is not None and actual.get_labels(name) != labels:
            return f"dim {name!r} has labels {actual.get_labels(name)}, not {labels}"
    extra = [n for n, t in zip(actual.names, actual.types, strict=True) if n not in declared.names and t != BATCH]
    if extra:
        return f"dims {tuple(extra)} are not declared (only batch dims may be added)"
    return None


def _dtype_matches(declared, dtype: DType) -> bool:
    return dtype == declared if isinstance(declared, DType) else dtype.kind is declared


def _describe(spec: _FieldSpec) -> str:
    parts = [f'a {spec.base.__name__}' if spec.base is not None else 'a value']
    if spec.dims:
        parts.append(f"with dims {spec.dims}")
    if spec.dtype is not None:
        parts.append(f"of dtype {spec.dtype}" if isinstance(spec.dtype, DType) else f"of kind {spec.dtype.__name__}")
    text = ' '.join(parts) + ', plus any batch dims'
    return text + ', or None' if spec.optional else text
