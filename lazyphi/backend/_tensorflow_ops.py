"""The operation table of the TensorFlow backend: TensorFlow functions, small adapters and compositions.

Only `lazyphi.backend.tensorflow` imports this module. Entries take the arguments of the NumPy backend's entries
and give results of the same data types; where TensorFlow lacks an operation, it is composed of TensorFlow
operations here (index arithmetic on static shapes included), never computed in NumPy.
"""

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ._dtype import DType, to_numpy_dtype
from ._numpy import NUMPY
from ._precision import get_precision
from ._tensorflow_types import (
    COMPLEX_BY_PRECISION,
    NATIVE,
    as_tensor,
    cast,
    common,
    converted,
    default_device_ref,
    dtype_of,
    from_dlpack,
    is_tensor,
    loop_types,
    numpy_dtype,
    on_default_device,
    operand_type,
    shape,
    staticshape,
    tf_dtype,
    tf_dtype_of,
    to_dlpack,
    to_native,
    to_numpy,
    typed_operands,
)

_INT32 = DType(int, 32)

# --- element-wise operations, typed like NumPy's ufuncs ---

def _typed(ufunc: np.ufunc, function: Callable, name: str | None = None) -> Callable:
    """`function` applied to its operands cast to the types NumPy's `ufunc` computes in."""
    def apply(*operands: Any) -> Any:
        return function(*typed_operands(ufunc, operands))
    apply.__name__ = apply.__qualname__ = name or ufunc.__name__
    return apply


def _on_booleans(logical: Callable, function: Callable) -> Callable:
    """`function`, or `logical` for boolean operands, on which TensorFlow has no arithmetic or bitwise kernels."""
    return lambda *x: logical(*x) if x[0].dtype == tf.bool else function(*x)


def _as_int8(function: Callable) -> Callable:
    return lambda *x: function(*[tf.cast(v, tf.int8) for v in x])


def _integers_unchanged(function: Callable) -> Callable:
    return lambda x: x if x.dtype.is_integer or x.dtype == tf.bool else function(x)


def _round(x: Any) -> Any:
    x = to_native(x)
    if x.dtype.is_complex:  # NumPy rounds both parts
        return tf.complex(tf.math.round(tf.math.real(x)), tf.math.round(tf.math.imag(x)))
    return _integers_unchanged(tf.math.round)(x)


def _abs(x: Any) -> Any:
    return x if x.dtype.is_unsigned or x.dtype == tf.bool else tf.math.abs(x)


def _sign(x: Any) -> Any:
    return tf.cast(x > 0, x.dtype) if x.dtype.is_unsigned else tf.math.sign(x)


def _log_base(base: float) -> Callable:
    return lambda x: tf.math.log(x) / tf.math.log(tf.constant(base, x.dtype))


def _special(function: Callable, typing: np.ufunc, name: str) -> Callable:
    """A special function (SciPy's in the NumPy backend): float32 and float64 kept, other types as float64.

    SciPy's ufuncs take Python numbers as float64 (their first loop), not as types that yield to the other operand.
    """
    def apply(*operands: Any) -> Any:
        operand_types = tuple(np.dtype(t) if isinstance(t, type) else t for t in map(operand_type, operands))
        types = loop_types(typing, operand_types)
        types = [t if t in (np.float32, np.float64) or t.kind == 'c' else np.dtype(np.float64) for t in types]
        return function(*[converted(x, t) for x, t in zip(operands, types, strict=True)])
    apply.__name__ = apply.__qualname__ = name
    return apply


def _real_part(function: Callable, of_real: Callable) -> Callable:
    def apply(x: Any) -> Any:
        x = to_native(x)
        return function(x) if x.dtype.is_complex else of_real(x)
    apply.__name__ = function.__name__
    return apply


def _float_test(function: Callable, integers: bool) -> Callable:
    """An `isnan`-style test; integers are always finite, never NaN or infinite."""
    def test(x: Any) -> Any:
        x = to_native(x)
        if x.dtype.is_integer or x.dtype == tf.bool:
            return tf.fill(tf.shape(x), integers)
        if x.dtype.is_complex:
            both = tf.logical_and if integers else tf.logical_or
            return both(function(tf.math.real(x)), function(tf.math.imag(x)))
        return function(x)
    test.__name__ = function.__name__
    return test


