"""The JAX backend: `jax.Array`s (and tracers of them), plus NumPy arrays, Python numbers and lists of them.

Importing this module registers `JAX`; `lazyphi` imports it only when a JAX value is first seen by
`choose_backend()` or `'jax'` is named (`backend_by_name`, `set_global_default_backend`).

**64-bit values.** Importing this module turns on JAX's `jax_enable_x64` flag. Without it JAX silently
truncates float64 to float32 and int64 to int32, so `precision(64)` would have no effect and data types
would follow rules other than `NUMPY`'s. The flag is global: after the import, JAX code outside lazyphi
also gets 64-bit defaults (`jnp.ones(3)` is float64, `jnp.arange(3)` int64). lazyphi itself always names
the float type of the current precision when it creates floating-point arrays, so its own results do not
depend on the flag's default widths.

**Randomness.** The backend holds one PRNG key; every random operation splits a fresh sub-key off it
(thread-safe), and `seed()` restarts the sequence. Inside `jit_compile` the sub-key is drawn while
tracing, so a compiled function returns the same random values on every call.

**Devices.** New arrays go to the backend's default device (`set_default_device`); where that is JAX's
own default device they are left uncommitted, so JAX may still move them as usual.
"""

import functools
import os
import platform
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer
from jax.scipy import special
from jax.scipy.ndimage import map_coordinates

from ._backend import Backend, LazyFunction
from ._device import ComputeDevice, cpu_memory
from ._dtype import DType, from_numpy_dtype, to_numpy_dtype
from ._numpy import NUMPY, _complex_dtype, _complex_result_type, _float_dtype, numpy_like_shape_ops
from ._precision import get_precision
from ._registry import register_backend

jax.config.update('jax_enable_x64', True)

_INT32 = DType(int, 32)
_HIGHEST = lax.Precision.HIGHEST  # no TF32 or bfloat16 passes on GPUs: results match the other backends
_JAX_DEFAULT_DEVICE = jax.local_devices()[0]


# --- tensors, types and devices ---

def _is_tensor(x: Any, only_native: bool = False) -> bool:
    if isinstance(x, jax.Array):  # tracers included
        return True
    if only_native:
        return False
    if isinstance(x, tuple | list):
        return all(_is_tensor(item) for item in x)
    return NUMPY.is_tensor(x)


def _placement() -> jax.Device | None:
    """The device new arrays go to, `None` where that is JAX's own default device."""
    device = JAX.get_default_device().ref
    return None if device == _JAX_DEFAULT_DEVICE else device


def _place(array: jax.Array) -> jax.Array:
    device = _placement()
    return array if device is None else jax.device_put(array, device)


def _native_byte_order(x: Any) -> Any:
    """`x`, with NumPy data in the machine's byte order, the only one JAX reads."""
    if isinstance(x, np.ndarray | np.generic) and not x.dtype.isnative:
        return x.astype(x.dtype.newbyteorder('='))
    return x


def _as_tensor(x: Any, convert_external: bool = True) -> Any:
    """Converts `x` to a JAX array on the default device; floating-point values take the current precision."""
    if not isinstance(x, jax.Array):
        if not convert_external and isinstance(x, int | float | complex):
            return x
        # copies NumPy data: a later change to it cannot reach the result
        x = jnp.asarray(_native_byte_order(x), device=_placement())
    kind = x.dtype.kind
    if kind == 'f':
        return x.astype(_float_dtype())
    if kind == 'c':
        return x.astype(_complex_dtype())
    return x


def _dtype(x: Any) -> DType:
    return from_numpy_dtype(x.dtype) if isinstance(x, jax.Array) else NUMPY.dtype(x)


def _cast(x: Any, dtype: DType) -> jax.Array:
    np_dtype = to_numpy_dtype(dtype)
    if isinstance(x, jax.Array):
        return x.astype(np_dtype)
    return jnp.asarray(_native_byte_order(x), np_dtype, device=_placement())


