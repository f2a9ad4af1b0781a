"""The operation table of the PyTorch backend: torch functions, Python operators and small adapters.

Only `lazyphi.backend.torch` imports this module. Entries take the arguments of the NumPy backend's entries and
give results of the same data types; tensors they create go to the device set with `use_device`.
"""

import functools
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .._errors import UnsupportedDType
from . import _torch_sparse as sparse
from ._dtype import DType, inexact_type
from ._numpy import NUMPY, sparse_to_scipy
from ._precision import get_precision

_PYTHON_NUMBERS = (bool, int, float, complex)
_INT32 = DType(int, 32)

_TO_TORCH = {
    DType(bool): torch.bool,
    DType(int, 8): torch.int8, DType(int, 16): torch.int16, DType(int, 32): torch.int32, DType(int, 64): torch.int64,
    DType(int, 8, True): torch.uint8, DType(int, 16, True): torch.uint16, DType(int, 32, True): torch.uint32,
    DType(int, 64, True): torch.uint64,
    DType(float, 16): torch.float16, DType(float, 32): torch.float32, DType(float, 64): torch.float64,
    DType(complex, 64): torch.complex64, DType(complex, 128): torch.complex128,
}
_FROM_TORCH = {torch_dtype: dtype for dtype, torch_dtype in _TO_TORCH.items()}
FLOAT_BY_PRECISION = {16: torch.float16, 32: torch.float32, 64: torch.float64}
_COMPLEX_BY_PRECISION = {16: torch.complex64, 32: torch.complex64, 64: torch.complex128}

_default_device = torch.device('cpu')  # where created tensors go, see use_device()


def use_device(device: torch.device) -> None:
    """Makes the operations that create tensors put them on `device`."""
    global _default_device
    _default_device = device


def _torch_dtype(dtype: DType | None) -> torch.dtype:
    if dtype is None:
        return FLOAT_BY_PRECISION[get_precision()]
    dtype = DType.as_dtype(dtype)
    try:
        return _TO_TORCH[dtype]
    except KeyError:
        raise UnsupportedDType(f"PyTorch has no data type for {dtype!r}. Supported: {list(_TO_TORCH)}") from None


def _dtype(x: Any) -> DType:
    if isinstance(x, torch.Tensor):
        try:
            return _FROM_TORCH[x.dtype]
        except KeyError:
            raise ValueError(f"torch dtype {x.dtype} has no lazyphi equivalent") from None
    return NUMPY.dtype(x)


def _is_tensor(x: Any, only_native: bool = False) -> bool:
    if isinstance(x, torch.Tensor):
        return True
    return not only_native and NUMPY.is_tensor(x)  # numbers, lists and NumPy arrays: as_tensor converts them


def _from_numpy(array: np.ndarray) -> torch.Tensor:
    """`array` as a tensor on the default device, sharing memory on the CPU where torch can."""
    if array.dtype.kind not in 'biufc':
        raise TypeError(f"PyTorch cannot hold NumPy arrays of dtype {array.dtype}")
    if not array.dtype.isnative or any(stride < 0 for stride in array.strides):
        array = np.ascontiguousarray(array, array.dtype.newbyteorder('='))  # torch aborts on negative strides
    # from_numpy warns about read-only arrays; DLPack shares them without a warning
    tensor = torch.from_numpy(array) if array.flags.writeable else torch.from_dlpack(array)
    return tensor if _default_device.type == 'cpu' else tensor.to(_default_device)


def _with_precision(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_floating_point():
        return tensor.to(FLOAT_BY_PRECISION[get_precision()])
    if tensor.is_complex():
        return tensor.to(_COMPLEX_BY_PRECISION[get_precision()])
    return tensor


def as_tensor(x: Any, convert_external: bool = True) -> Any:
    """Converts `x` to a torch tensor; floating-point values take the current precision."""
    if isinstance(x, torch.Tensor):
        return _with_precision(x)
    if not convert_external and isinstance(x, _PYTHON_NUMBERS):
        return x
    return _with_precision(_from_numpy(np.asarray(x)))


def _numpy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:  # a SciPy matrix, as phiml gives
            return sparse_to_scipy(x, sparse.disassemble, _numpy)
        return x.numpy(force=True)  # detached, on the CPU, conjugation resolved; shares memory where possible
    return np.asarray(x)


def _cast(x: Any, dtype: DType) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(_torch_dtype(dtype))
    return _from_numpy(np.asarray(x)).to(_torch_dtype(dtype))


def _staticshape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, torch.Tensor) else np.shape(x)