def _clip(x: Any, minimum: Any, maximum: Any) -> Any:
    # NumPy's definition, min(max(x, lower), upper), also where lower > upper (tf.clip_by_value differs there)
    x, minimum, maximum = common([x, minimum, maximum])
    return tf.minimum(tf.maximum(x, minimum), maximum)


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """`x` where `condition` holds, else `y`; without `x` and `y`, the indices of true entries `(nnz, ndims)`."""
    condition = _as_bool(condition)
    if x is None or y is None:
        return tf.where(condition)
    return tf.where(condition, *common([x, y]))


def _as_bool(x: Any) -> Any:
    x = to_native(x)
    return x if x.dtype == tf.bool else tf.cast(x, tf.bool)


def any_true(x: Any, *ignored: Any) -> Any:
    """Whether any entry of `x` is true (non-zero): the condition of `while_loop`."""
    return tf.reduce_any(_as_bool(x))


# --- reductions, sorting and counting ---

def _accumulating(x: Any) -> Any:
    """`x` with booleans and integers narrower than 64 bits widened to 64 bits, as NumPy sums them."""
    x = to_native(x)
    if x.dtype == tf.bool or (x.dtype.is_integer and x.dtype.size < 8):
        return tf.cast(x, tf.uint64 if x.dtype.is_unsigned else tf.int64)
    return x


def _inexact(x: Any) -> Any:
    """`x` with booleans and integers as float64, as NumPy averages them."""
    x = to_native(x)
    return tf.cast(x, tf.float64) if x.dtype == tf.bool or x.dtype.is_integer else x


def _extremum(reduce: Callable, reduce_bool: Callable) -> Callable:
    def extremum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = to_native(x)
        return (reduce_bool if x.dtype == tf.bool else reduce)(x, axis, keepdims)
    extremum.__name__ = reduce.__name__
    return extremum


