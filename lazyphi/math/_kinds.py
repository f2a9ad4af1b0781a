"""Tensor kinds that defer materialising: `Expanded` (constant along some dims) and `Stacked`.

Both plug into the dispatch path of `_tensor.py` through `__handle__`: they handle the
operation categories they can serve without materialising and pass on the rest, which
then runs on `_dense()`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

from .._errors import DimNotFound, IncompatibleShapes
from ..backend import Backend, DType
from ._natives import promoted_dtype
from ._reductions import reduction_of
from ._shape import NonUniform, Shape, merge_shapes
from ._tensor import (
    ELEMENTWISE,
    EXPAND,
    GATHER,
    REDUCE,
    RENAME,
    STACK,
    Dense,
    Op,
    Tensor,
    aligned_native,
    auto_cast,
    common_backend,
    dispatch,
)


class Expanded(Tensor):
    """A tensor constant along the dims of `shape` that `inner` lacks; those dims are never materialised."""

    __slots__ = ('_inner', '_shape')
    _kind_priority = 10

    def __init__(self, inner: Tensor, shape: Shape):
        self._inner = inner
        self._shape = shape

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._inner.dtype

    @property
    def backend(self) -> Backend:
        return self._inner.backend

    @property
    def available(self) -> bool:
        return self._inner.available

    @property
    def _names(self) -> tuple:
        return self._inner._names

    def _dense(self) -> Dense:
        inner = self._inner._dense()
        native = inner.backend.broadcast_to(aligned_native(inner, self._shape), self._shape.sizes)
        return Dense(native, self._shape, inner.backend)

    def native(self, order=None, force_expand: bool = True):
        if force_expand:
            return self._dense()._native_in(order)
        order = self._shape.names if order is None else order
        return Dense(aligned_native(self._inner._dense(), self._shape), self._shape, self.backend)._native_in(order)

    def __reduce__(self):
        return Expanded, (self._inner, self._shape)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        category = op.category
        if category == ELEMENTWISE:
            if not all(type(t) in (Dense, Expanded) for t in tensors):
                return NotImplemented
            inner = dispatch(op, [t._inner if type(t) is Expanded else t for t in tensors], params)
            return expand_to(inner, merge_shapes(*[t.shape for t in tensors]))
        self = tensors[0]
        if category == REDUCE:
            reduction = reduction_of(op)
            if reduction is None:
                return NotImplemented
            (dims,) = params
            inner_dims = tuple(d for d in dims if d in self._inner.shape.names)
            count = math.prod(self._shape.get_size(d) for d in dims if d not in inner_dims)
            result = reduction.repeated(reduction(self._inner, inner_dims), count)
            return expand_to(result, self._shape.without(dims))
        if category == GATHER:
            (selection,) = params
            inner_sel = {d: s for d, s in selection.items() if d in self._inner.shape.names}
            inner = dispatch(op, (self._inner,), (inner_sel,)) if inner_sel else self._inner
            return expand_to(inner, self._shape.after_gather(selection))
        if category == EXPAND:
            return Expanded(self._inner, params[0])
        if category == RENAME:
            old, new = params
            present = tuple(i for i, n in enumerate(old) if n in self._inner.shape.names)
            inner = self._inner
            if present:
                inner = dispatch(op, (inner,), (tuple(old[i] for i in present), new[[new.names[i] for i in present]]))
            return expand_to(inner, self._shape.replace(old, new))
        if category == STACK:
            return _stack_expanded(op, tensors, params[0])
        return NotImplemented


def _stack_expanded(op: Op, tensors: Sequence[Tensor], dim: Shape):
    """Tensors expanded along the same dims, stacked: their inner tensors stacked, those dims still not materialised
    (as phiml stores such a stack: `get_sparsity` of three stacked `zeros(batch(b=4))` is 3 / 12)."""
    if not all(type(t) is Expanded for t in tensors):
        return NotImplemented
    added = [t._shape.without(t._inner.shape.names) for t in tensors]
    if any(set(a.names) != set(added[0].names) or any(a.get_size(n) != added[0].get_size(n) for n in a.names)
           for a in added[1:]):
        return NotImplemented
    shape = stacked_shape([t.shape for t in tensors], dim)
    if not shape.is_uniform:
        return NotImplemented
    return Expanded(dispatch(op, [t._inner for t in tensors], (dim,)), shape)


def expand_to(value: Tensor, shape: Shape) -> Tensor:
    """`value` seen with `shape` (a superset of its dims), expanding lazily; unchanged if nothing is added.

    Expanding is an operation (category EXPAND), so kinds without values, such as the tracer, take part.
    """
    if value.shape.rank == shape.rank:
        return value
    return dispatch(EXPAND_OP, (value,), (shape,))


EXPAND_OP = Op('expand', EXPAND, lambda ts, shape: Expanded(ts[0], shape), any_kind=True)


class PartsKind(Tensor):
    """Base of the kinds that hold several tensors (`_parts`): dtype, backend and availability come from those."""

    __slots__ = ()

    @property
    def dtype(self) -> DType:
        return self._parts[0].dtype

    @property
    def backend(self) -> Backend:
        return self._parts[0].backend

    @property
    def available(self) -> bool:
        return all(p.available for p in self._parts)

    @property
    def parts(self) -> tuple:
        return self._parts


class Stacked(PartsKind):
    """Tensors stacked along `dim` but kept apart: sizes may differ between parts (non-uniform shapes)."""

    __slots__ = ('_dim', '_parts', '_shape')
    _kind_priority = 20

    def __init__(self, parts: Sequence[Tensor], dim: Shape):
        self._parts = tuple(parts)
        self._dim = dim.with_size(len(self._parts)) if dim.labels[0] is None else dim
        self._shape = stacked_shape([p.shape for p in self._parts], self._dim)

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        """What the parts' dtypes combine to, as stacking them into one array casts them (their own where equal)."""
        return promoted_dtype([p.dtype for p in self._parts])

    def _dense(self) -> Dense:
        if not self._shape.is_uniform:
            raise IncompatibleShapes(f'A tensor of non-uniform shape {self._shape} cannot be held in one array; '
                                     f'slice or unstack it along {self._dim.name!r} first.')
        return stack_dense(self._parts, self._dim, self._shape)

    def __reduce__(self):
        return Stacked, (self._parts, self._dim)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        first = next(t for t in tensors if type(t) is Stacked)
        dim = first._dim.name
        category = op.category
        if category == ELEMENTWISE:
            if any(dim in t.shape.names and not (type(t) is Stacked and t._dim.name == dim) and not t.shape.is_uniform
                   for t in tensors):
                return NotImplemented
            parts = [dispatch(op, [_part(t, dim, i) for t in tensors], params) for i in range(first._dim.size)]
            return Stacked(parts, first._dim)
        if category == GATHER:
            (selection,) = params
            rest = {d: s for d, s in selection.items() if d != dim}
            parts = first._parts
            sel = selection.get(dim, slice(None))
            if isinstance(sel, int):
                return parts[sel][rest] if rest else parts[sel]
            picked = parts[sel] if isinstance(sel, slice) else tuple(parts[i] for i in sel)
            picked = [p[rest] for p in picked] if rest else picked
            return Stacked(picked, first._dim.after_gather({dim: sel}))
        if category == REDUCE:
            (dims,) = params
            return _reduce_parts(op, first, [tuple(d for d in dims if d in p.shape.names) for p in first._parts],
                                 dim in dims, lambda parts: Stacked(parts, first._dim))
        if category == RENAME:
            old, new = params
            parts = [dispatch(op, (p,), _rename_params(p.shape, old, new)) for p in first._parts]
            new_dim = first._dim.replace((dim,), new[[new.names[old.index(dim)]]]) if dim in old else first._dim
            return Stacked(parts, new_dim)
        if category == STACK and not first.shape.is_uniform:  # cannot be one array: stacked as they are
            return Stacked(tensors, params[0])
        return NotImplemented


