"""Element-wise functions, reductions and Fourier transforms of tensors, all through `dispatch`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..backend import Backend, DType, get_precision
from ._dims import spatial
from ._tensor import (
    ABS,
    ELEMENTWISE,
    FFT,
    Dense,
    Op,
    Tensor,
    aligned_native,
    as_tensor,
    auto_cast,
    common_backend,
    dims_in,
    dispatch,
    elementwise_op,
    merge_shapes,
)


def _float_input(backend: Backend, native):
    """Integer and bool natives become floats of the current precision before a float-valued function."""
    if backend.dtype(native).kind in (int, bool):
        return backend.cast(native, DType(float, get_precision()))
    return native


def _unary_float(fn_name: str) -> Op:
    return Op(fn_name, ELEMENTWISE, lambda ts: Dense(getattr(ts[0]._backend, fn_name)(
        _float_input(ts[0]._backend, ts[0]._native)), ts[0]._shape, ts[0]._backend))


def _apply(op: Op, *values):
    return dispatch(op, [as_tensor(v) for v in values])


def _unary_function(op: Op, doc: str) -> Callable:
    def function(x):
        return dispatch(op, (as_tensor(x),))
    function.__name__ = op.name
    function.__doc__ = doc
    return function


_SIGN = elementwise_op('sign')
_ROUND = elementwise_op('round')
_CEIL = elementwise_op('ceil')
_FLOOR = elementwise_op('floor')
_IS_NAN = elementwise_op('isnan')
_IS_FINITE = elementwise_op('isfinite')
_IS_INF = elementwise_op('isinf')
_REAL = elementwise_op('real')
_IMAG = elementwise_op('imag')
_CONJ = elementwise_op('conj')
_MAXIMUM = elementwise_op('maximum')
_MINIMUM = elementwise_op('minimum')
_ARCTAN2 = Op('arctan2', ELEMENTWISE, lambda ts: _binary_float(ts, 'arctan2'))
_CLIP = elementwise_op('clip')

abs_ = _unary_function(ABS, 'Absolute value, element-wise.')
abs_.__name__ = 'abs_'
sign = _unary_function(_SIGN, 'Sign (-1, 0 or 1), element-wise.')
round_ = _unary_function(_ROUND, 'Round to the nearest integer value, element-wise; the dtype is kept.')
round_.__name__ = 'round_'
ceil = _unary_function(_CEIL, 'Smallest integer value not below x, element-wise.')
floor = _unary_function(_FLOOR, 'Largest integer value not above x, element-wise.')
is_nan = _unary_function(_IS_NAN, 'Whether each value is NaN.')
is_finite = _unary_function(_IS_FINITE, 'Whether each value is neither NaN nor infinite.')
is_inf = _unary_function(_IS_INF, 'Whether each value is +inf or -inf.')
real = _unary_function(_REAL, 'Real part of each value.')
imag = _unary_function(_IMAG, 'Imaginary part of each value.')
conjugate = _unary_function(_CONJ, 'Complex conjugate of each value.')


def _float_function(name: str, doc: str) -> Callable:
    return _unary_function(_unary_float(name), doc)


sqrt = _float_function('sqrt', 'Square root, element-wise; integers become floats of the current precision.')
exp = _float_function('exp', 'e**x, element-wise.')
log = _float_function('log', 'Natural logarithm, element-wise.')
log2 = _float_function('log2', 'Base-2 logarithm, element-wise.')
log10 = _float_function('log10', 'Base-10 logarithm, element-wise.')
sin = _float_function('sin', 'Sine, element-wise.')
cos = _float_function('cos', 'Cosine, element-wise.')
tan = _float_function('tan', 'Tangent, element-wise.')
arcsin = _float_function('arcsin', 'Inverse sine, element-wise.')
arccos = _float_function('arccos', 'Inverse cosine, element-wise.')
arctan = _float_function('arctan', 'Inverse tangent, element-wise.')
sinh = _float_function('sinh', 'Hyperbolic sine, element-wise.')
cosh = _float_function('cosh', 'Hyperbolic cosine, element-wise.')
tanh = _float_function('tanh', 'Hyperbolic tangent, element-wise.')
arcsinh = _float_function('arcsinh', 'Inverse hyperbolic sine, element-wise.')
arccosh = _float_function('arccosh', 'Inverse hyperbolic cosine, element-wise.')
arctanh = _float_function('arctanh', 'Inverse hyperbolic tangent, element-wise.')
sigmoid = _float_function('sigmoid', 'Logistic function 1 / (1 + exp(-x)), element-wise.')


def _binary_float(ts: Sequence[Dense], fn_name: str) -> Dense:
    out = merge_shapes(*[t._shape for t in ts])
    backend = common_backend(ts)
    natives = [_float_input(backend, aligned_native(t, out, backend)) for t in ts]
    return Dense(getattr(backend, fn_name)(*natives), out, backend)


def arctan2(y, x) -> Tensor:
    """Angle of the point (x, y) in radians, element-wise."""
    return _apply(_ARCTAN2, y, x)


def maximum(x, y) -> Tensor:
    """Element-wise maximum, broadcasting by dim name."""
    return _apply(_MAXIMUM, x, y)


def minimum(x, y) -> Tensor:
    """Element-wise minimum, broadcasting by dim name."""
    return _apply(_MINIMUM, x, y)


def clip(x, lower_limit, upper_limit) -> Tensor:
    """Limit the values of `x` to the range [lower_limit, upper_limit]."""
    return _apply(_CLIP, x, lower_limit, upper_limit)


def _dense_where(ts: Sequence[Dense]) -> Dense:
    out = merge_shapes(*[t._shape for t in ts])
    backend = common_backend(ts)
    cond = aligned_native(ts[0], out, backend)
    values = auto_cast(backend, [aligned_native(t, out, backend) for t in ts[1:]])
    return Dense(backend.where(cond, *values), out, backend)


_WHERE = Op('where', ELEMENTWISE, _dense_where)


def where(condition, true_value, false_value) -> Tensor:
    """`true_value` where `condition` holds, else `false_value`; all three broadcast by dim name."""
    return _apply(_WHERE, condition, true_value, false_value)


def _dense_cast(ts: Sequence[Dense], dtype: DType) -> Dense:
    t = ts[0]
    return Dense(t._backend.cast(t._native, dtype), t._shape, t._backend)


_CAST = Op('cast', ELEMENTWISE, _dense_cast)


def cast(x, dtype) -> Tensor:
    """`x` converted to `dtype` (a DType, a Python type such as `float`, a NumPy dtype or a name like 'int64')."""
    target = DType.as_dtype(dtype)
    x = as_tensor(x)
    if x.dtype == target:
        return x
    return dispatch(_CAST, (x,), (target,))


def to_float(x) -> Tensor:
    """`x` as floats of the current precision (complex values keep their type)."""
    x = as_tensor(x)
    return x if x.dtype.kind in (float, complex) else cast(x, DType(float, get_precision()))


def to_int32(x) -> Tensor:
    """`x` as 32-bit integers."""
    return cast(x, DType(int, 32))


def to_int64(x) -> Tensor:
    """`x` as 64-bit integers."""
    return cast(x, DType(int, 64))


def to_complex(x) -> Tensor:
    """`x` as complex numbers of the current precision."""
    return cast(x, DType(complex, 2 * get_precision()))


# --- Fourier transforms --------------------------------------------------------------------

def _dense_fft(fn_name: str) -> Callable:
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        native = t._native
        if t._backend.dtype(native).kind is not complex:
            native = t._backend.cast(native, DType(complex, 2 * max(get_precision(), t.dtype.bits if
                                                                    t.dtype.kind is float else 0)))
        return Dense(getattr(t._backend, fn_name)(native, t._shape.indices(dims)), t._shape, t._backend)
    return run


_FFT = Op('fft', FFT, _dense_fft('fft'))
_IFFT = Op('ifft', FFT, _dense_fft('ifft'))


def fft(x, dims=spatial) -> Tensor:
    """Discrete Fourier transform along `dims` (default: the spatial dims); the result is complex."""
    x = as_tensor(x)
    return dispatch(_FFT, (x,), (dims_in(x.shape, dims),))


def ifft(k, dims=spatial) -> Tensor:
    """Inverse discrete Fourier transform along `dims` (default: the spatial dims)."""
    k = as_tensor(k)
    return dispatch(_IFFT, (k,), (dims_in(k.shape, dims),))
