"""`@checked`: validate the dims and dtypes that `Annotated` field annotations declare, at construction (with
`autocast`, after converting values to the annotated types).

    @checked
    @dataclass(frozen=True)
    class Grid:
        values: Annotated[Tensor, spatial('x,y'), channel(vector='x,y'), float]
        mask: Annotated[Tensor | None, 'x:s,y:s', bool] = None

The metadata of an `Annotated` field may hold Shapes (dims with their types, and sizes or
labels where given), dim specs like `'x:s,y:s'` (names and types only), a dtype kind
(`float`, `int`, `complex`, `bool`) or a `DType` (exact). A value must have every listed
dim, with the listed type, size and labels; besides those it may only have batch dims, and a
batch dim of one checked field has the same size in every other.

For arrays without dim names (NumPy, JAX, PyTorch, TensorFlow), the metadata may hold, as in
jax_dataclasses, a shape pattern (a tuple of sizes, None for any size, and at most one `...` where
the batch axes go; without one they lead) and a NumPy-style dtype (`np.float32`, `jnp.float32`,
`np.dtype('uint8')`, or an abstract type like `np.integer`, matched as `np.issubdtype` does). The
batch axes (what `...` stands for) must be the same for every patterned field;
`EnforcedAnnotationsMixin.get_batch_axes()` returns them. None passes where the annotation admits
None. Fields without such metadata are not checked; metadata of other libraries is ignored.

`@checked(autocast=True)` first converts values to the types their annotations name (tensordict's autocast):

    @checked(autocast=True)
    @dataclass(frozen=True)
    class Sample:
        image: Annotated[Tensor, spatial('x,y'), float]
        steps: int

    Sample(np.zeros((28, 28), np.uint8), steps='3')  # image: a float Tensor (xˢ=28, yˢ=28); steps: 3
"""

import dataclasses
import functools
import types
import typing
import weakref
from typing import Any, NamedTuple

import numpy as np

from .._errors import NoBackendFound
from ..backend import DType, choose_backend, to_numpy_dtype
from ..math import BATCH, EMPTY_SHAPE, Shape, Tensor, cast, concat_shapes, shape, wrap
from ..math.kinds import parse_dim_spec, resolved_annotations

_KINDS = (float, int, complex, bool)
_UNIONS = (typing.Union, types.UnionType)


class AnnotationMismatch(ValueError, AssertionError):
    """A field's value does not have the dims its `Annotated` annotation declares.

    Also an AssertionError: what jax_dataclasses raises for the same annotations.
    """


class AnnotationTypeMismatch(AnnotationMismatch, TypeError):
    """A field's value is not of the type or dtype its `Annotated` annotation declares."""


class _FieldSpec(NamedTuple):
    name: str
    base: Any  # the annotated type, None if it names no class to check with isinstance
    dims: Shape
    dtype: Any  # a kind from _KINDS, a DType, a NumPy dtype or scalar type (np.integer), or None
    optional: bool
    axes: tuple | None  # a shape pattern for arrays without dim names: sizes, None (any size), at most one ...


_SPECS: 'weakref.WeakKeyDictionary[type, tuple[_FieldSpec, ...]]' = weakref.WeakKeyDictionary()
_AUTOCAST: 'weakref.WeakSet[type]' = weakref.WeakSet()  # classes decorated with @checked(autocast=True)
_CASTS: 'weakref.WeakKeyDictionary[type, tuple]' = weakref.WeakKeyDictionary()  # class -> ((field, conversion), ...)