def _copy(tensor: Any, only_mutable: bool = False) -> Any:
    if only_mutable and isinstance(tensor, jax.Array):  # JAX arrays never change
        return tensor
    return jnp.array(tensor, copy=True)


def _block_until_ready(values: Any) -> None:
    jax.block_until_ready(values)


def _from_dlpack(external: Any) -> jax.Array:
    """Wraps an array of another library without copying where DLPack allows; NumPy arrays that it does not
    pass (read-only, negative strides, other byte order) are copied, keeping their data type."""
    try:
        return jnp.from_dlpack(external)
    except (BufferError, RuntimeError):
        if not isinstance(external, np.ndarray):
            raise
        return jnp.asarray(_native_byte_order(external))


class _KeySequence:
    """The backend's PRNG key. Each `next()` splits a fresh sub-key off it; `seed()` restarts the sequence."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seed(None)

    def seed(self, seed: int | None) -> None:
        with self._lock:
            self._key = jax.random.key(secrets.randbits(63) if seed is None else seed)

    def next(self, count: int = 1) -> jax.Array:
        # evaluated eagerly even while a function is traced, so that no tracer is stored in `_key`
        with self._lock, jax.ensure_compile_time_eval():
            self._key, *keys = jax.random.split(self._key, count + 1)
        return keys[0] if count == 1 else keys


_keys = _KeySequence()


def _random_uniform(shape: Sequence[int], low: Any, high: Any, dtype: DType | None = None) -> jax.Array:
    """Values drawn uniformly from `[low, high)`; real and imaginary parts separately for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    shape = tuple(shape)
    if dtype.kind is float:
        values = jax.random.uniform(_keys.next(), shape, to_numpy_dtype(dtype), low, high)
    elif dtype.kind is complex:
        part = to_numpy_dtype(DType(float, dtype.precision))
        real, imag = (jax.random.uniform(key, shape, part, low, high) for key in _keys.next(2))
        values = lax.complex(real, imag)
    elif dtype.kind is int:
        values = jax.random.randint(_keys.next(), shape, low, high, to_numpy_dtype(dtype))
    elif dtype.kind is bool:
        values = jax.random.bernoulli(_keys.next(), 0.5, shape)
    else:
        raise ValueError(f"random_uniform supports bool, int, float and complex types, not {dtype}")
    return _place(values)


def _random_normal(shape: Sequence[int], dtype: DType | None = None) -> jax.Array:
    """Standard-normal values; real and imaginary parts each standard-normal for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    shape = tuple(shape)
    if dtype.kind is float:
        values = jax.random.normal(_keys.next(), shape, to_numpy_dtype(dtype))
    elif dtype.kind is complex:
        part = to_numpy_dtype(DType(float, dtype.precision))
        values = lax.complex(*(jax.random.normal(key, shape, part) for key in _keys.next(2)))
    else:
        raise ValueError(f"random_normal supports float and complex types, not {dtype}")
    return _place(values)


def _creation_dtype(dtype: DType | None) -> np.dtype:
    return _float_dtype() if dtype is None else to_numpy_dtype(DType.as_dtype(dtype))


def _range(start: int, limit: int | None = None, delta: int = 1, dtype: DType = _INT32) -> jax.Array:
    if limit is None:
        start, limit = 0, start
    return jnp.arange(start, limit, delta, to_numpy_dtype(dtype), device=_placement())


# --- shape ---

_pad, _expand_dims = numpy_like_shape_ops(jnp)


def _repeat(x: Any, repeats: Any, axis: int, new_length: int | None = None) -> jax.Array:
    """`jnp.repeat`; with `new_length`, cropped or padded with zeros to that length (traceable then)."""
    repeats = jnp.asarray(repeats)
    result = jnp.repeat(x, repeats, axis, total_repeat_length=new_length)
    if new_length is None:
        return result
    # JAX pads with copies of the last entry; the other backends pad with zeros
    valid = jnp.arange(new_length) < jnp.sum(repeats)
    return jnp.where(jnp.expand_dims(valid, tuple(range(1, result.ndim - axis % result.ndim))), result, 0)


# --- reductions, sorting, counting ---

def _cumsum(x: Any, axis: int) -> jax.Array:
    """`jnp.cumsum` that, like NumPy, accumulates integers narrower than 64 bits in 64 bits."""
    x = jnp.asarray(x)
    dtype = None
    if x.dtype.kind in 'bi' and x.dtype.itemsize < 8:
        dtype = jnp.int64
    elif x.dtype.kind == 'u' and x.dtype.itemsize < 8:
        dtype = jnp.uint64
    return jnp.cumsum(x, axis, dtype)


def _quantile(x: Any, quantiles: Any) -> jax.Array:
    """Quantiles along the last axis, in NumPy's result type: a list of quantiles is float64, a number weak."""
    x = jnp.asarray(x)
    quantiles = np.asarray(quantiles) if isinstance(quantiles, tuple | list) else quantiles
    dtype = jnp.result_type(x, quantiles)
    return jnp.quantile(x.astype(dtype) if dtype.kind in 'fc' else x, jnp.asarray(quantiles), axis=-1)


