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

A carried cached value is never stale: it survives only when tracing the property
(`trace_property`, on the tracer kind of `_trace.py`) proves that it mixes none of the dims
the operation affects — sliced or renamed dims (checked on the input), stacked or expanded dims
(checked on the result). `centred = x - mean(x, batch)` is dropped when slicing along the batch
and recomputed on access, while `x * 2` is sliced. `lazyphi.parallel` plans with the same traces.
"""

import contextlib
import contextvars
import copy
import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import NoBackendFound
from ..backend import DType, choose_backend
from ._deps import ALL, direct_dependencies, property_dependencies
from ._dims import shape
from ._fields import config_fields, data_fields, field_names
from ._layout import Layout
from ._properties import cached_property_names, class_attribute
from ._shape import Shape, ShapeDtype, merge_shapes
from ._tensor import NUMBER_TYPES, Tensor, element_bytes
from ._trace import TRACING, DataNeeded, PerElement, Trace, TraceAborted, tracer_for

_TREE_FORMS = 'a Tensor, a number, or a tuple, list, dict or dataclass instance holding those'
_SELECTION_FORMS = ("a dict {dim: index, slice, label or index tensor}, a label str like 'x' or 'x,y', "
                    "or a tuple or list of those")
DROPPED = object()  # result of a cache function (and marker of a missing entry): leave the cached value out

LeafFunction = Callable[[list, str], Any]
# the dims the running tree operation affects, and whether to check on its result (new dims) or input
_AFFECTED: contextvars.ContextVar = contextvars.ContextVar('lazyphi_affected_dims', default=None)


@contextlib.contextmanager
def affecting(dims: tuple, on_result: bool):
    token = _AFFECTED.set((tuple(dims), on_result))
    try:
        yield
    finally:
        _AFFECTED.reset(token)


def _drop_invalid_caches(result, original) -> None:
    """Remove from `result` the cached values whose property mixes dims the running operation affects.

    Checked on `original` for operations that change or remove dims (slicing, renaming), on
    `result` for those that add dims (stacking, expanding); see `cache_survives`.
    """
    affected = _AFFECTED.get()
    state = getattr(result, '__dict__', None)
    if affected is None or not state:
        return
    dims, on_result = affected
    probe = result if on_result else original
    cached = cached_property_names(type(result))
    for name in [n for n in state if n in cached]:
        if not cache_survives(probe, name, dims):
            del state[name]


CacheFunction = Callable[[list, Sequence], Any]  # (cached Tensors, their instances) -> new value or DROPPED


# --- the one traversal ---------------------------------------------------------------------------


def map_trees(fn: LeafFunction, trees: Sequence, leaf_types: tuple, cache_fn: CacheFunction | None, what: str,
              path: str = '', objects: bool = False, attributes: Callable[[Any], tuple] | None = None,
              protocol: str | None = None):
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
        attributes: the attribute names of a dataclass instance or attribute-listing object to traverse (as
            `variable_attributes`), the rest being kept as they are; None for the data fields, or `__value_attrs__`.
        protocol: the method (such as `'__stack__'`) by which a dataclass whose class defines it does the
            operation itself: such an instance is passed to `fn` as a leaf instead of being traversed.
    """
    first = trees[0]
    if isinstance(first, leaf_types) or any(isinstance(t, leaf_types) for t in trees[1:]):
        _check_all(trees, lambda t: isinstance(t, leaf_types), what, path,
                   'of type ' + ', '.join(dict.fromkeys(t.__name__ for t in leaf_types)))
        return fn(list(trees), path)
    if isinstance(first, (tuple, list)):
        _check_all(trees, lambda t: type(t) is type(first) and len(t) == len(first), what, path,
                   f'{type(first).__name__}s of length {len(first)}')
        items = [map_trees(fn, [t[i] for t in trees], leaf_types, cache_fn, what, f'{path}[{i}]', objects,
                           attributes, protocol) for i in range(len(first))]
        if len(trees) == 1 and all(new is old for new, old in zip(items, first, strict=True)):
            return first
        if isinstance(first, list):
            return items
        return type(first)._make(items) if hasattr(type(first), '_fields') else type(first)(items)
    if isinstance(first, dict):
        _check_all(trees, lambda t: type(t) is type(first) and t.keys() == first.keys(), what, path,
                   f'{type(first).__name__}s with keys {list(first)}')
        items = {k: map_trees(fn, [t[k] for t in trees], leaf_types, cache_fn, what, f'{path}[{k!r}]', objects,
                              attributes, protocol) for k in first}
        if len(trees) == 1 and all(items[k] is v for k, v in first.items()):
            return first
        result = {} if type(first) is dict else copy.copy(first)
        result.update(items)
        return result
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        if protocol is not None and class_attribute(type(first), protocol)[0] is not None:
            return fn(list(trees), path)
        return _map_dataclass(fn, trees, leaf_types, cache_fn, what, path, objects, attributes, protocol)
    listed = hasattr(first, '__value_attrs__') or (hasattr(first, '__variable_attrs__') and (objects or attributes))
    if listed:
        return _map_attributes(fn, trees, leaf_types, cache_fn, what, path, objects, attributes, protocol)
    if hasattr(first, '__variable_attrs__'):
        raise ValueError(f"{what}(): {type(first).__qualname__} at {path or 'the top level'} lists no __value_attrs__; "
                         f"operations on values act on the attributes it names there (its __variable_attrs__ are "
                         f"only traversed by shape operations)")
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
                    path: str, objects: bool, attributes: Callable[[Any], tuple] | None, protocol: str | None):
    """Map the attributes `attributes` names, else those an object lists in `__value_attrs__()` (or
    `__variable_attrs__()`).

    The result is `__with_attrs__(**new)` where the class defines it, else a shallow copy with the new attributes.
    """
    first = trees[0]
    _check_all(trees, lambda t: type(t) is type(first), what, path, f'instances of {type(first).__qualname__}')
    if attributes is not None:
        names = attributes(first)
    else:
        names = first.__value_attrs__() if hasattr(first, '__value_attrs__') else first.__variable_attrs__()
    new = {name: map_trees(fn, [getattr(t, name) for t in trees], leaf_types, cache_fn, what, f'{path}.{name}',
                           objects, attributes, protocol) for name in names}
    if hasattr(first, '__with_attrs__'):
        return first.__with_attrs__(**new)
    result = copy.copy(first)
    for name, value in new.items():
        object.__setattr__(result, name, value)
    return result


