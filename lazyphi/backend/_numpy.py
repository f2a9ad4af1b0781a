"""The NumPy backend: NumPy arrays and scalars, and Python numbers and lists of them.

Its table is the one shared with JAX (`numpy_like_ops(numpy)`, mostly NumPy's functions themselves) plus the
entries below, which adapt NumPy where the backend signature differs. SciPy is imported only when one of its
functions is first called.

Sparse matrices are SciPy's COO, CSR and CSC matrices (`scipy.sparse`, triangular solves by
`scipy.sparse.linalg.spsolve_triangular`); the iterative linear solvers are the base class's. Left out, as NumPy
cannot differentiate: `jacobian`, `hessian` and their compiled forms, `minimize` (it takes gradients) and
`variable`; and the batched sparse constructors, as SciPy's sparse matrices have two dims.
"""

import itertools
import math
import os
import platform
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import xxhash
from numpy.lib.stride_tricks import sliding_window_view

from ._backend import Backend, LazyFunction
from ._device import ComputeDevice, cpu_memory
from ._dtype import DType, from_numpy_dtype, inexact_type, to_numpy_dtype
from ._numpy_like import complex_dtype, float_dtype, numpy_like_ops
from ._precision import get_precision

_NATIVE = (np.ndarray, np.generic)
_PYTHON_NUMBERS = (int, float, complex)  # bool is an int
_INT32 = DType(int, 32)
_rng = None  # NumPy's Generator, made on first use: numpy.random took a sixth of `import lazyphi`


def _is_tensor(x: Any, only_native: bool = False) -> bool:
    if isinstance(x, _NATIVE):
        return x.dtype.kind != 'O'  # object arrays belong to the OBJECTS backend
    if _is_sparse(x):
        return True
    if only_native:
        return False
    if isinstance(x, _PYTHON_NUMBERS):
        return True
    if isinstance(x, tuple | list):
        return all(_is_tensor(item) for item in x)
    return False


def _reshape(x, shape):
    # the array method skips np.reshape's dispatch layer, a third of the cost on small arrays
    return x.reshape(shape) if isinstance(x, np.ndarray) else np.reshape(x, shape)


def _transpose(x, axes):
    return x.transpose(axes) if isinstance(x, np.ndarray) else np.transpose(x, axes)


def _as_tensor(x: Any, convert_external: bool = True) -> Any:
    """Converts `x` to a NumPy array or scalar; floating-point values take the current precision."""
    if isinstance(x, _NATIVE):
        array = x
    elif not convert_external and isinstance(x, _PYTHON_NUMBERS):
        return x
    else:
        array = np.asarray(x)
    kind = array.dtype.kind
    if kind == 'f':
        return array.astype(float_dtype(), copy=False)
    if kind == 'c':
        return array.astype(complex_dtype(), copy=False)
    return array


def _content_hash(x: Any) -> str:
    """A digest of the dtype, shape and bytes of `x`; other backends hash their data as NumPy arrays through this."""
    array = np.asarray(x, order='C')
    if array.dtype.kind == 'O':
        raise TypeError("Object arrays have no content hash: their bytes are addresses, not values")
    # XXH3 (128 bits): not cryptographic, but a cache key needs no protection from deliberate collisions; measured
    # 7.5 ms for 256 MiB against 180 ms for SHA-256 (hardware-accelerated) and 230 ms for BLAKE2b here
    digest = xxhash.xxh3_128(f'{array.dtype.str}{array.shape}'.encode())
    digest.update(array)
    return digest.hexdigest()


def _dtype(x: Any) -> DType:
    if isinstance(x, _NATIVE) or _is_sparse(x):
        return from_numpy_dtype(x.dtype)
    if isinstance(x, bool):
        return DType(bool)
    if isinstance(x, int):
        return _INT32
    if isinstance(x, float):
        return DType(float, 64)
    if isinstance(x, complex):
        return DType(complex, 128)
    return from_numpy_dtype(np.asarray(x).dtype)


def _to_numpy_dtype(dtype: DType | None) -> np.dtype:
    return float_dtype() if dtype is None else to_numpy_dtype(DType.as_dtype(dtype))


def _cast(x: Any, dtype: DType) -> Any:
    np_dtype = to_numpy_dtype(dtype)
    if isinstance(x, _NATIVE):
        return x.astype(np_dtype, copy=False)
    if isinstance(x, _PYTHON_NUMBERS):
        return np_dtype.type(x)
    return np.asarray(x, np_dtype)


def _seed(seed: int | None) -> None:
    global _rng
    _rng = np.random.default_rng(seed)


