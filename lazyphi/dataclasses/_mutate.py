"""`copy_and_mutate`: edit a deep copy of a (frozen) dataclass instance in place, then freeze it again.

The copy and every dataclass instance inside it (in fields, tuples, lists, dicts, at any depth) are
writable during the block. Frozen instances are made writable without touching other instances: while
a block runs, each class's `__setattr__` / `__delattr__` are replaced by versions that let exactly the
registered copies through (by `id`, which cannot be reused while the block holds the copy) and hand
everything else to the original methods. A count per class, kept under a lock, restores the
originals when the last block on that class ends, so threads may use the class meanwhile.

Which attributes of each of those instances the block changed is found by comparing, before and after,
a fingerprint of each field and instance attribute: the identities of the objects in it, followed through
tuples, lists, dicts, sets and dataclass instances. Tensors are immutable, so their identity
stands for their content; a value of any other mutable kind (a NumPy array, say) could change
in place unseen and counts as changed.
"""

import contextlib
import copy as _copy
import dataclasses
import enum
import threading
import types
from collections.abc import Iterator
from typing import Any, TypeVar

from ..backend import DType
from ..math import Shape, Tensor, data_fields, shape
from ..math.kinds import ALL, cached_property_names, property_dependencies
from ._ops import same_dims

T = TypeVar('T')
_ATOMS = (type(None), bool, int, float, complex, str, bytes, Tensor, Shape, DType, enum.Enum, slice, range, type,
          types.FunctionType, types.BuiltinFunctionType)
_LOCK = threading.Lock()
_WRITABLE: set = set()  # ids of the copies being mutated
_PATCHED: dict = {}  # class -> [active blocks, own __setattr__ or None, own __delattr__ or None]