def _map_dataclass(fn: LeafFunction, trees: Sequence, leaf_types: tuple, cache_fn: CacheFunction | None, what: str,
                   path: str, objects: bool = False, attributes: Callable[[Any], tuple] | None = None,
                   protocol: str | None = None):
    first = trees[0]
    cls = type(first)
    _check_all(trees, lambda t: type(t) is cls, what, path, f'instances of {cls.__qualname__}')
    mapped = data_fields(cls)
    if attributes is not None:
        names = attributes(first)
        mapped = [f for f in mapped if f.name in names]
    for f in [f for f in dataclasses.fields(cls) if f not in mapped]:
        value = getattr(first, f.name)
        for i, other in enumerate(trees[1:], 1):
            if not _equal(value, getattr(other, f.name)):
                raise ValueError(f"{what}(): config field {cls.__qualname__}.{f.name} at {path or 'the top level'} "
                                 f"differs between the values: {value!r} in value 0 but {getattr(other, f.name)!r} "
                                 f"in value {i}. Only instances that agree on every non-data field can be combined.")
    changes = {}
    for f in mapped:
        old = getattr(first, f.name)
        new = map_trees(fn, [getattr(t, f.name) for t in trees], leaf_types, cache_fn, what, f'{path}.{f.name}',
                        objects, attributes, protocol)
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


