"""Operations TensorFlow lacks in NumPy's form, composed of TensorFlow operations for the backend's table.

Sorting and counting (quantiles, sorted `unique`, histograms, segment sums), shapes (padding with edge modes,
NumPy's `tile`), selection (`take`-like gathers with negative indices, scatters, grid sampling) and signals
(convolutions, FFTs over any axes). Index arithmetic uses static shapes where TensorFlow has them; no data
passes through NumPy. Only `_tensorflow_ops` imports this module.
"""

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ._dtype import DType, inexact_type
from ._precision import get_precision
from ._tensorflow_types import (
    COMPLEX_BY_PRECISION,
    NATIVE,
    common,
    dtype_of,
    inexact,
    numpy_dtype,
    tf_dtype,
    tf_dtype_of,
    to_native,
)

_INT32 = DType(int, 32)


# --- sorting and counting ---

def _lerp(a: Any, b: Any, t: Any) -> Any:
    """Linear interpolation, exact at both ends (NumPy's formula for quantiles)."""
    difference = b - a
    return tf.where(t >= 0.5, b - difference * (1 - t), a + difference * t)


def quantile(x: Any, quantiles: Any) -> Any:
    """Quantiles along the last axis with linear interpolation; the quantiles' axes come first."""
    x, q = common([inexact(x), quantiles])
    size = x.shape[-1]
    position = q * (size - 1)
    lower = tf.floor(position)
    upper = tf.minimum(lower + 1, size - 1)
    ordered = tf.sort(x, -1)
    a = tf.gather(ordered, tf.cast(lower, tf.int64), axis=-1)
    b = tf.gather(ordered, tf.cast(upper, tf.int64), axis=-1)
    result = _lerp(a, b, position - lower)  # axes: x's leading axes, then the quantiles' axes
    leading, q_rank = x.shape.rank - 1, q.shape.rank
    if not (leading and q_rank):
        return result
    return tf.transpose(result, [*range(leading, leading + q_rank), *range(leading)])


def argsort(x: Any, axis: int = -1) -> Any:
    return tf.cast(tf.argsort(x, axis, stable=True), tf.int64)


def searchsorted(sorted_sequence: Any, search_values: Any, side: str, dtype: DType = _INT32) -> Any:
    """Insertion indices of `search_values` into `sorted_sequence`; a 2D sequence is searched row by row."""
    sequence, values = common([sorted_sequence, search_values])
    out_type = tf_dtype(dtype) if tf_dtype(dtype) in (tf.int32, tf.int64) else tf.int64
    if sequence.shape.rank == 1:
        flat = tf.searchsorted(sequence[None], tf.reshape(values, (1, -1)), side, out_type)
        result = tf.reshape(flat, tf.shape(values))
    else:
        result = tf.searchsorted(sequence, values, side, out_type)
    return tf.cast(result, tf_dtype(dtype))


def _lexicographic_order(rows: Any) -> Any:
    """The permutation sorting the rows of a matrix lexicographically (stable sorts, last column first)."""
    order = tf.range(tf.shape(rows, out_type=tf.int64)[0])
    for column in reversed(range(rows.shape[1])):
        key = tf.gather(rows[:, column], order)
        if key.dtype == tf.bool:
            key = tf.cast(key, tf.int8)
        order = tf.gather(order, tf.argsort(key, stable=True))
    return order


def unique(x: Any, return_inverse: bool, return_counts: bool, axis: int | None) -> Any:
    """Sorted unique entries (or sub-arrays along `axis`), optionally with inverse indices and counts."""
    x = to_native(x)
    if axis is None:
        rows = tf.reshape(x, (-1, 1))
    else:
        rows = _moveaxis(x, axis, 0)
        rows = tf.reshape(rows, (tf.shape(rows)[0], -1))
    found, index = tf.raw_ops.UniqueV2(x=rows, axis=[0], out_idx=tf.int64)  # in order of appearance
    order = _lexicographic_order(found)
    found = tf.gather(found, order)
    if axis is None:
        values = tf.reshape(found, (-1,))
    else:
        moved_shape = [x.shape[axis], *(s for i, s in enumerate(x.shape) if i != axis % x.shape.rank)]
        values = tf.reshape(found, [-1, *moved_shape[1:]])
        values = _moveaxis(values, 0, axis)
    result = [values]
    if return_inverse:
        inverse = tf.gather(tf.math.invert_permutation(order), index)
        result.append(tf.reshape(inverse, tf.shape(x)) if axis is None else inverse)
    if return_counts:
        counts = tf.math.bincount(index, minlength=tf.size(order, out_type=tf.int64), dtype=tf.int64)
        result.append(tf.gather(counts, order))
    return values if len(result) == 1 else tuple(result)


