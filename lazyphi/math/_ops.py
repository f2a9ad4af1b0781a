"""Element-wise functions and Fourier transforms: the public, tree-aware functions over the `Op`s of `_elementwise`.

A function of one value accepts a `Tensor`, a number, a native array of any backend, `None`, or a tree
(tuple, list, dict, dataclass) of those, as phiml's do: tensors give tensors, numbers and natives give
natives (computed through a tensor whose dims are named by axis position), trees give trees of results
and `None` gives `None`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..backend import DType, get_precision
from ._autodiff import custom_gradient
from ._dims import spatial
from ._elementwise import (
    ARCTAN2,
    CEIL,
    CLIP,
    CONJ,
    FACTORIAL,
    FFT_OP,
    FLOAT_FUNCTIONS,
    FLOOR,
    GAMMA_INC_L,
    GAMMA_INC_U,
    IFFT_OP,
    IMAG,
    IS_FINITE,
    IS_INF,
    IS_NAN,
    MAXIMUM,
    MINIMUM,
    REAL,
    ROUND,
    SAFE_DIV,
    SIGN,
    WHERE,
    cast_tensor,
    positional_tensor,
)
from ._reductions import REDUCTIONS
from ._tensor import ABS, NUMBER_TYPES, Op, Tensor, as_tensor, dims_in, dispatch
from ._tree import tree_map

_LEAVES = (Tensor, *NUMBER_TYPES, np.ndarray)
INF = float('inf')
NAN = float('nan')


def _positional_native(result: Tensor):
    """The native of a result computed from positional tensors, its axes ordered as the inputs' were."""
    names = sorted(result.shape.names, key=lambda n: -int(n[1:]))
    return result.native(names)


def evaluate(fn: Callable[..., Tensor], *values):
    """`fn` on `values` as tensors; a native result when no value is a Tensor (numbers and natives in, native out)."""
    tensors = []
    for v in values:
        if isinstance(v, Tensor):
            tensors.append(v)
        elif isinstance(v, NUMBER_TYPES):
            tensors.append(as_tensor(v))
        else:
            tensors.append(positional_tensor(v))
    result = fn(*tensors)
    if any(isinstance(v, Tensor) for v in values):
        return result
    return _positional_native(result)


def map_leaves(fn: Callable[[Tensor], Tensor], x):
    """`fn` applied to `x` or to every tensor, number and native array in the tree `x`; `None` stays `None`."""
    if isinstance(x, Tensor):
        return fn(x)
    if x is None:
        return None
    if isinstance(x, (tuple, list, dict)) or _is_dataclass_instance(x) or _lists_attributes(x):
        return tree_map(lambda leaf: evaluate(fn, leaf), x, leaf_types=_LEAVES)
    return evaluate(fn, x)


def _lists_attributes(x) -> bool:
    """Whether `x` names its data in `__value_attrs__` or `__variable_attrs__` (phiml's tree nodes)."""
    return hasattr(x, '__value_attrs__') or hasattr(x, '__variable_attrs__')


def _is_dataclass_instance(x) -> bool:
    return hasattr(type(x), '__dataclass_fields__') and not isinstance(x, type)


def _unary(op: Op, name: str, doc: str) -> Callable:
    def function(x):
        return map_leaves(lambda t: dispatch(op, (t,)), x)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc + '\n\n    `x` is a Tensor, number, native array or a tree of those.'
    return function


abs_ = _unary(ABS, 'abs_', 'Absolute value, element-wise; complex values give their magnitude.')
sign = _unary(SIGN, 'sign', 'Sign (-1, 0 or 1), element-wise.')
round_ = _unary(ROUND, 'round_', 'Round to the nearest integer value, element-wise; the dtype is kept.')
ceil = _unary(CEIL, 'ceil', 'Smallest integer value not below x, element-wise.')
floor = _unary(FLOOR, 'floor', 'Largest integer value not above x, element-wise.')
is_nan = _unary(IS_NAN, 'is_nan', 'Whether each value is NaN.')
is_finite = _unary(IS_FINITE, 'is_finite', 'Whether each value is neither NaN nor infinite.')
is_inf = _unary(IS_INF, 'is_inf', 'Whether each value is +inf or -inf.')
real = _unary(REAL, 'real', 'Real part of each value.')
imag = _unary(IMAG, 'imag', 'Imaginary part of each value.')
conjugate = _unary(CONJ, 'conjugate', 'Complex conjugate of each value.')
factorial = _unary(FACTORIAL, 'factorial', 'x! element-wise: exact for integers (which stay integers), '
                   'Gamma(x + 1) for floats.')


def _float(name: str, doc: str, public_name: str | None = None) -> Callable:
    return _unary(FLOAT_FUNCTIONS[name], public_name or name, doc + ' Integers become floats of the current precision.')