def _arg_extremum(function: Callable) -> Callable:
    def arg_extremum(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        x = to_native(x)
        if x.dtype == tf.bool:
            x = tf.cast(x, tf.int8)
        if axis is None:
            index = function(tf.reshape(x, (-1,)), 0, output_type=tf.int64)
            return tf.reshape(index, (1,) * x.shape.rank) if keepdims else index
        index = function(x, axis, output_type=tf.int64)
        return tf.expand_dims(index, axis) if keepdims else index
    arg_extremum.__name__ = function.__name__
    return arg_extremum


def _cumsum(x: Any, axis: int | None = None) -> Any:
    x = _accumulating(x)
    if axis is None:
        x, axis = tf.reshape(x, (-1,)), 0
    return tf.cumsum(x, axis)


def _lerp(a: Any, b: Any, t: Any) -> Any:
    """Linear interpolation, exact at both ends (NumPy's formula for quantiles)."""
    difference = b - a
    return tf.where(t >= 0.5, b - difference * (1 - t), a + difference * t)


def _quantile(x: Any, quantiles: Any) -> Any:
    """Quantiles along the last axis with linear interpolation; the quantiles' axes come first."""
    x, q = common([_inexact(x), quantiles])
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


def _argsort(x: Any, axis: int = -1) -> Any:
    return tf.cast(tf.argsort(x, axis, stable=True), tf.int64)


def _searchsorted(sorted_sequence: Any, search_values: Any, side: str, dtype: DType = _INT32) -> Any:
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


def _unique(x: Any, return_inverse: bool, return_counts: bool, axis: int | None) -> Any:
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


def _bincount(x: Any, weights: Any, bins: int, x_sorted: bool = False) -> Any:
    """Occurrences of each value in `x`, or sums of `weights`; at least `bins` entries."""
    if weights is None:
        return tf.math.bincount(x, minlength=bins, dtype=tf.int64)
    weights = to_native(weights)
    counts = tf.math.bincount(x, tf.cast(weights, tf.float64) if weights.dtype == tf.bool else weights,
                              minlength=bins)
    return tf.cast(counts, weights.dtype)


def _histogram1d(values: Any, weights: Any, bin_edges: Any) -> Any:
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


def _indexed_segment_sum(x: Any, indices: Any, axis: int) -> Any:
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

def _resized(x: Any, axis: int, size: int, fill_value: Any) -> Any:
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


def _tile(value: Any, multiples: Sequence[int]) -> Any:
    """Like `numpy.tile`: fewer multiples than axes repeat the last axes; more add leading axes."""
    value = to_native(value)
    multiples, rank = list(multiples), value.shape.rank
    if len(multiples) > rank:
        value = tf.reshape(value, [1] * (len(multiples) - rank) + list(_shape_list(value)))
    return tf.tile(value, [1] * (rank - len(multiples)) + multiples)


def _shape_list(x: Any) -> list:
    return [s if s is not None else tf.shape(x)[i] for i, s in enumerate(x.shape)]


def _repeat(x: Any, repeats: Any, axis: int, new_length: int | None = None) -> Any:
    result = tf.repeat(to_native(x), repeats, axis)
    return result if new_length is None else _resized(result, axis, new_length, 0)


def _expand_dims(a: Any, axis: int = 0, number: int = 1) -> Any:
    a = to_native(a)
    position = axis if axis >= 0 else a.shape.rank + 1 + axis
    for _ in range(number):
        a = tf.expand_dims(a, position)
    return a


def _flip(value: Any, axes: int | Sequence[int] | None = None) -> Any:
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


def _pad(value: Any, pad_width: Any, mode: str = 'constant', constant_values: Any = 0) -> Any:
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

def _gather(values: Any, indices: Any, axis: int | None = None) -> Any:
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


def _batch_gather(tensor: Any, batches: int | Sequence[int]) -> Any:
    return tf.gather(to_native(tensor), [batches] if isinstance(batches, int) else batches, axis=0)


def _gather_by_component_indices(values: Any, *component_indices: Any) -> Any:
    if all(isinstance(i, int | np.integer) for i in component_indices):
        return values[component_indices]
    indices = [tf.cast(to_native(i), tf.int64) for i in component_indices]
    shape = np.broadcast_shapes(*[tuple(i.shape) for i in indices])
    return tf.gather_nd(values, tf.stack([tf.broadcast_to(i, shape) for i in indices], -1))


def _broadcast_batch(*tensors: Any) -> list:
    """`tensors` broadcast along their first axis, where some have size 1 there."""
    batch = max(t.shape[0] for t in tensors)
    return [t if t.shape[0] == batch else tf.broadcast_to(t, [batch, *_shape_list(t)[1:]]) for t in tensors]


def _batched_gather_nd(values: Any, indices: Any) -> Any:
    """Gathers `values (batch, spatial..., channels)` at `indices (batch, any..., index)`; batch 1 broadcasts."""
    values, indices = _broadcast_batch(to_native(values), to_native(indices))
    return tf.gather_nd(values, indices, batch_dims=1)


_SCATTER = {'update': tf.tensor_scatter_nd_update, 'add': tf.tensor_scatter_nd_add,
            'max': tf.tensor_scatter_nd_max, 'min': tf.tensor_scatter_nd_min}


def _scatter(base_grid: Any, indices: Any, values: Any, mode: str) -> Any:
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


def _get_diagonal(matrices: Any, offset: int = 0) -> Any:
    """Diagonals of `matrices (batch, rows, cols, channels)` as `(batch, diagonal, channels)`."""
    channels_first = tf.transpose(to_native(matrices), (0, 3, 1, 2))
    return tf.transpose(tf.linalg.diag_part(channels_first, k=offset), (0, 2, 1))


def _grid_sample(grid: Any, coordinates: Any, extrapolation: str) -> Any:
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
        values = _batched_gather_nd(grid, _folded_index(index, size, 'boundary' if extrapolation in (
            'undefined', 'zeros') else extrapolation))
        if extrapolation == 'zeros':
            inside = tf.reduce_all((index >= 0) & (index < size), -1)
            values = tf.where(inside[..., None], values, tf.zeros((), values.dtype))
        result = result + weight[..., None] * tf.cast(values, weight.dtype)
    return result


# --- linear algebra and signals ---

def _tensordot(a: Any, a_axes: int | Sequence[int], b: Any, b_axes: int | Sequence[int]) -> Any:
    axes = [[x] if isinstance(x, int) else list(x) for x in (a_axes, b_axes)]
    return tf.tensordot(*common([a, b]), axes)


def _mul_matrix_batched_vector(matrix: Any, vector: Any) -> Any:
    """Multiplies `matrix (rows, cols)` or `(batch, rows, cols)` with `vector (batch, cols)`."""
    matrix, vector = common([matrix, vector])
    return tf.linalg.matmul(matrix, vector[..., None])[..., 0]


def _conv(value: Any, kernel: Any, zero_padding: bool = True) -> Any:
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


def _fourier(transforms: dict) -> Callable:
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


# --- creation and random values ---

@on_default_device
def _zeros(shape: Sequence[int], dtype: DType | None = None) -> Any:
    return tf.zeros(shape, tf_dtype(dtype))


@on_default_device
def _ones(shape: Sequence[int], dtype: DType | None = None) -> Any:
    return tf.ones(shape, tf_dtype(dtype))


@on_default_device
def _range(start: int, limit: int | None = None, delta: int = 1, dtype: DType = _INT32) -> Any:
    if limit is None:
        start, limit = 0, start
    return tf.range(start, limit, delta, dtype=tf_dtype(dtype))


@on_default_device
def _linspace(start: Any, stop: Any, number: int) -> Any:
    values = tf.linspace(tf.cast(start, tf.float64), tf.cast(stop, tf.float64), number)
    return tf.cast(values, tf_dtype(None))


@on_default_device
def _meshgrid(*coordinates: Any) -> tuple:
    return tuple(tf.meshgrid(*coordinates, indexing='ij'))


class _Generators:
    """One `tf.random.Generator` per device, made when first drawn from, seeded by the last `seed()` call."""

    def __init__(self) -> None:
        self._seed: int | None = None
        self._by_device: dict[str, tf.random.Generator] = {}

    def seed(self, seed: int | None) -> None:
        """Restarts every device's sequence from `seed`; `None` draws a seed from the operating system."""
        self._seed = seed
        self._by_device.clear()

    def on_default_device(self) -> tf.random.Generator:
        ref = default_device_ref()
        generator = self._by_device.get(ref)
        if generator is None:
            with tf.init_scope(), tf.device(ref):  # its state is a variable: made outside any graph being traced
                generator = tf.random.Generator.from_non_deterministic_state() if self._seed is None else \
                    tf.random.Generator.from_seed(self._seed)
            generator = self._by_device.setdefault(ref, generator)
        return generator


_GENERATORS = _Generators()


@on_default_device
def _random_uniform(shape: Sequence[int], low: Any, high: Any, dtype: DType | None = None) -> Any:
    """Values drawn uniformly from `[low, high)`; real and imaginary parts separately for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    generator, target = _GENERATORS.on_default_device(), tf_dtype(dtype)
    if dtype.kind is float:
        return generator.uniform(shape, low, high, target)
    if dtype.kind is complex:
        part = target.real_dtype
        return tf.complex(generator.uniform(shape, low, high, part), generator.uniform(shape, low, high, part))
    if dtype.kind is int:
        drawn = target if target in (tf.int32, tf.int64) else tf.int64
        return tf.cast(generator.uniform(shape, low, high, drawn), target)
    if dtype.kind is bool:
        return tf.cast(generator.uniform(shape, 0, 2, tf.int32), tf.bool)
    raise ValueError(f"random_uniform supports bool, int, float and complex types, not {dtype}")


@on_default_device
def _random_normal(shape: Sequence[int], dtype: DType | None = None) -> Any:
    """Standard-normal values; real and imaginary parts each standard-normal for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    generator, target = _GENERATORS.on_default_device(), tf_dtype(dtype)
    if dtype.kind is float:
        return generator.normal(shape, dtype=target)
    if dtype.kind is complex:
        part = target.real_dtype
        return tf.complex(generator.normal(shape, dtype=part), generator.normal(shape, dtype=part))
    raise ValueError(f"random_normal supports float and complex types, not {dtype}")


def _numpy_call(f: Callable, output_shapes: Any, output_dtypes: Any, *args: Any, **aux_args: Any) -> Any:
    """Calls `f` on NumPy arrays (`tf.numpy_function`), also inside `jit_compile`; not differentiable.

    `output_dtypes` is one `DType` (and `output_shapes` one shape) or a sequence of them, one per output.
    """
    single = not isinstance(output_dtypes, tuple | list)
    dtypes = [output_dtypes] if single else list(output_dtypes)
    shapes = [output_shapes] if single else list(output_shapes)
    numpy_types = [to_numpy_dtype(DType.as_dtype(d)) for d in dtypes]

    def call(*arrays: np.ndarray) -> list:
        outputs = f(*arrays, **aux_args)
        return [np.asarray(o, t) for o, t in zip([outputs] if single else outputs, numpy_types, strict=True)]
    types = [tf_dtype_of(t) for t in numpy_types]
    if single:
        return tf.ensure_shape(tf.numpy_function(lambda *a: call(*a)[0], list(args), types[0]), shapes[0])
    results = tf.numpy_function(call, list(args), types)
    return tuple(tf.ensure_shape(r, s) for r, s in zip(results, shapes, strict=True))


OPS: dict[str, Callable] = {
    # --- tensors and types ---
    'is_tensor': is_tensor,
    'as_tensor': as_tensor,
    'is_available': lambda tensor: not (isinstance(tensor, tf.Tensor) and tf.is_symbolic_tensor(tensor)),
    'numpy': to_numpy,
    'content_hash': lambda x: NUMPY.content_hash(to_numpy(x)),  # equal data hashes equal on every backend
    'copy': lambda tensor, only_mutable=False: tensor if only_mutable and isinstance(tensor, tf.Tensor) else
    tf.identity(tensor),
    'to_dlpack': to_dlpack,
    'from_dlpack': from_dlpack,
    'dtype': dtype_of,
    'cast': cast,
    'staticshape': staticshape,
    'shape': shape,
    'is_module': lambda obj: isinstance(obj, tf.Module),
    'is_sparse': lambda x: isinstance(x, tf.SparseTensor),
    'prefers_channels_last': lambda: True,
    'stop_gradient': tf.stop_gradient,
    'numpy_call': _numpy_call,
    'seed': _GENERATORS.seed,
    # --- creation ---
    'random_uniform': _random_uniform,
    'random_normal': _random_normal,
    'zeros': _zeros,
    'ones': _ones,
    'zeros_like': lambda tensor: tf.zeros_like(to_native(tensor)),
    'ones_like': lambda tensor: tf.ones_like(to_native(tensor)),
    'range': _range,
    'linspace': _linspace,
    'meshgrid': _meshgrid,
    # --- shape ---
    'reshape': tf.reshape,
    'broadcast_to': tf.broadcast_to,
    'transpose': lambda tensor, axes=None: tf.transpose(tensor, axes),
    'stack': lambda values, axis=0: tf.stack(common(values), axis),
    'concat': lambda values, axis=0: tf.concat(common(values), axis),
    'flip': _flip,
    'tile': _tile,
    'repeat': _repeat,
    'expand_dims': _expand_dims,
    'pad': _pad,
    # --- reductions ---
    'sum': lambda value, axis=None, keepdims=False: tf.reduce_sum(_accumulating(value), axis, keepdims),
    'prod': lambda value, axis=None, keepdims=False: tf.reduce_prod(_accumulating(value), axis, keepdims),
    'mean': lambda value, axis=None, keepdims=False: tf.reduce_mean(_inexact(value), axis, keepdims),
    'std': lambda x, axis=None, keepdims=False: tf.math.reduce_std(_inexact(x), axis, keepdims),
    'max': _extremum(tf.reduce_max, tf.reduce_any),
    'min': _extremum(tf.reduce_min, tf.reduce_all),
    'any': lambda boolean_tensor, axis=None, keepdims=False: tf.reduce_any(_as_bool(boolean_tensor), axis, keepdims),
    'all': lambda boolean_tensor, axis=None, keepdims=False: tf.reduce_all(_as_bool(boolean_tensor), axis, keepdims),
    'argmax': _arg_extremum(tf.argmax),
    'argmin': _arg_extremum(tf.argmin),
    'cumsum': _cumsum,
    'quantile': _quantile,
    'argsort': _argsort,
    'sort': lambda x, axis=-1: tf.sort(x, axis),
    'searchsorted': _searchsorted,
    'unique': _unique,
    'bincount': _bincount,
    'histogram1d': _histogram1d,
    'indexed_segment_sum': _indexed_segment_sum,
    # --- selection ---
    'where': _where,
    'nonzero': lambda values, length=None, fill_value=-1: tf.where(_as_bool(values)) if length is None else
    _resized(tf.where(_as_bool(values)), 0, length, fill_value),
    'boolean_mask': lambda x, mask, axis=0, new_length=None, fill_value=0: tf.boolean_mask(x, mask, axis=axis)
    if new_length is None else _resized(tf.boolean_mask(x, mask, axis=axis), axis, new_length, fill_value),
    'gather': _gather,
    'batch_gather': _batch_gather,
    'gather_by_component_indices': _gather_by_component_indices,
    'batched_gather_nd': _batched_gather_nd,
    'scatter': _scatter,
    'get_diagonal': _get_diagonal,
    'grid_sample': _grid_sample,
    # --- linear algebra and signals ---
    'tensordot': _tensordot,
    'einsum': lambda equation, *tensors: tf.einsum(equation, *common(tensors)),
    'mul_matrix_batched_vector': _mul_matrix_batched_vector,
    'conv': _conv,
    'fft': _fourier({1: tf.signal.fft, 2: tf.signal.fft2d, 3: tf.signal.fft3d}),
    'ifft': _fourier({1: tf.signal.ifft, 2: tf.signal.ifft2d, 3: tf.signal.ifft3d}),
    # --- element-wise ---
    'add': _typed(np.add, _on_booleans(tf.math.logical_or, tf.math.add)),
    'sub': _typed(np.subtract, tf.math.subtract),
    'mul': _typed(np.multiply, _on_booleans(tf.math.logical_and, tf.math.multiply)),
    'div': _typed(np.true_divide, tf.math.truediv),
    'pow': _typed(np.power, tf.math.pow),
    'mod': _typed(np.mod, tf.math.floormod),
    'floordiv': _typed(np.floor_divide, tf.math.floordiv),
    'and_': _typed(np.bitwise_and, _on_booleans(tf.math.logical_and, tf.bitwise.bitwise_and)),
    'or_': _typed(np.bitwise_or, _on_booleans(tf.math.logical_or, tf.bitwise.bitwise_or)),
    'xor': _typed(np.bitwise_xor, _on_booleans(tf.math.logical_xor, tf.bitwise.bitwise_xor)),
    'invert': _typed(np.invert, _on_booleans(tf.math.logical_not, tf.bitwise.invert)),
    'shift_bits_left': _typed(np.left_shift, tf.bitwise.left_shift),
    'shift_bits_right': _typed(np.right_shift, tf.bitwise.right_shift),
    'equal': _typed(np.equal, tf.math.equal),
    'not_equal': _typed(np.not_equal, tf.math.not_equal),
    'greater_than': _typed(np.greater, _on_booleans(_as_int8(tf.math.greater), tf.math.greater)),
    'greater_or_equal': _typed(np.greater_equal, _on_booleans(_as_int8(tf.math.greater_equal),
                                                              tf.math.greater_equal)),
    'maximum': _typed(np.maximum, _on_booleans(tf.math.logical_or, tf.math.maximum)),
    'minimum': _typed(np.minimum, _on_booleans(tf.math.logical_and, tf.math.minimum)),
    'clip': _clip,
    'divide_no_nan': _typed(np.true_divide, tf.math.divide_no_nan, 'divide_no_nan'),
    'sigmoid': _typed(np.exp, tf.math.sigmoid, 'sigmoid'),
    'softplus': _typed(np.exp, tf.math.softplus, 'softplus'),
    'abs': _typed(np.absolute, _abs),
    'sign': _typed(np.sign, _sign),
    'round': _round,
    'ceil': _typed(np.ceil, _integers_unchanged(tf.math.ceil)),
    'floor': _typed(np.floor, _integers_unchanged(tf.math.floor)),
    'sqrt': _typed(np.sqrt, tf.math.sqrt),
    'exp': _typed(np.exp, tf.math.exp),
    'log': _typed(np.log, tf.math.log),
    'log2': _typed(np.log2, _log_base(2)),
    'log10': _typed(np.log10, _log_base(10)),
    'sin': _typed(np.sin, tf.math.sin),
    'arcsin': _typed(np.arcsin, tf.math.asin),
    'cos': _typed(np.cos, tf.math.cos),
    'arccos': _typed(np.arccos, tf.math.acos),
    'tan': _typed(np.tan, tf.math.tan),
    'arctan': _typed(np.arctan, tf.math.atan),
    'arctan2': _typed(np.arctan2, tf.math.atan2),
    'sinh': _typed(np.sinh, tf.math.sinh),
    'arcsinh': _typed(np.arcsinh, tf.math.asinh),
    'cosh': _typed(np.cosh, tf.math.cosh),
    'arccosh': _typed(np.arccosh, tf.math.acosh),
    'tanh': _typed(np.tanh, tf.math.tanh),
    'arctanh': _typed(np.arctanh, tf.math.atanh),
    'isfinite': _float_test(tf.math.is_finite, True),
    'isnan': _float_test(tf.math.is_nan, False),
    'isinf': _float_test(tf.math.is_inf, False),
    'real': _real_part(tf.math.real, lambda x: x),
    'imag': _real_part(tf.math.imag, tf.zeros_like),
    'conj': _real_part(tf.math.conj, lambda x: x),
    'erf': _special(tf.math.erf, np.sqrt, 'erf'),
    'log_gamma': _special(tf.math.lgamma, np.sqrt, 'log_gamma'),
    'gamma_inc_l': _special(tf.math.igamma, np.arctan2, 'gamma_inc_l'),
    'gamma_inc_u': _special(tf.math.igammac, np.arctan2, 'gamma_inc_u'),
}