def bincount(x: Any, weights: Any, bins: int, x_sorted: bool = False) -> Any:
    """Occurrences of each value in `x`, or sums of `weights`; at least `bins` entries."""
    if weights is None:
        return tf.math.bincount(x, minlength=bins, dtype=tf.int64)
    weights = to_native(weights)
    counts = tf.math.bincount(x, tf.cast(weights, tf.float64) if weights.dtype == tf.bool else weights,
                              minlength=bins)
    return tf.cast(counts, weights.dtype)


def histogram1d(values: Any, weights: Any, bin_edges: Any) -> Any:
    """Weighted histograms of `values (batch, values)` with `bin_edges (batch, edges)`: `(batch, edges - 1)`.

    Bins include their lower edge; the last bin includes its upper edge too; values outside are not counted.
    """
    values, bin_edges = common([values, bin_edges])
    weights = to_native(weights)
    batch, bins = max(values.shape[0], bin_edges.shape[0]), bin_edges.shape[1] - 1
    values = tf.broadcast_to(values, (batch, values.shape[1]))
    bin_edges = tf.broadcast_to(bin_edges, (batch, bins + 1))
    index = tf.searchsorted(bin_edges, values, 'right', tf.int64) - 1
    index = tf.where(values == bin_edges[:, -1:], tf.constant(bins - 1, tf.int64), index)
    inside = (index >= 0) & (index < bins)
    segment = tf.where(inside, index + bins * tf.range(batch, dtype=tf.int64)[:, None], 0)
    counted = tf.where(inside, tf.broadcast_to(weights, tf.shape(values)), tf.zeros((), weights.dtype))
    return tf.reshape(tf.math.unsorted_segment_sum(counted, segment, batch * bins), (batch, bins))


def indexed_segment_sum(x: Any, indices: Any, axis: int) -> Any:
    """Sums of `x (batch, ...)` along `axis` over segments starting at the non-decreasing `indices (batch, segments)`.

    Like NumPy's `add.reduceat`: a segment whose start is not below the next start is the single entry there.
    """
    x, indices = to_native(x), tf.cast(to_native(indices), tf.int64)
    results = []
    for b in range(x.shape[0]):
        values = _moveaxis(x[b], axis - 1, 0)
        starts = indices[min(b, indices.shape[0] - 1)]
        segment = tf.searchsorted(starts, tf.range(values.shape[0], dtype=tf.int64), 'right') - 1
        sums = tf.math.unsorted_segment_sum(values, segment, starts.shape[0])
        single = tf.concat([starts[:-1] >= starts[1:], [False]], 0)
        single = tf.reshape(single, [-1] + [1] * (values.shape.rank - 1))
        sums = tf.where(single, tf.gather(values, starts), sums)
        results.append(_moveaxis(sums, 0, axis - 1))
    return tf.stack(results)


# --- shapes ---

def resized(x: Any, axis: int, size: int, fill_value: Any) -> Any:
    """`x` cropped or padded with `fill_value` at the end of `axis` to `size` entries (sizes may be dynamic)."""
    rank = x.shape.rank
    axis %= rank
    x = x[(slice(None),) * axis + (slice(0, size),)]
    missing = tf.maximum(size - tf.shape(x)[axis], 0)
    widths = tf.tensor_scatter_nd_update(tf.zeros((rank, 2), tf.int32), [[axis, 1]], [missing])
    result = tf.pad(x, widths, constant_values=tf.cast(fill_value, x.dtype))
    return tf.ensure_shape(result, [size if i == axis else s for i, s in enumerate(x.shape)])


