"""Tensor kinds that defer materialising: `Expanded` (constant along some dims) and `Stacked`.

Both plug into the dispatch path of `_tensor.py` through `__handle__`: they handle the
operation categories they can serve without materialising and pass on the rest, which
then runs on `_dense()`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._errors import IncompatibleShapes
from ..backend import Backend, DType
from ._shape import NonUniform, Shape, merge_shapes
from ._tensor import (
    ELEMENTWISE,
    GATHER,
    REDUCE,
    RENAME,
    Dense,
    Op,
    Tensor,
    aligned_native,
    auto_cast,
    common_backend,
    dispatch,
)

# how a reduction treats a dim along which the value is constant: sum-like ops scale by the size
_SCALED_BY_COUNT = {'sum', 'finite_sum'}
_POWER_OF_COUNT = {'prod'}
_INVARIANT_UNDER_REPEAT = {'mean', 'max', 'min', 'any', 'all', 'std', 'finite_mean', 'finite_max', 'finite_min'}


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
            if op.name not in _SCALED_BY_COUNT | _POWER_OF_COUNT | _INVARIANT_UNDER_REPEAT:
                return NotImplemented
            (dims,) = params
            inner_dims = tuple(d for d in dims if d in self._inner.shape.names)
            result = dispatch(op, (self._inner,), (inner_dims,)) if inner_dims else self._inner
            count = math.prod(self._shape.get_size(d) for d in dims if d not in inner_dims)
            if count != 1 and op.name in _SCALED_BY_COUNT:
                result = result * count
            elif count != 1 and op.name in _POWER_OF_COUNT:
                result = result ** count
            return expand_to(result, self._shape.without(dims))
        if category == GATHER:
            (selection,) = params
            inner_sel = {d: s for d, s in selection.items() if d in self._inner.shape.names}
            inner = dispatch(op, (self._inner,), (inner_sel,)) if inner_sel else self._inner
            return expand_to(inner, self._shape.after_gather(selection))
        if category == RENAME:
            old, new = params
            present = tuple(i for i, n in enumerate(old) if n in self._inner.shape.names)
            inner = self._inner
            if present:
                inner = dispatch(op, (inner,), (tuple(old[i] for i in present), new[[new.names[i] for i in present]]))
            return expand_to(inner, self._shape.replace(old, new))
        return NotImplemented


def expand_to(value: Tensor, shape: Shape) -> Tensor:
    """`value` seen with `shape` (a superset of its dims), expanding lazily; unchanged if nothing is added."""
    if value.shape.rank == shape.rank:
        return value
    if type(value) is Expanded:
        value = value._inner
    return Expanded(value, shape)


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
            per_part = [dispatch(op, (p,), (tuple(d for d in dims if d in p.shape.names),)) for p in first._parts]
            if dim not in dims:
                return Stacked(per_part, first._dim)
            if op.name in ('mean', 'finite_mean'):
                return NotImplemented if first._shape.is_uniform else _non_uniform_mean(op, first, dims)
            combined = Stacked(per_part, first._dim)
            if not combined.shape.is_uniform:
                return NotImplemented
            return dispatch(op, (combined._dense(),), ((dim,),))
        if category == RENAME:
            old, new = params
            parts = [dispatch(op, (p,), _rename_params(p.shape, old, new)) for p in first._parts]
            new_dim = first._dim.replace(old, new) if dim in old else first._dim
            return Stacked(parts, new_dim)
        return NotImplemented


def _part(t: Tensor, dim: str, i: int) -> Tensor:
    if type(t) is Stacked and t._dim.name == dim:
        return t._parts[i]
    return t[{dim: i}] if dim in t.shape.names else t


def _rename_params(shape: Shape, old: tuple, new: Shape) -> tuple:
    present = [i for i, n in enumerate(old) if n in shape.names]
    return tuple(old[i] for i in present), new[[new.names[i] for i in present]]


def _non_uniform_mean(op: Op, stacked: Stacked, dims: tuple):
    from_sum = {'mean': 'sum', 'finite_mean': 'finite_sum'}[op.name]
    sum_op = SUM_LIKE[from_sum]
    total = dispatch(sum_op, (stacked,), (dims,))
    counts = [math.prod(p.shape.get_size(d) for d in dims if d in p.shape.names) for p in stacked._parts]
    return total / sum(counts)


SUM_LIKE: dict[str, Op] = {}  # filled by _ops with the sum reductions the non-uniform mean needs


def stacked_shape(shapes: Sequence[Shape], dim: Shape) -> Shape:
    """The shape of parts with `shapes` stacked along `dim`; dims whose sizes differ become non-uniform."""
    try:
        inner = merge_shapes(*shapes)
    except IncompatibleShapes:
        inner = merge_shapes(*shapes, allow_varying_sizes=True)
        sizes = []
        for name in inner.names:
            per_part = tuple(s.get_size(name) if name in s.names else 1 for s in shapes)
            sizes.append(per_part[0] if len(set(per_part)) == 1 else NonUniform(per_part, (dim.name,)))
        inner = inner.with_sizes(sizes)
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
