"""Copies that keep what is still valid of the cache, equality by value, and a repr without data.

`replace` builds the new instance through `__init__` (so `__post_init__` validates it) and then
hands over each cached value whose dependencies (see `math/_deps.py`) did not change. A field counts
as changed when the new instance holds a different object than the old one (`is not`), which
also catches a `__post_init__` that converts or rebuilds a value; other attributes that
`__init__` leaves in the instance `__dict__` are compared the same way.
"""

import dataclasses
import inspect
import reprlib
import weakref
from typing import NamedTuple, TypeVar

import numpy as np

from ..math import Shape, Tensor, data_fields, non_data_fields, unstack, wrap
from ..math.kinds import ALL, cached_property_names, property_dependencies

T = TypeVar('T')
_MISSING = object()
_NUMBERS = (int, float, complex, np.number, np.bool_)


class _ClassInfo(NamedTuple):
    fields: tuple  # names of all fields
    init_fields: tuple  # names of the fields __init__ takes
    init_only: frozenset  # parameters of __init__ that are not fields (InitVars)
    no_init: frozenset  # fields declared with init=False
    cached: frozenset  # names of the cached properties
    dependencies: dict  # cached property name -> property_dependencies(), filled on first use


_CLASS_INFO: 'weakref.WeakKeyDictionary[type, _ClassInfo]' = weakref.WeakKeyDictionary()


def _class_info(cls: type) -> _ClassInfo:
    info = _CLASS_INFO.get(cls)
    if info is None:
        fields = dataclasses.fields(cls)
        init_fields = tuple(f.name for f in fields if f.init)
        try:
            parameters = list(inspect.signature(cls.__init__).parameters)[1:]
        except (TypeError, ValueError):
            parameters = list(init_fields)
        info = _ClassInfo(tuple(f.name for f in fields), init_fields,
                          frozenset(parameters) - {f.name for f in fields},
                          frozenset(f.name for f in fields if not f.init), frozenset(cached_property_names(cls)), {})
        _CLASS_INFO[cls] = info
    return info


def _check_instance(obj, what: str) -> None:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"{what}() takes a dataclass instance, but got {obj!r} of type {type(obj).__qualname__}")


def _construct(obj, info: _ClassInfo, changes: dict, call_metaclass: bool, what: str):
    """A new instance of `type(obj)` with the field values of `obj` updated by `changes`, built through __init__."""
    cls = type(obj)
    unknown = [name for name in changes if name not in info.init_fields and name not in info.init_only]
    if unknown:
        not_init = [name for name in unknown if name in info.no_init]
        if not_init:
            raise ValueError(f"{what}(): field(s) {', '.join(not_init)} of {cls.__qualname__} are declared with "
                             f"init=False and cannot be replaced; __init__ / __post_init__ sets them")
        raise TypeError(f"{what}(): {cls.__qualname__} has no field(s) {', '.join(map(repr, unknown))}; "
                        f"its fields are {', '.join(info.init_fields) or 'none'}")
    kwargs = {name: changes[name] if name in changes else getattr(obj, name) for name in info.init_fields}
    for name in info.init_only:
        if name in changes:
            kwargs[name] = changes[name]
    if call_metaclass:
        return cls(**kwargs)
    # bypass a metaclass __call__, which may implement a convenience constructor for users
    new = object.__new__(cls) if cls.__new__ is object.__new__ else cls.__new__(cls, **kwargs)
    new.__init__(**kwargs)
    return new


def replace(obj: T, /, call_metaclass: bool = False, **changes) -> T:
    """A copy of a dataclass instance with some fields replaced, keeping the cached values still valid.

    Unlike `dataclasses.replace()`, the values of `cached_property` members (lazyphi's or
    `functools`') that `obj` already computed are carried over, unless the property reads (directly,
    through helper methods, or through other cached properties) a field whose value changed. Where
    the dependencies cannot be determined, the value is dropped and recomputed on access.

    Args:
        obj: dataclass instance.
        call_metaclass: build the copy with `type(obj)(**fields)`, going through a metaclass `__call__`
            if the class has one; by default `__new__` and `__init__` are called directly.
        **changes: new values of fields (or of `InitVar` parameters), by name.

    Returns:
        The new instance; `__init__` and `__post_init__` ran on it.

    Raises:
        TypeError: `obj` is not a dataclass instance, or a name in `changes` is not a field.
        ValueError: a field in `changes` is declared with `init=False`.
    """
    _check_instance(obj, 'replace')
    info = _class_info(type(obj))
    new = _construct(obj, info, changes, call_metaclass, 'replace')
    _carry_cache(obj, new, info, keep_all=False)
    return new


def copy(obj: T, /, call_metaclass: bool = False) -> T:
    """A copy of a dataclass instance, built through `__init__`, holding all of its cached values.

    Args:
        obj: dataclass instance.
        call_metaclass: build the copy with `type(obj)(**fields)`, going through a metaclass `__call__`
            if the class has one; by default `__new__` and `__init__` are called directly.

    Raises:
        TypeError: `obj` is not a dataclass instance.
    """
    _check_instance(obj, 'copy')
    info = _class_info(type(obj))
    new = _construct(obj, info, {}, call_metaclass, 'copy')
    _carry_cache(obj, new, info, keep_all=True)
    return new


