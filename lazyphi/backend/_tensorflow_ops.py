"""The operation table of the TensorFlow backend: TensorFlow functions typed like NumPy's, creation, randomness.

Only `lazyphi.backend.tensorflow` imports this module. Entries take the arguments of the NumPy backend's entries
and give results of the same data types. Where TensorFlow lacks an operation in NumPy's form, the table takes
its composition of TensorFlow operations from `_tensorflow_compositions`; nothing is computed in NumPy.
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from . import _tensorflow_compositions as compositions
from . import _tensorflow_sparse as sparse
from ._dtype import DType, to_numpy_dtype
from ._numpy import NUMPY
from ._precision import get_precision
from ._tensorflow_types import (
    accumulating,
    as_tensor,
    cast,
    common,
    converted,
    default_device_ref,
    dtype_of,
    from_dlpack,
    inexact,
    loop_types,
    on_default_device,
    operand_type,
    shape,
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


# --- reductions ---

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
    x = accumulating(x)
    if axis is None:
        x, axis = tf.reshape(x, (-1,)), 0
    return tf.cumsum(x, axis)


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
    """Values drawn uniformly from `[low, high)`; for complex types the real parts from `[low.real, high.real)`
    and the imaginary parts from `[low.imag, high.imag)`, so real bounds give real values."""
    dtype = DType(float, get_precision()) if dtype is None else DType.as_dtype(dtype)
    generator, target = _GENERATORS.on_default_device(), tf_dtype(dtype)
    if dtype.kind is float:
        return generator.uniform(shape, low, high, target)
    if dtype.kind is complex:
        part = target.real_dtype
        low, high = tf.cast(low, target), tf.cast(high, target)
        return tf.complex(generator.uniform(shape, tf.math.real(low), tf.math.real(high), part),
                          generator.uniform(shape, tf.math.imag(low), tf.math.imag(high), part))
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
    'is_tensor': sparse.is_tensor,
    'as_tensor': as_tensor,
    'is_available': lambda tensor: not (isinstance(tensor, tf.Tensor) and tf.is_symbolic_tensor(tensor)),
    'numpy': sparse.numpy,
    'content_hash': lambda x: NUMPY.content_hash(to_numpy(x)),  # equal data hashes equal on every backend
    'copy': lambda tensor, only_mutable=False: tensor if only_mutable and isinstance(tensor, tf.Tensor) else
    tf.identity(tensor),
    'to_dlpack': to_dlpack,
    'from_dlpack': from_dlpack,
    'dtype': dtype_of,
    'cast': cast,
    'staticshape': sparse.staticshape,
    'shape': shape,
    'is_module': lambda obj: isinstance(obj, tf.Module),
    'is_sparse': lambda x: isinstance(x, tf.SparseTensor),
    'get_sparse_format': lambda x: 'coo' if isinstance(x, tf.SparseTensor) else 'dense',
    'disassemble': sparse.disassemble,
    'sparse_coo_tensor': sparse.sparse_coo_tensor,
    'sparse_coo_tensor_batched': sparse.sparse_coo_tensor_batched,
    'variable': lambda value: tf.Variable(as_tensor(value)),
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
    'flip': compositions.flip,
    'tile': compositions.tile,
    'repeat': compositions.repeat,
    'expand_dims': compositions.expand_dims,
    'pad': compositions.pad,
    # --- reductions ---
    'sum': lambda value, axis=None, keepdims=False: tf.reduce_sum(accumulating(value), axis, keepdims),
    'prod': lambda value, axis=None, keepdims=False: tf.reduce_prod(accumulating(value), axis, keepdims),
    'mean': lambda value, axis=None, keepdims=False: tf.reduce_mean(inexact(value), axis, keepdims),
    'std': lambda x, axis=None, keepdims=False: tf.math.reduce_std(inexact(x), axis, keepdims),
    'max': _extremum(tf.reduce_max, tf.reduce_any),
    'min': _extremum(tf.reduce_min, tf.reduce_all),
    'any': lambda boolean_tensor, axis=None, keepdims=False: tf.reduce_any(_as_bool(boolean_tensor), axis, keepdims),
    'all': lambda boolean_tensor, axis=None, keepdims=False: tf.reduce_all(_as_bool(boolean_tensor), axis, keepdims),
    'argmax': _arg_extremum(tf.argmax),
    'argmin': _arg_extremum(tf.argmin),
    'cumsum': _cumsum,
    'quantile': compositions.quantile,
    'argsort': compositions.argsort,
    'sort': lambda x, axis=-1: tf.sort(x, axis),
    'searchsorted': compositions.searchsorted,
    'unique': compositions.unique,
    'bincount': compositions.bincount,
    'histogram1d': compositions.histogram1d,
    'indexed_segment_sum': compositions.indexed_segment_sum,
    # --- selection ---
    'where': _where,
    'nonzero': lambda values, length=None, fill_value=-1: tf.where(_as_bool(values)) if length is None else
    compositions.resized(tf.where(_as_bool(values)), 0, length, fill_value),
    'boolean_mask': lambda x, mask, axis=0, new_length=None, fill_value=0: tf.boolean_mask(x, mask, axis=axis)
    if new_length is None else compositions.resized(tf.boolean_mask(x, mask, axis=axis), axis, new_length, fill_value),
    'gather': compositions.gather,
    'batch_gather': compositions.batch_gather,
    'gather_by_component_indices': compositions.gather_by_component_indices,
    'batched_gather_nd': compositions.batched_gather_nd,
    'scatter': compositions.scatter,
    'get_diagonal': compositions.get_diagonal,
    'grid_sample': compositions.grid_sample,
    # --- linear algebra and signals ---
    'tensordot': compositions.tensordot,
    'einsum': lambda equation, *tensors: tf.einsum(equation, *common(tensors)),
    'mul_matrix_batched_vector': sparse.mul_matrix_batched_vector,
    'conv': compositions.conv,
    'solve_triangular_dense': compositions.solve_triangular_dense,
    'fft': compositions.fourier({1: tf.signal.fft, 2: tf.signal.fft2d, 3: tf.signal.fft3d}),
    'ifft': compositions.fourier({1: tf.signal.ifft, 2: tf.signal.ifft2d, 3: tf.signal.ifft3d}),
    'svd': compositions.svd,
    'eigvals': tf.linalg.eigvals,
    'matrix_solve_least_squares': lambda matrix, rhs: (tf.linalg.lstsq(matrix, rhs, fast=False), None, None, None),
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