def _from_dlpack(x: Any) -> torch.Tensor:
    """A tensor sharing the memory of `x` (an object implementing `__dlpack__`, or a capsule)."""
    if isinstance(x, np.ndarray) and any(stride < 0 for stride in x.strides):
        x = np.ascontiguousarray(x)  # torch aborts the process on negative strides
    return torch.from_dlpack(x)


def _to_dlpack(tensor: torch.Tensor) -> torch.Tensor:
    """An object implementing `__dlpack__`: the tensor without gradient and with conjugation resolved."""
    return tensor.detach().resolve_conj().resolve_neg()


def _like(value: Any, other: torch.Tensor) -> torch.Tensor:
    """A Python number as a 0-d tensor on `other`'s device, of the type torch promotes the two to."""
    return torch.as_tensor(value, dtype=torch.result_type(other, value), device=other.device)


def _tensor_arguments(function: Callable) -> Callable:
    """Adapts a torch function of two tensors to also take a Python number for either argument."""
    def apply(a: Any, b: Any) -> torch.Tensor:
        if not isinstance(a, torch.Tensor):
            a = _like(a, b)
        elif not isinstance(b, torch.Tensor):
            b = _like(b, a)
        return function(a, b)
    apply.__name__ = apply.__qualname__ = function.__name__
    return apply


def _clip(x: torch.Tensor, minimum: Any, maximum: Any) -> torch.Tensor:
    if isinstance(minimum, torch.Tensor) != isinstance(maximum, torch.Tensor):  # torch takes two of a kind
        minimum, maximum = (v if isinstance(v, torch.Tensor) else _like(v, x) for v in (minimum, maximum))
    return torch.clamp(x, minimum, maximum)


def _imag(x: torch.Tensor) -> torch.Tensor:
    return torch.imag(x) if x.is_complex() else torch.zeros_like(x)


def _conj(x: torch.Tensor) -> torch.Tensor:
    return torch.conj_physical(x) if x.is_complex() else x


def _seed(seed: int | None) -> None:
    if seed is None:
        torch.seed()
    else:
        torch.manual_seed(seed)