def tree_map(fn: Callable[[Any], Any], tree, leaf_types: type | tuple = Tensor,
             attributes: Callable[[Any], tuple] | None = None):
    """Apply `fn` to every leaf of `tree`, rebuilding tuples, lists, dicts and dataclass instances.

    Dataclass instances are traversed through their data fields; config fields are kept, and
    cached property values are dropped because `fn` need not commute with them.

    Args:
        fn: function of one leaf.
        tree: a leaf, or a tuple, list, dict or dataclass instance (nested in any way).
        leaf_types: type or tuple of types that are leaves; other values are kept as they are.
        attributes: which attributes of dataclass instances (and objects listing theirs) to traverse, such as
            `variable_attributes`; the others are kept as they are. None traverses the data fields.

    Returns:
        A tree of the same structure; containers none of whose leaves changed are returned as they are.
    """
    leaf_types = leaf_types if isinstance(leaf_types, tuple) else (leaf_types,)
    return map_trees(lambda leaves, path: fn(leaves[0]), [tree], leaf_types, None, 'tree_map', attributes=attributes)


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


# --- analysing a property of an instance -----------------------------------------------------------
#
# One analysis per class, property and input structure (the shapes and dtypes of the data fields and the
# config values it reads; never the values), traced with every dim parallel, serves slicing along any dim and
# planning along any dims (`Trace.under`). A property reading another cached property is traced on what
# that property's own analysis gives (its `stand_in`), injected into the traced copy's cache, so no
# property's code runs inside another's analysis; the instance's cached values are not read.

_ANALYSES: dict = {}  # key -> Analysis; the oldest entries go first once it holds _ANALYSIS_CACHE_SIZE
_ANALYSIS_CACHE_SIZE = 512
_ANALYSING = threading.RLock()  # analyses run one at a time, so that two threads never run one property twice
_IN_PROGRESS: set = set()  # (class, property) whose analysis is running, guarded by _ANALYSING


@dataclasses.dataclass
class Analysis:
    """One cached property traced on one input structure, and what properties reading it see.

    Attributes:
        trace: the trace (with every dim parallel, unless made for given parallel dims).
        code: token of the code it was traced under (see `analyse_property`), None when not given.
        stand_in: tree of `ShapeDtype` that readers are traced on, once asked for (`property_stand_in`).
        assumed: whether `stand_in` is a guess (a float with every dim of the fields the property reads),
            which finds or overstates the dims a reader mixes but says nothing of its output.
    """

    trace: Trace
    code: Any = None
    stand_in: Any = DROPPED
    assumed: bool = False


def cache_survives(instance, name: str, dims: tuple) -> bool:
    """Whether the cached value of property `name` stays right when `instance` is transformed along `dims`.

    True only when tracing proves the property mixes none of those dims (it is element-wise along them).
    """
    present = frozenset(dims) & frozenset(shape(instance).names)
    if not present:
        return True
    trace = trace_property(instance, name, present)
    return trace.complete and not (trace.mixed & present)


def trace_property(instance, name: str, parallel_dims: frozenset, free: frozenset = frozenset(), code=None) -> Trace:
    """The trace of the cached property `name` of `instance`, with `parallel_dims` parallel (see `analyse_property`).

    Args:
        instance: a dataclass instance with a `__dict__`.
        name: the name of one of its cached properties (either kind, `parallel_property` included).
        parallel_dims: dims along which a conversion to Python data ends the trace with `per_element`.
        free: dims the traced instance lacks (an element of the instance along them is traced).
        code: a token of the code the property runs, or None (see `analyse_property`).

    Returns:
        The trace; its `output` is set when the function ran to its end, else `per_element` or
        `fallback` say where and why it stopped.
    """
    parallel = frozenset(parallel_dims) - free
    trace = analyse_property(instance, name, free, code).trace.under(parallel)
    if trace is None:  # the code takes len() of a vector: only a trace with these parallel dims goes on
        trace = analyse_property(instance, name, free, code, parallel).trace
    return trace