def _searchsorted(sorted_sequence: Any, search_values: Any, side: str, dtype: DType = _INT32) -> jax.Array:
    """Insertion indices of `search_values` into `sorted_sequence`; a 2D sequence is searched row by row."""
    if jnp.ndim(sorted_sequence) == 1:
        return jnp.searchsorted(sorted_sequence, search_values, side).astype(to_numpy_dtype(dtype))
    return jax.vmap(functools.partial(_searchsorted, side=side, dtype=dtype))(sorted_sequence, search_values)


def _bincount(x: Any, weights: Any, bins: int, x_sorted: bool = False) -> jax.Array:
    return jnp.bincount(x, weights, minlength=bins, length=bins)


def _histogram1d(values: Any, weights: Any, bin_edges: Any) -> jax.Array:
    """Weighted histograms of `values (batch, values)` with `bin_edges (batch, edges)`: `(batch, edges - 1)`."""
    counts = jax.vmap(lambda v, w, e: jnp.histogram(v, e, weights=w)[0])(values, weights, bin_edges)
    return counts.astype(jnp.asarray(weights).dtype)


def _indexed_segment_sum(x: Any, indices: Any, axis: int) -> jax.Array:
    """Sums the segments of `x (batch, ...)` starting at `indices (batch, segments)` along `axis`."""
    return jnp.stack([jnp.add.reduceat(x[b], indices[min(b, len(indices) - 1)], axis - 1) for b in range(len(x))])


def _unique(x: Any, return_inverse: bool, return_counts: bool, axis: int | None) -> Any:
    return jnp.unique(x, return_inverse=return_inverse, return_counts=return_counts, axis=axis)


# --- selection ---

def _where(condition: Any, x: Any = None, y: Any = None) -> jax.Array:
    """`x` where `condition` holds, else `y`; without `x` and `y`, the indices of true entries `(nnz, ndims)`."""
    if x is None or y is None:
        return jnp.argwhere(condition)
    return jnp.where(condition, x, y)


def _nonzero(values: Any, length: int | None = None, fill_value: int = -1) -> jax.Array:
    if length is None:
        return jnp.argwhere(values)
    return jnp.argwhere(values, size=length, fill_value=fill_value)


def _boolean_mask(x: Any, mask: Any, axis: int = 0, new_length: int | None = None, fill_value: Any = 0) -> jax.Array:
    """The slices of `x` along `axis` where `mask` holds; with `new_length`, cropped or padded with `fill_value`
    to that length (traceable then)."""
    if new_length is None:
        return jnp.compress(mask, x, axis)
    x = jnp.asarray(x)
    beyond = x.shape[axis]  # an index out of bounds, so `take` fills it
    index = jnp.flatnonzero(mask, size=new_length, fill_value=beyond)
    return jnp.take(x, index, axis, mode='fill', fill_value=fill_value)