def _moveaxis(x: Any, source: int, destination: int) -> Any:
    rank = x.shape.rank
    order = [a for a in range(rank) if a != source % rank]
    order.insert(destination % rank, source % rank)
    return x if order == sorted(order) else tf.transpose(x, order)


def tile(value: Any, multiples: Sequence[int]) -> Any:
    """Like `numpy.tile`: fewer multiples than axes repeat the last axes; more add leading axes."""
    value = to_native(value)
    multiples, rank = list(multiples), value.shape.rank
    if len(multiples) > rank:
        value = tf.reshape(value, [1] * (len(multiples) - rank) + list(_shape_list(value)))
    return tf.tile(value, [1] * (rank - len(multiples)) + multiples)


def _shape_list(x: Any) -> list:
    return [s if s is not None else tf.shape(x)[i] for i, s in enumerate(x.shape)]


def repeat(x: Any, repeats: Any, axis: int, new_length: int | None = None) -> Any:
    result = tf.repeat(to_native(x), repeats, axis)
    return result if new_length is None else resized(result, axis, new_length, 0)


def expand_dims(a: Any, axis: int = 0, number: int = 1) -> Any:
    a = to_native(a)
    position = axis if axis >= 0 else a.shape.rank + 1 + axis
    for _ in range(number):
        a = tf.expand_dims(a, position)
    return a


def flip(value: Any, axes: int | Sequence[int] | None = None) -> Any:
    value = to_native(value)
    axes = range(value.shape.rank) if axes is None else [axes] if isinstance(axes, int) else axes
    return tf.reverse(value, list(axes))


def _folded_index(index: Any, size: Any, mode: str) -> Any:
    """Indices outside `[0, size)` mapped inside: 'periodic', 'boundary' (clamped), 'symmetric' or 'reflect'."""
    if mode == 'periodic':
        return index % size
    if mode == 'boundary':
        return tf.clip_by_value(index, tf.zeros_like(size), size - 1)
    if mode == 'symmetric':  # edge values repeat: c b a | a b c | c b a
        folded = index % (2 * size)
        return tf.where(folded < size, folded, 2 * size - 1 - folded)
    period = tf.maximum(2 * size - 2, 1)  # 'reflect', edge values do not repeat: c b | a b c | b a
    folded = index % period
    return tf.where(folded < size, folded, period - folded)


def pad(value: Any, pad_width: Any, mode: str = 'constant', constant_values: Any = 0) -> Any:
    """Pads with `mode` 'constant', 'boundary', 'periodic', 'symmetric' or 'reflect'; `NotImplemented` for others."""
    if mode not in ('constant', 'boundary', 'periodic', 'symmetric', 'reflect'):
        return NotImplemented
    value = to_native(value)
    if mode == 'constant':
        return tf.pad(value, pad_width, constant_values=tf.cast(constant_values, value.dtype))
    for axis, (before, after) in enumerate(pad_width):
        if before or after:
            size = tf.shape(value, out_type=tf.int64)[axis]
            index = tf.range(-before, size + after, dtype=tf.int64)
            value = tf.gather(value, _folded_index(index, size, mode), axis=axis)
    return value


# --- selection ---

def gather(values: Any, indices: Any, axis: int | None = None) -> Any:
    """Like `numpy.take`: negative indices count from the end; without `axis`, `values` is flattened first."""
    values = to_native(values)
    if axis is None:
        values, axis = tf.reshape(values, (-1,)), 0
    if isinstance(indices, NATIVE):
        if not indices.dtype.is_unsigned:
            indices = tf.where(indices < 0, indices + tf.shape(values, out_type=indices.dtype)[axis], indices)
    else:
        indices = np.asarray(indices)
        if (indices < 0).any():  # static indices: resolved while building the call, not a computation on data
            indices = indices % values.shape[axis]
    return tf.gather(values, indices, axis=axis)


def batch_gather(tensor: Any, batches: int | Sequence[int]) -> Any:
    return tf.gather(to_native(tensor), [batches] if isinstance(batches, int) else batches, axis=0)