def analyse_property(instance, name: str, free: frozenset = frozenset(), code=None,
                     parallel_dims: frozenset | None = None) -> Analysis:
    """Run the function of the cached property `name` of `instance` on tracers, once per input structure.

    The function runs on a shallow copy of `instance` in which every tensor of the data fields is a
    tracer without the dims in `free`, and each cached property it reads is in the copy's cache as
    a tracer of its `property_stand_in`. Analyses are kept by class, property, `free`, `parallel_dims`,
    and the shapes and dtypes of the data fields and the values of the config fields it reads. A kept
    analysis made under another `code` token is made again; one made without a token is taken (and
    given `code`), and a caller giving no token takes any.

    Args:
        instance: a dataclass instance with a `__dict__`.
        name: the name of one of its cached properties.
        free: dims the traced instance lacks.
        code: a token of the code the property runs (`lazyphi.parallel` gives the class's), or None.
        parallel_dims: the parallel dims of the trace; None (the default): every dim (see `Trace.under`).
    """
    cls = type(instance)
    key = (cls, name, free, parallel_dims, _structure(instance, name))
    found = _kept(key, code)
    if found is not None:
        return found
    with _ANALYSING:
        found = _kept(key, code)  # another thread may have made it meanwhile
        if found is not None:
            return found
        _IN_PROGRESS.add((cls, name))
        try:
            stand_ins, assumed = _stand_ins(instance, name, code)
            trace = _run_trace(instance, class_attribute(cls, name)[1].func, parallel_dims, free, stand_ins)
        finally:
            _IN_PROGRESS.discard((cls, name))
        trace.assumptions = assumed
        analysis = Analysis(trace, code)
        _ANALYSES.pop(key, None)
        if len(_ANALYSES) >= _ANALYSIS_CACHE_SIZE:
            _ANALYSES.pop(next(iter(_ANALYSES)))
        _ANALYSES[key] = analysis
    return analysis


def _kept(key: tuple, code) -> Analysis | None:
    """The kept analysis of `key` if it was made under `code` (or either token is unknown), else None."""
    found = _ANALYSES.get(key)
    if found is None or not (code is None or found.code is None or found.code == code):
        return None
    if code is not None:
        found.code = code
    return found


def property_stand_in(instance, name: str, code=None) -> tuple:
    """What properties reading property `name` of `instance` are traced on: (tree of `ShapeDtype` or None, assumed).

    The output its parallel property declares (`out=`); else its traced output, traced element by
    element along the dims of a value it converts to Python data (those dims put back); else a
    float with every dim of the fields it reads, `assumed`. None when those dims do not merge.
    """
    analysis = analyse_property(instance, name, code=code)
    if analysis.stand_in is DROPPED:
        analysis.stand_in, analysis.assumed = _stand_in(instance, name, analysis, code)
    return analysis.stand_in, analysis.assumed


def _stand_in(instance, name: str, analysis: Analysis, code) -> tuple:
    declared = getattr(class_attribute(type(instance), name)[1], 'out', None)
    if isinstance(declared, (ShapeDtype, tuple, list, dict)):  # a parallel_property's out= placeholders
        return declared, False
    try:
        full = merge_shapes(*[t.shape for f in _read_fields(instance, name) for t in leaves(getattr(instance, f))])
    except (TypeError, ValueError):  # data whose dims do not merge
        return None, True
    trace, free = analysis.trace, frozenset()
    while trace.per_element is not None:
        free |= trace.per_element[1]
        trace = analyse_property(instance, name, free, code).trace
    if trace.complete:
        return output_placeholders(trace.output, full.only(tuple(free))), trace.assumptions
    return ShapeDtype(full, float), True


def output_placeholders(output, extra: Shape):
    """A traced output with its tensors as `ShapeDtype`s, each with the dims of `extra` added."""
    if isinstance(output, Tensor):
        return ShapeDtype(output.shape & extra, output.dtype)
    if isinstance(output, (tuple, list)):
        return type(output)(output_placeholders(v, extra) for v in output)
    if isinstance(output, dict):
        return {k: output_placeholders(v, extra) for k, v in output.items()}
    return output