def _carry_cache(old, new, info: _ClassInfo, keep_all: bool) -> None:
    """Put the cached values of `old` into `new` (all of them, or those whose dependencies are unchanged)."""
    old_dict = getattr(old, '__dict__', None)
    if not old_dict:
        return
    properties = info.cached
    cached = [name for name in old_dict if name in properties]
    if not cached:
        return
    new_dict = new.__dict__
    if keep_all:
        for name in cached:
            new_dict.setdefault(name, old_dict[name])
        return
    changed = {name for name in info.fields if getattr(new, name, _MISSING) is not getattr(old, name, _MISSING)}
    for name in old_dict.keys() | new_dict.keys():
        if name not in properties and old_dict.get(name, _MISSING) is not new_dict.get(name, _MISSING):
            changed.add(name)
    known = info.dependencies
    for name in cached:
        if name in new_dict:  # __post_init__ computed it already
            continue
        if changed:
            dependencies = known.get(name)
            if dependencies is None:
                dependencies = known[name] = property_dependencies(type(old), name)
            if dependencies is ALL or not dependencies.isdisjoint(changed):
                continue
        new_dict[name] = old_dict[name]  # with nothing changed, every value stays valid


# --- equality ------------------------------------------------------------------------------------


class _Tolerance(NamedTuple):
    rel: float
    abs: float
    equal_nan: bool
    by_ref: bool


def equal(obj1, obj2, rel_tolerance: float = 0., abs_tolerance: float = 0., equal_nan: bool = True) -> bool:
    """Whether two values are equal, data compared by shape and value, everything else with `==`.

    Dataclass instances are equal if they are of one class, their config and special fields are
    equal by `==` and their data fields are equal as described here (fields declared with
    `compare=False` are skipped). Tensors are equal if they have the same dims (names, sizes, types
    and labels, in any order) and values within the tolerances; their dtypes may differ. Tuples,
    lists and dicts are compared item by item; numbers with the tolerances.

    Args:
        obj1: dataclass instance, Tensor, number, or tuple, list or dict of those.
        obj2: the value to compare with.
        rel_tolerance: relative tolerance, as in `numpy.isclose` (`rtol`).
        abs_tolerance: absolute tolerance, as in `numpy.isclose` (`atol`).
        equal_nan: whether NaN equals NaN.
    """
    return _equal(obj1, obj2, _Tolerance(rel_tolerance, abs_tolerance, equal_nan, False))


def data_eq(cls=None, /, *, rel_tolerance: float = 0., abs_tolerance: float = 0., equal_nan: bool = True,
            compare_tensors_by_ref: bool = False):
    """Class decorator giving a dataclass an `__eq__` that compares data fields by shape and value.

    Config and special fields are compared with `==`, data fields as in `equal()`, or by identity
    of their tensors with `compare_tensors_by_ref` (cheap, but two instances holding equal data in
    different tensors are unequal). `__hash__` becomes the hash of the config and special fields
    for frozen classes (and those declared with `unsafe_hash=True`); other classes are unhashable.
    Place it above `@dataclass`.

    Args:
        cls: the dataclass, when used as `@data_eq` without arguments.
        rel_tolerance: relative tolerance for tensor values.
        abs_tolerance: absolute tolerance for tensor values.
        equal_nan: whether NaN equals NaN.
        compare_tensors_by_ref: compare tensors by identity instead of by value.

    Raises:
        TypeError: the class is not a dataclass, or was declared with `eq=False`.
    """
    tolerance = _Tolerance(rel_tolerance, abs_tolerance, equal_nan, compare_tensors_by_ref)

    def decorate(cls: type) -> type:
        if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
            raise TypeError(f"@data_eq decorates dataclasses, but got {cls!r}. Put it above @dataclass:\n"
                            f"    @data_eq\n    @dataclass(frozen=True)\n    class MyClass: ...")
        params = getattr(cls, '__dataclass_params__', None)
        if params is not None and not params.eq:
            raise TypeError(f"@data_eq needs a dataclass declared with eq=True, but {cls.__qualname__} has eq=False")

        def __eq__(self, other):
            if other.__class__ is not self.__class__:
                return NotImplemented
            return _dataclass_equal(self, other, tolerance)

        def __hash__(self):
            return hash(tuple(getattr(self, f.name) for f in non_data_fields(type(self)) if f.compare and f.hash
                              is not False))

        __eq__.__qualname__ = f'{cls.__qualname__}.__eq__'
        __hash__.__qualname__ = f'{cls.__qualname__}.__hash__'
        cls.__eq__ = __eq__
        hashable = params is not None and (params.frozen or params.unsafe_hash)
        cls.__hash__ = __hash__ if hashable else None
        return cls

    return decorate if cls is None else decorate(cls)


