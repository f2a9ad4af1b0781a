"""The operation table shared by libraries with NumPy's API, written once in terms of the array module `xp`.

`numpy_like_ops(numpy)` and `numpy_like_ops(jax.numpy)` bind the same entries to each library's functions; the
NumPy and JAX backends add what really differs between them (creation on devices, randomness, dtype rules,
compiled shapes, matrix-product precision, ...) on top. Entries take and return natives of `xp`.
"""

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ._precision import get_precision

_FLOAT_BY_PRECISION = {16: np.dtype(np.float16), 32: np.dtype(np.float32), 64: np.dtype(np.float64)}
_COMPLEX_BY_PRECISION = {16: np.dtype(np.complex64), 32: np.dtype(np.complex64), 64: np.dtype(np.complex128)}
_PAD_MODES = {'constant': 'constant', 'boundary': 'edge', 'periodic': 'wrap', 'symmetric': 'symmetric',
              'reflect': 'reflect'}


def float_dtype() -> np.dtype:
    """The NumPy float type of the current precision."""
    return _FLOAT_BY_PRECISION[get_precision()]


def complex_dtype() -> np.dtype:
    """The NumPy complex type whose parts have the current precision (at least 32 bits each)."""
    return _COMPLEX_BY_PRECISION[get_precision()]


def complex_result_type(x: Any) -> np.dtype:
    """The complex type a Fourier transform of `x` gives: that of `x`'s precision, the current one for integers."""
    if x.dtype.kind == 'c':
        return x.dtype
    if x.dtype.kind == 'f':
        return np.dtype(np.complex64 if x.dtype.itemsize <= 4 else np.complex128)
    return complex_dtype()