def _stand_ins(instance, name: str, code) -> tuple:
    """{name: stand-in} of the cached properties property `name` reads, and whether any is assumed.

    Where the code may read any attribute, every cached property whose own reads are known and exclude
    `name` stands in. A property whose analysis is running (a cycle) does not: read, its code runs.
    """
    cls = type(instance)
    cached = cached_property_names(cls)
    direct = direct_dependencies(cls, name)
    if direct is ALL:
        reads = [q for q in cached if q != name and name not in _known_reads(cls, q)]
    else:
        reads = sorted(frozenset(direct.cached) & frozenset(cached) - {name})
    stand_ins, assumed = {}, False
    for q in reads:
        if (cls, q) in _IN_PROGRESS:
            continue
        value, guess = property_stand_in(instance, q, code)
        if value is not None:
            stand_ins[q] = value
            assumed = assumed or guess
    return stand_ins, assumed


def _known_reads(cls: type, name: str) -> frozenset:
    """What property `name` reads, directly or through others; every cached property where unknown."""
    reads = property_dependencies(cls, name)
    return frozenset(cached_property_names(cls)) if reads is ALL else reads


def _run_trace(instance, func: Callable, parallel_dims: frozenset | None, free: frozenset, stand_ins: dict) -> Trace:
    trace = Trace(parallel_dims)
    token = _AFFECTED.set(None)  # the traced code's own tree operations are not part of the caller's
    tracing = TRACING.set(True)
    try:
        trace.output = func(_traced_instance(instance, trace, free, stand_ins))
    except PerElement as signal:
        trace.per_element = (signal.operation, signal.dims)
        trace.conversion = None if signal.shape is None else (signal.operation, signal.shape)
    except TraceAborted as abort:
        trace.fallback = (abort.operation, abort.reason)
        trace.needs_data = isinstance(abort, DataNeeded)
        if trace.needs_data and abort.shape is not None:
            trace.conversion = (abort.operation, abort.shape)
    except Exception as err:  # user code failing on tracers: the trace says so, the caller decides
        trace.fallback = (type(err).__name__, f'{err} (raised by the property while tracing)')
    finally:
        TRACING.reset(tracing)
        _AFFECTED.reset(token)
    return trace


def _traced_instance(instance, trace: Trace, free: frozenset, stand_ins: dict):
    """A shallow copy of `instance` whose tensors are input tracers of `trace` (without the dims in `free`).

    Its cache holds the `stand_ins` alone (as tracers), none of the values `instance` holds. Each tracer
    records where replaying finds its value: (origin, name, index of the leaf in the tree), origin
    'field' or 'cached'.
    """
    clone = copy.copy(instance)
    for n in cached_property_names(type(instance)):
        clone.__dict__.pop(n, None)
    dropped = tuple(free)

    def tracers(value, origin: str, name: str):
        leaf = itertools.count()

        def to_tracer(t):
            return tracer_for(trace, t.shape.without(dropped) if dropped else t.shape, DType.as_dtype(t.dtype),
                              (origin, name, next(leaf)))
        return tree_map(to_tracer, value, leaf_types=(Tensor, ShapeDtype))
    for f in data_fields(instance):
        object.__setattr__(clone, f.name, tracers(getattr(instance, f.name), 'field', f.name))
    for n, value in stand_ins.items():
        clone.__dict__[n] = tracers(value, 'cached', n)
    return clone


def _structure(instance, name: str) -> tuple:
    """What the analysis of property `name` depends on: the shapes and dtypes of the tensors of the data fields
    it reads, directly or through other properties, and the values of the config fields it reads (all of them
    where its reads are unknown)."""
    reads = property_dependencies(type(instance), name)
    fields = tuple((n, _leaf_specs(getattr(instance, n))) for n in _read_fields(instance, name))
    config = tuple((f.name, _hashable(getattr(instance, f.name))) for f in config_fields(instance)
                   if reads is ALL or f.name in reads)
    return fields, config


def _read_fields(instance, name: str) -> tuple:
    """The data fields property `name` reads, directly or through other properties; all where that is unknown."""
    reads = property_dependencies(type(instance), name)
    return tuple(f.name for f in data_fields(instance) if reads is ALL or f.name in reads)