def checked(cls: type | None = None, /, *, autocast: bool = False):
    """Class decorator validating the `Annotated` dims and dtypes of a dataclass's fields at construction.

    The check runs once the generated `__init__` has set the fields and before the class's own
    `__post_init__` body, which may therefore rely on the declared dims. Without a `__post_init__`
    it runs at the end of `__init__`. Copies made by slicing, stacking or pytree unflattening do not
    run `__init__` and are not checked; `dataclasses.replace` is. Dataclass subclasses are checked
    against their own annotations.

    Args:
        cls: the dataclass; `@checked(autocast=True)` passes it by decorating.
        autocast: first convert each field's value to the type its annotation names, as tensordict's
            `@tensorclass(autocast=True)` does (fields annotated `Tensor` take numbers, lists and native arrays,
            named by the dims their `Annotated` metadata declares and cast to its dtype; `int`, `float`,
            `complex`, `bool`, `str` and `numpy.ndarray` fields take what their constructors take; dataclass
            fields take dicts of keyword arguments), then check. Subclasses convert too.

    Raises:
        TypeError: `cls` is not a dataclass (put `@checked` above `@dataclass`), or an annotation's
            metadata cannot be read (when the first instance is made).
        AnnotationMismatch: (a ValueError and AssertionError) at construction, for a value lacking a declared dim,
            having it with another type, size or labels, or having non-batch dims the annotation does not list; an
            unnamed array not matching its shape pattern; batch axes or batch dims differing between fields.
        AnnotationTypeMismatch: (also a TypeError) at construction, for a value of the wrong type or dtype, or one
            that `autocast` cannot convert.
    """
    if cls is None:
        return lambda c: checked(c, autocast=autocast)
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise TypeError(f"@checked decorates dataclasses, but got {cls!r}. Put it above @dataclass: "
                        f"@checked\\n@dataclass\\nclass {getattr(cls, '__name__', 'Name')}: ...")
    if not isinstance(autocast, bool):
        raise TypeError(f"@checked(autocast=...) takes True or False, got {autocast!r}")
    if autocast:
        _AUTOCAST.add(cls)
    post_init = getattr(cls, '__post_init__', None)
    if post_init is not None:
        @functools.wraps(post_init)
        def __post_init__(self, *init_vars):
            prepare_fields(self)
            post_init(self, *init_vars)
        cls.__post_init__ = __post_init__
    else:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            prepare_fields(self)
        cls.__init__ = __init__
        cls.__post_init__ = prepare_fields  # called by the __init__ that @dataclass writes for subclasses
    return cls


def prepare_fields(obj) -> None:
    """Convert the fields of `obj` where its class asked for `autocast`, then check them (`check_fields`)."""
    if any(c in _AUTOCAST for c in type(obj).__mro__):
        autocast_fields(obj)
    check_fields(obj)


class EnforcedAnnotationsMixin:
    """A base class that validates the `Annotated` fields of its dataclass subclasses at construction.

    jax_dataclasses' name for the checks of `@checked` (`class Batch(EnforcedAnnotationsMixin)` under
    `@pytree_dataclass` or `@dataclass`). The check runs in `__post_init__`: a subclass defining its own
    calls `super().__post_init__()`.

    Raises:
        AnnotationMismatch, AnnotationTypeMismatch: at construction (see `checked`).
    """

    def __post_init__(self):
        check_fields(self)

    def get_batch_axes(self) -> tuple:
        """The sizes of the batch axes of the arrays whose annotations give a shape pattern (what its `...` stands
        for; the leading axes where it has none), shared by all of them; () where no field has a pattern."""
        return batch_axes(self)


def check_fields(obj) -> None:
    """Validate every field of dataclass instance `obj` whose annotation declares dims, a shape or a dtype.

    Raises:
        AnnotationMismatch, AnnotationTypeMismatch: see `checked`.
    """
    cls = type(obj)
    batch_axes, batch_dims = {}, {}  # field -> batch axes of its unnamed array; batch dim -> (size, field)
    for spec in _field_specs(cls):
        value = getattr(obj, spec.name)
        axes = _check(cls, spec, value)
        if axes is not None:
            batch_axes[spec.name] = axes
        elif isinstance(value, Tensor):
            for name, size in zip(value.shape.batch.names, value.shape.batch.sizes, strict=True):
                size_elsewhere, other = batch_dims.setdefault(name, (size, spec.name))
                if size_elsewhere != size:
                    raise AnnotationMismatch(f"{cls.__qualname__}: batch dim {name!r} has size {size_elsewhere} in "
                                             f"{other} but {size} in {spec.name}; the checked fields must agree")
    if len(set(batch_axes.values())) > 1:
        found = ', '.join(f'{name} {axes}' for name, axes in batch_axes.items())
        raise AnnotationMismatch(f"{cls.__qualname__}: the batch axes (what ... stands for in the shape patterns) "
                                 f"differ between fields: {found}; they must be the same for all")