@contextlib.contextmanager
def copy_and_mutate(obj: T, validate: bool = True) -> Iterator[T]:
    """Context manager yielding a deep copy of a dataclass instance that may be changed inside the block.

    Attributes of the copy, and of every dataclass instance inside it (in its fields, tuples, lists
    and dicts, at any depth), can be set and deleted inside the block even if their classes are
    frozen (`with copy_and_mutate(scene) as s: s.body.position = p`); afterwards they are frozen
    again. Instances created inside the block stay as their class makes them. `obj` is never
    changed. Tensors are shared between `obj` and the copy (they are immutable); everything else is
    copied with `copy.deepcopy`.

    When the block ends, cached property values of the copy and of the instances inside it that
    depend on a changed attribute are dropped, so they are recomputed on access.

    Args:
        obj: dataclass instance.
        validate: check, when the block ends without an error, that every array in the data fields (a
            Tensor: its dims in any order; a NumPy, PyTorch, JAX or TensorFlow array: its shape) kept its
            shape and dtype, and stayed where it was in the structure of tuples, lists, dicts and
            dataclasses.

    Raises:
        TypeError: `obj` is not a dataclass instance.
        MutationMismatch: (a ValueError and AssertionError) with `validate`, an array in a data field
            (at any depth of tuples, lists, dicts and dataclasses) changed its shape or dtype, was
            replaced by another kind of value, or appeared where there was none.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"copy_and_mutate() takes a dataclass instance, but got {obj!r} of type "
                        f"{type(obj).__qualname__}")
    cls = type(obj)
    memo: dict = {}
    _share_tensors(obj, memo, set())
    mutable = _copy.deepcopy(obj, memo)
    original = _instances(obj, {}, set())
    instances = [i for key, i in _instances(mutable, {}, set()).items() if key not in original]  # the copy's
    before = [_fingerprints(i) for i in instances]
    frozen = [i for i in instances if _is_frozen(type(i))]
    for instance in frozen:
        _make_writable(instance)
    try:
        yield mutable
    finally:
        for instance in frozen:
            _make_read_only(instance)
        for instance, fingerprints in zip(instances, before, strict=True):
            after = _fingerprints(instance)
            changed = {n for n in fingerprints.keys() | after.keys() if fingerprints.get(n) != after.get(n)}
            _drop_dependent_cache(instance, changed)
    if validate:
        for f in data_fields(cls):
            _check_tensors(getattr(obj, f.name), getattr(mutable, f.name, _ABSENT), f'{cls.__qualname__}.{f.name}')


def _is_frozen(cls: type) -> bool:
    params = getattr(cls, '__dataclass_params__', None)
    return bool(params is not None and params.frozen)


# --- writable copies of frozen classes -----------------------------------------------------------


def _make_writable(obj) -> None:
    cls = type(obj)
    with _LOCK:
        _WRITABLE.add(id(obj))
        entry = _PATCHED.get(cls)
        if entry is not None:
            entry[0] += 1
            return
        original_set, original_del = cls.__setattr__, cls.__delattr__

        def __setattr__(self, name: str, value) -> None:
            if id(self) in _WRITABLE:
                object.__setattr__(self, name, value)
            else:
                original_set(self, name, value)

        def __delattr__(self, name: str) -> None:
            if id(self) in _WRITABLE:
                object.__delattr__(self, name)
            else:
                original_del(self, name)

        _PATCHED[cls] = [1, vars(cls).get('__setattr__'), vars(cls).get('__delattr__')]
        type.__setattr__(cls, '__setattr__', __setattr__)
        type.__setattr__(cls, '__delattr__', __delattr__)


def _make_read_only(obj) -> None:
    cls = type(obj)
    with _LOCK:
        _WRITABLE.discard(id(obj))
        entry = _PATCHED[cls]
        entry[0] -= 1
        if entry[0]:
            return
        del _PATCHED[cls]
        for name, own in (('__setattr__', entry[1]), ('__delattr__', entry[2])):
            if own is None:
                type.__delattr__(cls, name)
            else:
                type.__setattr__(cls, name, own)


# --- copying and fingerprints --------------------------------------------------------------------


def _share_tensors(value, memo: dict, seen: set) -> None:
    """Enter every Tensor reachable through containers and dataclasses in the deepcopy memo, as itself."""
    if isinstance(value, Tensor):
        memo[id(value)] = value
        return
    if id(value) in seen or isinstance(value, _ATOMS):
        return
    seen.add(id(value))
    for child in _children(value):
        _share_tensors(child, memo, seen)


def _children(value, with_cache: bool = True) -> list:
    if isinstance(value, (tuple, list, set, frozenset)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    if _is_instance(value):
        return [v for _, v in _attributes(value, with_cache)]
    return []


def _is_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _instances(value, found: dict, seen: set) -> dict:
    """`found` with every dataclass instance in `value` (itself included; not in cached values), by id, outer first."""
    if isinstance(value, _ATOMS) or id(value) in seen:
        return found
    seen.add(id(value))
    if _is_instance(value):
        found[id(value)] = value
    for child in _children(value, with_cache=False):
        _instances(child, found, seen)
    return found


def _attributes(obj, with_cache: bool) -> list[tuple[str, Any]]:
    """(name, value) of the fields and the other instance attributes of a dataclass instance."""
    items = {f.name: getattr(obj, f.name, _ABSENT) for f in dataclasses.fields(obj)}
    items.update(getattr(obj, '__dict__', {}))
    if not with_cache:
        for name in cached_property_names(type(obj)):
            items.pop(name, None)
    return list(items.items())


_ABSENT = object()


def _fingerprints(obj) -> dict:
    """A fingerprint per field and non-cached instance attribute of `obj`, equal only if nothing in it changed."""
    return {name: _fingerprint(value, set()) for name, value in _attributes(obj, with_cache=False)}


def _fingerprint(value, active: set):
    if isinstance(value, _ATOMS):
        return id(value)
    if id(value) in active:
        return 'cycle', id(value)
    active.add(id(value))
    try:
        if isinstance(value, (tuple, list)):
            return type(value), id(value), tuple(_fingerprint(v, active) for v in value)
        if isinstance(value, (set, frozenset)):
            return type(value), id(value), frozenset(id(v) for v in value)
        if isinstance(value, dict):
            return type(value), id(value), tuple((id(k), _fingerprint(v, active)) for k, v in value.items())
        if _is_instance(value):
            return type(value), id(value), tuple((n, _fingerprint(v, active))
                                                 for n, v in _attributes(value, with_cache=False))
        return object()  # may change in place unseen: never equal to another fingerprint
    finally:
        active.discard(id(value))


def _drop_dependent_cache(obj, changed: set) -> None:
    cache = getattr(obj, '__dict__', None)
    if not cache or not changed:
        return
    cls = type(obj)
    for name in cached_property_names(cls):
        if name in cache:
            dependencies = property_dependencies(cls, name)
            if dependencies is ALL or not dependencies.isdisjoint(changed):
                del cache[name]


# --- validation ----------------------------------------------------------------------------------


class MutationMismatch(ValueError, AssertionError):
    """A `copy_and_mutate` block changed the shape, dtype or place of an array in a data field.

    Also an AssertionError, which is what jax_dataclasses raises when its validation fails, so code
    catching that keeps working.
    """


def _check_tensors(old, new, path: str) -> None:
    """Raise MutationMismatch unless `new` holds arrays of the same shapes and dtypes as `old`, at the same places."""
    old_leaves, new_leaves = {}, {}
    _leaves(old, path, old_leaves)
    _leaves(new, path, new_leaves)
    for where in {**old_leaves, **new_leaves}:
        before, after = old_leaves.get(where, _ABSENT), new_leaves.get(where, _ABSENT)
        if not _is_array(before) and not _is_array(after):
            continue
        if not _same_shape(before, after):
            inside = [p for p in new_leaves if p.startswith((where + '[', where + '.'))] if after is _ABSENT else []
            now = f'a structure holding {", ".join(inside)}' if inside else _describe(after)
            raise MutationMismatch(f"copy_and_mutate(): {where} changed its shape from {_describe(before)} to "
                                   f"{now}. Data fields must keep the shapes of their arrays; build a new "
                                   f"instance with replace() to change them, or pass validate=False.")
        if _is_array(before) and _is_array(after) and str(before.dtype) != str(after.dtype):
            raise MutationMismatch(f"copy_and_mutate(): {where} changed its dtype from {before.dtype} to "
                                   f"{after.dtype} (now {_describe(after)}). Cast the new value, or pass "
                                   f"validate=False.")


def _is_array(value) -> bool:
    """A Tensor, or a native array of any backend (it has a shape and a dtype)."""
    return isinstance(value, Tensor) or (not isinstance(value, _ATOMS) and hasattr(value, 'shape')
                                         and hasattr(value, 'dtype'))


def _same_shape(before, after) -> bool:
    """Tensors (and numbers beside them): the same dims in any order; native arrays: the same shape tuple."""
    if isinstance(before, Tensor) or isinstance(after, Tensor):
        before_shape, after_shape = _shape_of(before), _shape_of(after)
        return before_shape is not None and after_shape is not None and same_dims(before_shape, after_shape)
    return _is_array(before) and _is_array(after) and tuple(before.shape) == tuple(after.shape)


def _leaves(value, path: str, out: dict) -> None:
    """Every value in `value` other than a tuple, list, dict or dataclass, by its path."""
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _leaves(item, f'{path}[{i}]', out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _leaves(item, f'{path}[{key!r}]', out)
    elif _is_instance(value):
        for f in data_fields(value):
            _leaves(getattr(value, f.name, _ABSENT), f'{path}.{f.name}', out)
    elif value is not _ABSENT:
        out[path] = value


def _shape_of(value) -> Shape | None:
    return shape(value) if isinstance(value, (Tensor, int, float, complex)) else None


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f'{value.shape} ({value.dtype})'
    if _is_array(value):
        return f'{tuple(value.shape)} ({value.dtype}, {type(value).__name__})'
    if value is _ABSENT:
        return 'nothing (no value is there any more)'
    if isinstance(value, (int, float, complex)):
        return f'() (the {type(value).__name__} {value!r})'
    return f'a {type(value).__name__}'
