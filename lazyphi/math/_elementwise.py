"""The element-wise operations and Fourier transforms as `Op`s, with their dense implementations.

Each `Op` here runs through `dispatch`, so every tensor kind and the tracer take part. The public,
tree-aware functions built on them are in `_ops.py`; this module is the lower layer that the
reduction table (`_reductions.py`) can use without importing the tree functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..backend import Backend, DType, choose_backend, get_precision
from ._shape import Shape
from ._tensor import (
    ELEMENTWISE,
    FFT,
    Dense,
    Op,
    Tensor,
    aligned_native,
    as_tensor,
    auto_cast,
    common_backend,
    dispatch,
    elementwise_op,
    merge_shapes,
)


def float_input(backend: Backend, native):
    """Integer and bool natives become floats of the current precision before a float-valued function."""
    if backend.dtype(native).kind in (int, bool):
        return backend.cast(native, DType(float, get_precision()))
    return native


def _dense_float(fn_name: str) -> Callable:
    """An n-ary element-wise implementation whose inputs are floats (ints and bools are cast first)."""
    def run(ts: Sequence[Dense]) -> Dense:
        out = ts[0]._shape if len(ts) == 1 else merge_shapes(*[t._shape for t in ts])
        backend = common_backend(ts)
        natives = [float_input(backend, aligned_native(t, out, backend)) for t in ts]
        if len(natives) > 1:
            natives = auto_cast(backend, natives)
        return Dense(getattr(backend, fn_name)(*natives), out, backend)
    return run


def float_op(name: str, fn_name: str | None = None) -> Op:
    """An element-wise `Op` computing floats: the backend function `fn_name` on float inputs."""
    return Op(name, ELEMENTWISE, _dense_float(fn_name or name))


def positional_tensor(native) -> Dense:
    """A native array as a tensor whose dims are named by axis position from the last axis (`_0` is the last)."""
    backend = choose_backend(native)
    sizes = tuple(backend.staticshape(native))
    names = tuple(f'_{len(sizes) - 1 - i}' for i in range(len(sizes)))
    return Dense(native, Shape(sizes, names, ('spatial',) * len(sizes), (None,) * len(sizes)), backend)


def apply(op: Op, *values, params: tuple = ()) -> Tensor:
    """`op` on `values` (tensors or numbers), through `dispatch`."""
    return dispatch(op, [as_tensor(v) for v in values], params)


SIGN = elementwise_op('sign')


def _rounding(name: str) -> Op:
    """An element-wise rounding `Op`: bools and integers are whole already and come back unchanged on every
    backend (NumPy rounds a bool to float16, TensorFlow keeps it, torch and JAX refuse it)."""
    def run(ts: Sequence[Dense]) -> Dense:
        t = ts[0]
        if t._backend.dtype(t._native).kind in (bool, int):
            return t
        return Dense(getattr(t._backend, name)(t._native), t._shape, t._backend)
    return Op(name, ELEMENTWISE, run)


ROUND = _rounding('round')
CEIL = _rounding('ceil')
FLOOR = _rounding('floor')
IS_NAN = elementwise_op('isnan')
IS_FINITE = elementwise_op('isfinite')
IS_INF = elementwise_op('isinf')
REAL = elementwise_op('real')
IMAG = elementwise_op('imag')
CONJ = elementwise_op('conj')
MAXIMUM = elementwise_op('maximum')
MINIMUM = elementwise_op('minimum')
CLIP = elementwise_op('clip')
FACTORIAL = elementwise_op('factorial')  # integers stay integers (exact), floats through the gamma function
ARCTAN2 = float_op('arctan2')
SAFE_DIV = float_op('safe_div', 'divide_no_nan')
GAMMA_INC_L = float_op('gamma_inc_l')
GAMMA_INC_U = float_op('gamma_inc_u')
FLOAT_FUNCTIONS = {name: float_op(name) for name in (
    'sqrt', 'exp', 'log', 'log2', 'log10', 'sin', 'cos', 'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh',
    'arcsinh', 'arccosh', 'arctanh', 'sigmoid', 'softplus', 'erf', 'log_gamma')}


def maximum(x, y) -> Tensor:
    """Element-wise maximum of two tensors or numbers, broadcasting by dim name."""
    return apply(MAXIMUM, x, y)


def minimum(x, y) -> Tensor:
    """Element-wise minimum of two tensors or numbers, broadcasting by dim name."""
    return apply(MINIMUM, x, y)


def _dense_where(ts: Sequence[Dense]) -> Dense:
    out = merge_shapes(*[t._shape for t in ts])
    backend = common_backend(ts)
    cond = aligned_native(ts[0], out, backend)
    if backend.dtype(cond).kind is not bool:
        cond = backend.not_equal(cond, 0)
    values = auto_cast(backend, [aligned_native(t, out, backend) for t in ts[1:]])
    return Dense(backend.where(cond, *values), out, backend)


WHERE = Op('where', ELEMENTWISE, _dense_where)


def where(condition, value_true, value_false) -> Tensor:
    """`value_true` where `condition` is true (non-zero), else `value_false`; all three broadcast by dim name."""
    return apply(WHERE, condition, value_true, value_false)


def _dense_cast(ts: Sequence[Dense], dtype: DType) -> Dense:
    t = ts[0]
    return Dense(t._backend.cast(t._native, dtype), t._shape, t._backend)


CAST = Op('cast', ELEMENTWISE, _dense_cast)


def cast_tensor(x: Tensor, dtype: DType) -> Tensor:
    """`x` converted to `dtype`; `x` itself if it has that dtype already."""
    return x if x.dtype == dtype else dispatch(CAST, (x,), (dtype,))


# --- Fourier transforms --------------------------------------------------------------------

def _dense_fft(fn_name: str) -> Callable:
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        native = t._native
        if t._backend.dtype(native).kind is not complex:
            bits = max(get_precision(), t.dtype.bits if t.dtype.kind is float else 0)
            native = t._backend.cast(native, DType(complex, 2 * bits))
        return Dense(getattr(t._backend, fn_name)(native, t._shape.indices(dims)), t._shape, t._backend)
    return run


FFT_OP = Op('fft', FFT, _dense_fft('fft'))
IFFT_OP = Op('ifft', FFT, _dense_fft('ifft'))