def _batched_gather_nd(values: Any, indices: Any) -> jax.Array:
    """Gathers `values (batch, spatial..., channels)` at `indices (batch, any..., index)`; batch 1 broadcasts."""
    values, indices = jnp.asarray(values), jnp.asarray(indices)
    batch_index = jnp.arange(values.shape[0]).reshape((-1,) + (1,) * (indices.ndim - 2))
    return values[(batch_index, *jnp.moveaxis(indices, -1, 0))]


_SCATTER_MODES = ('update', 'add', 'max', 'min')


def _scatter(base_grid: Any, indices: Any, values: Any, mode: str) -> jax.Array:
    """Returns `base_grid (batch, spatial..., channels)` with `values (batch, updates, channels)` written at
    `indices (batch, updates, index)`; `mode` is 'update', 'add', 'max' or 'min'. Batch 1 broadcasts."""
    if mode not in _SCATTER_MODES:
        raise ValueError(f"scatter mode must be 'update', 'add', 'max' or 'min' but got {mode!r}")
    base_grid, indices, values = jnp.asarray(base_grid), jnp.asarray(indices), jnp.asarray(values)
    batch = max(base_grid.shape[0], indices.shape[0], values.shape[0])
    result = jnp.broadcast_to(base_grid, (batch, *base_grid.shape[1:])).astype(jnp.result_type(base_grid, values))
    position = (jnp.arange(batch)[:, None], *jnp.moveaxis(indices, -1, 0))
    values = jnp.broadcast_to(values, (batch, indices.shape[1], result.shape[-1]))
    at = result.at[position]
    return {'update': at.set, 'add': at.add, 'max': at.max, 'min': at.min}[mode](values)


def _get_diagonal(matrices: Any, offset: int = 0) -> jax.Array:
    """Diagonals of `matrices (batch, rows, cols, channels)` as `(batch, diagonal, channels)`."""
    return jnp.moveaxis(jnp.diagonal(matrices, offset, axis1=1, axis2=2), -1, 1)


# lazyphi extrapolation -> mode of jax.scipy.ndimage.map_coordinates
_SAMPLE_MODES = {'undefined': 'nearest', 'boundary': 'nearest', 'zeros': 'constant', 'periodic': 'wrap',
                 'symmetric': 'reflect', 'reflect': 'mirror'}


def _grid_sample(grid: Any, coordinates: Any, extrapolation: str) -> Any:
    """Linear interpolation of `grid (batch, spatial..., channels)` at `coordinates (batch, instance..., vector)`.

    Coordinates are in index space: the first grid point lies at 0. `extrapolation` is one of 'undefined',
    'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'; others give `NotImplemented`.
    """
    mode = _SAMPLE_MODES.get(extrapolation)
    if mode is None:
        return NotImplemented
    grid, coordinates = jnp.asarray(grid), jnp.asarray(coordinates)
    dtype = jnp.result_type(grid, coordinates)

    def sample(grid: jax.Array, coordinates: jax.Array) -> jax.Array:
        points = list(jnp.moveaxis(coordinates, -1, 0).astype(dtype))
        channels = [map_coordinates(grid[..., c].astype(dtype), points, order=1, mode=mode)
                    for c in range(grid.shape[-1])]
        return jnp.stack(channels, -1)
    return JAX.vectorized_call(sample, grid, coordinates)


# --- linear algebra and signals ---

def _mul_matrix_batched_vector(matrix: Any, vector: Any) -> jax.Array:
    """Multiplies `matrix (rows, cols)` or `(batch, rows, cols)` with `vector (batch, cols)`."""
    return jnp.matmul(matrix, jnp.asarray(vector)[..., None], precision=_HIGHEST)[..., 0]