def _random_uniform(shape: Sequence[int], low: Any, high: Any, dtype: DType | None = None) -> torch.Tensor:
    """Values drawn uniformly from `[low, high)`; for complex types the real parts from `[low.real, high.real)`
    and the imaginary parts from `[low.imag, high.imag)`, so real bounds give real values."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    shape = tuple(shape)
    if dtype.kind is float:
        return torch.rand(shape, dtype=_torch_dtype(dtype), device=_default_device) * (high - low) + low
    if dtype.kind is complex:
        part = DType(float, dtype.bits // 2)
        low, high = (torch.as_tensor(v, dtype=_torch_dtype(dtype), device=_default_device) for v in (low, high))
        real, imag = (_random_uniform(shape, a, b, part) for a, b in ((low.real, high.real), (low.imag, high.imag)))
        return torch.complex(real, imag)
    if dtype.kind is int:
        return torch.randint(low, high, shape, dtype=_torch_dtype(dtype), device=_default_device)
    if dtype.kind is bool:
        return torch.randint(0, 2, shape, device=_default_device).bool()
    raise ValueError(f"random_uniform supports bool, int, float and complex types, not {dtype}")


def _random_normal(shape: Sequence[int], dtype: DType | None = None) -> torch.Tensor:
    """Standard-normal values; real and imaginary parts each standard-normal for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    shape = tuple(shape)
    if dtype.kind is float:
        return torch.randn(shape, dtype=_torch_dtype(dtype), device=_default_device)
    if dtype.kind is complex:
        part = _torch_dtype(DType(float, dtype.bits // 2))
        return torch.complex(*(torch.randn(shape, dtype=part, device=_default_device) for _ in range(2)))
    raise ValueError(f"random_normal supports float and complex types, not {dtype}")


def _range(start: int, limit: int | None = None, delta: int = 1, dtype: DType = _INT32) -> torch.Tensor:
    if limit is None:
        start, limit = 0, start
    return torch.arange(start, limit, delta, dtype=_torch_dtype(dtype), device=_default_device)


# --- shape ---

def _pad_or_crop(x: torch.Tensor, axis: int, size: int, fill_value: Any) -> torch.Tensor:
    current = x.shape[axis]
    if size < current:
        return x.narrow(axis, 0, size)
    if size > current:
        fill = torch.full((*x.shape[:axis], size - current, *x.shape[axis + 1:]), fill_value, dtype=x.dtype,
                          device=x.device)
        return torch.cat([x, fill], axis)
    return x


def _periodic(index: torch.Tensor, size: Any) -> torch.Tensor:
    return index % size


def _boundary(index: torch.Tensor, size: Any) -> torch.Tensor:
    return torch.minimum(torch.clamp(index, min=0), torch.as_tensor(size, device=index.device) - 1)


def _symmetric(index: torch.Tensor, size: Any) -> torch.Tensor:
    """Edge values repeat: c b a | a b c | c b a."""
    folded = index % (2 * size)
    return torch.where(folded < size, folded, 2 * size - 1 - folded)


def _reflect(index: torch.Tensor, size: Any) -> torch.Tensor:
    """Edge values do not repeat: c b | a b c | b a."""
    period = torch.clamp(torch.as_tensor(2 * size - 2, device=index.device), min=1)
    folded = index % period
    return torch.where(folded < size, folded, period - folded)


_WRAP = {'periodic': _periodic, 'boundary': _boundary, 'symmetric': _symmetric, 'reflect': _reflect}


def _pad(value: torch.Tensor, pad_width: Any, mode: str = 'constant', constant_values: Any = 0) -> Any:
    """Pads with `mode` 'constant', 'boundary', 'periodic', 'symmetric' or 'reflect'; `NotImplemented` for others."""
    if mode == 'constant':
        return F.pad(value, [w for widths in reversed(pad_width) for w in widths], value=constant_values)
    wrap = _WRAP.get(mode)
    if wrap is None:
        return NotImplemented
    for axis, (before, after) in enumerate(pad_width):
        if before or after:
            size = value.shape[axis]
            value = value.index_select(axis, wrap(torch.arange(-before, size + after, device=value.device), size))
    return value


def _expand_dims(a: torch.Tensor, axis: int = 0, number: int = 1) -> torch.Tensor:
    position = axis if axis >= 0 else a.dim() + 1 + axis
    return a.reshape((*a.shape[:position], *(1,) * number, *a.shape[position:]))


def _repeat(x: torch.Tensor, repeats: Any, axis: int, new_length: int | None = None) -> torch.Tensor:
    if not isinstance(repeats, int | torch.Tensor):
        repeats = torch.as_tensor(repeats, device=x.device)
    result = torch.repeat_interleave(x, repeats, dim=axis)
    return result if new_length is None else _pad_or_crop(result, axis, new_length, 0)


def _transpose(tensor: torch.Tensor, axes: Sequence[int] | None = None) -> torch.Tensor:
    return torch.permute(tensor, tuple(reversed(range(tensor.dim()))) if axes is None else tuple(axes))


def _flip(value: torch.Tensor, axes: Sequence[int] | int | None = None) -> torch.Tensor:
    if axes is None:
        axes = range(value.dim())
    return torch.flip(value, (axes,) if isinstance(axes, int) else tuple(axes))


# --- reductions ---

def _float_for_mean(x: torch.Tensor) -> torch.Tensor:
    """Integers and bools are averaged in float64, as NumPy does."""
    return x if x.is_floating_point() or x.is_complex() else x.to(torch.float64)


_UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _promote_for_sum(x: torch.Tensor) -> torch.Tensor:
    """The type a sum or product has in NumPy: bools and signed integers become int64, unsigned ones uint64."""
    if x.is_floating_point() or x.is_complex():
        return x
    return x.to(torch.uint64 if x.dtype in _UNSIGNED else torch.int64)


def _accumulated(reduction: Callable) -> Callable:
    """A sum or product with NumPy's result type: torch gives int64 for unsigned integers too."""
    def run(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        result = reduction(x, *args, **kwargs)
        return result.to(torch.uint64) if x.dtype in _UNSIGNED and result.dtype != torch.uint64 else result
    run.__name__ = run.__qualname__ = reduction.__name__
    return run


def _reduction(name: str, function: Callable, prepare: Callable = lambda x: x,
               on_no_axes: Callable = lambda x: x) -> Callable:
    """Adapts a torch reduction to NumPy's `axis`: `None` reduces all axes, `()` none (torch would reduce all)."""
    def reduce(x: torch.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> torch.Tensor:
        if axis is not None and not isinstance(axis, int) and len(axis) == 0:
            return on_no_axes(prepare(x))
        return function(prepare(x), dim=axis, keepdim=keepdims)
    reduce.__name__ = reduce.__qualname__ = name
    return reduce


def _prod(value: torch.Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> torch.Tensor:
    if axis is None:
        result = torch.prod(value)
        return result.reshape((1,) * value.dim()) if keepdims else result
    axes = (axis,) if isinstance(axis, int) else tuple(a % value.dim() for a in axis)
    if not axes:
        return _promote_for_sum(value)
    for a in sorted(axes, reverse=True):  # torch multiplies along one axis at a time
        value = torch.prod(value, a, keepdim=keepdims)
    return value


def _cumsum(x: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    return torch.cumsum(x.reshape(-1), 0) if axis is None else torch.cumsum(x, axis)


def _quantile(x: torch.Tensor, quantiles: Any) -> torch.Tensor:
    """Quantiles along the last axis with linear interpolation, stacked along a new first axis like NumPy.

    Sorts instead of calling `torch.quantile`, which refuses inputs of more than 2^24 elements.
    """
    x = _float_for_mean(x)
    if isinstance(quantiles, torch.Tensor):
        q = quantiles.to(x.device)
    elif isinstance(quantiles, float | int):
        q = torch.tensor(quantiles, dtype=x.dtype, device=x.device)  # a Python number adopts the type of `x`
    else:
        q = torch.as_tensor(np.asarray(quantiles), device=x.device)  # float64 for a list, as in NumPy
    dtype = torch.promote_types(x.dtype, q.dtype) if q.is_floating_point() else x.dtype
    x, q = x.to(dtype), q.to(dtype)
    ordered = torch.sort(x, -1).values
    position = q * (x.shape[-1] - 1)
    lower = torch.floor(position).long()
    upper = torch.clamp(lower + 1, max=x.shape[-1] - 1)
    fraction = position - lower
    below, above = ordered[..., lower.reshape(-1)], ordered[..., upper.reshape(-1)]
    result = torch.lerp(below, above, fraction.reshape(-1))
    return torch.movedim(result.reshape(*x.shape[:-1], *q.shape), -1, 0) if q.dim() else result[..., 0]


def _searchsorted(sorted_sequence: torch.Tensor, search_values: Any, side: str, dtype: DType = _INT32) -> torch.Tensor:
    """Insertion indices of `search_values` into `sorted_sequence`; a 2D sequence is searched row by row."""
    if isinstance(search_values, torch.Tensor):
        search_values = search_values.to(sorted_sequence.dtype).contiguous()
    result = torch.searchsorted(sorted_sequence.contiguous(), search_values, side=side)
    return result.to(_torch_dtype(dtype))


def _unique(x: torch.Tensor, return_inverse: bool, return_counts: bool, axis: int | None) -> Any:
    return torch.unique(x, sorted=True, return_inverse=return_inverse, return_counts=return_counts, dim=axis)


def _bincount(x: torch.Tensor, weights: torch.Tensor | None, bins: int, x_sorted: bool = False) -> torch.Tensor:
    counts = torch.bincount(x, weights, minlength=bins)
    return counts if weights is None else counts.to(weights.dtype)


def _histogram1d(values: torch.Tensor, weights: torch.Tensor, bin_edges: torch.Tensor) -> torch.Tensor:
    """Weighted histograms of `values (batch, values)` with `bin_edges (batch, edges)`: `(batch, edges - 1)`.

    Bins include their lower edge; the last also its upper edge, as in NumPy.
    """
    batch = max(values.shape[0], weights.shape[0], bin_edges.shape[0])
    bins = bin_edges.shape[-1] - 1
    values = values.to(bin_edges.dtype).expand(batch, values.shape[-1]).contiguous()
    bin_edges = bin_edges.expand(batch, bins + 1).contiguous()
    index = torch.searchsorted(bin_edges, values, right=True) - 1
    index = torch.where(values == bin_edges[:, -1:], bins - 1, index)
    inside = (index >= 0) & (index < bins)
    flat = torch.where(inside, index + torch.arange(batch, device=index.device)[:, None] * bins, batch * bins)
    weights = weights.expand(batch, values.shape[-1])
    counts = torch.zeros(batch * bins + 1, dtype=weights.dtype, device=weights.device)
    return counts.index_add_(0, flat.reshape(-1), weights.reshape(-1))[:-1].reshape(batch, bins)


def _indexed_segment_sum(x: torch.Tensor, indices: torch.Tensor, axis: int) -> torch.Tensor:
    """Sums the segments of `x (batch, ...)` starting at `indices (batch, segments)` along `axis`.

    Like NumPy's `add.reduceat`: a segment whose start is not below the next start holds `x` at its start.
    The starts must not decrease.
    """
    results = []
    for b in range(x.shape[0]):
        starts = indices[min(b, indices.shape[0] - 1)].contiguous()
        values, inner = x[b], axis - 1
        positions = torch.arange(values.shape[inner], device=values.device)
        segment = torch.searchsorted(starts, positions, right=True) - 1
        segment = torch.where(segment >= 0, segment, len(starts))  # before the first start: a discarded segment
        shape = list(values.shape)
        shape[inner] = len(starts) + 1
        sums = torch.zeros(shape, dtype=values.dtype, device=values.device).index_add_(inner, segment, values)
        sums = sums.narrow(inner, 0, len(starts))
        empty = torch.cat([starts[:-1] >= starts[1:], torch.zeros(1, dtype=torch.bool, device=starts.device)])
        at_start = values.index_select(inner, starts)
        empty = empty.reshape([-1 if i == inner else 1 for i in range(values.dim())])
        results.append(torch.where(empty, at_start, sums))
    return torch.stack(results)


# --- selection ---

def _where(condition: Any, x: Any = None, y: Any = None) -> torch.Tensor:
    """`x` where `condition` holds, else `y`; without `x` and `y`, the indices of true entries `(nnz, ndims)`."""
    if condition.dtype != torch.bool:
        condition = condition.bool()
    if x is None or y is None:
        return torch.argwhere(condition)
    return torch.where(condition, x, y)


def _nonzero(values: torch.Tensor, length: int | None = None, fill_value: int = -1) -> torch.Tensor:
    indices = torch.argwhere(values)
    return indices if length is None else _pad_or_crop(indices, 0, length, fill_value)


def _boolean_mask(x: torch.Tensor, mask: torch.Tensor, axis: int = 0, new_length: int | None = None,
                  fill_value: Any = 0) -> torch.Tensor:
    result = x[(slice(None),) * (axis % x.dim()) + (mask.bool(),)]
    return result if new_length is None else _pad_or_crop(result, axis, new_length, fill_value)


def _gather(values: torch.Tensor, indices: Any, axis: int) -> torch.Tensor:
    """`values` at `indices` (any shape, negative ones count from the end) along `axis`, like `numpy.take`."""
    return values[(slice(None),) * (axis % values.dim()) + (indices,)]


def _multi_slice(tensor: torch.Tensor, slices: tuple) -> torch.Tensor:
    """`tensor[slices]`, where torch refuses negative steps: those axes are sliced forwards, then flipped."""
    if not any(isinstance(s, slice) and s.step is not None and s.step < 0 for s in slices):
        return tensor[slices]
    consumed = sum(1 for s in slices if s is not None and s is not Ellipsis)
    forward, flipped, axis, out_axis = [], [], 0, 0
    for s in slices:
        if s is Ellipsis:
            skipped = tensor.dim() - consumed
            axis, out_axis = axis + skipped, out_axis + skipped
        elif s is None:
            out_axis += 1
        elif isinstance(s, slice):
            if s.step is not None and s.step < 0:
                selected = range(*s.indices(tensor.shape[axis]))
                s = slice(selected[-1], selected[0] + 1, -s.step) if selected else slice(0, 0)
                flipped.append(out_axis)
            axis, out_axis = axis + 1, out_axis + 1
        else:  # an index removes its axis
            axis += 1
        forward.append(s)
    result = tensor[tuple(forward)]
    return torch.flip(result, flipped) if flipped else result


def _batched_gather_nd(values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Gathers `values (batch, spatial..., channels)` at `indices (batch, any..., index)`; batch 1 broadcasts."""
    batch_index = torch.arange(values.shape[0], device=values.device).reshape((-1,) + (1,) * (indices.dim() - 2))
    return values[(batch_index, *torch.unbind(indices, -1))]


_SCATTER_REDUCTIONS = {'max': 'amax', 'min': 'amin'}


def _scatter(base_grid: torch.Tensor, indices: torch.Tensor, values: Any, mode: str) -> torch.Tensor:
    """Returns a copy of `base_grid (batch, spatial..., channels)` with `values (batch, updates, channels)` written
    at `indices (batch, updates, index)`; `mode` is 'update', 'add', 'max' or 'min'. Batch 1 broadcasts."""
    if mode not in ('update', 'add', 'max', 'min'):
        raise ValueError(f"scatter mode must be 'update', 'add', 'max' or 'min' but got {mode!r}")
    if not isinstance(values, torch.Tensor):
        values = _like(values, base_grid)
    values = values.reshape((1,) * (3 - values.dim()) + tuple(values.shape))
    batch = max(base_grid.shape[0], indices.shape[0], values.shape[0])
    result = base_grid.to(torch.result_type(base_grid, values)).expand(batch, *base_grid.shape[1:]).clone()
    channels = result.shape[-1]
    values = values.to(result.dtype).expand(batch, indices.shape[1], channels)
    batch_index = torch.arange(batch, device=result.device)[:, None]
    if mode in ('update', 'add'):
        return result.index_put_((batch_index, *torch.unbind(indices, -1)), values, accumulate=mode == 'add')
    spatial = result.shape[1:-1]
    strides = torch.tensor([math.prod(spatial[i + 1:]) for i in range(len(spatial))], device=result.device)
    flat = (indices * strides).sum(-1) + batch_index * math.prod(spatial)
    flat = flat.expand(batch, indices.shape[1]).reshape(-1, 1).expand(-1, channels)
    grid = result.reshape(-1, channels)
    grid.scatter_reduce_(0, flat, values.reshape(-1, channels), _SCATTER_REDUCTIONS[mode], include_self=True)
    return grid.reshape(result.shape)


def _get_diagonal(matrices: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Diagonals of `matrices (batch, rows, cols, channels)` as `(batch, diagonal, channels)`."""
    return torch.movedim(torch.diagonal(matrices, offset, dim1=1, dim2=2), -1, 1)


def _grid_sample(grid: torch.Tensor, coordinates: torch.Tensor, extrapolation: str) -> Any:
    """Linear interpolation of `grid (batch, spatial..., channels)` at `coordinates (batch, instance..., vector)`.

    Coordinates are in index space: the first grid point lies at 0. `extrapolation` is one of 'undefined',
    'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'; others give `NotImplemented`.
    """
    if extrapolation not in ('undefined', 'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'):
        return NotImplemented
    size = torch.tensor(grid.shape[1:-1], device=grid.device)
    lower = torch.floor(coordinates)
    fraction = coordinates - lower
    lower = lower.long()
    wrap = _WRAP.get(extrapolation, _boundary)
    result = 0
    for corner in itertools.product((0, 1), repeat=len(size)):
        corner = torch.tensor(corner, device=grid.device)
        weight = torch.prod(torch.where(corner.bool(), fraction, 1 - fraction), -1)
        index = lower + corner
        values = _batched_gather_nd(grid, wrap(index, size))
        if extrapolation == 'zeros':
            inside = torch.all((index >= 0) & (index < size), -1)
            values = torch.where(inside[..., None], values, 0)
        result = result + weight[..., None] * values
    return result


# --- linear algebra and signals ---

def _tensordot(a: torch.Tensor, a_axes: Any, b: torch.Tensor, b_axes: Any) -> torch.Tensor:
    a_axes, b_axes = ([axes] if isinstance(axes, int) else list(axes) for axes in (a_axes, b_axes))
    return torch.tensordot(a, b, (a_axes, b_axes))


def _solve_triangular_dense(matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> torch.Tensor:
    """Solves `matrix (batch, rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`; batch 1 broadcasts."""
    dtype = _torch_dtype(inexact_type(_dtype(matrix), _dtype(rhs)))
    matrix, rhs = as_tensor(matrix).to(dtype), as_tensor(rhs).to(dtype)
    return torch.linalg.solve_triangular(matrix, rhs[..., None], upper=not lower, unitriangular=unit_diagonal)[..., 0]


def _solve_triangular_sparse(matrix: torch.Tensor, rhs: Any, lower: bool, unit_diagonal: bool) -> torch.Tensor:
    """Solves the sparse triangular `matrix (rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`, reading only
    the triangle named (`torch.triangular_solve` is torch's solver that takes CSR matrices); float16 gives float32."""
    dtype = inexact_type(_dtype(matrix), _dtype(rhs))
    dtype = _torch_dtype(DType(float, 32) if dtype == DType(float, 16) else dtype)
    rows = sparse.compressed_rows(matrix.to(dtype))
    return torch.triangular_solve(as_tensor(rhs).to(dtype).T, rows, upper=not lower,
                                  unitriangular=unit_diagonal).solution.T


_CONVOLUTIONS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _conv(value: torch.Tensor, kernel: torch.Tensor, zero_padding: bool = True) -> torch.Tensor:
    """Cross-correlates `value (batch, in, spatial...)` with `kernel (batch or 1, out, in, kernel_spatial...)`.

    With `zero_padding`, the result keeps the spatial shape of `value` (centred like SciPy's `mode='same'`).
    One to three spatial dims.
    """
    kernel_shape = kernel.shape[3:]
    convolve = _CONVOLUTIONS.get(len(kernel_shape))
    if convolve is None:
        raise NotImplementedError(f"The torch backend convolves 1 to 3 spatial dims, not {len(kernel_shape)}")
    if zero_padding:
        value = F.pad(value, [w for k in reversed(kernel_shape) for w in (k // 2, k - 1 - k // 2)])
    if kernel.shape[0] == 1:
        return convolve(value, kernel[0])
    # one kernel per batch entry: a grouped convolution with one group per entry
    batch, out_channels = value.shape[0], kernel.shape[1]
    result = convolve(value.reshape(1, -1, *value.shape[2:]), kernel.reshape(-1, *kernel.shape[2:]), groups=batch)
    return result.reshape(batch, out_channels, *result.shape[2:])


def _complex_result_type(x: torch.Tensor) -> torch.dtype:
    if x.is_complex():
        return x.dtype
    if x.is_floating_point():
        return torch.complex128 if x.dtype == torch.float64 else torch.complex64
    return _COMPLEX_BY_PRECISION[get_precision()]


def _fourier(transform: Callable) -> Callable:
    def apply(x: torch.Tensor, axes: Sequence[int]) -> torch.Tensor:
        x = x.to(_complex_result_type(x))  # also lifts float16, which torch transforms only on GPUs
        return transform(x, dim=tuple(axes)) if len(axes) else x
    apply.__name__ = transform.__name__
    return apply


def _numpy_call(f: Callable, output_shapes: Any, output_dtypes: Any, *args: Any, **aux_args: Any) -> Any:
    """Calls `f` on NumPy versions of `args`; its results come back as tensors of `output_dtypes`. No gradients."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), _default_device)
    result = f(*[_numpy(a) if isinstance(a, torch.Tensor) else a for a in args], **aux_args)

    def back(value: Any, dtype: DType) -> torch.Tensor:
        return _from_numpy(np.asarray(value)).to(device=device, dtype=_torch_dtype(dtype))
    if isinstance(output_dtypes, tuple | list):
        return tuple(back(value, dtype) for value, dtype in zip(result, output_dtypes, strict=True))
    return back(result, output_dtypes)



OPS: dict[str, Callable] = {
    # --- tensors and types ---
    'is_tensor': _is_tensor,
    'as_tensor': as_tensor,
    'is_available': lambda tensor: not (torch.jit.is_tracing() or torch.compiler.is_compiling()),
    'numpy': _numpy,
    'content_hash': lambda x: NUMPY.content_hash(_numpy(x)),  # a GPU tensor is copied to host memory
    'copy': lambda tensor, only_mutable=False: torch.clone(tensor),  # torch tensors are always mutable
    'to_dlpack': _to_dlpack,
    'from_dlpack': _from_dlpack,
    'dtype': _dtype,
    'cast': _cast,
    'staticshape': _staticshape,
    'shape': _staticshape,
    'ndims': lambda tensor: tensor.dim() if isinstance(tensor, torch.Tensor) else np.ndim(tensor),
    'size': lambda tensor: tensor.numel() if isinstance(tensor, torch.Tensor) else np.size(tensor),
    'is_module': lambda obj: isinstance(obj, torch.nn.Module),
    'is_sparse': lambda x: isinstance(x, torch.Tensor) and x.layout != torch.strided,
    'get_sparse_format': sparse.get_sparse_format,
    'disassemble': sparse.disassemble,
    'variable': lambda value: torch.nn.Parameter(as_tensor(value)),
    'prefers_channels_last': lambda: False,
    'stop_gradient': lambda value: value.detach() if isinstance(value, torch.Tensor) else value,
    'numpy_call': _numpy_call,
    'seed': _seed,
    # --- creation ---
    'random_uniform': _random_uniform,
    'random_normal': _random_normal,
    'zeros': lambda shape, dtype=None: torch.zeros(tuple(shape), dtype=_torch_dtype(dtype), device=_default_device),
    'ones': lambda shape, dtype=None: torch.ones(tuple(shape), dtype=_torch_dtype(dtype), device=_default_device),
    'zeros_like': torch.zeros_like,
    'ones_like': torch.ones_like,
    'range': _range,
    'linspace': lambda start, stop, number: torch.linspace(
        start, stop, number, dtype=FLOAT_BY_PRECISION[get_precision()], device=_default_device),
    'meshgrid': lambda *coordinates: torch.meshgrid(*coordinates, indexing='ij'),
    # --- shape ---
    'reshape': torch.reshape,
    'broadcast_to': torch.broadcast_to,
    'transpose': _transpose,
    'stack': torch.stack,
    'concat': torch.cat,
    'flip': _flip,
    'flatten': torch.flatten,
    'tile': lambda value, multiples: torch.tile(value, tuple(multiples)),
    'repeat': _repeat,
    'expand_dims': _expand_dims,
    'pad': _pad,
    # --- reductions ---
    'sum': _accumulated(_reduction('sum', torch.sum, on_no_axes=_promote_for_sum)),
    'prod': _accumulated(_prod),
    'mean': _reduction('mean', torch.mean, _float_for_mean),
    'std': _reduction('std', functools.partial(torch.std, correction=0), _float_for_mean, torch.zeros_like),
    'max': _reduction('max', torch.amax),
    'min': _reduction('min', torch.amin),
    'any': _reduction('any', torch.any, on_no_axes=torch.Tensor.bool),
    'all': _reduction('all', torch.all, on_no_axes=torch.Tensor.bool),
    'argmax': lambda x, axis, keepdims=False: torch.argmax(x, axis, keepdims),
    'argmin': lambda x, axis, keepdims=False: torch.argmin(x, axis, keepdims),
    'cumsum': _cumsum,
    'quantile': _quantile,
    'argsort': lambda x, axis=-1: torch.argsort(x, dim=axis, stable=True),
    'sort': lambda x, axis=-1: torch.sort(x, dim=axis, stable=True).values,
    'searchsorted': _searchsorted,
    'unique': _unique,
    'bincount': _bincount,
    'histogram1d': _histogram1d,
    'indexed_segment_sum': _indexed_segment_sum,
    # --- selection ---
    'where': _where,
    'nonzero': _nonzero,
    'boolean_mask': _boolean_mask,
    'gather': _gather,
    'multi_slice': _multi_slice,
    'batched_gather_nd': _batched_gather_nd,
    'scatter': _scatter,
    'get_diagonal': _get_diagonal,
    'grid_sample': _grid_sample,
    # --- linear algebra and signals ---
    'tensordot': _tensordot,
    'einsum': torch.einsum,
    'mul_matrix_batched_vector': sparse.mul_matrix_batched_vector,
    'conv': _conv,
    'solve_triangular_dense': _solve_triangular_dense,
    'solve_triangular_sparse': _solve_triangular_sparse,
    # --- sparse matrices ---
    'sparse_coo_tensor': sparse.sparse_coo_tensor,
    'sparse_coo_tensor_batched': sparse.sparse_coo_tensor_batched,
    'csr_matrix': sparse.csr_matrix,
    'csr_matrix_batched': sparse.csr_matrix,  # the batch axis of the parts makes a batch of matrices
    'csc_matrix': sparse.csc_matrix,
    'csc_matrix_batched': sparse.csc_matrix,
    'fft': _fourier(torch.fft.fftn),
    'ifft': _fourier(torch.fft.ifftn),
    'svd': lambda matrix, full_matrices=True: tuple(torch.linalg.svd(matrix, full_matrices=full_matrices)),
    'eigvals': torch.linalg.eigvals,
    'matrix_solve_least_squares': lambda matrix, rhs: tuple(torch.linalg.lstsq(matrix, rhs)),
    # --- element-wise; the operators also take a Python number on either side ---
    'add': operator.add,
    'sub': operator.sub,
    'mul': operator.mul,
    'div': operator.truediv,
    'pow': operator.pow,
    'mod': operator.mod,
    'floordiv': operator.floordiv,
    'and_': operator.and_,
    'or_': operator.or_,
    'xor': operator.xor,
    'invert': operator.invert,
    'shift_bits_left': operator.lshift,
    'shift_bits_right': operator.rshift,
    'equal': operator.eq,
    'not_equal': operator.ne,
    'greater_than': operator.gt,
    'greater_or_equal': operator.ge,
    'maximum': _tensor_arguments(torch.maximum),
    'minimum': _tensor_arguments(torch.minimum),
    'clip': _clip,
    'abs': torch.abs,
    'sign': torch.sgn,  # also defined for complex values: z / |z|, as NumPy's sign
    'round': torch.round,
    'ceil': torch.ceil,
    'floor': torch.floor,
    'sqrt': torch.sqrt,
    'exp': torch.exp,
    'log': torch.log,
    'log2': torch.log2,
    'log10': torch.log10,
    'sin': torch.sin,
    'arcsin': torch.asin,
    'cos': torch.cos,
    'arccos': torch.acos,
    'tan': torch.tan,
    'arctan': torch.atan,
    'arctan2': _tensor_arguments(torch.atan2),
    'sinh': torch.sinh,
    'arcsinh': torch.asinh,
    'cosh': torch.cosh,
    'arccosh': torch.acosh,
    'tanh': torch.tanh,
    'arctanh': torch.atanh,
    'isfinite': torch.isfinite,
    'isnan': torch.isnan,
    'isinf': torch.isinf,
    'real': torch.real,
    'imag': _imag,
    'conj': _conj,
    'erf': torch.special.erf,
    'log_gamma': torch.special.gammaln,
    'gamma_inc_l': _tensor_arguments(torch.special.gammainc),
    'gamma_inc_u': _tensor_arguments(torch.special.gammaincc),
}
"""The table of `TorchBackend`: operation name -> function."""