def _leaf_specs(value) -> tuple:
    return tuple((leaf.shape, leaf.dtype) for leaf in leaves(value, (Tensor, ShapeDtype)))


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def replace(obj, **updates):
    """A copy of `obj` with the attributes `updates` set: through its `__with_attrs__` where it has one, by
    `dataclasses.replace` for a dataclass (running `__init__`; `lazyphi.dataclasses.replace` also keeps the
    cached values that do not depend on what changed), else by a shallow copy. Numbers come back as they are.
    """
    if isinstance(obj, (int, float, complex, bool)):
        return obj
    with_attrs = getattr(obj, '__with_attrs__', None)
    if with_attrs is not None:
        result = with_attrs(**updates)
        if result is not NotImplemented:
            return result
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **updates)
    result = copy.copy(obj)
    for name, value in updates.items():
        setattr(result, name, value)
    return result


# --- the attributes of tree nodes ----------------------------------------------------------------


def _listed(obj, method: str) -> tuple[str, ...]:
    names = getattr(obj, method)
    names = names() if callable(names) else names
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        raise TypeError(f'{type(obj).__qualname__}.{method} must give a tuple of attribute names, got {names!r}')
    return names


def _data_field_names(obj) -> tuple[str, ...]:
    return tuple(sorted(f.name for f in data_fields(obj)))


def value_attributes(obj) -> tuple[str, ...]:
    """The attributes of `obj` holding the values that math functions on trees act on.

    The names `obj.__value_attrs__()` lists (or `__all_attrs__()`); for a dataclass instance its `value_attrs`
    if it has that attribute, else the names of its data fields, sorted.
    """
    return _attributes(obj, ('__value_attrs__', '__all_attrs__'), 'value')


def variable_attributes(obj) -> tuple[str, ...]:
    """The attributes of `obj` that vary (what optimisers and tracers see), which include its value attributes.

    The names `obj.__variable_attrs__()` lists, else `__all_attrs__()`, else `__value_attrs__()`; for a
    dataclass instance its `variable_attrs` if it has that attribute, else the names of its data fields, sorted.
    """
    return _attributes(obj, ('__variable_attrs__', '__all_attrs__', '__value_attrs__'), 'variable')


def _attributes(obj, methods: tuple, kind: str) -> tuple[str, ...]:
    """The names the first of `methods` that `obj` has lists; for a dataclass without them, its `{kind}_attrs`
    attribute or the names of its data fields."""
    for method in methods:
        if hasattr(obj, method):
            return _listed(obj, method)
    if dataclasses.is_dataclass(obj):
        return _listed(obj, f'{kind}_attrs') if hasattr(obj, f'{kind}_attrs') else _data_field_names(obj)
    raise ValueError(f'{kind}_attributes(): a {type(obj).__qualname__} lists no {kind} attributes; it needs '
                     f'__{kind}_attrs__() or must be a dataclass')


def lists_attributes(obj) -> bool:
    """Whether `obj` names its attributes holding values (`__value_attrs__`, `__variable_attrs__`, `__all_attrs__`)."""
    return any(hasattr(obj, m) for m in ('__value_attrs__', '__variable_attrs__', '__all_attrs__'))


def is_composite(x: Any) -> bool:
    """Whether `x` is a container of values (a node of a tree) rather than a value.

    Containers are tuples, lists, dicts, dataclasses (instances and types), objects listing their attributes
    in `__value_attrs__()` / `__variable_attrs__()`, and `Layout`s. Tensors, numbers, strings, `None`, Shapes
    and natives of any backend are values.

    Raises:
        ValueError: `x` is none of these (an object no backend holds).
    """
    if x is None or isinstance(x, (str, bytes, Shape, *NUMBER_TYPES)):
        return False
    if isinstance(x, Layout):
        return True
    if isinstance(x, Tensor):
        return False
    if dataclasses.is_dataclass(x) or isinstance(x, (tuple, list, dict)):
        return True
    if lists_attributes(x):
        return True
    try:
        choose_backend(x)
    except NoBackendFound as err:
        raise ValueError(f'is_composite(): a {type(x).__qualname__} is neither a container (tuple, list, dict, '
                         f'dataclass, object with __value_attrs__) nor a value (tensor, number, native)') from err
    return False