def _generator():
    global _rng
    if _rng is None:
        _rng = np.random.default_rng()
    return _rng


def _random_uniform(shape: Sequence[int], low: Any, high: Any, dtype: DType | None = None) -> np.ndarray:
    """Values drawn uniformly from `[low, high)`; for complex types the real parts from `[low.real, high.real)`
    and the imaginary parts from `[low.imag, high.imag)`, so real bounds give real values."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    np_dtype = to_numpy_dtype(dtype)
    rng = _generator()
    if dtype.kind is float:
        return rng.uniform(low, high, shape).astype(np_dtype, copy=False)
    if dtype.kind is complex:
        low, high = np.asarray(low, complex), np.asarray(high, complex)
        real, imag = (rng.uniform(a, b, shape) for a, b in ((low.real, high.real), (low.imag, high.imag)))
        return (real + 1j * imag).astype(np_dtype, copy=False)
    if dtype.kind is int:
        return rng.integers(low, high, shape, dtype=np_dtype)
    if dtype.kind is bool:
        return rng.integers(0, 2, shape).astype(bool)
    raise ValueError(f"random_uniform supports bool, int, float and complex types, not {dtype}")


def _random_normal(shape: Sequence[int], dtype: DType | None = None) -> np.ndarray:
    """Standard-normal values; real and imaginary parts each standard-normal for complex types."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    np_dtype = to_numpy_dtype(dtype)
    rng = _generator()
    if dtype.kind is float:
        return rng.standard_normal(shape).astype(np_dtype, copy=False)
    if dtype.kind is complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype, copy=False)
    raise ValueError(f"random_normal supports float and complex types, not {dtype}")


def _pad_or_crop(x: np.ndarray, axis: int, size: int, fill_value: Any) -> np.ndarray:
    current = x.shape[axis]
    if size < current:
        return np.take(x, np.arange(size), axis)
    if size > current:
        widths = [(0, size - current) if i == axis % x.ndim else (0, 0) for i in range(x.ndim)]
        return np.pad(x, widths, constant_values=fill_value)
    return x


def _repeat(x: Any, repeats: Any, axis: int, new_length: int | None = None) -> np.ndarray:
    result = np.repeat(x, repeats, axis)
    return result if new_length is None else _pad_or_crop(result, axis, new_length, 0)


def _nonzero(values: Any, length: int | None = None, fill_value: int = -1) -> np.ndarray:
    indices = np.argwhere(values)
    return indices if length is None else _pad_or_crop(indices, 0, length, fill_value)


def _boolean_mask(x: Any, mask: Any, axis: int = 0, new_length: int | None = None, fill_value: Any = 0) -> np.ndarray:
    result = np.compress(mask, x, axis)
    return result if new_length is None else _pad_or_crop(result, axis, new_length, fill_value)


def _range(start: int, limit: int | None = None, delta: int = 1, dtype: DType = _INT32) -> np.ndarray:
    if limit is None:
        start, limit = 0, start
    return np.arange(start, limit, delta, dtype=to_numpy_dtype(dtype))


