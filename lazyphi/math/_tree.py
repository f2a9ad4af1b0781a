"""Shape and structure operations on trees: tuples, lists, dicts and dataclasses holding tensors.

Every function here walks a tree with one traversal, `_map_trees`, which zips one or more
trees of equal structure and calls a leaf function on each group of corresponding leaves.
Tuples, lists and dicts are rebuilt from their mapped items. A dataclass instance is
rebuilt from a shallow copy (no `__init__` or `__post_init__` runs, so frozen classes and
validating constructors work) in which the data fields are mapped and the config fields
kept; when several instances are zipped, their config fields must be equal.

Values a dataclass instance caches in its `__dict__` (the results of
`functools.cached_property` and its kind) follow the data through stacking, slicing,
expanding and renaming: cached Tensors are transformed like data, any other cached value
is dropped and recomputed on access. Slicing also drops a cached Tensor that lacks a dim
being sliced in the data, since it may have been reduced along that dim; concatenating
and `tree_map` drop all cached values. Attributes in `__dict__` that are neither fields
nor cached properties are instance state set by the class itself: Tensors among them are
transformed, anything else is kept. An instance whose data fields the operation leaves
unchanged is returned as it is, caches included.
"""

import contextlib
import contextvars
import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ._fields import data_fields, field_names, non_data_fields
from ._properties import cached_property_names
from ._shape import Shape, ShapeDtype
from ._tensor import Tensor, element_bytes

_TREE_FORMS = 'a Tensor, a number, or a tuple, list, dict or dataclass instance holding those'
_SELECTION_FORMS = ("a dict {dim: index, slice, label or index tensor}, a label str like 'x' or 'x,y', "
                    "or a tuple or list of those")
DROPPED = object()  # result of a cache function (and marker of a missing entry): leave the cached value out

LeafFunction = Callable[[list, str], Any]
# Checks that a cached property's value is still right after the instance is transformed along `dims`
# (sliced, stacked, expanded, renamed): (instance, property name, dims) -> bool. lazyphi.parallel registers
# one built on its tracer, which knows the dims a property mixes; without any, cached tensors are kept.
_CACHE_CHECKS: list[Callable[[Any, str, tuple], bool]] = []
# the dims the running tree operation affects, and whether to check on its result (new dims) or input
_AFFECTED: contextvars.ContextVar = contextvars.ContextVar('lazyphi_affected_dims', default=None)


def register_cache_check(check: Callable[[Any, str, tuple], bool]) -> None:
    """Have `check(instance, name, dims)` decide whether cached values survive tree operations along `dims`."""
    _CACHE_CHECKS.append(check)


@contextlib.contextmanager
def affecting(dims: tuple, on_result: bool):
    token = _AFFECTED.set((tuple(dims), on_result))
    try:
        yield
    finally:
        _AFFECTED.reset(token)


def _drop_invalid_caches(result, original) -> None:
    """Remove from `result` the cached values that the registered checks cannot vouch for.

    Checked on `original` for operations that change or remove dims (slicing, renaming), on
    `result` for those that add dims (stacking, expanding).
    """
    affected = _AFFECTED.get()
    state = getattr(result, '__dict__', None)
    if affected is None or not _CACHE_CHECKS or not state:
        return
    dims, on_result = affected
    probe = result if on_result else original
    cls = type(result)
    cached = cached_property_names(cls)
    for name in [n for n in state if n in cached]:
        if not all(check(probe, name, dims) for check in _CACHE_CHECKS):
            del state[name]


CacheFunction = Callable[[list, Sequence], Any]  # (cached Tensors, their instances) -> new value or DROPPED


# --- the one traversal ---------------------------------------------------------------------------


