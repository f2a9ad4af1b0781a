"""Gathering by index tensors: the `GATHER_TENSOR` operation behind `t[{'x': indices}]`, `t[vec(y=1, x=2)]`, gather.

An int index tensor along a dim replaces the dim by the index's dims; dims the index shares with the tensor pick
entries element by element, so indexing several dims one after another with components sharing their dims picks
points. `index_by_tensor` (`_gather_scatter.py`) chooses between this, gather and boolean masks for `t[...]`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .._errors import DimNotFound
from ..backend import convert
from ._shape import Shape, concat_shapes, merge_shapes
from ._tensor import GATHER_TENSOR, RENAME_OP, Dense, Op, Tensor, aligned_native, common_backend, dispatch


def _dense_gather_by_tensor(tensors: Sequence[Dense], dim: str) -> Dense:
    """Entries of `t` along `dim` at `index`; dims of `index` that `t` has too pick entries element by element."""
    t, index = tensors
    backend = common_backend(tensors)
    shape, index_shape = t._shape, index._shape
    shared, axis, taken, out = _gather_layout(shape, index_shape, dim)
    indices = index._native if index._backend is backend else convert(index._native, backend)
    if not shared:  # NumPy's take: the index's axes replace the axis of `dim`
        values = t._native if t._backend is backend else convert(t._native, backend)
        native = backend.gather(values, indices, axis)
    else:  # rows of (shared, dim) flattened: row s * size + index[s, i] holds the entries for element (s, i)
        rest = shape.without((*shared, dim))
        only_index = index_shape.without(shared)
        shared_shape, size = shape[list(shared)], shape.get_size(dim)
        values = backend.reshape(aligned_native(t, concat_shapes(shared_shape, shape[dim], rest), backend),
                                 (shared_shape.volume * size, rest.volume))
        indices = backend.reshape(aligned_native(index, concat_shapes(shared_shape, only_index), backend),
                                  (shared_shape.volume, only_index.volume))
        indices = backend.where(backend.greater_than(0, indices), indices + size, indices)  # -1: the last entry
        starts = backend.reshape(backend.range(0, shared_shape.volume * size, size, backend.dtype(indices)), (-1, 1))
        native = backend.gather(values, backend.reshape(starts + indices, (-1,)), 0)
        native = backend.reshape(native, shared_shape.sizes + only_index.sizes + rest.sizes)
    result = Dense(native, taken, backend)
    return result if taken is out else Dense(aligned_native(result, out), out, backend)


@functools.lru_cache(maxsize=1024)
def _gather_layout(shape: Shape, index_shape: Shape, dim: str) -> tuple:
    """(dims `index_shape` shares with `shape`, axis of `dim`, the shape of the gathered native, the result shape).

    The result shape is canonical; where the gathered native's axes differ from it, it is transposed. Cached:
    the same gathers repeat.
    """
    out = merge_shapes(shape.without(dim), index_shape)
    shared = tuple(n for n in index_shape.names if n in shape.names)
    axis = shape.index(dim)
    if shared:
        rest = shape.without((*shared, dim))
        taken = concat_shapes(shape[list(shared)], index_shape.without(shared), rest)
    else:
        taken = concat_shapes(shape[:axis], index_shape, shape[axis + 1:])
    return shared, axis, out if taken.names == out.names else taken, out


GATHER_BY_TENSOR = Op('gather_by_tensor', GATHER_TENSOR, _dense_gather_by_tensor)


def gather_by_tensor(t: Tensor, dim, index: Tensor) -> Tensor:
    """The entries of `t` along `dim` at the integers of `index`: `dim` is replaced by the dims of `index`.

    Dims `index` shares with `t` pick entries element by element; if `index` has `dim` itself, the result
    has it as `index` has it.
    """
    dim = dim.name if isinstance(dim, Shape) else dim
    if dim not in t.shape.names:
        raise DimNotFound(f'Cannot index dim {dim!r}: the tensor has shape {t.shape}')
    if index.dtype.kind is not int:
        raise TypeError(f'Index tensors for dim {dim!r} must hold integers, got {index.dtype}')
    return _gather(t, dim, index)


def _gather(t: Tensor, dim: str, index: Tensor) -> Tensor:
    if dim not in index.shape.names:
        return dispatch(GATHER_BY_TENSOR, (t, index), (dim,))
    temporary = _unused_name(dim, t.shape, index.shape)
    renamed = dispatch(RENAME_OP, (index,), ((dim,), index.shape[dim].rename(dim, temporary)))
    result = dispatch(GATHER_BY_TENSOR, (t, renamed), (dim,))
    return dispatch(RENAME_OP, (result,), ((temporary,), index.shape[dim]))


def _unused_name(name: str, *shapes: Shape) -> str:
    while any(name in s.names for s in shapes):
        name += '_'
    return name
