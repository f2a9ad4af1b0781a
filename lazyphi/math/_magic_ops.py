"""The shape operations on any value: tensors, numbers, trees of them, and objects of phiml's magic protocols.

`stack`, `concat`, `unstack`, `expand`, `rename_dims`, `pack_dims`, `unpack_dim`, `flatten` and `slice`
walk a tree (tuples, lists, dicts, dataclass instances, objects listing their `__value_attrs__`) with the
one traversal of `_tree.py` and act on each leaf: a tensor or number directly, any other object holding
dims through its protocol method (`__stack__`, `__concat__`, `__expand__`, `__replace_dims__`,
`__pack_dims__`, `__unpack_dim__`, `__flatten__`, `__unstack__`, `__getitem__`). An object that lacks
the method an operation needs is handled through the others it has (stacking by expanding and
concatenating, renaming by unstacking and stacking, ...); one that has none of them is a `TypeError`
naming its type and the protocol — never returned unchanged.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from .._errors import DimNotFound
from ._creation import tensor
from ._dims import batch, channel, dual, instance, parse_dim_spec, shape, spatial
from ._items import key_name, normalize_selection
from ._shape import EMPTY_SHAPE, Shape, concat_shapes, merge_shapes, resolve_dims
from ._structure import (
    FLAT_DIM,
    as_dim,
    concat_tensors,
    expand_tensor,
    pack_tensor_dims,
    rename_tensor_dims,
    stack_tensors,
    unpack_tensor_dim,
    unstack_tensor,
)
from ._tensor import NUMBER_TYPES, Tensor, dims_in
from ._tree import DROPPED, affecting, map_trees

_SELECTION_FORMS = ("a dict {dim: index, slice, label or index tensor}, a label str like 'x' or 'x,y', "
                    "a tuple or list of those, or an int index tensor whose channel dim lists the dims it indexes "
                    "as item labels")
_DATA = (Tensor, *NUMBER_TYPES)


def _is_data(value) -> bool:
    return isinstance(value, _DATA)


def _missing(value, operation: str, protocol: str) -> TypeError:
    return TypeError(f"{operation}() cannot handle a {type(value).__module__}.{type(value).__qualname__}: it is not a "
                     f"Tensor, number or tree, and implements {protocol}")


def _as_shape(dims, default_type: str = 'channel', what: str = 'dims') -> Shape:
    """A Shape from a Shape, a shaped object or a dim spec str ('points:i', '(x,y)')."""
    if isinstance(dims, str):
        return parse_dim_spec(dims, default_type)
    if isinstance(dims, Shape):
        return dims
    try:
        return shape(dims)
    except TypeError:
        raise TypeError(f"{what} must be a Shape or a dim spec like 'points:i'; got {dims!r}") from None


# --- stack -----------------------------------------------------------------------------------------


def stack(values, dim, expand_values: bool = False, simplify: bool = False, layout_non_matching: bool = False,
          allow_varying_labels: bool = True, **kwargs):
    """Stack trees of equal structure along the new dim(s) `dim`.

    Tensors and numbers at the same place in each tree are stacked (differing sizes give a non-uniform
    tensor); other objects through their `__stack__` (or `__expand__` and `__concat__`). Dataclass
    instances must be of one class and agree on their config fields.

    Args:
        values: a non-empty tuple or list of trees, or a dict whose str keys become the item labels of `dim`.
        dim: a Shape such as `batch('b')`, or a spec like 'b:b'. Several dims (`batch(a=3, b=2)`, sizes
            set) stack `values` in row-major order.
        expand_values: expand the tensors stacked together to the dims any of them has before stacking.
        simplify: accepted for phiml's signature; lazyphi never needs to simplify a stacked result.
        layout_non_matching: accepted for phiml's signature; trees must match in structure.
        allow_varying_labels: values whose labels differ along a dim give that dim without labels; if False,
            that is an `IncompatibleShapes` error.
        **kwargs: passed on to `__stack__` of custom objects.

    Raises:
        TypeError: `values` is not a tuple, list or dict, the trees differ in structure, or an object
            implements no stacking protocol.
        ValueError: `values` is empty, or non-data values (config fields, strings, ...) differ between trees.
    """
    dim = _as_shape(dim, 'batch', 'stack() dim')
    if isinstance(values, dict):
        if not all(isinstance(k, str) for k in values):
            raise TypeError(f"stack(): the keys of a dict of values become item labels and must be str, "
                            f"but got {list(values)!r}")
        if values and dim.rank == 1:
            dim = dim.with_size(tuple(values))
        values = list(values.values())
    elif not isinstance(values, (tuple, list)):
        raise TypeError(f"stack() takes a tuple, list or dict of values to stack, but got {type(values).__name__} "
                        f"{values!r}")
    if not values:
        raise ValueError(f"stack() needs at least one value to stack along {dim}, but got none")
    if all(_is_number_sequence(v) for v in values):  # vectors, as shape((1, 2)) says: lengths may differ
        values = [tensor(list(v)) for v in values]
    if dim.rank > 1:
        return _stack_multi(list(values), dim, expand_values, kwargs)
    dim = as_dim(dim, 'stack() dim')
    if dim.labels[0] is None:
        dim = dim.with_size(len(values))
    if not allow_varying_labels:
        merge_shapes(*[shape(v) for v in values])  # raises where labels (or sizes) differ
    with affecting((dim.name,), on_result=True):
        return map_trees(lambda leaves, path: _stack_leaves(leaves, dim, expand_values, kwargs), values,
                         _DATA, lambda leaves, owners: _stack_leaves(leaves, dim, expand_values, {}), 'stack',
                         objects=True, protocol='__stack__')


def _is_number_sequence(value) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, NUMBER_TYPES) for v in value)


def _stack_multi(values: list, dims: Shape, expand_values: bool, kwargs: dict):
    """Stack along several dims: the last fastest (values in row-major order)."""
    if dims.volume != len(values):
        raise ValueError(f"stack() along {dims} needs {dims.volume} values (the dims' volume) but got {len(values)}")
    inner = dims[1:]
    size = dims.sizes[0]
    groups = [values[i * inner.volume:(i + 1) * inner.volume] for i in range(size)]
    parts = [stack(g, inner, expand_values, **kwargs) for g in groups]
    return stack(parts, dims[0], expand_values, **kwargs)


def _stack_leaves(leaves: list, dim: Shape, expand_values: bool, kwargs: dict):
    if all(_is_data(v) for v in leaves):
        if expand_values:
            leaves = _expanded_to_common_dims(leaves)
        return stack_tensors(leaves, dim)
    first = next(v for v in leaves if not _is_data(v))
    if hasattr(first, '__stack__'):
        result = type(first).__stack__(tuple(leaves), dim, **kwargs)
        if result is not NotImplemented:
            return result
    if hasattr(first, '__expand__') and hasattr(first, '__concat__'):  # each value becomes one item along dim
        labels = dim.labels[0]
        items = [dim.with_size((labels[i],)) if labels else dim.with_size(1) for i in range(len(leaves))]
        return _concat_leaves([expand(v, item) for v, item in zip(leaves, items, strict=True)], dim.name, kwargs)
    raise _missing(first, 'stack', '__stack__ nor __expand__ and __concat__')


def _expanded_to_common_dims(leaves: list) -> list:
    shapes = [shape(v) for v in leaves]
    merged = merge_shapes(*shapes, allow_varying_sizes=True)
    return [v if s.rank == merged.rank else expand_tensor(v, merged.without(s)) for v, s in zip(leaves, shapes,
                                                                                               strict=True)]


# --- concat ----------------------------------------------------------------------------------------


def concat(values, dim, expand_values: bool = False, **kwargs):
    """Join trees of equal structure along the existing dim `dim`.

    Args:
        values: a non-empty tuple or list of trees.
        dim: the dim's name or a Shape holding it; or 'filter->new', e.g. 'i->points:i', which first renames
            the dims the filter selects in each value (their instance dims) to the new dim, then joins.
        expand_values: expand the tensors joined together to the dims any of them has first.
        **kwargs: passed on to `__concat__` of custom objects.

    Raises:
        TypeError: `values` is not a tuple or list, the trees differ in structure, or an object implements no
            joining protocol.
        ValueError: `values` is empty, or non-data values differ between trees.
        DimNotFound: a tensor lacks `dim`.
    """
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"concat() takes a tuple or list of values to join, but got {type(values).__name__} "
                        f"{values!r}")
    if not values:
        raise ValueError(f"concat() needs at least one value to join along {dim!r}, but got none")
    if isinstance(dim, str) and '->' in dim:
        source, target = (part.strip() for part in dim.split('->'))
        new = _as_shape(target, 'channel', 'concat() target dim')
        values = [rename_dims(v, _TYPE_FILTERS.get(source, source), new) for v in values]
        dim = new.name
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim)[0]

    def join(leaves: list, path: str):
        if expand_values and all(_is_data(v) for v in leaves):
            common = merge_shapes(*[shape(v).without(name) for v in leaves], allow_varying_sizes=True)
            leaves = [expand_tensor(v, common.without(shape(v))) for v in leaves]
        return _concat_leaves(leaves, name, kwargs)
    return map_trees(join, values, (Tensor,), None, 'concat', objects=True, protocol='__concat__')


def _concat_leaves(leaves: list, dim: str, kwargs: dict):
    if all(isinstance(v, Tensor) for v in leaves):
        return concat_tensors(leaves, dim)
    first = next(v for v in leaves if not isinstance(v, Tensor))
    if hasattr(first, '__concat__'):
        result = type(first).__concat__(tuple(leaves), dim, **kwargs)
        if result is not NotImplemented:
            return result
    if hasattr(first, '__stack__') or (hasattr(first, '__expand__') and hasattr(first, '__concat__')):
        parts = [p for v in leaves for p in unstack(v, dim)]
        labels = [lab for v in leaves for lab in (shape(v).get_item_names(dim) or ())]
        joined = shape(first)[dim].with_size(tuple(labels) if len(labels) == len(parts) else len(parts))
        return _stack_leaves(parts, joined, False, kwargs)
    raise _missing(first, 'concat', '__concat__ nor __stack__')


def _typed_concat(type_of_dim: Callable, name_if_none: str):
    def concat_of_type(values, *, dim_type: Callable = type_of_dim, expand_values: bool = True,
                       default_name: str = name_if_none):
        return tcat(values, dim_type, expand_values, default_name)
    return concat_of_type


def tcat(values, dim_type: Callable, expand_values: bool = False, default_name: str = 'tcat'):
    """Join along the one dim of type `dim_type` (e.g. `instance`) of each value; differently named dims are
    renamed to the first one's name, or to `default_name` when no value has such a dim."""
    names = [shape(v).only(dim_type).names for v in values]
    for n in names:
        if len(n) > 1:
            raise ValueError(f"tcat(): a value has several {dim_type.__name__} dims {n}; name the dim to join along")
    name = next((n[0] for n in names if n), default_name)
    target = dim_type(name)
    values = [rename_dims(v, n[0], target) if n and n[0] != name else v if n else expand(v, target.with_size(1))
              for v, n in zip(values, names, strict=True)]
    return concat(values, name, expand_values)


