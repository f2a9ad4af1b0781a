"""Operations that change the structure of tensors: stacking, concatenating, expanding, renaming, reshaping."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._errors import DimNotFound, IncompatibleShapes
from ._kinds import PartsKind, Stacked, expand_to, stack_dense, stacked_shape
from ._shape import (
    EMPTY_SHAPE,
    Shape,
    batch,
    concat_shapes,
    instance,
    merge_shapes,
    parse_dim_spec,
    resolve_dims,
    shape_of,
)
from ._tensor import (
    CONCAT,
    ELEMENTWISE,
    GATHER,
    REDUCE,
    RENAME,
    RENAME_OP,
    RESHAPE,
    STACK,
    Dense,
    Op,
    Tensor,
    aligned_native,
    as_tensor,
    auto_cast,
    common_backend,
    dims_in,
    dispatch,
)

FLAT_DIM = instance('flat')


def as_dim(dim, what: str = 'dim') -> Shape:
    """A rank-1 Shape from a Shape or a 'name:type' spec; anything else is a TypeError naming it."""
    if isinstance(dim, str):
        dim = parse_dim_spec(dim)
    if not isinstance(dim, Shape) or dim.rank != 1:
        raise TypeError(f'{what} must be a Shape with one dim such as batch("b") or channel(vector="x,y"), '
                        f'or a spec like "b:b"; got {dim!r}')
    return dim


def _dense_stack(ts: Sequence[Dense], dim: Shape) -> Tensor:
    shape = stacked_shape([t.shape for t in ts], dim)
    if not shape.is_uniform:
        return Stacked(ts, dim)
    first = ts[0]._shape
    backend = ts[0]._backend
    if all(t._shape == first and t._backend is backend for t in ts):  # identical layouts stack without alignment
        inner = shape.without(dim.name)
        if inner.names == first.names:
            natives = auto_cast(backend, [t._native for t in ts])
            return Dense(backend.stack(natives, shape.index(dim.name)), shape, backend)
    return stack_dense(ts, dim, shape)


STACK_OP = Op('stack', STACK, _dense_stack)


def stack_tensors(values: Sequence, dim: Shape) -> Tensor:
    """Stack tensors (or numbers) along the new dim `dim`; differing sizes give a non-uniform `Stacked` tensor."""
    tensors = [as_tensor(v) for v in values]
    if not tensors:
        raise ValueError(f'stack() needs at least one value to stack along {dim}')
    labels = dim.labels[0]
    if labels is None:
        dim = dim.with_size(len(tensors))
    elif len(labels) != len(tensors):
        raise IncompatibleShapes(f'stack() got {len(tensors)} values but dim {dim} has {len(labels)} labels')
    for t in tensors:
        if dim.name in t.shape.names:
            raise IncompatibleShapes(f'Cannot stack along {dim.name!r}: a value already has that dim ({t.shape})')
    return dispatch(STACK_OP, tensors, (dim,))


def _dense_concat(ts: Sequence[Dense], dim: str, shape: Shape) -> Dense:
    backend = common_backend(ts)
    natives = []
    for t in ts:
        layout = shape.with_dim_size(dim, t._shape.get_size(dim))
        native = aligned_native(t, layout, backend)
        if t._shape.rank < shape.rank:
            native = backend.broadcast_to(native, layout.sizes)
        natives.append(native)
    return Dense(backend.concat(auto_cast(backend, natives), shape.index(dim)), shape, backend)


CONCAT_OP = Op('concat', CONCAT, _dense_concat)


def concat_tensors(values: Sequence, dim) -> Tensor:
    """Join tensors along an existing dim `dim` (a name or Shape); labels are joined too when all have them."""
    tensors = [as_tensor(v) for v in values]
    if not tensors:
        raise ValueError('concat() needs at least one value')
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim)[0]
    if len(tensors) == 1:
        _joined_shape(tensors, name)
        return tensors[0]
    return dispatch(CONCAT_OP, tensors, (name, _joined_shape(tensors, name)))


def _joined_shape(tensors: Sequence[Tensor], name: str) -> Shape:
    """The shape of `tensors` laid end to end along their dim `name`."""
    for t in tensors:
        if name not in t.shape.names:
            raise DimNotFound(f'concat() along {name!r}: a value of shape {t.shape} lacks that dim')
    others = merge_shapes(*[t.shape.without(name) for t in tensors])
    labels = [t.shape.get_item_names(name) for t in tensors]
    if all(ls is not None for ls in labels):
        joined = tensors[0].shape[name].with_size(tuple(label for ls in labels for label in ls))
    else:
        joined = tensors[0].shape[name].with_size(sum(t.shape.get_size(name) for t in tensors))
    return merge_shapes(joined, others)


class Joined(PartsKind):
    """Tensors laid end to end along their dim `dim` but kept apart: a concatenation without a copy.

    `parallel_compute` returns its blocks' outputs this way, so assembling them costs no memory.
    Element-wise operations, slicing, renaming and most reductions work part by part while there
    are at most `PART_LIMIT` parts; everything else (and `numpy()`) materialises the concatenation.
    """

    __slots__ = ('_dim', '_offsets', '_parts', '_shape')
    _kind_priority = 15
    PART_LIMIT = 64

    def __init__(self, parts: Sequence[Tensor], dim: str):
        self._parts = tuple(parts)
        self._dim = dim
        self._shape = _joined_shape(self._parts, dim)
        offsets = [0]
        for p in self._parts:
            offsets.append(offsets[-1] + p.shape.get_size(dim))
        self._offsets = tuple(offsets)

    @property
    def shape(self) -> Shape:
        return self._shape

    def _dense(self) -> Dense:
        return _dense_concat([p._dense() for p in self._parts], self._dim, self._shape)

    def __reduce__(self):
        return Joined, (self._parts, self._dim)

    def _range(self, i: int) -> slice:
        return slice(self._offsets[i], self._offsets[i + 1])

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        first = next(t for t in tensors if type(t) is Joined)
        dim = first._dim
        if len(first._parts) > cls.PART_LIMIT:
            return NotImplemented
        if op.category == ELEMENTWISE:
            if any(type(t) is Joined and t is not first and t._offsets != first._offsets for t in tensors):
                return NotImplemented
            parts = [dispatch(op, [t._parts[i] if type(t) is Joined else
                                   t[{dim: first._range(i)}] if dim in t.shape.names else t for t in tensors], params)
                     for i in range(len(first._parts))]
            return Joined(parts, dim)
        if op.category == GATHER:
            (selection,) = params
            rest = {d: s for d, s in selection.items() if d != dim}
            sel = selection.get(dim, slice(None))
            if isinstance(sel, int):
                i = max(j for j in range(len(first._parts)) if first._offsets[j] <= sel)
                part = first._parts[i][{dim: sel - first._offsets[i]}]
                return part[rest] if rest else part
            if not isinstance(sel, slice) or sel.step not in (None, 1):
                return NotImplemented
            start, stop, _ = sel.indices(first._offsets[-1])
            picked = [p[{dim: slice(max(start, lo) - lo, min(stop, hi) - lo), **rest}]
                      for p, lo, hi in zip(first._parts, first._offsets[:-1], first._offsets[1:], strict=True)
                      if max(start, lo) < min(stop, hi)]
            if not picked:
                return NotImplemented
            return picked[0] if len(picked) == 1 else Joined(picked, dim)
        if op.category == RENAME:
            old, new = params
            parts = [dispatch(op, (p,), params) for p in first._parts]
            return Joined(parts, new.names[old.index(dim)] if dim in old else dim)
        if op.category == REDUCE and op.name in _PART_REDUCIBLE:
            (dims,) = params
            per_part = [dispatch(op, (p,), (dims,)) for p in first._parts]
            if dim not in dims:
                return Joined(per_part, dim)
            return dispatch(op, (stack_tensors(per_part, batch('parts_')),), (('parts_',),))
        return NotImplemented


_PART_REDUCIBLE = {'sum', 'prod', 'max', 'min', 'any', 'all', 'finite_sum', 'finite_max', 'finite_min'}


def unstack_tensor(value: Tensor, dim) -> tuple:
    """Slices of `value` along `dim` (a name, Shape or filter), as a tuple; several dims are iterated jointly."""
    names = dims_in(value.shape, dim)
    if not names:
        raise DimNotFound(f'unstack(): {dim!r} names no dim of {value.shape}')
    sizes = [value.shape.get_size(n) for n in names]
    result = []
    for flat in range(math.prod(sizes)):
        index, rest = {}, flat
        for n, s in zip(reversed(names), reversed(sizes), strict=True):
            index[n], rest = rest % s, rest // s
        result.append(value[index])
    return tuple(result)


def expand_tensor(value, *dims) -> Tensor:
    """`value` with the dims `dims` added, lazily: the values are not repeated in memory."""
    value = as_tensor(value)
    add = merge_shapes(*[parse_dim_spec(d) if isinstance(d, str) else shape_of(d) for d in dims]) if dims \
        else EMPTY_SHAPE
    for name, size in zip(add.names, add.sizes, strict=True):
        if size is None:
            raise ValueError(f'expand() needs sizes for the new dims; {name!r} has none in {add}')
    return expand_to(value, merge_shapes(value.shape, add))


def rename_tensor_dims(value, dims, names) -> Tensor:
    """`value` with the dims `dims` renamed to `names` (str, sequence, or a Shape that also sets types)."""
    value = as_tensor(value)
    requested = resolve_dims(dims, value.shape)
    new_names = names.names if isinstance(names, Shape) else resolve_dims(names)
    if len(new_names) != len(requested):
        raise ValueError(f'rename_dims() got {len(requested)} dims {requested} but {len(new_names)} new names '
                         f'{new_names}')
    keep = [i for i, n in enumerate(requested) if n in value.shape.names]
    if not keep:
        return value
    old = tuple(requested[i] for i in keep)
    if isinstance(names, Shape):
        new = names[[new_names[i] for i in keep]]
    else:
        new = value.shape.only(old, reorder=True).replace(old, tuple(new_names[i] for i in keep))
    return dispatch(RENAME_OP, (value,), (old, new))


def _dense_reshape(ts: Sequence[Dense], order: tuple, shape: Shape) -> Dense:
    t = ts[0]
    native = t._native_in(order)
    return Dense(t._backend.reshape(native, shape.sizes), shape, t._backend)


RESHAPE_OP = Op('reshape', RESHAPE, _dense_reshape)


def pack_tensor_dims(value: Tensor, dims, packed_dim: Shape) -> Tensor:
    """Merge `dims` into the single dim `packed_dim`, in the order the dims are given (row-major)."""
    value = as_tensor(value)
    packed_dim = as_dim(packed_dim, 'packed_dim')
    names = tuple(n for n in resolve_dims(dims, value.shape) if n in value.shape.names)
    if not names:
        return expand_to(value, merge_shapes(value.shape, packed_dim.with_size(1)))
    size = math.prod(value.shape.get_size(n) for n in names)
    if packed_dim.labels[0] is not None and len(packed_dim.labels[0]) != size:
        raise IncompatibleShapes(f'pack_dims(): {packed_dim} has labels for {len(packed_dim.labels[0])} entries '
                                 f'but the packed dims {names} hold {size}')
    packed = packed_dim if packed_dim.labels[0] is not None else packed_dim.with_size(size)
    first = min(value.shape.index(n) for n in names)
    rest = [n for n in value.shape.names if n not in names]
    before = value.shape[[n for n in rest if value.shape.index(n) < first]]
    after = value.shape[[n for n in rest if value.shape.index(n) > first]]
    result = concat_shapes(before, packed, after)
    order = before.names + names + after.names
    return dispatch(RESHAPE_OP, (value,), (order, result))


def unpack_tensor_dim(value: Tensor, dim, *unpacked_dims) -> Tensor:
    """Split the dim `dim` into `unpacked_dims` (row-major); at most one of their sizes may be None."""
    value = as_tensor(value)
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim)[0]
    if name not in value.shape.names:
        raise DimNotFound(f'unpack_dim(): {name!r} is not a dim of {value.shape}')
    new = concat_shapes(*[parse_dim_spec(d) if isinstance(d, str) else d for d in unpacked_dims])
    total = value.shape.get_size(name)
    unknown = [n for n, s in zip(new.names, new.sizes, strict=True) if s is None]
    known = math.prod(s for s in new.sizes if s is not None)
    if len(unknown) > 1 or (not unknown and known != total) or (unknown and total % known):
        raise IncompatibleShapes(f'unpack_dim(): cannot split {name!r} of size {total} into {new}')
    if unknown:
        new = new.with_dim_size(unknown[0], total // known)
    i = value.shape.index(name)
    result = concat_shapes(value.shape[:i], new, value.shape[i + 1:])
    return dispatch(RESHAPE_OP, (value,), (value.shape.names, result))


def flatten_tensor(value, flat_dim: Shape = FLAT_DIM) -> Tensor:
    """All dims of `value` packed into `flat_dim`, in the order of its shape."""
    value = as_tensor(value)
    return pack_tensor_dims(value, value.shape.names, flat_dim)


def transpose(value, order) -> Tensor:
    """`value` laid out with its dims in `order` (a dim filter listing all of its dims)."""
    value = as_tensor(value)
    names = resolve_dims(order, value.shape)
    if set(names) != set(value.shape.names):
        raise ValueError(f'transpose(): order {names} must list exactly the dims of {value.shape}')
    return dispatch(RESHAPE_OP, (value,), (names, value.shape[list(names)]))
