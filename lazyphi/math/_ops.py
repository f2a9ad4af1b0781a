"""Element-wise functions, reductions and Fourier transforms of tensors, all through `dispatch`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..backend import Backend, DType, get_precision
from ._kinds import SUM_LIKE
from ._shape import non_batch, spatial
from ._tensor import (
    ABS,
    ELEMENTWISE,
    FFT,
    REDUCE,
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


# --- reductions --------------------------------------------------------------------------

def _dense_reduce(fn_name: str, to_float: bool = False) -> Callable:
    """A reduction on Dense tensors; `to_float`: int and bool values become floats of the current precision first."""
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        if not dims:
            return t
        native = _as_float(t) if to_float else t._native
        native = getattr(t._backend, fn_name)(native, t._shape.indices(dims))
        return Dense(native, t._shape.without(dims), t._backend)
    return run


def _as_float(t: Dense):
    """The native of `t`, cast to the current precision's float type if it holds ints or bools."""
    if t._backend.dtype(t._native).kind in (int, bool):
        return t._backend.cast(t._native, t._backend.float_type)
    return t._native


def _reduce_op(name: str, dense: Callable | None = None) -> Op:
    return Op(name, REDUCE, dense or _dense_reduce(name))


def _finite(fn: Callable, fill) -> Callable:
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        finite = t._backend.isfinite(t._native)
        masked = Dense(t._backend.where(finite, t._native, fill), t._shape, t._backend)
        return fn([masked], dims)
    return run


def _dense_finite_mean(ts: Sequence[Dense], dims: tuple) -> Dense:
    t = ts[0]
    b = t._backend
    native = _as_float(t)
    finite = b.isfinite(native)
    axes = t._shape.indices(dims)
    total = b.sum(b.where(finite, native, 0), axes)
    count = b.sum(b.cast(finite, b.dtype(native)), axes)
    return Dense(total / count, t._shape.without(dims), b)


_SUM = _reduce_op('sum')
_PROD = _reduce_op('prod')
_MEAN = _reduce_op('mean', _dense_reduce('mean', to_float=True))
_STD = _reduce_op('std', _dense_reduce('std', to_float=True))
_MAX = _reduce_op('max')
_MIN = _reduce_op('min')
_ANY = _reduce_op('any')
_ALL = _reduce_op('all')
_FINITE_SUM = _reduce_op('finite_sum', _finite(_dense_reduce('sum'), 0))
_FINITE_MAX = _reduce_op('finite_max', _finite(_dense_reduce('max'), -np.inf))
_FINITE_MIN = _reduce_op('finite_min', _finite(_dense_reduce('min'), np.inf))
_FINITE_MEAN = _reduce_op('finite_mean', _dense_finite_mean)
SUM_LIKE.update(sum=_SUM, finite_sum=_FINITE_SUM)


def _reduction(op: Op, doc: str) -> Callable:
    def function(value, dim=non_batch) -> Tensor:
        value = as_tensor(value)
        dims = dims_in(value.shape, dim)
        if not dims:
            return value
        return dispatch(op, (value,), (dims,))
    function.__name__ = op.name
    function.__doc__ = doc + '\n\n    `dim` is any dim filter; by default every non-batch dim is reduced.'
    return function


sum_ = _reduction(_SUM, 'Sum of the values along `dim`.')
sum_.__name__ = 'sum_'
prod = _reduction(_PROD, 'Product of the values along `dim`.')
mean = _reduction(_MEAN, 'Mean of the values along `dim`.')
std = _reduction(_STD, 'Standard deviation (population) of the values along `dim`.')
max_ = _reduction(_MAX, 'Maximum of the values along `dim`.')
max_.__name__ = 'max_'
min_ = _reduction(_MIN, 'Minimum of the values along `dim`.')
min_.__name__ = 'min_'
any_ = _reduction(_ANY, 'Whether any value along `dim` is true.')
any_.__name__ = 'any_'
all_ = _reduction(_ALL, 'Whether all values along `dim` are true.')
all_.__name__ = 'all_'
finite_sum = _reduction(_FINITE_SUM, 'Sum along `dim`, ignoring NaN and infinite values.')
finite_mean = _reduction(_FINITE_MEAN, 'Mean along `dim` over the finite values only.')
finite_max = _reduction(_FINITE_MAX, 'Maximum along `dim` over the finite values only (-inf if none).')
finite_min = _reduction(_FINITE_MIN, 'Minimum along `dim` over the finite values only (+inf if none).')


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
