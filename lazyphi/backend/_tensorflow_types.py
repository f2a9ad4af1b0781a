"""TensorFlow values and NumPy: data types, conversion, DLPack, the placement of new tensors, NumPy's typing rules.

Part of the TensorFlow backend; only its modules import this one.
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ._device import ComputeDevice
from ._dtype import DType, from_numpy_dtype, to_numpy_dtype
from ._numpy import NUMPY
from ._precision import get_precision

NATIVE = (tf.Tensor, tf.Variable)
"""Types the TensorFlow backend holds natively."""

PYTHON_SCALARS = (int, float, complex)  # NumPy lets the other operand's type win over these (NEP 50)
FLOAT_BY_PRECISION = {16: tf.float16, 32: tf.float32, 64: tf.float64}
COMPLEX_BY_PRECISION = {16: tf.complex64, 32: tf.complex64, 64: tf.complex128}
_default_device: Callable[[], ComputeDevice] = NUMPY.get_default_device  # replaced by the backend on creation


def bind_default_device(get_default_device: Callable[[], ComputeDevice]) -> None:
    """Makes new tensors go to the device `get_default_device()` returns at the time they are created."""
    global _default_device
    _default_device = get_default_device


def default_device_ref() -> str:
    """The TensorFlow name of the backend's default device."""
    return _default_device().ref


def on_default_device(function: Callable) -> Callable:
    """`function` running with the default device as TensorFlow's device scope, so new tensors go there."""
    @functools.wraps(function)
    def placed(*args: Any, **kwargs: Any) -> Any:
        with tf.device(default_device_ref()):
            return function(*args, **kwargs)
    return placed


@functools.cache
def numpy_dtype(tf_dtype: tf.DType) -> np.dtype:
    return np.dtype(tf_dtype.as_numpy_dtype)


@functools.cache
def tf_dtype_of(np_dtype: np.dtype) -> tf.DType:
    return tf.as_dtype(np_dtype)


def tf_dtype(dtype: DType | None) -> tf.DType:
    """The TensorFlow type of `dtype`; the float type of the current precision for `None`."""
    return FLOAT_BY_PRECISION[get_precision()] if dtype is None else tf_dtype_of(to_numpy_dtype(DType.as_dtype(dtype)))


def to_native(x: Any) -> Any:
    """`x` as a TensorFlow value; NumPy arrays and Python data keep the data type NumPy gives them."""
    if isinstance(x, NATIVE):
        return x
    with tf.device(default_device_ref()):
        return tf.convert_to_tensor(np.asarray(x))


# --- table entries: tensors, types, conversion ---

def is_tensor(x: Any, only_native: bool = False) -> bool:
    return isinstance(x, NATIVE) or (not only_native and NUMPY.is_tensor(x))


def dtype_of(x: Any) -> DType:
    return from_numpy_dtype(numpy_dtype(x.dtype)) if isinstance(x, NATIVE) else NUMPY.dtype(x)


def as_tensor(x: Any, convert_external: bool = True) -> Any:
    """`x` as a TensorFlow value; floating-point values take the current precision."""
    if isinstance(x, NATIVE):
        if x.dtype.is_floating and x.dtype != FLOAT_BY_PRECISION[get_precision()]:
            return tf.cast(x, FLOAT_BY_PRECISION[get_precision()])
        if x.dtype.is_complex and x.dtype != COMPLEX_BY_PRECISION[get_precision()]:
            return tf.cast(x, COMPLEX_BY_PRECISION[get_precision()])
        return x
    if not convert_external and isinstance(x, PYTHON_SCALARS):
        return x
    return to_native(NUMPY.as_tensor(x))


def to_numpy(tensor: Any) -> np.ndarray:
    return tensor.numpy() if isinstance(tensor, NATIVE) else np.asarray(tensor)


def cast(x: Any, dtype: DType) -> Any:
    if isinstance(x, NATIVE):
        return tf.cast(x, tf_dtype(dtype))
    return to_native(np.asarray(x, to_numpy_dtype(dtype)))


def staticshape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, NATIVE) else np.shape(x)


def shape(x: Any) -> Any:
    """The shape as a tuple of ints, or as a tensor where the shape is known only when the graph runs."""
    if isinstance(x, NATIVE):
        return tuple(x.shape) if x.shape.is_fully_defined() else tf.shape(x)
    return np.shape(x)


_ALIGNMENT = 64  # TensorFlow's kernels need buffers aligned to EIGEN_MAX_ALIGN_BYTES (at most 64); they abort otherwise
_DLPACK_CPU = 1


