"""The operation table of the JAX backend: the table shared with NumPy, bound to `jax.numpy`, and what differs.

Only `lazyphi.backend.jax` imports this module. What differs from NumPy: arrays are created on the backend's
default device (see `use_device`), random values come from a PRNG key, matrix products run at full float32
precision on GPUs, shapes stay static where JAX compiles (`nonzero`, `boolean_mask` and `repeat` with a length),
integer sums widen like NumPy's, and the transformations (`jit_compile`, gradients, `numpy_call`) are JAX's.
"""

import functools
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer
from jax.scipy import special
from jax.scipy.ndimage import map_coordinates

from . import _jax_sparse as sparse
from ._backend import hessian_result
from ._dtype import DType, from_numpy_dtype, inexact_type, to_numpy_dtype
from ._numpy import NUMPY, sparse_to_scipy
from ._numpy_like import complex_dtype, float_dtype, numpy_like_ops
from ._precision import get_precision

jax.config.update('jax_enable_x64', True)

_INT32 = DType(int, 32)
_HIGHEST = lax.Precision.HIGHEST  # no TF32 or bfloat16 passes on GPUs: results match the other backends
_JAX_DEFAULT_DEVICE = jax.local_devices()[0]
_placement: jax.Device | None = None  # where created arrays go; None: JAX's default device, uncommitted


# --- tensors, types and devices ---

def _is_tensor(x: Any, only_native: bool = False) -> bool:
    if isinstance(x, jax.Array) or sparse.is_sparse(x):  # tracers included
        return True
    if only_native:
        return False
    if isinstance(x, tuple | list):
        return all(_is_tensor(item) for item in x)
    return NUMPY.is_tensor(x)


def use_device(device: jax.Device) -> None:
    """Makes the operations that create arrays put them on `device` (left uncommitted on JAX's default device)."""
    global _placement
    _placement = None if device == _JAX_DEFAULT_DEVICE else device


def _place(array: jax.Array) -> jax.Array:
    return array if _placement is None else jax.device_put(array, _placement)


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
        x = jnp.asarray(_native_byte_order(x), device=_placement)
    kind = x.dtype.kind
    if kind == 'f':
        return x.astype(float_dtype())
    if kind == 'c':
        return x.astype(complex_dtype())
    return x


def _dtype(x: Any) -> DType:
    return from_numpy_dtype(x.dtype) if isinstance(x, jax.Array) else NUMPY.dtype(x)