def _equal(a, b, tolerance: _Tolerance) -> bool:
    if a is b and (tolerance.equal_nan or tolerance.by_ref):
        return True
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        if tolerance.by_ref:
            return a is b
        return _close(a, b, tolerance)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if tolerance.by_ref:
            return a is b
        return _arrays_close(np.asarray(a), np.asarray(b), tolerance)
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return _arrays_close(np.asarray(a), np.asarray(b), tolerance)
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y, tolerance) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k], tolerance) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return _dataclass_equal(a, b, tolerance)
    return _plain_equal(a, b)


def _dataclass_equal(a, b, tolerance: _Tolerance) -> bool:
    if type(a) is not type(b):
        return False
    for f in non_data_fields(a):
        if f.compare and not _plain_equal(getattr(a, f.name), getattr(b, f.name)):
            return False
    return all(_equal(getattr(a, f.name), getattr(b, f.name), tolerance) for f in data_fields(a) if f.compare)


def _plain_equal(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # no single truth value, e.g. an array-like compared element-wise
        return False


def same_dims(a: Shape, b: Shape) -> bool:
    """Whether two shapes hold the same dims (names, sizes, types and labels), in any order."""
    return a.rank == b.rank and set(zip(a.names, a.sizes, a.types, a.labels, strict=True)) == set(
        zip(b.names, b.sizes, b.types, b.labels, strict=True))


def _close(a, b, tolerance: _Tolerance) -> bool:
    """Tensors (or a tensor and a number) with the same dims and values within the tolerances."""
    if not isinstance(a, (Tensor, *_NUMBERS)) or not isinstance(b, (Tensor, *_NUMBERS)):
        return False
    a, b = wrap(a), wrap(b)
    if not same_dims(a.shape, b.shape):
        return False
    varying = next((size.along[0] for size in a.shape.sizes if not isinstance(size, int) and size is not None),
                   None)
    if varying is not None:  # non-uniform: compare the slices along a dim the sizes vary along
        return all(_close(x, y, tolerance) for x, y in zip(unstack(a, varying), unstack(b, varying), strict=True))
    order = a.shape.names
    return _arrays_close(a.numpy(order), b.numpy(order), tolerance)


def _arrays_close(a: np.ndarray, b: np.ndarray, tolerance: _Tolerance) -> bool:
    if a.shape != b.shape:
        return False
    numeric = all(x.dtype.kind in 'biufc' for x in (a, b))
    if not numeric:
        return bool(np.array_equal(a, b))
    if a.dtype.kind in 'fc' or b.dtype.kind in 'fc':
        return bool(np.allclose(a, b, rtol=tolerance.rel, atol=tolerance.abs, equal_nan=tolerance.equal_nan))
    if tolerance.rel == 0 and tolerance.abs == 0:
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a, b, rtol=tolerance.rel, atol=tolerance.abs))


# --- repr ----------------------------------------------------------------------------------------


_REPR_ITEMS = 6  # items of a container shown before '...'
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxother = _SHORT_REPR.maxstring = 60  # longest repr shown of a value of another kind


def dataclass_repr(obj) -> str:
    """A one-line repr of a dataclass instance that shows tensors and arrays as dtype and shape, never data.

    Fields declared with `repr=False` are left out; nested dataclass instances, tuples, lists and dicts
    are shown the same way, long containers shortened, other values by their own (shortened) repr.
    """
    _check_instance(obj, 'dataclass_repr')
    return _summary(obj, set())


def _summary(value, active: set) -> str:
    if isinstance(value, Tensor):
        return f'{value.dtype}{value.shape!r}'
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in active:
            return f'{type(value).__name__}(...)'
        active.add(id(value))
        try:
            parts = [f'{f.name}={_summary(getattr(value, f.name, None), active)}'
                     for f in dataclasses.fields(value) if f.repr]
        finally:
            active.discard(id(value))
        return f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, (tuple, list, dict)):
        if id(value) in active:
            return '...'
        active.add(id(value))
        try:
            return _container_summary(value, active)
        finally:
            active.discard(id(value))
    shape, dtype = getattr(value, 'shape', None), getattr(value, 'dtype', None)
    if isinstance(shape, tuple) and dtype is not None:  # a NumPy array or another library's native
        return f'{type(value).__name__}{shape} {dtype}'
    return _SHORT_REPR.repr(value)


def _container_summary(value, active: set) -> str:
    if isinstance(value, dict):
        items = [f'{k!r}: {_summary(v, active)}' for k, v in list(value.items())[:_REPR_ITEMS]]
        opening, closing = '{', '}'
    else:
        items = [_summary(v, active) for v in value[:_REPR_ITEMS]]
        opening, closing = ('[', ']') if isinstance(value, list) else ('(', ',)' if len(value) == 1 else ')')
    if len(value) > _REPR_ITEMS:
        items.append(f'... {len(value) - _REPR_ITEMS} more')
    prefix = type(value).__name__ if type(value) not in (tuple, list, dict) else ''
    return f'{prefix}{opening}{", ".join(items)}{closing}'