def _conv(value: np.ndarray, kernel: np.ndarray, zero_padding: bool = True) -> np.ndarray:
    """Cross-correlates `value (batch, in, spatial...)` with `kernel (batch or 1, out, in, kernel_spatial...)`.

    With `zero_padding`, the result keeps the spatial shape of `value` (centred like SciPy's `mode='same'`).
    """
    kernel_shape = kernel.shape[3:]
    if zero_padding:
        value = np.pad(value, [(0, 0), (0, 0)] + [(k // 2, k - 1 - k // 2) for k in kernel_shape])
    windows = sliding_window_view(value, kernel_shape, axis=tuple(range(2, value.ndim)))
    spatial, offsets = 'xyzuvw'[:len(kernel_shape)], 'klmnpq'[:len(kernel_shape)]
    if kernel.shape[0] == 1:
        return np.einsum(f'bi{spatial}{offsets},oi{offsets}->bo{spatial}', windows, kernel[0])
    return np.einsum(f'bi{spatial}{offsets},boi{offsets}->bo{spatial}', windows, kernel)


def _histogram1d(values: np.ndarray, weights: np.ndarray, bin_edges: np.ndarray) -> np.ndarray:
    """Weighted histograms of `values (batch, values)` with `bin_edges (batch, edges)`: `(batch, edges - 1)`."""
    counts = [np.histogram(v, e, weights=w)[0] for v, w, e in zip(values, weights, bin_edges, strict=True)]
    return np.stack(counts).astype(np.asarray(weights).dtype, copy=False)


def _bincount(x: np.ndarray, weights: np.ndarray | None, bins: int, x_sorted: bool = False) -> np.ndarray:
    counts = np.bincount(x, weights, minlength=bins)
    return counts if weights is None else counts.astype(np.asarray(weights).dtype, copy=False)


def _searchsorted(sorted_sequence: np.ndarray, search_values: Any, side: str, dtype: DType = _INT32) -> np.ndarray:
    """Insertion indices of `search_values` into `sorted_sequence`; a 2D sequence is searched row by row."""
    if np.ndim(sorted_sequence) == 1:
        return np.searchsorted(sorted_sequence, search_values, side).astype(to_numpy_dtype(dtype))
    return np.stack([_searchsorted(s, v, side, dtype) for s, v in zip(sorted_sequence, search_values, strict=True)])


_SOLVE_TRIANGULAR = LazyFunction('scipy.linalg', 'solve_triangular')


def _solve_triangular_dense(matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> np.ndarray:
    """Solves `matrix (batch, rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`; batch 1 broadcasts.

    Only the lower or upper triangle of `matrix` is read, and not its diagonal where `unit_diagonal`.
    Integer inputs give floats of the current precision.
    """
    dtype = to_numpy_dtype(inexact_type(_dtype(matrix), _dtype(rhs)))
    matrix, rhs = np.asarray(matrix, dtype), np.asarray(rhs, dtype)
    solve = _SOLVE_TRIANGULAR.load()  # one matrix per call: older SciPy versions do not batch
    results = [solve(matrix[min(b, len(matrix) - 1)], rhs[min(b, len(rhs) - 1)], lower=lower,
                     unit_diagonal=unit_diagonal, check_finite=False) for b in range(max(len(matrix), len(rhs)))]
    return np.stack(results).astype(dtype, copy=False)  # LAPACK has no float16 solver


def _is_sparse(x: Any) -> bool:
    """Whether `x` is a SciPy sparse matrix or array; such a value proves `scipy.sparse` imported, so testing
    costs no import."""
    return type(x).__module__.startswith('scipy.sparse')


def sparse_to_scipy(x: Any, disassemble: Callable, to_numpy: Callable) -> Any:
    """The SciPy matrix of another library's sparse matrix `x`, assembled from its parts as NumPy arrays."""
    assemble, parts = disassemble(x)
    return assemble(NUMPY, *[to_numpy(part) for part in parts])


def _numpy(x: Any) -> Any:
    """`x` as a NumPy array; SciPy's sparse matrices as they are (phiml's NumPy backend holds them)."""
    return x if _is_sparse(x) else np.asarray(x)


def _get_sparse_format(x: Any) -> str:
    """SciPy's name of the format of `x` ('coo', 'csr', 'csc', ...), 'dense' for arrays and numbers."""
    return x.format if _is_sparse(x) else 'dense'


def _sparse_coo_tensor(indices: Any, values: Any, shape: Sequence[int]) -> Any:
    """A `scipy.sparse.coo_matrix` of `values (nnz,)` at `indices (nnz, 2)` (row, column); repeats add up."""
    if len(shape) != 2:
        raise ValueError(f"SciPy's sparse matrices have two dims, got shape {tuple(shape)}")
    indices = np.asarray(indices)
    return _SPARSE['coo'].load()((np.asarray(values), (indices[:, 0], indices[:, 1])), shape=tuple(shape))


def _disassemble(x: Any) -> tuple[Callable, tuple]:
    """`assemble(backend, *parts)` and the parts of `x`: (indices (nnz, 2), values) of COO matrices, (values,
    column indices, row pointers) of CSR ones, (values, row indices, column pointers) of CSC ones, `(x,)` else."""
    if not _is_sparse(x):
        return (lambda b, t: t), (x,)
    shape = x.shape
    if x.format == 'coo':
        return (lambda b, i, v: b.sparse_coo_tensor(i, v, shape)), (np.stack([x.row, x.col], -1), x.data)
    if x.format == 'csr':
        return (lambda b, v, i, p: b.csr_matrix(i, p, v, shape)), (x.data, x.indices, x.indptr)
    if x.format == 'csc':
        return (lambda b, v, i, p: b.csc_matrix(p, i, v, shape)), (x.data, x.indices, x.indptr)
    raise ValueError(f"disassemble takes COO, CSR and CSC matrices, got SciPy's format {x.format!r}")


def _solve_triangular_sparse(matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> np.ndarray:
    """Solves the sparse triangular `matrix (rows, cols) @ x = rhs (batch, rows)` for `x (batch, cols)`."""
    dtype = to_numpy_dtype(inexact_type(from_numpy_dtype(matrix.dtype), _dtype(rhs)))
    if dtype == np.float16:  # SuperLU has no float16 solver
        dtype = np.dtype(np.float32)
    solve = _SPARSE['solve_triangular'].load()
    triangle = _SPARSE['tril' if lower else 'triu'].load()(matrix, format='csr')  # SciPy reads the other one too
    result = solve(triangle.astype(dtype), np.asarray(rhs, dtype).T, lower=lower, unit_diagonal=unit_diagonal)
    return np.asarray(result, dtype).T


_SPARSE = {'coo': LazyFunction('scipy.sparse', 'coo_matrix'), 'csr': LazyFunction('scipy.sparse', 'csr_matrix'),
           'csc': LazyFunction('scipy.sparse', 'csc_matrix'),
           'tril': LazyFunction('scipy.sparse', 'tril'), 'triu': LazyFunction('scipy.sparse', 'triu'),
           'solve_triangular': LazyFunction('scipy.sparse.linalg', 'spsolve_triangular')}
_SHARED = numpy_like_ops(np)
_mul_dense_matrix_batched_vector = _SHARED['mul_matrix_batched_vector']


def _mul_matrix_batched_vector(matrix: Any, vector: Any) -> np.ndarray:
    """`matrix (rows, cols)`, dense or sparse, or `(batch, rows, cols)` times `vector (batch, cols)`."""
    if _is_sparse(matrix):
        return np.asarray(matrix @ np.asarray(vector).T).T
    return _mul_dense_matrix_batched_vector(matrix, vector)



_batched_gather_nd = _SHARED['batched_gather_nd']
_SCATTER_MODES = {'add': np.add, 'max': np.maximum, 'min': np.minimum}


def _scatter(base_grid: np.ndarray, indices: np.ndarray, values: Any, mode: str) -> np.ndarray:
    """Returns a copy of `base_grid (batch, spatial..., channels)` with `values (batch, updates, channels)` written
    at `indices (batch, updates, index)`; `mode` is 'update', 'add', 'max' or 'min'. Batch 1 broadcasts."""
    if mode != 'update' and mode not in _SCATTER_MODES:
        raise ValueError(f"scatter mode must be 'update', 'add', 'max' or 'min' but got {mode!r}")
    values = np.asarray(values)
    batch = max(base_grid.shape[0], indices.shape[0], values.shape[0])
    result = np.array(np.broadcast_to(base_grid, (batch, *base_grid.shape[1:])), np.result_type(base_grid, values),
                      order='C')  # its flat view is written to
    values = np.broadcast_to(values, (batch, indices.shape[1], result.shape[-1]))
    # every update's position in the flattened result: `ufunc.at` with one flat index is ten times faster than
    # with an index per axis (0.06 ms instead of 0.7 ms adding 81,408 values into a 128 x 128 grid)
    grid = result.shape[1:-1]
    indices = np.asarray(indices)
    if indices.size and indices.min() < 0:  # counted from the end, as NumPy's indexing does
        indices = np.where(indices < 0, indices + np.asarray(grid, indices.dtype), indices)
    flat = np.zeros(indices.shape[:-1], np.int64)
    for axis, size in enumerate(grid):
        flat = flat * size + indices[..., axis]
    flat = np.arange(batch)[:, None] * math.prod(grid) + flat
    channels = result.shape[-1]
    position = (flat[..., None] * channels + np.arange(channels)).reshape(-1)
    values = values.reshape(-1)
    if mode == 'update':
        result.reshape(-1)[position] = values
    else:
        _SCATTER_MODES[mode].at(result.reshape(-1), position, values)
    return result


def _wrap_indices(index: np.ndarray, size: np.ndarray, extrapolation: str) -> tuple[np.ndarray, np.ndarray | None]:
    if extrapolation == 'periodic':
        return index % size, None
    if extrapolation == 'symmetric':  # edge values repeat: c b a | a b c | c b a
        folded = index % (2 * size)
        return np.where(folded < size, folded, 2 * size - 1 - folded), None
    if extrapolation == 'reflect':  # edge values do not repeat: c b | a b c | b a
        period = np.maximum(2 * size - 2, 1)
        folded = index % period
        return np.where(folded < size, folded, period - folded), None
    inside = np.all((index >= 0) & (index < size), -1) if extrapolation == 'zeros' else None
    return np.clip(index, 0, size - 1), inside


def _grid_sample(grid: np.ndarray, coordinates: np.ndarray, extrapolation: str) -> Any:
    """Linear interpolation of `grid (batch, spatial..., channels)` at `coordinates (batch, instance..., vector)`.

    Coordinates are in index space: the first grid point lies at 0. `extrapolation` is one of 'undefined',
    'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'; others give `NotImplemented`.
    """
    if extrapolation not in ('undefined', 'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'):
        return NotImplemented
    size = np.array(grid.shape[1:-1])
    lower = np.floor(coordinates)
    fraction = coordinates - lower
    lower = lower.astype(np.int64)
    result = 0
    for corner in itertools.product((0, 1), repeat=len(size)):
        weight = np.prod(np.where(np.array(corner, bool), fraction, 1 - fraction), -1)
        index, inside = _wrap_indices(lower + corner, size, extrapolation)
        values = _batched_gather_nd(grid, index)
        if inside is not None:
            values = np.where(inside[..., None], values, 0)
        result = result + weight[..., None] * values
    return result


class NumPyBackend(Backend):
    """Backend for NumPy arrays and scalars (except object arrays) and Python numbers and lists of them."""

    OPS: ClassVar[dict[str, Callable | LazyFunction]] = {
        **_SHARED,
        # --- tensors and types ---
        'is_tensor': _is_tensor,
        'numpy': _numpy,
        'as_tensor': _as_tensor,
        'is_available': lambda tensor: True,
        'content_hash': _content_hash,
        'copy': lambda tensor, only_mutable=False: np.array(tensor, copy=True),
        'from_dlpack': np.from_dlpack,
        'dtype': _dtype,
        'cast': _cast,
        'stop_gradient': lambda value: value,
        'numpy_call': lambda f, output_shapes, output_dtypes, *args, **aux_args: f(*args, **aux_args),
        'seed': _seed,
        # --- creation ---
        'random_uniform': _random_uniform,
        'random_normal': _random_normal,
        'zeros': lambda shape, dtype=None: np.zeros(shape, _to_numpy_dtype(dtype)),
        'ones': lambda shape, dtype=None: np.ones(shape, _to_numpy_dtype(dtype)),
        'range': _range,
        'linspace': lambda start, stop, number: np.linspace(start, stop, number, dtype=float_dtype()),
        # --- shape ---
        'reshape': _reshape,
        'transpose': _transpose,
        'repeat': _repeat,
        # --- reductions, sorting, counting ---
        'cumsum': np.cumsum,
        'quantile': lambda x, quantiles: np.quantile(x, quantiles, axis=-1),
        'searchsorted': _searchsorted,
        'bincount': _bincount,
        'histogram1d': _histogram1d,
        # --- selection ---
        'nonzero': _nonzero,
        'boolean_mask': _boolean_mask,
        'scatter': _scatter,
        'grid_sample': _grid_sample,
        # --- linear algebra, signals and special functions ---
        'conv': _conv,
        'solve_triangular_dense': _solve_triangular_dense,
        'mul_matrix_batched_vector': _mul_matrix_batched_vector,
        # --- sparse matrices of SciPy ---
        'is_sparse': _is_sparse,
        'get_sparse_format': _get_sparse_format,
        'disassemble': _disassemble,
        'sparse_coo_tensor': _sparse_coo_tensor,
        'csr_matrix': lambda column_indices, row_pointers, values, shape: _SPARSE['csr'].load()(
            (values, column_indices, row_pointers), shape=tuple(shape)),
        'csc_matrix': lambda column_pointers, row_indices, values, shape: _SPARSE['csc'].load()(
            (values, row_indices, column_pointers), shape=tuple(shape)),
        'solve_triangular_sparse': _solve_triangular_sparse,
        'erf': LazyFunction('scipy.special', 'erf'),
        'log_gamma': LazyFunction('scipy.special', 'gammaln'),
        'gamma_inc_l': LazyFunction('scipy.special', 'gammainc'),
        'gamma_inc_u': LazyFunction('scipy.special', 'gammaincc'),
    }

    def __init__(self) -> None:
        cpu = ComputeDevice(self, 'CPU', 'CPU', cpu_memory(), os.cpu_count() or -1,
                            f"NumPy {np.__version__} on {platform.machine() or 'unknown machine'}", 'CPU')
        super().__init__('numpy', [cpu], cpu)

    def get_device(self, tensor: Any) -> ComputeDevice:
        """NumPy arrays always live on the CPU."""
        return self._devices[0]

    def allocate_on_device(self, tensor: Any, device: ComputeDevice) -> Any:
        """Returns `tensor`: the CPU is NumPy's only device."""
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not numpy")
        return tensor


NUMPY = NumPyBackend()
"""The backend for NumPy arrays and Python numbers."""