def _reduce_parts(op: Op, tensor: PartsKind, part_dims: list, across: bool, rebuild: Callable):
    """Reduce a tensor of parts: part by part, then across the parts with the reduction's combine if asked.

    `part_dims` are the dims to reduce within each part; `across`: the reduction spans the parts too.
    `rebuild` makes a tensor of the same kind from reduced parts. Across parts, a reduction whose combine
    would round differently from reducing all values at once (float sums, means) materialises instead,
    unless the parts cannot be held in one array.
    """
    reduction = reduction_of(op)
    if reduction is None:
        return NotImplemented
    if not across:
        return rebuild([reduction(p, d) for p, d in zip(tensor._parts, part_dims, strict=True)])
    if tensor.dtype.kind not in reduction.exact_kinds and tensor.shape.is_uniform:
        return NotImplemented
    try:
        partials = [reduction.partial(p, d) for p, d in zip(tensor._parts, part_dims, strict=True)]
    except ValueError:  # a part whose element count is unknown: reduce the materialised tensor instead
        return NotImplemented
    return reduction.combine(partials)


def _part(t: Tensor, dim: str, i: int) -> Tensor:
    if type(t) is Stacked and t._dim.name == dim:
        return t._parts[i]
    return t[{dim: i}] if dim in t.shape.names else t