def map_trees(fn: LeafFunction, trees: Sequence, leaf_types: tuple, cache_fn: CacheFunction | None, what: str,
              path: str = '', objects: bool = False):
    """Zip `trees` (all of one structure) and return a tree of `fn(leaves, path)` for each group of leaves.

    Args:
        fn: called with the list of corresponding leaves (one per tree) and their path in the tree.
        trees: one tree to map, or several to combine (stack, concat).
        leaf_types: types passed to `fn`. Other values that are neither containers nor dataclasses are
            kept; when zipping several trees they must be equal.
        cache_fn: maps the corresponding cached Tensors of dataclass instances, given with the instances
            holding them, to a new value or `DROPPED`. If None, cached values are dropped.
        what: name of the calling operation, for error messages.
        path: location of `trees` in the whole tree, for error messages.
        objects: pass other objects that hold dims (a Shape-valued `shape` or `__shape__()`) to `fn` as leaves,
            for the magic protocols; objects listing `__value_attrs__` are traversed through those attributes.
    """
    first = trees[0]
    if isinstance(first, leaf_types) or any(isinstance(t, leaf_types) for t in trees[1:]):
        _check_all(trees, lambda t: isinstance(t, leaf_types), what, path,
                   'of type ' + ', '.join(dict.fromkeys(t.__name__ for t in leaf_types)))
        return fn(list(trees), path)
    if isinstance(first, (tuple, list)):
        _check_all(trees, lambda t: type(t) is type(first) and len(t) == len(first), what, path,
                   f'{type(first).__name__}s of length {len(first)}')
        items = [map_trees(fn, [t[i] for t in trees], leaf_types, cache_fn, what, f'{path}[{i}]', objects)
                 for i in range(len(first))]
        if len(trees) == 1 and all(new is old for new, old in zip(items, first, strict=True)):
            return first
        if isinstance(first, list):
            return items
        return type(first)._make(items) if hasattr(type(first), '_fields') else type(first)(items)
    if isinstance(first, dict):
        _check_all(trees, lambda t: type(t) is type(first) and t.keys() == first.keys(), what, path,
                   f'{type(first).__name__}s with keys {list(first)}')
        items = {k: map_trees(fn, [t[k] for t in trees], leaf_types, cache_fn, what, f'{path}[{k!r}]', objects)
                 for k in first}
        if len(trees) == 1 and all(items[k] is v for k, v in first.items()):
            return first
        result = {} if type(first) is dict else copy.copy(first)
        result.update(items)
        return result
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return _map_dataclass(fn, trees, leaf_types, cache_fn, what, path, objects)
    if objects and (hasattr(first, '__value_attrs__') or hasattr(first, '__variable_attrs__')):
        return _map_attributes(fn, trees, leaf_types, cache_fn, what, path)
    if objects and holds_dims(first):
        return fn(list(trees), path)
    for i, other in enumerate(trees[1:], 1):
        if not _equal(first, other):
            raise ValueError(f"{what}(): the values at {path or 'the top level'} differ ({first!r} in value 0, "
                             f"{other!r} in value {i}); values other than {_TREE_FORMS} must be equal in all inputs")
    return first


def holds_dims(value) -> bool:
    """Whether `value`, not a tree, has dims: a Shape-valued `shape` attribute or a `__shape__()` method."""
    if value is None or isinstance(value, (str, bytes, type)):
        return False
    return hasattr(value, '__shape__') or isinstance(getattr(value, 'shape', None), Shape)


def _map_attributes(fn: LeafFunction, trees: Sequence, leaf_types: tuple, cache_fn: CacheFunction | None, what: str,
                    path: str):
    """Map the attributes an object lists in `__value_attrs__()` (or `__variable_attrs__()`) on a shallow copy."""
    first = trees[0]
    _check_all(trees, lambda t: type(t) is type(first), what, path, f'instances of {type(first).__qualname__}')
    names = first.__value_attrs__() if hasattr(first, '__value_attrs__') else first.__variable_attrs__()
    result = copy.copy(first)
    for name in names:
        new = map_trees(fn, [getattr(t, name) for t in trees], leaf_types, cache_fn, what, f'{path}.{name}', True)
        object.__setattr__(result, name, new)
    return result


def _map_dataclass(fn: LeafFunction, trees: Sequence, leaf_types: tuple, cache_fn: CacheFunction | None, what: str,
                   path: str, objects: bool = False):
    first = trees[0]
    cls = type(first)
    _check_all(trees, lambda t: type(t) is cls, what, path, f'instances of {cls.__qualname__}')
    for f in non_data_fields(cls):
        value = getattr(first, f.name)
        for i, other in enumerate(trees[1:], 1):
            if not _equal(value, getattr(other, f.name)):
                raise ValueError(f"{what}(): config field {cls.__qualname__}.{f.name} at {path or 'the top level'} "
                                 f"differs between the values: {value!r} in value 0 but {getattr(other, f.name)!r} "
                                 f"in value {i}. Only instances that agree on every non-data field can be combined.")
    changes = {}
    for f in data_fields(cls):
        old = getattr(first, f.name)
        new = map_trees(fn, [getattr(t, f.name) for t in trees], leaf_types, cache_fn, what, f'{path}.{f.name}',
                        objects)
        if new is not old or len(trees) > 1:
            changes[f.name] = new
    if not changes:
        return first  # cached values stay valid, even those with dims the data lacks
    cached = _mapped_cache(cache_fn, trees)
    result = copy.copy(first)
    for name, value in changes.items():
        object.__setattr__(result, name, value)
    state = getattr(result, '__dict__', None)
    for name, value in cached.items():
        if value is DROPPED:
            del state[name]
        else:
            state[name] = value
    _drop_invalid_caches(result, first)
    return result