def gather_by_component_indices(values: Any, *component_indices: Any) -> Any:
    if all(isinstance(i, int | np.integer) for i in component_indices):
        return values[component_indices]
    indices = [tf.cast(to_native(i), tf.int64) for i in component_indices]
    shape = np.broadcast_shapes(*[tuple(i.shape) for i in indices])
    return tf.gather_nd(values, tf.stack([tf.broadcast_to(i, shape) for i in indices], -1))


def _broadcast_batch(*tensors: Any) -> list:
    """`tensors` broadcast along their first axis, where some have size 1 there."""
    batch = max(t.shape[0] for t in tensors)
    return [t if t.shape[0] == batch else tf.broadcast_to(t, [batch, *_shape_list(t)[1:]]) for t in tensors]


def batched_gather_nd(values: Any, indices: Any) -> Any:
    """Gathers `values (batch, spatial..., channels)` at `indices (batch, any..., index)`; batch 1 broadcasts."""
    values, indices = _broadcast_batch(to_native(values), to_native(indices))
    return tf.gather_nd(values, indices, batch_dims=1)


_SCATTER = {'update': tf.tensor_scatter_nd_update, 'add': tf.tensor_scatter_nd_add,
            'max': tf.tensor_scatter_nd_max, 'min': tf.tensor_scatter_nd_min}


def scatter(base_grid: Any, indices: Any, values: Any, mode: str) -> Any:
    """Returns `base_grid (batch, spatial..., channels)` with `values (batch, updates, channels)` written at
    `indices (batch, updates, index)`; `mode` is 'update', 'add', 'max' or 'min'. Batch 1 broadcasts."""
    if mode not in _SCATTER:
        raise ValueError(f"scatter mode must be 'update', 'add', 'max' or 'min' but got {mode!r}")
    base_grid, values = common([base_grid, values])
    indices = to_native(indices)
    if values.shape.rank < 3:
        values = tf.reshape(values, [1] * (3 - values.shape.rank) + _shape_list(values))
    base_grid, indices, values = _broadcast_batch(base_grid, indices, values)
    batch, updates = base_grid.shape[0], indices.shape[1]
    values = tf.broadcast_to(values, (batch, updates, base_grid.shape[-1]))
    batch_index = tf.broadcast_to(tf.range(batch, dtype=indices.dtype)[:, None, None], (batch, updates, 1))
    return _SCATTER[mode](base_grid, tf.concat([batch_index, indices], -1), values)


def get_diagonal(matrices: Any, offset: int = 0) -> Any:
    """Diagonals of `matrices (batch, rows, cols, channels)` as `(batch, diagonal, channels)`."""
    channels_first = tf.transpose(to_native(matrices), (0, 3, 1, 2))
    return tf.transpose(tf.linalg.diag_part(channels_first, k=offset), (0, 2, 1))


def grid_sample(grid: Any, coordinates: Any, extrapolation: str) -> Any:
    """Linear interpolation of `grid (batch, spatial..., channels)` at `coordinates (batch, instance..., vector)`.

    Coordinates are in index space: the first grid point lies at 0. `extrapolation` is one of 'undefined',
    'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'; others give `NotImplemented`.
    """
    if extrapolation not in ('undefined', 'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'):
        return NotImplemented
    grid, coordinates = to_native(grid), to_native(coordinates)
    real = numpy_dtype(coordinates.dtype) if coordinates.dtype.is_floating else np.dtype(np.float64)
    coordinates = tf.cast(coordinates, tf_dtype_of(np.result_type(real, numpy_dtype(grid.dtype))))
    size = tf.constant(grid.shape[1:-1], tf.int64)
    lower = tf.floor(coordinates)
    fraction = coordinates - lower
    lower = tf.cast(lower, tf.int64)
    result = 0
    for corner in itertools.product((0, 1), repeat=len(grid.shape) - 2):
        weight = tf.reduce_prod(tf.where([c == 1 for c in corner], fraction, 1 - fraction), -1)
        index = lower + tf.constant(corner, tf.int64)
        values = batched_gather_nd(grid, _folded_index(index, size, 'boundary' if extrapolation in (
            'undefined', 'zeros') else extrapolation))
        if extrapolation == 'zeros':
            inside = tf.reduce_all((index >= 0) & (index < size), -1)
            values = tf.where(inside[..., None], values, tf.zeros((), values.dtype))
        result = result + weight[..., None] * tf.cast(values, weight.dtype)
    return result