def _rename_params(shape: Shape, old: tuple, new: Shape) -> tuple:
    present = [i for i, n in enumerate(old) if n in shape.names]
    return tuple(old[i] for i in present), new[[new.names[i] for i in present]]


def stacked_shape(shapes: Sequence[Shape], dim: Shape) -> Shape:
    """The shape of parts with `shapes` stacked along `dim`; dims whose sizes differ become non-uniform.

    A dim differs when the parts having it disagree on its size; then a part lacking it counts as size 1.
    Parts whose labels differ along a dim of equal size give that dim without labels.
    """
    try:
        inner = merge_shapes(*shapes)
    except IncompatibleShapes:
        names = list(dict.fromkeys(n for s in shapes for n in s.names))
        sizes, types, labels = [], [], []
        for name in names:
            having = [s[name] for s in shapes if name in s.names]
            kinds = {d.type for d in having}
            if len(kinds) > 1:
                raise IncompatibleShapes(f'Cannot stack values along {dim.name!r}: dim {name!r} is '
                                         f'{" in one and ".join(sorted(kinds))} in another') from None
            known = {d.size for d in having if d.size is not None}
            item_labels = {d.item_labels for d in having}
            if len(known) > 1:
                per_part = tuple(s.get_size(name) if name in s.names else 1 for s in shapes)
                sizes.append(NonUniform(per_part, (dim.name,)))
                labels.append(None)
            else:
                sizes.append(known.pop() if known else None)
                labels.append(item_labels.pop() if len(item_labels) == 1 else None)
            types.append(kinds.pop())
        inner = merge_shapes(Shape(tuple(sizes), tuple(names), tuple(types), tuple(labels)))
    return merge_shapes(dim, inner)


def stack_dense(parts: Sequence[Tensor], dim: Shape, shape: Shape) -> Dense:
    """Stack uniform parts into one native laid out as `shape`."""
    inner = shape.without(dim.name)
    dense = [p._dense() for p in parts]
    backend = common_backend(dense)
    natives = [backend.broadcast_to(aligned_native(p, inner, backend), inner.sizes) if p.shape.rank < inner.rank
               else aligned_native(p, inner, backend) for p in dense]
    axis = shape.index(dim.name)
    return Dense(backend.stack(auto_cast(backend, natives), axis), shape, backend)


def concat_dense(ts: Sequence[Dense], dim: str, shape: Shape) -> Dense:
    backend = common_backend(ts)
    natives = []
    for t in ts:
        layout = shape.with_dim_size(dim, t._shape.get_size(dim))
        native = aligned_native(t, layout, backend)
        if t._shape.rank < shape.rank:
            native = backend.broadcast_to(native, layout.sizes)
        natives.append(native)
    return Dense(backend.concat(auto_cast(backend, natives), shape.index(dim)), shape, backend)


def joined_shape(tensors: Sequence[Tensor], name: str) -> Shape:
    """The shape of `tensors` laid end to end along their dim `name`, in the dim order of the first."""
    for t in tensors:
        if name not in t.shape.names:
            raise DimNotFound(f'concat() along {name!r}: a value of shape {t.shape} lacks that dim')
    others = merge_shapes(*[t.shape.without(name) for t in tensors])
    labels = [t.shape.get_item_names(name) for t in tensors]
    if all(ls is not None for ls in labels):
        joined = tensors[0].shape[name].with_size(tuple(label for ls in labels for label in ls))
    else:
        joined = tensors[0].shape[name].with_size(sum(t.shape.get_size(name) for t in tensors))
    return merge_shapes(tensors[0].shape.replace(name, joined), others)