def ncat(values, dim: Shape, expand_values: bool = False):
    """Join along `dim` (a Shape), which every value has, or which a value lacking it gets with size 1."""
    dim = as_dim(dim, 'ncat() dim')
    values = [v if dim.name in shape(v) else expand(v, dim.with_size(1)) for v in values]
    return concat(values, dim.name, expand_values)


ccat = _typed_concat(channel, 'ccat')
scat = _typed_concat(spatial, 'scat')
icat = _typed_concat(instance, 'icat')
dcat = _typed_concat(dual, '~dcat')
for _f, _t in ((ccat, 'channel'), (scat, 'spatial'), (icat, 'instance'), (dcat, 'dual')):
    _f.__name__ = _f.__qualname__ = f'{_t[0]}cat'
    _f.__doc__ = f'Join `values` along their one {_t} dim (see `tcat`).'


# --- unstack, slice --------------------------------------------------------------------------------


def unstack(value, dim, expand: bool = False) -> tuple:
    """Slices of `value` along `dim`, one per item; several dims are iterated jointly, the last fastest.

    Args:
        value: a Tensor, a tree of them, or an object with `__unstack__` or `__getitem__`.
        dim: a dim name, Shape or filter function naming dims of `shape(value)`; a Shape with a size
            the value lacks gives that many copies when `expand` is set.
        expand: for dims `value` lacks, return `size` copies of `value` instead of raising.

    Raises:
        DimNotFound: `dim` names no dim of `value` (and `expand` is not set).
        ValueError: the size of a dim to unstack is not known.
    """
    full = shape(value)
    if isinstance(value, Tensor) and not expand:
        return unstack_tensor(value, dim)
    names = dims_in(full, dim)
    if not names:
        if expand and isinstance(dim, Shape) and dim.volume:
            return (value,) * dim.volume
        raise DimNotFound(f"unstack(): {dim!r} names no dim of the value, whose shape is {full}")
    if hasattr(value, '__unstack__') and not isinstance(value, Tensor):
        result = value.__unstack__(names)
        if result is not NotImplemented:
            return tuple(result)
    sizes = [full.get_size(n) for n in names]
    for name, size in zip(names, sizes, strict=True):
        if not isinstance(size, int):
            raise ValueError(f"unstack(): dim {name!r} of {full} has no single known size ({size}); "
                             f"unstack along the dims it varies along first")
    return tuple(slice_(value, dict(zip(names, index, strict=True)))
                 for index in itertools.product(*[range(s) for s in sizes]))