def _conv(value: Any, kernel: Any, zero_padding: bool = True) -> jax.Array:
    """Cross-correlates `value (batch, in, spatial...)` with `kernel (batch or 1, out, in, kernel_spatial...)`.

    With `zero_padding`, the result keeps the spatial shape of `value` (centred like SciPy's `mode='same'`).
    """
    dtype = jnp.result_type(value, kernel)
    value, kernel = jnp.asarray(value, dtype), jnp.asarray(kernel, dtype)
    kernel_shape = kernel.shape[3:]
    padding = [(k // 2, k - 1 - k // 2) for k in kernel_shape] if zero_padding else 'VALID'

    def correlate(v: jax.Array, k: jax.Array) -> jax.Array:
        return lax.conv_general_dilated(v, k, (1,) * len(kernel_shape), padding, precision=_HIGHEST)
    if kernel.shape[0] == 1:
        return correlate(value, kernel[0])
    return jax.vmap(lambda v, k: correlate(v[None], k)[0])(value, kernel)


def _fourier(transform: Callable) -> Callable:
    def apply(x: Any, axes: Sequence[int]) -> jax.Array:
        x = jnp.asarray(x)
        x = x.astype(_complex_result_type(x))  # complex64 for float32, as NUMPY does
        return transform(x, axes=tuple(axes)) if len(axes) else x
    apply.__name__ = transform.__name__
    return apply


# --- automatic differentiation and function transformations ---

def _differentiable(x: Any) -> Any:
    return _cast(x, DType(float, get_precision())) if _dtype(x).kind in (bool, int) else x


def _jacobian(f: Callable, wrt: Sequence[int], get_output: bool, is_f_scalar: bool) -> Callable:
    """Derivatives of `f`, which returns `(loss, outputs)`, by the arguments at the indices `wrt`.

    Returns a function with the arguments of `f` that returns the gradients (Jacobians, with the dims of
    `loss` first, unless `is_f_scalar`), preceded by `outputs` if `get_output`. Integer and boolean
    arguments are differentiated as floats. Gradients by complex arguments are conjugated, so that they
    agree with PyTorch and TensorFlow.
    """
    wrt = tuple(wrt)
    transform = jax.grad if is_f_scalar else jax.jacrev
    derivative = transform(f, argnums=wrt, has_aux=True)

    def gradient_of_f(*args: Any) -> tuple:
        args = [_differentiable(a) if i in wrt else a for i, a in enumerate(args)]
        gradients, output = derivative(*args)
        gradients = tuple(jnp.conj(g) if jnp.iscomplexobj(g) else g for g in gradients)
        if not get_output:
            return gradients
        return (*output, *gradients) if isinstance(output, tuple | list) else (output, *gradients)
    gradient_of_f.__name__ = f"gradient_of_{getattr(f, '__name__', 'f')}"
    return gradient_of_f


def _cotangent(gradient: Any, primal: Any) -> Any:
    """The gradient `jax.custom_vjp` expects for `primal`: `float0` zeros for integers, zeros for `None`."""
    primal = jnp.asarray(primal)
    if primal.dtype.kind in 'biu':
        return np.zeros(primal.shape, jax.dtypes.float0)
    if gradient is None:
        return jnp.zeros_like(primal)
    return jnp.broadcast_to(jnp.asarray(gradient, primal.dtype), primal.shape)


def _custom_gradient(f: Callable, gradient: Callable, get_external_cache: Callable | None = None,
                     on_call_skipped: Callable | None = None) -> Callable:
    """Returns `f` differentiated by `gradient(args, output, d_output)`, which returns one gradient per
    positional argument of `f` (`None` for none)."""
    with_gradient = jax.custom_vjp(f)

    def forward(*args: Any) -> tuple:
        output = f(*args)
        return output, (args, output)

    def backward(residuals: tuple, d_output: Any) -> tuple:
        args, output = residuals
        gradients = gradient(args, output, d_output)
        return tuple(_cotangent(g, a) for g, a in zip(gradients, args, strict=True))
    with_gradient.defvjp(forward, backward)
    return with_gradient


def _numpy_call(f: Callable, output_shapes: Any, output_dtypes: Any, *args: Any, **aux_args: Any) -> Any:
    """Calls `f` on NumPy versions of `args` through `jax.pure_callback`, so it also works in `jit_compile`.

    `output_dtypes` is one `DType` or a sequence of them (one per output); `output_shapes` likewise.
    """
    single = not isinstance(output_dtypes, tuple | list)
    shapes, dtypes = ([output_shapes], [output_dtypes]) if single else (output_shapes, output_dtypes)
    specs = [jax.ShapeDtypeStruct(tuple(s), to_numpy_dtype(DType.as_dtype(d))) for s, d in zip(shapes, dtypes,
                                                                                               strict=True)]

    def on_host(*arrays: Any) -> list:
        results = f(*jax.tree.map(np.asarray, arrays), **aux_args)  # the callback may receive JAX arrays
        results = [results] if single else results
        return [np.asarray(r, spec.dtype) for r, spec in zip(results, specs, strict=True)]
    results = jax.pure_callback(on_host, specs, *args, vmap_method='sequential')
    return results[0] if single else tuple(results)


def _device_type(device: jax.Device) -> str:
    return {'cpu': 'CPU', 'tpu': 'TPU'}.get(device.platform, 'GPU')


def _compute_device(backend: Backend, device: jax.Device) -> ComputeDevice:
    device_type = _device_type(device)
    stats = device.memory_stats() or {}  # None on CPUs
    memory = stats.get('bytes_limit', cpu_memory() if device_type == 'CPU' else -1)
    processors = getattr(device, 'core_count', None) or -1  # multiprocessors of a GPU
    if device_type == 'CPU':
        processors = os.cpu_count() or -1
    host = f" on {platform.machine() or 'unknown machine'}" if device_type == 'CPU' else ''
    description = f"JAX {jax.__version__} {device.device_kind}{host}, id={device.id}"
    return ComputeDevice(backend, f"{device_type}:{device.id}", device_type, memory, processors, description, device)


class JaxBackend(Backend):
    """Backend for `jax.Array`s, accepting NumPy arrays, Python numbers and lists of them as inputs."""

    OPS: ClassVar[dict[str, Callable | LazyFunction]] = {
        # --- tensors and types ---
        'is_tensor': _is_tensor,
        'as_tensor': _as_tensor,
        'is_available': lambda tensor: not isinstance(tensor, Tracer),
        'numpy': np.asarray,
        'content_hash': lambda x: NUMPY.content_hash(np.asarray(x)),  # equal data hashes equal on every backend
        'copy': _copy,
        'to_dlpack': jnp.asarray,  # JAX arrays implement __dlpack__
        'from_dlpack': _from_dlpack,
        'dtype': _dtype,
        'cast': _cast,
        'staticshape': jnp.shape,
        'shape': jnp.shape,
        'ndims': jnp.ndim,
        'size': jnp.size,
        'is_module': lambda obj: False,
        'is_sparse': lambda x: False,
        'prefers_channels_last': lambda: True,
        'requires_fixed_shapes_when_tracing': lambda: True,
        'block_until_ready': _block_until_ready,
        'seed': _keys.seed,
        # --- transformations ---
        'jit_compile': jax.jit,
        'jacobian': _jacobian,
        'jit_compile_grad': lambda f, wrt, get_output, is_f_scalar: jax.jit(_jacobian(f, wrt, get_output,
                                                                                      is_f_scalar)),
        'custom_gradient': _custom_gradient,
        'stop_gradient': lax.stop_gradient,
        'numpy_call': _numpy_call,
        # --- creation ---
        'random_uniform': _random_uniform,
        'random_normal': _random_normal,
        'zeros': lambda shape, dtype=None: jnp.zeros(shape, _creation_dtype(dtype), device=_placement()),
        'ones': lambda shape, dtype=None: jnp.ones(shape, _creation_dtype(dtype), device=_placement()),
        'zeros_like': jnp.zeros_like,
        'ones_like': jnp.ones_like,
        'range': _range,
        'linspace': lambda start, stop, number: jnp.linspace(start, stop, number, dtype=_float_dtype(),
                                                             device=_placement()),
        'meshgrid': lambda *coordinates: jnp.meshgrid(*coordinates, indexing='ij'),
        # --- shape ---
        'reshape': jnp.reshape,
        'broadcast_to': jnp.broadcast_to,
        'transpose': jnp.transpose,
        'stack': jnp.stack,
        'concat': jnp.concatenate,
        'flip': jnp.flip,
        'flatten': jnp.ravel,
        'tile': jnp.tile,
        'repeat': _repeat,
        'expand_dims': _expand_dims,
        'pad': _pad,
        # --- reductions ---
        'sum': lambda value, axis=None, keepdims=False: jnp.sum(value, axis, keepdims=keepdims),
        'prod': jnp.prod,
        'mean': lambda value, axis=None, keepdims=False: jnp.mean(value, axis, keepdims=keepdims),
        'std': lambda x, axis=None, keepdims=False: jnp.std(x, axis, keepdims=keepdims),
        'max': lambda x, axis=None, keepdims=False: jnp.max(x, axis, keepdims=keepdims),
        'min': lambda x, axis=None, keepdims=False: jnp.min(x, axis, keepdims=keepdims),
        'any': lambda boolean_tensor, axis=None, keepdims=False: jnp.any(boolean_tensor, axis, keepdims=keepdims),
        'all': lambda boolean_tensor, axis=None, keepdims=False: jnp.all(boolean_tensor, axis, keepdims=keepdims),
        'argmax': lambda x, axis, keepdims=False: jnp.argmax(x, axis, keepdims=keepdims),
        'argmin': lambda x, axis, keepdims=False: jnp.argmin(x, axis, keepdims=keepdims),
        'cumsum': _cumsum,
        'quantile': _quantile,
        'argsort': jnp.argsort,
        'sort': jnp.sort,
        'searchsorted': _searchsorted,
        'unique': _unique,
        'bincount': _bincount,
        'histogram1d': _histogram1d,
        'indexed_segment_sum': _indexed_segment_sum,
        # --- selection ---
        'where': _where,
        'nonzero': _nonzero,
        'boolean_mask': _boolean_mask,
        'gather': jnp.take,
        'batched_gather_nd': _batched_gather_nd,
        'scatter': _scatter,
        'get_diagonal': _get_diagonal,
        'grid_sample': _grid_sample,
        # --- linear algebra and signals ---
        'tensordot': lambda a, a_axes, b, b_axes: jnp.tensordot(a, b, (a_axes, b_axes), precision=_HIGHEST),
        'einsum': functools.partial(jnp.einsum, precision=_HIGHEST),
        'mul_matrix_batched_vector': _mul_matrix_batched_vector,
        'conv': _conv,
        'fft': _fourier(jnp.fft.fftn),
        'ifft': _fourier(jnp.fft.ifftn),
        # --- element-wise ---
        'add': jnp.add,
        'sub': jnp.subtract,
        'mul': jnp.multiply,
        'div': jnp.true_divide,
        'pow': jnp.power,
        'mod': jnp.mod,
        'floordiv': jnp.floor_divide,
        'and_': jnp.bitwise_and,
        'or_': jnp.bitwise_or,
        'xor': jnp.bitwise_xor,
        'invert': jnp.invert,
        'shift_bits_left': jnp.left_shift,
        'shift_bits_right': jnp.right_shift,
        'equal': jnp.equal,
        'not_equal': jnp.not_equal,
        'greater_than': jnp.greater,
        'greater_or_equal': jnp.greater_equal,
        'maximum': jnp.maximum,
        'minimum': jnp.minimum,
        'clip': jnp.clip,
        'abs': jnp.abs,
        'sign': jnp.sign,
        'round': jnp.round,
        'ceil': jnp.ceil,
        'floor': jnp.floor,
        'sqrt': jnp.sqrt,
        'exp': jnp.exp,
        'log': jnp.log,
        'log2': jnp.log2,
        'log10': jnp.log10,
        'sin': jnp.sin,
        'arcsin': jnp.arcsin,
        'cos': jnp.cos,
        'arccos': jnp.arccos,
        'tan': jnp.tan,
        'arctan': jnp.arctan,
        'arctan2': jnp.arctan2,
        'sinh': jnp.sinh,
        'arcsinh': jnp.arcsinh,
        'cosh': jnp.cosh,
        'arccosh': jnp.arccosh,
        'tanh': jnp.tanh,
        'arctanh': jnp.arctanh,
        'isfinite': jnp.isfinite,
        'isnan': jnp.isnan,
        'isinf': jnp.isinf,
        'real': jnp.real,
        'imag': jnp.imag,
        'conj': jnp.conjugate,
        'erf': special.erf,
        'log_gamma': special.gammaln,
        'gamma_inc_l': special.gammainc,
        'gamma_inc_u': special.gammaincc,
    }

    def __init__(self) -> None:
        found = dict.fromkeys([*jax.local_devices(), *jax.local_devices(backend='cpu')])
        devices = [_compute_device(self, device) for device in found]
        super().__init__('jax', devices, devices[0])

    def get_device(self, tensor: Any) -> ComputeDevice:
        """The device holding `tensor`; the default device for values that are not (yet) on one."""
        if not isinstance(tensor, jax.Array) or isinstance(tensor, Tracer):
            return self._default_device
        return self.get_device_by_ref(min(tensor.devices(), key=lambda device: device.id))

    def allocate_on_device(self, tensor: Any, device: ComputeDevice) -> jax.Array:
        """Returns `tensor` on `device` (a copy unless it is there already)."""
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not jax")
        return jax.device_put(tensor, device.ref)

    def vectorized_call(self, f: Callable, *args: Any, output_dtypes: Any = None, **aux_args: Any) -> Any:
        """`jax.vmap` of `f` along the first axis of `args`; arguments of size 1 there broadcast."""
        size = self.determine_size(args, 0)
        in_axes = [None if size > 1 and self.staticshape(a)[0] == 1 else 0 for a in args]
        args = [a[0] if axis is None else a for a, axis in zip(args, in_axes, strict=True)]
        return jax.vmap(lambda *a: f(*a, **aux_args), in_axes)(*args)

    def while_loop(self, loop: Callable, values: tuple, max_iter: int | Sequence[int] | None) -> Any:
        """Runs `values = loop(*values)` while any of `values[0]` is true, at most `max_iter` times.

        Concrete values run the Python loop of `Backend.while_loop`; traced values (inside `jit_compile`)
        become a `lax.while_loop`. A sequence `max_iter` returns the values after each of those iteration
        counts in increasing order, stacked along a new first axis; checkpoints after the loop ended hold the
        final values.
        `max_iter=None` loops until the condition fails. No gradients flow through.
        """
        values = self.stop_gradient_tree(tuple(values))
        if max_iter is not None and all(self.is_available(v) for v in jax.tree.leaves(values)):
            return super().while_loop(loop, values, max_iter)

        def step(state: tuple) -> tuple:
            return tuple(loop(*state))
        if max_iter is None:
            return self.stop_gradient_tree(lax.while_loop(lambda state: jnp.any(state[0]), step, values))

        def run_until(iterations: int, counted: tuple) -> tuple:
            return lax.while_loop(lambda c: jnp.any(c[1][0]) & (c[0] < iterations),
                                  lambda c: (c[0] + 1, step(c[1])), counted)
        counted = (jnp.asarray(0), values)
        if isinstance(max_iter, int):
            return self.stop_gradient_tree(run_until(max_iter, counted)[1])
        trajectory = []
        for checkpoint in sorted(max_iter):  # in increasing order, as Backend.while_loop stacks them
            counted = run_until(checkpoint, counted)
            trajectory.append(counted[1])
        return self.stop_gradient_tree(self.stack_leaves(trajectory))


JAX = register_backend(JaxBackend())
"""The backend for JAX arrays."""