sqrt = _float('sqrt', 'Square root, element-wise.')
exp = _float('exp', 'e**x, element-wise.')
log = _float('log', 'Natural logarithm, element-wise.')
log2 = _float('log2', 'Base-2 logarithm, element-wise.')
log10 = _float('log10', 'Base-10 logarithm, element-wise.')
sin = _float('sin', 'Sine, element-wise.')
cos = _float('cos', 'Cosine, element-wise.')
tan = _float('tan', 'Tangent, element-wise.')
arcsin = _float('arcsin', 'Inverse sine, element-wise.')
arccos = _float('arccos', 'Inverse cosine, element-wise.')
sinh = _float('sinh', 'Hyperbolic sine, element-wise.')
cosh = _float('cosh', 'Hyperbolic cosine, element-wise.')
tanh = _float('tanh', 'Hyperbolic tangent, element-wise.')
arcsinh = _float('arcsinh', 'Inverse hyperbolic sine, element-wise.')
arccosh = _float('arccosh', 'Inverse hyperbolic cosine, element-wise.')
arctanh = _float('arctanh', 'Inverse hyperbolic tangent, element-wise.')
sigmoid = _float('sigmoid', 'Logistic function 1 / (1 + exp(-x)), element-wise.')
soft_plus = _float('softplus', 'log(1 + exp(x)) element-wise, without overflow for large x.', 'soft_plus')
erf = _float('erf', 'The error function, element-wise.')
log_gamma = _float('log_gamma', 'Natural logarithm of the absolute value of the gamma function, element-wise.')


def arctan(x, divide_by=None):
    """Inverse tangent of `x`, or of `x / divide_by` in the quadrant of the point (divide_by, x) when given.

    Args:
        x: Tensor, number, native array or tree of those.
        divide_by: None, or the denominator: `arctan(y, divide_by=x)` is the angle of the point (x, y),
            also where x is 0.
    """
    if divide_by is None:
        return map_leaves(lambda t: dispatch(FLOAT_FUNCTIONS['arctan'], (t,)), x)
    return evaluate(lambda y, d: dispatch(ARCTAN2, (y, d)), x, divide_by)


def arctan2(y, x):
    """Angle of the point (x, y) in radians, element-wise; the same as `arctan(y, divide_by=x)`."""
    return evaluate(lambda a, b: dispatch(ARCTAN2, (a, b)), y, x)


def angle(x):
    """The argument (phase angle) of complex values in radians, element-wise; 0 or pi for real values."""
    return map_leaves(lambda t: dispatch(ARCTAN2, (dispatch(IMAG, (t,)), dispatch(REAL, (t,)))), x)


def abs_square(complex_values):
    """|x|**2 element-wise: real**2 + imag**2 for complex values (a real result), x**2 for real ones."""
    def square(t: Tensor) -> Tensor:
        if t.dtype.kind is complex:
            return dispatch(REAL, (t,)) ** 2 + dispatch(IMAG, (t,)) ** 2
        return t * t
    return map_leaves(square, complex_values)


def radians_to_degrees(rad):
    """Angles in radians converted to degrees, element-wise."""
    return map_leaves(lambda t: t * (180 / math.pi), rad)


def degrees_to_radians(deg):
    """Angles in degrees converted to radians, element-wise."""
    return map_leaves(lambda t: t * (math.pi / 180), deg)


def nan_to_0(x):
    """`x` with NaN values replaced by 0."""
    return map_leaves(lambda t: dispatch(WHERE, (dispatch(IS_NAN, (t,)), as_tensor(0), t)), x)


def incomplete_gamma(a, x, upper: bool = False, regularized: bool = True):
    """The incomplete gamma function of `a` and `x`, element-wise.

    Args:
        a: the order (positive).
        x: the integration bound (non-negative).
        upper: the upper incomplete gamma function Gamma(a, x) instead of the lower gamma(a, x).
        regularized: divide by Gamma(a), which makes the lower and upper functions sum to 1.
    """
    def compute(a_: Tensor, x_: Tensor) -> Tensor:
        result = dispatch(GAMMA_INC_U if upper else GAMMA_INC_L, (a_, x_))
        if not regularized:
            result = result * dispatch(FLOAT_FUNCTIONS['exp'], (dispatch(FLOAT_FUNCTIONS['log_gamma'], (a_,)),))
        return result
    return evaluate(compute, a, x)


def safe_div(x, y):
    """`x / y` element-wise, 0 where `y` is 0 (also for 0 / 0); NaN inputs still give NaN."""
    return evaluate(lambda a, b: dispatch(SAFE_DIV, (a, b)), x, y)


def maximum(x, y, allow_none: bool = False):
    """Element-wise maximum, broadcasting by dim name; with `allow_none`, a `None` argument yields the other."""
    if allow_none and (x is None or y is None):
        return y if x is None else x
    return evaluate(lambda a, b: dispatch(MAXIMUM, (a, b)), x, y)


def minimum(x, y, allow_none: bool = False):
    """Element-wise minimum, broadcasting by dim name; with `allow_none`, a `None` argument yields the other."""
    if allow_none and (x is None or y is None):
        return y if x is None else x
    return evaluate(lambda a, b: dispatch(MINIMUM, (a, b)), x, y)