def slice_(value, slices):
    """`value` with `slices` applied to every tensor and sliceable object in it; dims a value lacks are ignored.

    Args:
        value: a Tensor, a tree of them, or an object with `__getitem__`.
        slices: a dict mapping dim names (or Shapes) to an int, slice, label str or index tensor; a label
            str like 'x' or 'x,y', looked up among the labels of the dims of `value`; a tuple or list of those;
            or an int tensor of indices whose channel dim names the dims it indexes by its item labels
            (`wrap([[3], [1]], instance('k'), channel(index='i'))`), which gathers every tensor having those dims
            as `tensor[indices]` does.

    Raises:
        TypeError: `slices` has none of these forms.
        KeyError: a label is not found.
    """
    if slices is None:
        return value
    if isinstance(slices, Tensor):
        sliced = _indexed_dims(slices)
    else:
        if isinstance(slices, (str, tuple, list)):
            slices = normalize_selection(shape(value), slices)
        elif not isinstance(slices, dict):
            raise TypeError(f"slice() takes {_SELECTION_FORMS}, but got {type(slices).__name__} {slices!r}")
        if not slices:
            return value
        if all(isinstance(d, (str, Shape)) for d in slices):
            slices = {d.name if isinstance(d, Shape) else d: s for d, s in slices.items()}
        else:  # dim filters among the keys: applied to the shape of the whole tree
            full = shape(value)
            slices = {name: s for name, s in ((key_name(d, full, slices), s) for d, s in slices.items()) if name}
        sliced = tuple(slices)

    def own(names) -> dict | Tensor | None:
        """What of `slices` applies to a value with dims `names`: None where nothing does."""
        if isinstance(slices, Tensor):
            return slices if set(sliced) & set(names) else None
        return {d: s for d, s in slices.items() if d in names} or None

    def slice_cached(cached: list, owners: Sequence):
        # a cached value lacking a sliced dim of the data may have been reduced along it: slicing cannot fix that
        data_dims = shape(owners[0]).names
        if any(d in data_dims and d not in cached[0].shape.names for d in sliced):
            return DROPPED
        selection = own(cached[0].shape.names)
        return cached[0] if selection is None else cached[0][selection]

    def slice_leaf(leaves: list, path: str):
        leaf = leaves[0]
        if _is_data(leaf) and not isinstance(leaf, Tensor):
            return leaf
        if not isinstance(leaf, Tensor) and not hasattr(leaf, '__getitem__'):
            raise _missing(leaf, 'slice', '__getitem__')
        selection = own(shape(leaf).names)
        return leaf if selection is None else leaf[selection]
    with affecting(sliced, on_result=False):
        return map_trees(slice_leaf, [value], _DATA, slice_cached, 'slice', objects=True)