def batch_axes(obj) -> tuple:
    """The batch axes of the unnamed arrays of `obj` whose annotations give a shape pattern: what `...` stands for
    (leading axes where a pattern has none), the same for all of them once `obj` passed its checks; () where no
    field has a pattern."""
    for spec in _field_specs(type(obj)):
        value = getattr(obj, spec.name)
        if spec.axes is not None and value is not None:
            return _match_axes(spec.axes, tuple(value.shape))
    return ()


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
    shapes, dtype, axes = [], None, None
    for item in metadata:
        if isinstance(item, Shape):
            shapes.append(item)
        elif isinstance(item, str):
            try:
                shapes.append(parse_dim_spec(item))
            except ValueError as err:
                raise TypeError(f"{cls.__qualname__}.{name}: the annotation metadata {item!r} is no dim spec: "
                                f"{err}") from None
        elif isinstance(item, tuple):
            if not _is_pattern(item):
                raise TypeError(f"{cls.__qualname__}.{name}: the annotation metadata {item!r} is no shape pattern: "
                                f"give sizes (ints), None for any size and at most one ... where batch axes go, "
                                f"like (..., 28, 28)")
            axes = item
        elif any(item is kind for kind in _KINDS) or isinstance(item, DType):
            dtype = item
        elif _numpy_dtype(item) is not None:
            dtype = _numpy_dtype(item)
    if not shapes and dtype is None and axes is None:
        return None
    if axes is not None and shapes:
        raise TypeError(f"{cls.__qualname__}.{name}: the annotation gives both dims {shapes} and the shape pattern "
                        f"{axes}; dims describe Tensors, shape patterns arrays without dim names: give one of them")
    dims = concat_shapes(*shapes) if shapes else EMPTY_SHAPE
    numpy_style = dtype is not None and not isinstance(dtype, DType) and not any(dtype is k for k in _KINDS)
    unnamed = axes is not None or numpy_style  # jax_dataclasses' style: arrays of any library
    return _FieldSpec(name, base if isinstance(base, type) and not unnamed else None, dims, dtype, optional, axes)


def _is_pattern(item: tuple) -> bool:
    sizes = [a for a in item if a is not Ellipsis]
    return len(item) - len(sizes) <= 1 and all(
        a is None or (isinstance(a, int) and not isinstance(a, bool) and a >= 0) for a in sizes)


def _numpy_dtype(item):
    """The NumPy dtype or abstract scalar type `item` declares (`np.float32`, `jnp.float32`, `np.dtype('int8')`,
    `np.integer`), else None."""
    if isinstance(item, type) and issubclass(item, np.generic):
        return item
    if isinstance(item, np.dtype):
        return item
    declared = getattr(item, 'dtype', None)  # a JAX scalar type carries its NumPy dtype
    return declared if isinstance(declared, np.dtype) and not hasattr(item, 'shape') else None


def _match_axes(pattern: tuple, actual: tuple) -> tuple | None:
    """The batch axes of an array of shape `actual` matching `pattern` (what its ... stands for), else None."""
    split = pattern.index(Ellipsis) if Ellipsis in pattern else 0
    before, after = pattern[:split], pattern[split + 1:] if Ellipsis in pattern else pattern
    if len(actual) < len(before) + len(after):
        return None
    ends = actual[:len(before)] + actual[len(actual) - len(after):]
    if any(size is not None and size != found for size, found in zip(before + after, ends, strict=True)):
        return None
    return actual[len(before):len(actual) - len(after)]


def _check(cls: type, spec: _FieldSpec, value) -> tuple | None:
    """Raise unless `value` passes `spec`; returns its batch axes where `spec` has a shape pattern."""
    where = f"{cls.__qualname__}.{spec.name}"
    expected = _describe(spec)
    if value is None and spec.optional:
        return None
    if spec.base is not None and not isinstance(value, spec.base):
        raise AnnotationTypeMismatch(f"{where} must be {expected}, but got {value!r} of type "
                                     f"{type(value).__qualname__}")
    unnamed = not isinstance(value, Tensor) and hasattr(value, 'shape') and hasattr(value, 'dtype')
    axes = None
    if spec.axes is not None:
        if not unnamed:
            raise AnnotationTypeMismatch(f"{where} must be {expected}, but got {value!r} of type "
                                         f"{type(value).__qualname__}: a shape pattern describes arrays without dim "
                                         f"names (declare a Tensor's dims with Shapes)")
        axes = _match_axes(spec.axes, tuple(value.shape))
        if axes is None:
            raise AnnotationMismatch(f"{where} must be {expected}, but got shape {tuple(value.shape)}")
    elif spec.dims or not unnamed:
        try:
            actual = shape(value)
        except TypeError:
            raise AnnotationTypeMismatch(f"{where} must be {expected}, but got {value!r} of type "
                                         f"{type(value).__qualname__}, which has no Shape") from None
        problem = _dim_problem(spec.dims, actual)
        if problem:
            raise AnnotationMismatch(f"{where} must be {expected}, but got shape {actual}: {problem}")
    if spec.dtype is not None:
        dtype = _dtype_of(value)
        if dtype is None or not _dtype_matches(spec.dtype, dtype):
            raise AnnotationTypeMismatch(f"{where} must be {expected}, but got dtype {dtype} (shape "
                                         f"{tuple(value.shape) if unnamed else shape(value)})")
    return axes