def _mapped_cache(cache_fn: CacheFunction | None, trees: Sequence) -> dict:
    """New values (or `DROPPED`) for the non-field `__dict__` entries of the first instance that change."""
    state = getattr(trees[0], '__dict__', None)
    if not state:
        return {}
    cls = type(trees[0])
    fields = field_names(cls)
    cached = cached_property_names(cls)
    result = {}
    for name, value in state.items():
        if name in fields:
            continue
        values = [vars(t).get(name, DROPPED) for t in trees]
        new = DROPPED
        if cache_fn is not None and all(isinstance(v, Tensor) for v in values):
            # a cache that does not survive the operation is dropped and recomputed when next accessed
            with contextlib.suppress(ValueError, TypeError, KeyError, IndexError):
                new = cache_fn(values, trees)
        if new is DROPPED and name not in cached:
            continue  # instance state that is not a cache: kept as it is
        if new is not value:
            result[name] = new
    return result


def _check_all(trees: Sequence, ok: Callable[[Any], bool], what: str, path: str, expected: str) -> None:
    for i, t in enumerate(trees):
        if not ok(t):
            kinds = ', '.join(type(v).__name__ for v in trees)
            raise TypeError(f"{what}(): the values at {path or 'the top level'} do not match in structure: value {i} "
                            f"is {t!r} but all must be {expected} (got {kinds})")


def _equal(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # an array-like whose comparison has no single truth value
        return False


def tree_map(fn: Callable[[Any], Any], tree, leaf_types: type | tuple = Tensor):
    """Apply `fn` to every leaf of `tree`, rebuilding tuples, lists, dicts and dataclass instances.

    Dataclass instances are traversed through their data fields; config fields are kept, and
    cached property values are dropped because `fn` need not commute with them.

    Args:
        fn: function of one leaf.
        tree: a leaf, or a tuple, list, dict or dataclass instance (nested in any way).
        leaf_types: type or tuple of types that are leaves; other values are kept as they are.

    Returns:
        A tree of the same structure; containers none of whose leaves changed are returned as they are.
    """
    leaf_types = leaf_types if isinstance(leaf_types, tuple) else (leaf_types,)
    return map_trees(lambda leaves, path: fn(leaves[0]), [tree], leaf_types, None, 'tree_map')


def leaves(tree, leaf_types: type | tuple = Tensor) -> list:
    """The leaves of `tree` (see `tree_map`) in traversal order: data fields of dataclasses, not cached values."""
    found = []
    tree_map(lambda leaf: found.append(leaf) or leaf, tree, leaf_types)
    return found


def memory_bytes(value) -> int:
    """Bytes the tensors in `value` hold in memory: a Tensor, a `ShapeDtype` placeholder, or a tree of them.

    A tensor counts its elements unless its kind holds less (a disk-backed tensor counts its
    reference); a placeholder counts the elements it stands for; sizes not known count 0.
    """
    if isinstance(value, Tensor):
        return value._memory_bytes()
    if isinstance(value, ShapeDtype):
        return element_bytes(value.shape, value.dtype)
    return sum(memory_bytes(leaf) for leaf in leaves(value, (Tensor, ShapeDtype)))


# --- transforming one tree -----------------------------------------------------------------------


def map_tensors(fn: Callable[[Tensor], Tensor], value, what: str, leaf_types: tuple = (Tensor,),
                 cache_fn: CacheFunction | None = None):
    """Map `fn` over the tensors of one tree and, unless `cache_fn` says otherwise, over cached Tensors too."""
    if cache_fn is None:
        def cache_fn(cached: list, owners: Sequence):
            return fn(cached[0])
    return map_trees(lambda leaves, path: fn(leaves[0]), [value], leaf_types, cache_fn, what)