def _cast(x: Any, dtype: DType) -> jax.Array:
    np_dtype = to_numpy_dtype(dtype)
    if isinstance(x, jax.Array):
        return x.astype(np_dtype)
    return jnp.asarray(_native_byte_order(x), np_dtype, device=_placement)


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
    """Values drawn uniformly from `[low, high)`; for complex types the real parts from `[low.real, high.real)`
    and the imaginary parts from `[low.imag, high.imag)`, so real bounds give real values."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    shape = tuple(shape)
    if dtype.kind is float:
        values = jax.random.uniform(_keys.next(), shape, to_numpy_dtype(dtype), low, high)
    elif dtype.kind is complex:
        part = to_numpy_dtype(DType(float, dtype.precision))
        low, high = jnp.asarray(low, complex), jnp.asarray(high, complex)
        real, imag = (jax.random.uniform(key, shape, part, a, b) for key, a, b in
                      zip(_keys.next(2), (low.real, low.imag), (high.real, high.imag), strict=True))
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
    return float_dtype() if dtype is None else to_numpy_dtype(DType.as_dtype(dtype))


def _range(start: int, limit: int | None = None, delta: int = 1, dtype: DType = _INT32) -> jax.Array:
    if limit is None:
        start, limit = 0, start
    return jnp.arange(start, limit, delta, to_numpy_dtype(dtype), device=_placement)


# --- shape ---

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


# --- selection ---

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


def vmap_first_axis(f: Callable, *args: Any) -> Any:
    """`jax.vmap` of `f` along the first axis of `args`; arguments of size 1 there broadcast."""
    sizes = {jnp.shape(a)[0] for a in args} - {1}
    if len(sizes) > 1:
        raise ValueError(f"Sizes along axis 0 do not broadcast: {sorted(sizes)}")
    in_axes = [None if sizes and jnp.shape(a)[0] == 1 else 0 for a in args]
    args = [a[0] if axis is None else a for a, axis in zip(args, in_axes, strict=True)]
    return jax.vmap(f, in_axes)(*args)


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
    return vmap_first_axis(sample, grid, coordinates)


# --- linear algebra and signals ---

def _mul_matrix_batched_vector(matrix: Any, vector: Any) -> jax.Array:
    """Multiplies `matrix (rows, cols)`, dense or sparse, or `(batch, rows, cols)` with `vector (batch, cols)`."""
    if sparse.is_sparse(matrix):
        return sparse.sparse_times_vector(matrix, vector)
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


def _hessian(f: Callable, wrt: Sequence[int], get_output: bool, get_gradient: bool) -> Callable:
    """Hessians of `f`'s loss by the arguments at `wrt`, per entry of the batch (first) axis; see
    `TorchBackend.hessian` for the arguments and results.

    Entries are independent, so the derivative of the gradient along a parameter direction set in every entry at
    once gives that column of each entry's Hessian: one forward-mode product per parameter, mapped with `vmap`.
    """
    wrt = tuple(wrt)

    def hessian_of_f(*args: Any) -> tuple:
        args = [_differentiable(a) if i in wrt else a for i, a in enumerate(args)]

        def loss_of(*variables: Any) -> tuple:
            replaced = list(args)
            for i, v in zip(wrt, variables, strict=True):
                replaced[i] = v
            loss, output = f(*replaced)
            return jnp.sum(loss), output
        gradient = jax.grad(loss_of, argnums=tuple(range(len(wrt))), has_aux=True)
        variables = [jnp.asarray(args[i]) for i in wrt]
        gradients, output = gradient(*variables)
        columns = []
        for j, v in enumerate(variables):
            batch, params = v.shape[0], v.shape[1:]

            def column(k: Any, j: int = j, v: Any = v, batch: int = batch, params: tuple = params) -> tuple:
                direction = jnp.broadcast_to(jax.nn.one_hot(k, v[0].size, dtype=v.dtype).reshape(params), v.shape)
                tangents = [direction if m == j else jnp.zeros_like(u) for m, u in enumerate(variables)]
                return jax.jvp(lambda *u: gradient(*u)[0], variables, tangents)[1]
            columns.append(jax.vmap(column)(jnp.arange(v[0].size)))  # per argument i: (columns, batch, *params_i)
        hessian = tuple(tuple(jnp.moveaxis(columns[j][i], 0, -1).reshape(*g.shape, *variables[j].shape[1:])
                              for j in range(len(wrt))) for i, g in enumerate(gradients))
        return hessian_result(output, gradients, hessian, get_output, get_gradient)
    hessian_of_f.__name__ = f"hessian_of_{getattr(f, '__name__', 'f')}"
    return hessian_of_f


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


def _solve_triangular_dense(matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> jax.Array:
    """Solves `matrix (batch, rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`; batch 1 broadcasts."""
    dtype = to_numpy_dtype(inexact_type(_dtype(matrix), _dtype(rhs)))
    matrix, rhs = jnp.asarray(matrix, dtype), jnp.asarray(rhs, dtype)
    batch = max(matrix.shape[0], rhs.shape[0])
    matrix, rhs = jnp.broadcast_to(matrix, (batch, *matrix.shape[1:])), jnp.broadcast_to(rhs, (batch, rhs.shape[1]))
    return lax.linalg.triangular_solve(matrix, rhs[..., None], left_side=True, lower=lower,
                                       unit_diagonal=unit_diagonal)[..., 0]


def _numpy(x: Any) -> Any:
    """`x` as a NumPy array; sparse matrices as SciPy's, as phiml gives them."""
    return sparse_to_scipy(x, sparse.disassemble, _numpy) if sparse.is_sparse(x) else np.asarray(x)