def from_dlpack(external: Any) -> tf.Tensor:
    """A tensor viewing memory shared through DLPack: an object implementing `__dlpack__`, or a legacy capsule.

    TensorFlow can view only writable, C-contiguous and aligned memory, and it does not check: host memory of
    another layout is copied instead (a legacy capsule cannot be checked). Memory TensorFlow rejects raises
    `BufferError`.
    """
    host = _host_view(external)
    if host is not None and not (host.flags.c_contiguous and host.ctypes.data % _ALIGNMENT == 0):
        return tf.convert_to_tensor(host)  # TensorFlow copies into memory of its own
    if isinstance(external, np.ndarray) and not external.flags.writeable:
        return tf.convert_to_tensor(external)  # NumPy exports read-only memory only through newer DLPack versions
    capsule = external.__dlpack__() if hasattr(external, '__dlpack__') else external
    try:
        return tf.experimental.dlpack.from_dlpack(capsule)
    except tf.errors.InvalidArgumentError as err:
        raise BufferError(f"TensorFlow cannot view this memory through DLPack: {err.message}") from err


def _host_view(external: Any) -> np.ndarray | None:
    """A NumPy view of `external` where it lies in host memory, so that its layout can be checked; else `None`."""
    if isinstance(external, np.ndarray):
        return external
    if hasattr(external, '__dlpack_device__') and external.__dlpack_device__()[0] == _DLPACK_CPU:
        return np.from_dlpack(external)
    return None


def to_dlpack(tensor: Any) -> tf.Tensor:
    """The tensor itself: TensorFlow tensors implement `__dlpack__`, which NumPy, PyTorch and JAX consume."""
    return tf.convert_to_tensor(tensor)


# --- NumPy's typing rules for operations on TensorFlow values ---

def operand_type(x: Any) -> Any:
    if isinstance(x, NATIVE):
        return numpy_dtype(x.dtype)
    if type(x) in PYTHON_SCALARS:
        return type(x)
    return x.dtype if isinstance(x, np.ndarray | np.generic) else np.asarray(x).dtype


@functools.cache
def loop_types(ufunc: np.ufunc, operand_types: tuple) -> tuple:
    """The types `ufunc` computes in for operands of `operand_types`, as NumPy resolves them (without the result's)."""
    return ufunc.resolve_dtypes((*operand_types, None))[:len(operand_types)]


@functools.cache
def _casts(ufunc: np.ufunc, key: tuple) -> tuple:
    """Per operand, the NumPy type to convert it to, or `None` for a TensorFlow value that has it already."""
    types = loop_types(ufunc, tuple(numpy_dtype(k) if isinstance(k, tf.DType) else k for k in key))
    return tuple(None if isinstance(k, tf.DType) and tf_dtype_of(t) == k else t
                 for k, t in zip(key, types, strict=True))


def typed_operands(ufunc: np.ufunc, operands: Sequence) -> list:
    """`operands` as TensorFlow values of the types NumPy's `ufunc` computes in."""
    key = tuple(x.dtype if isinstance(x, NATIVE) else operand_type(x) for x in operands)
    return [x if t is None else converted(x, t) for x, t in zip(operands, _casts(ufunc, key), strict=True)]


def converted(x: Any, dtype: np.dtype) -> Any:
    """`x` as a TensorFlow value of the NumPy type `dtype`."""
    target = tf_dtype_of(dtype)
    if isinstance(x, NATIVE):
        return x if x.dtype == target else tf.cast(x, target)
    if type(x) in PYTHON_SCALARS:
        return tf.constant(x, target)
    return tf.constant(np.asarray(x, dtype))


def common(values: Sequence) -> list:
    """`values` as TensorFlow values of their common NumPy result type."""
    types = [operand_type(v) for v in values]
    if all(t == types[0] for t in types) and all(isinstance(v, NATIVE) for v in values):
        return list(values)
    samples = [t(0) if isinstance(t, type) else t for t in types]  # weak Python scalars take part by value
    target = np.result_type(*samples)
    return [converted(v, target) for v in values]


def accumulating(x: Any) -> Any:
    """`x` with booleans and integers narrower than 64 bits widened to 64 bits, as NumPy sums them."""
    x = to_native(x)
    if x.dtype == tf.bool or (x.dtype.is_integer and x.dtype.size < 8):
        return tf.cast(x, tf.uint64 if x.dtype.is_unsigned else tf.int64)
    return x


def inexact(x: Any) -> Any:
    """`x` with booleans and integers as float64, as NumPy averages them."""
    x = to_native(x)
    return tf.cast(x, tf.float64) if x.dtype == tf.bool or x.dtype.is_integer else x