class Joined(PartsKind):
    """Tensors laid end to end along their dim `dim` but kept apart: a concatenation without a copy.

    `parallel_compute` returns its blocks' outputs this way, so assembling them costs no memory.
    Slicing touches only the parts it selects and renaming works part by part, for any number of parts;
    element-wise operations and most reductions work part by part while there are at most `PART_LIMIT`
    parts; everything else (and `numpy()`) materialises the concatenation.
    """

    __slots__ = ('_dim', '_offsets', '_parts', '_shape')
    _kind_priority = 15
    PART_LIMIT = 64

    def __init__(self, parts: Sequence[Tensor], dim: str):
        self._parts = tuple(parts)
        self._dim = dim
        self._shape = joined_shape(self._parts, dim)
        offsets = [0]
        for p in self._parts:
            offsets.append(offsets[-1] + p.shape.get_size(dim))
        self._offsets = tuple(offsets)

    @property
    def shape(self) -> Shape:
        return self._shape

    def _dense(self) -> Dense:
        return concat_dense([p._dense() for p in self._parts], self._dim, self._shape)

    def __reduce__(self):
        return Joined, (self._parts, self._dim)

    def _range(self, i: int) -> slice:
        return slice(self._offsets[i], self._offsets[i + 1])

    def _part_of(self, index: int) -> int:
        """The number of the part holding item `index` (0 <= index < size) along the joined dim."""
        return bisect.bisect_right(self._offsets, index) - 1

    def _gather(self, selection: dict):
        """A selection touching only the parts it needs (each part sliced lazily); NotImplemented if none."""
        dim = self._dim
        rest = {d: s for d, s in selection.items() if d != dim}
        sel = selection.get(dim, slice(None))
        size = self._offsets[-1]
        if isinstance(sel, int):
            i = self._part_of(sel)
            part = self._parts[i][{dim: sel - self._offsets[i]}]
            return part[rest] if rest else part
        if isinstance(sel, slice) and sel.step in (None, 1):
            start, stop, _ = sel.indices(size)
            if start >= stop:
                return NotImplemented
            runs = [(i, slice(max(start, self._offsets[i]) - self._offsets[i],
                              min(stop, self._offsets[i + 1]) - self._offsets[i]))
                    for i in range(self._part_of(start), self._part_of(stop - 1) + 1)]
        else:  # items in any order: consecutive items of one part are taken from it together
            items = tuple(range(size)[sel]) if isinstance(sel, slice) else sel
            if not items:
                return NotImplemented
            runs = []
            for index in items:
                i = self._part_of(index)
                if runs and runs[-1][0] == i:
                    runs[-1][1].append(index - self._offsets[i])
                else:
                    runs.append((i, [index - self._offsets[i]]))
            runs = [(i, tuple(local)) for i, local in runs]
        picked = [self._parts[i][{dim: local, **rest}] for i, local in runs]
        return picked[0] if len(picked) == 1 else Joined(picked, dim)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        first = next(t for t in tensors if type(t) is Joined)
        dim = first._dim
        if op.category == GATHER:  # any number of parts: slicing touches only the parts it needs
            return first._gather(params[0])
        if op.category in (ELEMENTWISE, REDUCE) and len(first._parts) > cls.PART_LIMIT:
            return NotImplemented
        if op.category == ELEMENTWISE:
            if any(type(t) is Joined and t is not first and t._offsets != first._offsets for t in tensors):
                return NotImplemented
            parts = [dispatch(op, [t._parts[i] if type(t) is Joined else
                                   t[{dim: first._range(i)}] if dim in t.shape.names else t for t in tensors], params)
                     for i in range(len(first._parts))]
            return Joined(parts, dim)
        if op.category == RENAME:
            old, new = params
            if dim in old:  # each part keeps its own size (and labels) along the joined dim
                new = new.with_dim_size(new.names[old.index(dim)], None)
            parts = [dispatch(op, (p,), (old, new)) for p in first._parts]
            return Joined(parts, new.names[old.index(dim)] if dim in old else dim)
        if op.category == REDUCE:
            (dims,) = params
            return _reduce_parts(op, first, [dims] * len(first._parts), dim in dims, lambda parts: Joined(parts, dim))
        return NotImplemented