def _dtype_of(value) -> DType | None:
    dtype = getattr(value, 'dtype', None)
    if isinstance(dtype, DType) or dtype is None:
        return dtype
    try:
        return choose_backend(value).dtype(value)
    except NoBackendFound:  # not an array of a backend lazyphi knows: no dtype to compare
        return None


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
    if isinstance(declared, DType):
        return dtype == declared
    if isinstance(declared, (type, np.dtype)) and not any(declared is kind for kind in _KINDS):
        return np.issubdtype(to_numpy_dtype(dtype), declared)
    return dtype.kind is declared


def _describe(spec: _FieldSpec) -> str:
    parts = [f'a {spec.base.__name__}' if spec.base is not None else 'an array' if spec.axes is not None else 'a value']
    if spec.dims:
        parts.append(f"with dims {spec.dims}")
    if spec.axes is not None:
        sizes = ['...' if a is Ellipsis else str(a) for a in spec.axes]
        parts.append(f"of shape ({', '.join(sizes)}{',' if len(sizes) == 1 else ''})")
    if spec.dtype is not None:
        kind = spec.dtype if isinstance(spec.dtype, (DType, np.dtype)) else spec.dtype.__name__
        parts.append(f"of dtype {kind}" if isinstance(spec.dtype, (DType, np.dtype)) else f"of kind {kind}")
    text = ' '.join(parts) + (', plus any batch dims' if spec.axes is None else '')
    return text + ', or None' if spec.optional else text


# --- autocast ------------------------------------------------------------------------------------------------------

_BUILTINS = (int, float, complex, bool, str)


def autocast_fields(obj) -> None:
    """Replace each field value of dataclass instance `obj` by its conversion to the type the field's annotation names
    (see `checked`); None stays None. Annotations naming no such type (unions of several types, generic aliases) leave
    values alone.

    Raises:
        AnnotationTypeMismatch: a value cannot be converted; the message names the field, the value and the type.
    """
    cls = type(obj)
    casts = _CASTS.get(cls)
    if casts is None:
        hints = resolved_annotations(cls)
        casts = tuple((f.name, c) for f in dataclasses.fields(cls)
                      if (c := _conversion(hints.get(f.name, f.type))) is not None)
        _CASTS[cls] = casts
    for name, (target, convert) in casts:
        value = getattr(obj, name)
        if value is None:
            continue
        try:
            converted = convert(value)
        except (TypeError, ValueError) as err:
            raise AnnotationTypeMismatch(f"{cls.__qualname__}.{name}: autocast cannot convert {value!r} (of type "
                                         f"{type(value).__qualname__}) to {target}: {err}") from None
        if converted is not value:
            object.__setattr__(obj, name, converted)  # frozen dataclasses too: the instance is still being made


def _conversion(annotation) -> tuple | None:
    """(what the conversion makes, the conversion) for values of a field annotated `annotation`, or None."""
    metadata = []
    for _ in range(2):  # Optional[Annotated[X, ...]] and Annotated[X | None, ...]
        if typing.get_origin(annotation) in _UNIONS:
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return None
            annotation = members[0]
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *extra = typing.get_args(annotation)
            metadata.extend(extra)
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, Tensor):
        return 'Tensor', _tensor_conversion(metadata)
    if annotation in _BUILTINS:
        return annotation.__name__, lambda value: value if type(value) is annotation else annotation(value)
    if annotation is np.ndarray:
        dtype = next((_numpy_dtype(m) for m in metadata if _numpy_dtype(m) is not None), None)
        return 'numpy.ndarray', lambda value: np.asarray(value, dtype=dtype)
    if dataclasses.is_dataclass(annotation):
        return (f'{annotation.__qualname__} (from a dict of its fields)',
                lambda value: annotation(**value) if isinstance(value, dict) else value)
    return None


def _tensor_conversion(metadata: list):
    """Values to Tensors on their own backend, named by the declared dims (where they match the array's axes), cast
    to the declared dtype."""
    shapes = [m if isinstance(m, Shape) else parse_dim_spec(m) for m in metadata if isinstance(m, (Shape, str))]
    dims = concat_shapes(*shapes) if shapes else EMPTY_SHAPE
    dtype = next((m for m in metadata if isinstance(m, DType) or any(m is kind for kind in _KINDS)), None)

    def convert(value):
        if not isinstance(value, Tensor):
            axes = len(value.shape) if hasattr(value, 'shape') else np.ndim(value)
            value = wrap(value, dims) if dims and axes == dims.rank else wrap(value)  # on the value's backend
        if dtype is None or (value.dtype == dtype if isinstance(dtype, DType) else value.dtype.kind is dtype):
            return value
        return cast(value, dtype)
    return convert