def _gather(values: Any, indices: Any, axis: int | None = None) -> jax.Array:
    """Like `numpy.take`; `indices` may also be a Python list or tuple, which `jnp.take` refuses."""
    return jnp.take(values, jnp.asarray(indices) if isinstance(indices, list | tuple) else indices, axis)


OPS: dict[str, Callable] = {
    **numpy_like_ops(jnp),
    # --- tensors and types ---
    'is_tensor': _is_tensor,
    'numpy': _numpy,
    'as_tensor': _as_tensor,
    'is_available': lambda tensor: not isinstance(tensor, Tracer),
    'content_hash': lambda x: NUMPY.content_hash(np.asarray(x)),  # equal data hashes equal on every backend
    'copy': _copy,
    'from_dlpack': _from_dlpack,
    'dtype': _dtype,
    'cast': _cast,
    'requires_fixed_shapes_when_tracing': lambda: True,
    'block_until_ready': _block_until_ready,
    'seed': _keys.seed,
    # --- transformations ---
    'jit_compile': jax.jit,
    'jacobian': _jacobian,
    'jit_compile_grad': lambda f, wrt, get_output, is_f_scalar: jax.jit(_jacobian(f, wrt, get_output, is_f_scalar)),
    'hessian': _hessian,
    'jit_compile_hessian': lambda f, wrt, get_output, get_gradient: jax.jit(_hessian(f, wrt, get_output,
                                                                                     get_gradient)),
    'custom_gradient': _custom_gradient,
    'stop_gradient': lax.stop_gradient,
    'numpy_call': _numpy_call,
    # --- creation on the default device ---
    'random_uniform': _random_uniform,
    'random_normal': _random_normal,
    'zeros': lambda shape, dtype=None: jnp.zeros(shape, _creation_dtype(dtype), device=_placement),
    'ones': lambda shape, dtype=None: jnp.ones(shape, _creation_dtype(dtype), device=_placement),
    'range': _range,
    'linspace': lambda start, stop, number: jnp.linspace(start, stop, number, dtype=float_dtype(),
                                                         device=_placement),
    # --- static shapes, NumPy's integer widening ---
    'repeat': _repeat,
    'cumsum': _cumsum,
    'quantile': _quantile,
    'searchsorted': _searchsorted,
    'bincount': _bincount,
    'histogram1d': _histogram1d,
    'nonzero': _nonzero,
    'boolean_mask': _boolean_mask,
    'gather': _gather,
    'scatter': _scatter,
    'grid_sample': _grid_sample,
    # --- full precision products, convolutions, special functions ---
    'tensordot': lambda a, a_axes, b, b_axes: jnp.tensordot(a, b, (a_axes, b_axes), precision=_HIGHEST),
    'einsum': functools.partial(jnp.einsum, precision=_HIGHEST),
    'mul_matrix_batched_vector': _mul_matrix_batched_vector,
    'conv': _conv,
    'solve_triangular_dense': _solve_triangular_dense,
    # --- sparse matrices (JAX has no variables: its arrays are values) ---
    'is_sparse': sparse.is_sparse,
    'get_sparse_format': sparse.get_sparse_format,
    'disassemble': sparse.disassemble,
    'sparse_coo_tensor': sparse.sparse_coo_tensor,
    'sparse_coo_tensor_batched': sparse.sparse_coo_tensor_batched,
    'csr_matrix': sparse.csr_matrix,
    'csr_matrix_batched': sparse.csr_matrix,  # the batch axis of the parts makes a batch of matrices
    'csc_matrix': sparse.csc_matrix,
    'erf': special.erf,
    'log_gamma': special.gammaln,
    'gamma_inc_l': special.gammainc,
    'gamma_inc_u': special.gammaincc,
}