def numpy_like_ops(xp: ModuleType) -> dict[str, Callable]:
    """The table entries that are the same function of `xp` for every array module with NumPy's API.

    Args:
        xp: `numpy` or a module with its API, such as `jax.numpy`.
    """
    def pad(value: Any, pad_width: Any, mode: str = 'constant', constant_values: Any = 0) -> Any:
        """Pads with `mode` 'constant', 'boundary', 'periodic', 'symmetric' or 'reflect'; `NotImplemented` otherwise."""
        library_mode = _PAD_MODES.get(mode)
        if library_mode is None:
            return NotImplemented
        if library_mode == 'constant':
            return xp.pad(value, pad_width, 'constant', constant_values=constant_values)
        return xp.pad(value, pad_width, library_mode)

    def eigvals(matrix: Any) -> Any:
        """The eigenvalues of `matrix (batch..., n, n)`, always complex: NumPy gives real ones where all are real."""
        values = xp.linalg.eigvals(matrix)
        return values.astype(xp.result_type(values.dtype, xp.complex64))

    def expand_dims(a: Any, axis: int = 0, number: int = 1) -> Any:
        position = axis if axis >= 0 else xp.ndim(a) + 1 + axis
        return xp.expand_dims(a, tuple(range(position, position + number)))

    def where(condition: Any, x: Any = None, y: Any = None) -> Any:
        """`x` where `condition` holds, else `y`; without `x` and `y`, the indices of true entries `(nnz, ndims)`."""
        if x is None or y is None:
            return xp.argwhere(condition)
        return xp.where(condition, x, y)

    def unique(x: Any, return_inverse: bool, return_counts: bool, axis: int | None) -> Any:
        return xp.unique(x, return_inverse=return_inverse, return_counts=return_counts, axis=axis)

    def indexed_segment_sum(x: Any, indices: Any, axis: int) -> Any:
        """Sums the segments of `x (batch, ...)` starting at `indices (batch, segments)` along `axis`."""
        return xp.stack([xp.add.reduceat(x[b], indices[min(b, len(indices) - 1)], axis - 1) for b in range(len(x))])

    def batched_gather_nd(values: Any, indices: Any) -> Any:
        """Gathers `values (batch, spatial..., channels)` at `indices (batch, any..., index)`; batch 1 broadcasts."""
        values, indices = xp.asarray(values), xp.asarray(indices)
        batch_index = xp.arange(values.shape[0]).reshape((-1,) + (1,) * (indices.ndim - 2))
        return values[(batch_index, *xp.moveaxis(indices, -1, 0))]

    def get_diagonal(matrices: Any, offset: int = 0) -> Any:
        """Diagonals of `matrices (batch, rows, cols, channels)` as `(batch, diagonal, channels)`."""
        return xp.moveaxis(xp.diagonal(matrices, offset, axis1=1, axis2=2), -1, 1)

    def mul_matrix_batched_vector(matrix: Any, vector: Any) -> Any:
        """Multiplies `matrix (rows, cols)` or `(batch, rows, cols)` with `vector (batch, cols)`."""
        return xp.matmul(matrix, xp.asarray(vector)[..., None])[..., 0]

    def fourier(transform: Callable) -> Callable:
        def apply(x: Any, axes: Sequence[int]) -> Any:
            x = xp.asarray(x)
            result = transform(x, axes=tuple(axes)) if len(axes) else x
            return xp.asarray(result, complex_result_type(x))
        apply.__name__ = transform.__name__
        return apply

    return {
        # --- tensors and types ---
        'numpy': np.asarray,
        'to_dlpack': xp.asarray,  # the arrays implement __dlpack__
        'staticshape': xp.shape,
        'shape': xp.shape,
        'ndims': xp.ndim,
        'size': xp.size,
        'is_module': lambda obj: False,
        'is_sparse': lambda x: False,
        'prefers_channels_last': lambda: True,
        # --- creation ---
        'zeros_like': xp.zeros_like,
        'ones_like': xp.ones_like,
        'meshgrid': lambda *coordinates: xp.meshgrid(*coordinates, indexing='ij'),
        # --- shape ---
        'reshape': xp.reshape,
        'broadcast_to': xp.broadcast_to,
        'transpose': xp.transpose,
        'stack': xp.stack,
        'concat': xp.concatenate,
        'flip': xp.flip,
        'flatten': xp.ravel,
        'tile': xp.tile,
        'expand_dims': expand_dims,
        'pad': pad,
        # --- reductions, sorting ---
        'sum': lambda value, axis=None, keepdims=False: xp.sum(value, axis, keepdims=keepdims),
        'prod': xp.prod,
        'mean': lambda value, axis=None, keepdims=False: xp.mean(value, axis, keepdims=keepdims),
        'std': lambda x, axis=None, keepdims=False: xp.std(x, axis, keepdims=keepdims),
        'max': lambda x, axis=None, keepdims=False: xp.max(x, axis, keepdims=keepdims),
        'min': lambda x, axis=None, keepdims=False: xp.min(x, axis, keepdims=keepdims),
        'any': lambda boolean_tensor, axis=None, keepdims=False: xp.any(boolean_tensor, axis, keepdims=keepdims),
        'all': lambda boolean_tensor, axis=None, keepdims=False: xp.all(boolean_tensor, axis, keepdims=keepdims),
        'argmax': lambda x, axis, keepdims=False: xp.argmax(x, axis, keepdims=keepdims),
        'argmin': lambda x, axis, keepdims=False: xp.argmin(x, axis, keepdims=keepdims),
        'argsort': xp.argsort,
        'sort': xp.sort,
        'unique': unique,
        'indexed_segment_sum': indexed_segment_sum,
        # --- selection ---
        'where': where,
        'gather': xp.take,
        'batched_gather_nd': batched_gather_nd,
        'get_diagonal': get_diagonal,
        # --- linear algebra and signals ---
        'tensordot': lambda a, a_axes, b, b_axes: xp.tensordot(a, b, (a_axes, b_axes)),
        'einsum': xp.einsum,
        'mul_matrix_batched_vector': mul_matrix_batched_vector,
        'fft': fourier(xp.fft.fftn),
        'ifft': fourier(xp.fft.ifftn),
        'svd': lambda matrix, full_matrices=True: tuple(xp.linalg.svd(matrix, full_matrices=full_matrices)),
        'eigvals': eigvals,
        # the minimum-norm least-squares solution, by the pseudo-inverse, which batches (`lstsq` does not)
        'matrix_solve_least_squares': lambda matrix, rhs: (xp.linalg.pinv(matrix) @ rhs, None, None, None),
        # --- element-wise ---
        'add': xp.add,
        'sub': xp.subtract,
        'mul': xp.multiply,
        'div': xp.true_divide,
        'pow': xp.power,
        'mod': xp.mod,
        'floordiv': xp.floor_divide,
        'and_': xp.bitwise_and,
        'or_': xp.bitwise_or,
        'xor': xp.bitwise_xor,
        'invert': xp.invert,
        'shift_bits_left': xp.left_shift,
        'shift_bits_right': xp.right_shift,
        'equal': xp.equal,
        'not_equal': xp.not_equal,
        'greater_than': xp.greater,
        'greater_or_equal': xp.greater_equal,
        'maximum': xp.maximum,
        'minimum': xp.minimum,
        'clip': xp.clip,
        'abs': xp.abs,
        'sign': xp.sign,
        'round': xp.round,
        'ceil': xp.ceil,
        'floor': xp.floor,
        'sqrt': xp.sqrt,
        'exp': xp.exp,
        'log': xp.log,
        'log2': xp.log2,
        'log10': xp.log10,
        'sin': xp.sin,
        'arcsin': xp.arcsin,
        'cos': xp.cos,
        'arccos': xp.arccos,
        'tan': xp.tan,
        'arctan': xp.arctan,
        'arctan2': xp.arctan2,
        'sinh': xp.sinh,
        'arcsinh': xp.arcsinh,
        'cosh': xp.cosh,
        'arccosh': xp.arccosh,
        'tanh': xp.tanh,
        'arctanh': xp.arctanh,
        'isfinite': xp.isfinite,
        'isnan': xp.isnan,
        'isinf': xp.isinf,
        'real': xp.real,
        'imag': xp.imag,
        'conj': xp.conjugate,
    }