def _indexed_dims(indices: Tensor) -> tuple:
    """The dims an index tensor gathers along: the item labels of its one channel dim.

    Raises:
        TypeError: `indices` holds no ints, or has no single channel dim with item labels.
    """
    channel_dims = indices.shape.channel
    if indices.dtype.kind is not int or channel_dims.rank != 1 or channel_dims.labels[0] is None:
        raise TypeError(f"An index tensor used to slice must hold ints and have one channel dim listing the dims it "
                        f"indexes as item labels (e.g. channel(index='x,y')), but got one of shape {indices.shape} "
                        f"and dtype {indices.dtype}. Accepted: {_SELECTION_FORMS}.")
    return tuple(channel_dims.labels[0])


# --- expand, rename --------------------------------------------------------------------------------


def expand(value, *dims, **kwargs):
    """`value` with the dims `dims` added, lazily: tensors are not copied in memory.

    Args:
        value: a Tensor, number, tree of those, or an object with `__expand__` (else `__stack__`).
        *dims: Shapes or specs like 'b:b' of the dims to add; sizes must be known. Dims a value
            already has are kept as they are.
        **kwargs: passed on to `__expand__` of custom objects.
    """
    add = concat_shapes(*[_as_shape(d, 'channel', 'expand() dims') for d in dims]) if dims else EMPTY_SHAPE
    if not add:
        return value

    def expand_leaf(leaves: list, path: str):
        leaf = leaves[0]
        if _is_data(leaf):
            return expand_tensor(leaf, add)
        missing = add.without(shape(leaf))
        if not missing:
            return leaf
        if hasattr(leaf, '__expand__'):
            result = leaf.__expand__(missing, **kwargs)
            if result is not NotImplemented:
                return result
        if hasattr(leaf, '__stack__') or hasattr(leaf, '__concat__'):
            for dim in reversed(missing):
                leaf = _stack_leaves([leaf] * dim.size, dim, False, kwargs)
            return leaf
        raise _missing(leaf, 'expand', '__expand__ nor __stack__')
    with affecting(add.names, on_result=True):
        return map_trees(expand_leaf, [value], _DATA, lambda cached, owners: expand_tensor(cached[0], add), 'expand',
                         objects=True)