# --- linear algebra and signals ---

def tensordot(a: Any, a_axes: int | Sequence[int], b: Any, b_axes: int | Sequence[int]) -> Any:
    axes = [[x] if isinstance(x, int) else list(x) for x in (a_axes, b_axes)]
    return tf.tensordot(*common([a, b]), axes)


def solve_triangular_dense(matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> Any:
    """Solves `matrix (batch, rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`; batch 1 broadcasts."""
    dtype = tf_dtype(inexact_type(dtype_of(matrix), dtype_of(rhs)))
    matrix, rhs = tf.cast(to_native(matrix), dtype), tf.cast(to_native(rhs), dtype)
    if unit_diagonal:  # TensorFlow reads the diagonal always
        matrix = tf.linalg.set_diag(matrix, tf.ones(tf.shape(matrix)[:-1], dtype))
    return tf.linalg.triangular_solve(matrix, rhs[..., None], lower=lower)[..., 0]


def svd(matrix: Any, full_matrices: bool = True) -> tuple:
    """`(u, s, vh)` of `matrix (batch..., m, n)` in NumPy's order; TensorFlow gives `(s, u, v)`, `v` untransposed."""
    s, u, v = tf.linalg.svd(to_native(matrix), full_matrices=full_matrices)
    return u, s, tf.linalg.adjoint(v)


def conv(value: Any, kernel: Any, zero_padding: bool = True) -> Any:
    """Cross-correlates `value (batch, in, spatial...)` with `kernel (batch or 1, out, in, kernel_spatial...)`.

    With `zero_padding`, the result keeps the spatial shape of `value` (centred like SciPy's `mode='same'`).
    TensorFlow convolves 1 to 3 spatial dims.
    """
    value, kernel = common([value, kernel])
    kernel_shape = kernel.shape[3:]
    if not 1 <= len(kernel_shape) <= 3:
        raise NotImplementedError(f"TensorFlow convolves 1 to 3 spatial dims, not {len(kernel_shape)}")
    if zero_padding:
        value = tf.pad(value, [(0, 0), (0, 0)] + [(k // 2, k - 1 - k // 2) for k in kernel_shape])
    rank = value.shape.rank
    channels_last = tf.transpose(value, (0, *range(2, rank), 1))
    to_filters = (*range(2, rank), 1, 0)  # kernel (out, in, spatial...) -> filters (spatial..., in, out)

    def correlate(v: Any, k: Any) -> Any:
        return tf.nn.convolution(v, tf.transpose(k, to_filters), padding='VALID')
    if kernel.shape[0] == 1:
        result = correlate(channels_last, kernel[0])
    else:
        result = tf.concat([correlate(channels_last[b:b + 1], kernel[b]) for b in range(kernel.shape[0])], 0)
    return tf.transpose(result, (0, rank - 1, *range(1, rank - 1)))


def _complex_result_type(x: Any) -> tf.DType:
    if x.dtype.is_complex:
        return x.dtype
    if x.dtype.is_floating:
        return tf.complex64 if x.dtype.size <= 4 else tf.complex128
    return COMPLEX_BY_PRECISION[get_precision()]


def _along_last_axes(x: Any, axes: list, transform: Callable) -> Any:
    """`transform` of the innermost axes applied to `axes` of `x`, moving them last and back."""
    order = [a for a in range(x.shape.rank) if a not in axes] + axes
    if order == sorted(order):
        return transform(x)
    return tf.transpose(transform(tf.transpose(x, order)), np.argsort(order))


def fourier(transforms: dict) -> Callable:
    def apply(x: Any, axes: Sequence[int]) -> Any:
        x = to_native(x)
        x = tf.cast(x, _complex_result_type(x))
        axes = sorted({a % x.shape.rank for a in axes})
        for start in range(0, len(axes), 3):  # TensorFlow transforms at most the 3 innermost axes at once
            chunk = axes[start:start + 3]
            x = _along_last_axes(x, chunk, transforms[len(chunk)])
        return x
    apply.__name__ = transforms[1].__name__
    return apply
