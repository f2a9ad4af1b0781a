"""Dask-backed tensors: `tensor(dask_array, dims)` and dask-backed DataArrays stay lazy.

A `DaskTensor` holds a `dask.array.Array` and the named shape of its axes. Slicing and renaming give
new DaskTensors over the sliced dask array, computing nothing; any other operation computes the
values of its selection only (just the chunks it touches, on Dask's local threads) and keeps them
in the memory cache that disk-backed tensors use (`set_cache_ttl`), except a reduction of a selection
too large to hold at once, which computes and reduces it piece by piece (`reduce_in_pieces`). As an
input of `parallel_compute` each block slices it, so each block computes only its own part of the dask
array.

This module imports Dask; `lazyphi.parallel` registers it with `tensor()` for values of the `dask`
package (see `lazyphi.math._foreign`), so it loads only once a dask array reaches `tensor()`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import dask.array as da
import numpy as np
from dask.sizeof import sizeof

from .._errors import IncompatibleShapes
from ..backend import NUMPY, Backend, DType
from ..math import Shape
from ..math.kinds import GATHER, REDUCE, RENAME, Dense, Op, Tensor, read_only_native, tensor_html
from ..storage import MEMORY, reduce_in_pieces

SCHEDULER = 'threads'  # computing a selection: Dask's local threads, wherever it runs (host, task or worker)


class DaskTensor(Tensor):
    """A tensor whose values are those of a dask array, computed part by part when an operation needs them.

    Create one with `math.tensor(dask_array, dims...)` or from a dask-backed `xarray.DataArray`.
    """

    __slots__ = ('_array', '_dtype', '_shape')
    _kind_priority = 5

    def __init__(self, array: da.Array, shape: Shape):
        self._array = array
        self._shape = shape
        self._dtype = DType.as_dtype(array.dtype)

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def backend(self) -> Backend:
        return NUMPY

    @property
    def available(self) -> bool:
        """Whether the values are in memory now (computed on use otherwise)."""
        return MEMORY.holds(self._memory_key())

    def _dense(self) -> Dense:
        native, _ = MEMORY.get_or_load(self._memory_key(), self._compute)
        return Dense(native, self._shape, NUMPY)

    def _memory_key(self) -> tuple:
        return 'dask', self._array.name

    def _compute(self) -> np.ndarray:
        return read_only_native(np.asarray(self._array.compute(scheduler=SCHEDULER)))

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        first = tensors[0]
        if op.category == GATHER and type(first) is DaskTensor:
            return first._select(params[0])
        if op.category == RENAME and type(first) is DaskTensor:
            old, new = params
            return DaskTensor(first._array, first._shape.replace(old, new))
        if op.category == REDUCE and type(first) is DaskTensor:
            return reduce_in_pieces(op, first, params[0], lambda: first._array.chunks,
                                    lambda piece: Dense(piece._compute(), piece._shape, NUMPY))
        return NotImplemented

    def _select(self, selection: dict) -> DaskTensor:
        array, axis_of = self._array, list(self._shape.names)
        lists = []
        index = [slice(None)] * len(axis_of)
        for dim, sel in selection.items():
            if isinstance(sel, tuple):
                lists.append((dim, list(sel)))
            else:
                index[axis_of.index(dim)] = sel
        array = array[tuple(index)]
        kept = [n for n in axis_of if not isinstance(selection.get(n), int)]
        for dim, indices in lists:  # Dask takes one list of indices at a time
            array = array[(slice(None),) * kept.index(dim) + (indices,)]
        return DaskTensor(array, self._shape.after_gather(selection))

    def to_dask(self) -> da.Array:
        """The dask array, axes in the order of `shape`."""
        return self._array

    def __repr__(self) -> str:
        return f'DaskTensor{self._shape} {self._dtype} over {self._array.name}'

    def _repr_html_(self) -> str:
        array = self._array
        return tensor_html(self, [('dask array', f'{array.name}, {array.npartitions} chunks of {array.chunksize}')])

    def __reduce__(self):
        return DaskTensor, (self._array, self._shape)

    def __dask_tokenize__(self):
        shape = self._shape
        return 'lazyphi.DaskTensor', self._array.name, shape.names, shape.types, shape.labels


@sizeof.register(DaskTensor)
def _sizeof_dask_tensor(t: DaskTensor) -> int:
    """A reference to a computation, not its values: what the task graph carries."""
    return 1024


def from_dask(data, dims: Shape) -> DaskTensor:
    """A lazy tensor of the dask array `data`, its axes named by `dims` in order (as for any native).

    Raises:
        TypeError: `data` is a dask collection other than an array.
        IncompatibleShapes: `dims` does not name every axis, a size disagrees, or chunk sizes are unknown.
    """
    if not isinstance(data, da.Array):
        raise TypeError(f'tensor() takes dask arrays, not {type(data).__module__}.{type(data).__qualname__}; '
                        f'convert it to a dask array first (e.g. .to_dask_array(lengths=True))')
    if any(isinstance(s, float) and math.isnan(s) for s in data.shape):
        raise IncompatibleShapes(f'tensor(): the dask array has unknown sizes {data.shape}; call '
                                 f'.compute_chunk_sizes() on it first')
    if dims.rank != data.ndim:
        raise IncompatibleShapes(f'tensor(): the dask array has {data.ndim} axes of sizes {data.shape} but '
                                 f'{dims.rank} dims were given ({dims}). Name every axis, e.g. '
                                 f'tensor(array, batch("b"), spatial("x"))')
    for name, given, labels, actual in zip(dims.names, dims.sizes, dims.labels, data.shape, strict=True):
        expected = len(labels) if labels is not None else given
        if expected is not None and expected != actual:
            raise IncompatibleShapes(f'tensor(): dim {name!r} was given {expected} entries but the dask array has '
                                     f'{actual} along that axis')
    return DaskTensor(data, dims.with_sizes([labels if labels is not None else size for labels, size in
                                             zip(dims.labels, data.shape, strict=True)]))