_TYPE_FILTERS = {'b': batch, 'd': dual, 'i': instance, 's': spatial, 'c': channel}


def rename_dims(value, dims, names, **kwargs):
    """`value` with the dims `dims` renamed (or retyped) to `names`, in every tensor and object of the tree.

    Args:
        value: a Tensor, a tree of them, a Shape, or an object with `__replace_dims__` (else `__getitem__` and
            `__stack__`).
        dims: the dims to rename: a str 'x,y', a sequence or Shape, or a filter function such as `spatial`,
            which is applied to the shape of the whole tree.
        names: the new names, one per dim: a str 'a,b', a sequence of str, a Shape (which also sets types,
            and labels where it has them), a dim spec like 'points:i' or '(z,w)' (the latter keeps the name and
            sets the item labels), or a type function such as `instance` (keeps the names, changes the type).
        **kwargs: passed on to `__replace_dims__` of custom objects.
    """
    full = shape(value)
    old = resolve_dims(dims, full)
    new = _new_dims(full, old, names)
    present = tuple(n for n in old if n in full)
    if not present:
        return value
    if isinstance(value, Shape):
        return value.replace(present, new[[new.names[i] for i, n in enumerate(old) if n in full]])

    def rename_leaf(leaves: list, path: str):
        leaf = leaves[0]
        if _is_data(leaf):
            return rename_tensor_dims(leaf, old, new) if isinstance(leaf, Tensor) else leaf
        own = shape(leaf)
        keep = [i for i, n in enumerate(old) if n in own]
        if not keep:
            return leaf
        leaf_old, leaf_new = tuple(old[i] for i in keep), new[[new.names[i] for i in keep]]
        if hasattr(leaf, '__replace_dims__'):
            result = leaf.__replace_dims__(leaf_old, leaf_new, **kwargs)
            if result is not NotImplemented:
                return result
        return _restack(leaf, leaf_old, _sized_like(leaf_new, own.only(leaf_old, reorder=True)), 'rename_dims',
                        '__replace_dims__', kwargs)
    with affecting(present, on_result=False):
        return map_trees(rename_leaf, [value], _DATA, None if not full else
                         lambda cached, owners: rename_tensor_dims(cached[0], old, new), 'rename_dims', objects=True)


def _sized_like(new: Shape, old: Shape) -> Shape:
    """`new` with the sizes of `old` (dim by dim), keeping `new`'s labels where they fit, else taking `old`'s."""
    sizes = [lab if lab is not None and len(lab) == s else old_lab if old_lab is not None else s
             for lab, s, old_lab in zip(new.labels, old.sizes, old.labels, strict=True)]
    return new.with_sizes(sizes)