def clip(x, lower_limit=0, upper_limit=1):
    """`x` limited to the range [lower_limit, upper_limit], element-wise."""
    return evaluate(lambda a, lo, hi: dispatch(CLIP, (a, lo, hi)), x, lower_limit, upper_limit)


def where(condition, value_true=None, value_false=None):
    """`value_true` where `condition` is true (non-zero), else `value_false`; all three broadcast by dim name.

    A Python bool `condition` picks one of the values. Dicts and dataclass instances of one structure are
    combined field by field. Both values are required; `nonzero` gives the positions of true values.
    """
    if isinstance(condition, bool):
        return value_true if condition else value_false
    if value_true is None or value_false is None:
        raise ValueError('where() needs both value_true and value_false; for the positions of true values use '
                         'nonzero(condition)')
    if isinstance(value_true, (dict, tuple, list)) or _is_dataclass_instance(value_true):
        falses = []
        tree_map(lambda t: falses.append(t) or t, value_false, leaf_types=_LEAVES)
        remaining = iter(falses)
        return tree_map(lambda t: where(condition, t, next(remaining)), value_true, leaf_types=_LEAVES)
    return evaluate(lambda c, t, f: dispatch(WHERE, (c, t, f)), condition, value_true, value_false)


def cast(x, dtype):
    """`x` (a tensor, number, native or tree) converted to `dtype`: a DType, a Python type such as `float`,
    a `(kind, bits)` tuple, a NumPy dtype or a name like 'int64'."""
    target = DType.as_dtype(dtype)
    return map_leaves(lambda t: cast_tensor(t, target), x)


def to_float(x):
    """`x` as floats of the current precision (complex values as complex numbers of it)."""
    def as_float(t: Tensor) -> Tensor:
        if t.dtype.kind is complex:
            return cast_tensor(t, DType(complex, max(64, 2 * get_precision())))
        return cast_tensor(t, DType(float, get_precision()))
    return map_leaves(as_float, x)


def to_int32(x):
    """`x` as 32-bit integers (floats are truncated)."""
    return map_leaves(lambda t: cast_tensor(t, DType(int, 32)), x)


def to_int64(x):
    """`x` as 64-bit integers (floats are truncated)."""
    return map_leaves(lambda t: cast_tensor(t, DType(int, 64)), x)


def bool_to_int(x, bits: int = 32):
    """`x` with its booleans as integers of `bits` bits; tensors, numbers and natives of other dtypes are kept.

    `x` is a Tensor, bool, number, native array or a tree of those.
    """
    target = DType(int, bits)

    def convert(leaf):
        if isinstance(leaf, (bool, np.bool_)):
            return int(leaf)
        if isinstance(leaf, NUMBER_TYPES):
            return leaf
        return map_leaves(lambda t: cast_tensor(t, target) if t.dtype.kind is bool else t, leaf)
    if isinstance(x, (tuple, list, dict)) or _is_dataclass_instance(x) or _lists_attributes(x):
        return tree_map(convert, x, leaf_types=_LEAVES)
    return convert(x)


def to_complex(x):
    """`x` as complex numbers of the current precision."""
    return map_leaves(lambda t: cast_tensor(t, DType(complex, max(64, 2 * get_precision()))), x)


def identity(x):
    """`x` itself: a function to pass where one is expected."""
    return x


# --- Fourier transforms --------------------------------------------------------------------


def fft(x, dims=spatial) -> Tensor:
    """Discrete Fourier transform along `dims` (default: the spatial dims); the result is complex."""
    x = as_tensor(x)
    return dispatch(FFT_OP, (x,), (dims_in(x.shape, dims),))


def ifft(k, dims=spatial) -> Tensor:
    """Inverse discrete Fourier transform along `dims` (default: the spatial dims)."""
    k = as_tensor(k)
    return dispatch(IFFT_OP, (k,), (dims_in(k.shape, dims),))


def _safe_product_gradient(inputs: dict, product, d_product) -> dict:
    """The gradients of x * y, with non-finite contributions replaced by 0."""
    x, y = inputs['x'], inputs['y']
    result = {}
    for name, own, other in (('x', x, y), ('y', y, x)):
        contribution = other * d_product
        contribution = dispatch(WHERE, (dispatch(IS_FINITE, (contribution,)), contribution, as_tensor(0)))
        extra = tuple(n for n in contribution.shape.names if n not in own.shape.names)
        result[name] = REDUCTIONS['sum'](contribution, extra) if extra else contribution
    return result


def _product(x, y):
    return x * y


_SAFE_PRODUCT = custom_gradient(_product, _safe_product_gradient)


def safe_mul(x, y):
    """`x * y`, whose gradient leaves out non-finite contributions: where `y` (or `x`) is NaN or infinite,
    the gradient with respect to `x` (or `y`) is 0 instead of NaN."""
    return _SAFE_PRODUCT(as_tensor(x), as_tensor(y))