def _new_dims(full: Shape, old: tuple, names) -> Shape:
    """The dims replacing `old` (names of `full`), from any form `rename_dims` accepts."""
    present = full.only(old, reorder=True) if all(n in full for n in old) else None
    if callable(names) and not isinstance(names, Shape) and getattr(names, 'dim_type', None):
        if present is None:
            raise DimNotFound(f"rename_dims(): retyping needs dims of the value, but {old} are not all in {full}")
        return present.as_type(names)
    if isinstance(names, str) and any(c in names for c in ':()~'):
        names = parse_dim_spec(names)
    if isinstance(names, Shape):
        if names.rank != len(old):
            raise ValueError(f"rename_dims() got {len(old)} dims {old} but {names.rank} new dims {names}")
        return names
    new_names = resolve_dims(names)
    if len(new_names) != len(old):
        raise ValueError(f"rename_dims() got {len(old)} dims {old} but {len(new_names)} new names {new_names}")
    base = present if present is not None else full.only(old, reorder=True)
    return base.replace(tuple(n for n in old if n in base), tuple(nn for n, nn in zip(old, new_names, strict=True)
                                                                   if n in base))


def _restack(value, old: tuple, new: Shape, operation: str, protocol: str, kwargs: dict):
    """`value` with the dims `old` replaced by `new` (of equal volume) by unstacking and stacking again."""
    if not (hasattr(value, '__stack__') or (hasattr(value, '__expand__') and hasattr(value, '__concat__'))):
        raise _missing(value, operation, f'{protocol} nor __getitem__ with __stack__')
    parts = unstack(value, old)
    if not new:
        return parts[0]
    if len(parts) != new.volume:
        raise ValueError(f"{operation}(): {len(parts)} items along {old} do not fill {new}")
    return _stack_multi(list(parts), new, False, kwargs) if new.rank > 1 else _stack_leaves(list(parts), new, False,
                                                                                             kwargs)


def _type_conversion(source: Callable, target: Callable):
    def convert(value):
        return rename_dims(value, source, target)
    convert.__name__ = convert.__qualname__ = f'{source.__name__[0]}2{target.__name__[0]}'
    convert.__doc__ = f'`value` with its {source.__name__} dims turned into {target.__name__} dims of the same names.'
    return convert


b2i = _type_conversion(batch, instance)
c2b = _type_conversion(channel, batch)
c2d = _type_conversion(channel, dual)
i2b = _type_conversion(instance, batch)
s2b = _type_conversion(spatial, batch)
d2i = _type_conversion(dual, instance)
d2s = _type_conversion(dual, spatial)


def si2d(value):
    """`value` with its spatial and instance dims turned into dual dims."""
    return rename_dims(value, lambda s: s.spatial + s.instance, dual)


def p2d(value):
    """`value` with its primal dims (instance, spatial, channel) turned into dual dims."""
    return rename_dims(value, lambda s: s.primal, dual)


# --- pack, unpack, flatten -------------------------------------------------------------------------


def pack_dims(value, dims, packed_dim, pos: int | None = None, **kwargs):
    """Merge the dims `dims` of `value` into the single dim `packed_dim`, in the order the dims are given (row-major).

    No dim to pack adds `packed_dim` (with its size, else 1); one dim is renamed.

    Args:
        value: a Tensor, a tree of them, or an object with `__pack_dims__` (else `__getitem__` and `__stack__`).
        dims: the dims to pack (any dim filter).
        packed_dim: the new dim: a Shape or a spec such as 'points:i'.
        pos: where the new dim goes among the remaining ones (default: where the first packed dim was).
        **kwargs: passed on to `__pack_dims__` of custom objects.
    """
    return _pack(value, dims, packed_dim, pos, 'channel', kwargs)


def _pack(value, dims, packed_dim, pos, default_type: str, kwargs: dict):
    packed = as_dim(_as_shape(packed_dim, default_type, 'packed_dim'), 'packed_dim')
    full = shape(value)
    names = tuple(n for n in resolve_dims(dims, full) if n in full)
    if not names:
        return expand(value, packed.with_size(packed.size if isinstance(packed.size, int) else 1))

    def pack_leaf(leaves: list, path: str):
        leaf = leaves[0]
        if _is_data(leaf):
            return pack_tensor_dims(leaf, names, packed, pos) if isinstance(leaf, Tensor) else leaf
        own = tuple(n for n in names if n in shape(leaf))
        if not own:
            return leaf
        if hasattr(leaf, '__pack_dims__'):
            result = leaf.__pack_dims__(own, packed, pos, **kwargs)
            if result is not NotImplemented:
                return result
        size = math.prod(shape(leaf).get_size(n) for n in own)
        return _restack(leaf, own, packed.with_size(size), 'pack_dims', '__pack_dims__', kwargs)
    with affecting(names, on_result=False):
        return map_trees(pack_leaf, [value], _DATA, None, 'pack_dims', objects=True)


def _typed_pack(dim_type: str, filter_: Callable):
    def pack_of_type(value, packed_dim, pos: int | None = None, **kwargs):
        return _pack(value, filter_, packed_dim, pos, dim_type, kwargs)
    pack_of_type.__name__ = pack_of_type.__qualname__ = f'{dim_type[0]}pack'
    pack_of_type.__doc__ = (f'Pack the {dim_type} dims of `value` into `packed_dim` (a name makes it a {dim_type} '
                            f'dim; a spec like "points:i" sets the type). See `pack_dims`.')
    return pack_of_type


spack = _typed_pack('spatial', spatial)
ipack = _typed_pack('instance', instance)
cpack = _typed_pack('channel', channel)
dpack = _typed_pack('dual', dual)


def unpack_dim(value, dim, *unpacked_dims, **kwargs):
    """Split the dim `dim` of `value` into `unpacked_dims` (row-major); at most one of their sizes may be unknown.

    An empty `unpacked_dims` removes a dim of size 1; one dim renames. A value without `dim` is returned as it is.

    Args:
        value: a Tensor, a tree of them, or an object with `__unpack_dim__` (else `__getitem__` and `__stack__`).
        dim: the dim to split (a name or Shape).
        *unpacked_dims: Shapes or specs of the new dims.
        **kwargs: passed on to `__unpack_dim__` of custom objects.
    """
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim, shape(value))[0]
    new = concat_shapes(*[_as_shape(d, 'channel', 'unpacked_dims') for d in unpacked_dims])
    if name not in shape(value):
        return value

    def unpack_leaf(leaves: list, path: str):
        leaf = leaves[0]
        if _is_data(leaf):
            return unpack_tensor_dim(leaf, name, new) if isinstance(leaf, Tensor) else leaf
        own = shape(leaf)
        if name not in own:
            return leaf
        if hasattr(leaf, '__unpack_dim__'):
            result = leaf.__unpack_dim__(name, new, **kwargs)
            if result is not NotImplemented:
                return result
        return _restack(leaf, (name,), _with_unknown_size(new, own.get_size(name)), 'unpack_dim', '__unpack_dim__',
                        kwargs)
    with affecting((name,), on_result=False):
        return map_trees(unpack_leaf, [value], _DATA, None, 'unpack_dim', objects=True)


def _with_unknown_size(new: Shape, total: int) -> Shape:
    unknown = [n for n, s in zip(new.names, new.sizes, strict=True) if s is None]
    if not unknown:
        return new
    known = math.prod(s for s in new.sizes if s is not None)
    return new.with_dim_size(unknown[0], total // known)


def flatten(value, flat_dim: Shape = FLAT_DIM, flatten_batch: bool = False, **kwargs):
    """Pack the dims of `value` into `flat_dim` (batch dims too if `flatten_batch`), in the order of its shape.

    Args:
        value: a Tensor, a tree of them, or an object with `__flatten__` (else packing protocols).
        flat_dim: the new dim (a Shape or spec such as 'points:i').
        flatten_batch: also pack the batch dims; otherwise they stay.
        **kwargs: passed on to `__flatten__` of custom objects.
    """
    flat_dim = as_dim(_as_shape(flat_dim, 'instance', 'flat_dim'), 'flat_dim')
    if not isinstance(value, Tensor) and hasattr(value, '__flatten__'):
        result = value.__flatten__(flat_dim, flatten_batch, **kwargs)
        if result is not NotImplemented:
            return result
    full = shape(value)
    return pack_dims(value, full if flatten_batch else full.non_batch, flat_dim, **kwargs)


def squeeze(x, dims):
    """`x` without the dims `dims`, each of which must have size 1."""
    full = shape(x)
    names = dims_in(full, dims)
    for n in names:
        if full.get_size(n) != 1:
            raise ValueError(f"squeeze(): dim {n!r} of {full} has size {full.get_size(n)}, not 1")
    return slice_(x, {n: 0 for n in names}) if names else x
