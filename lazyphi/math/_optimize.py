"""Solving linear systems `f(x) = y`: `solve_linear`, configured by a `Solve`, reported by a `SolveInfo`.

The iterative methods (conjugate gradient, BiCGStab) are written with lazyphi operations on named tensors;
their state is handed to the backend's `while_loop` as natives laid out in fixed shapes, so NumPy, PyTorch,
JAX and TensorFlow all run them (JAX and TensorFlow inside their compiled loops where the values are traced).
Each batch entry stops on its own: an entry that converged or diverged keeps its state while the others go on.
The direct method lays the matrix out as one per batch entry (`reshaped_native`) and hands it to the backend's
`matrix_solve_least_squares`. Gradients flow through a solve by implicit differentiation: the backward pass
solves the transposed system (for a function, the same one, assumed symmetric) with `Solve.gradient_solve`.
"""

from __future__ import annotations

import copy
import time
import uuid
import warnings
from collections.abc import Callable

import numpy as np

from ..backend import DType, convert, default_backend, get_precision
from ._autodiff import _flatten, compiling, custom_gradient, gradient
from ._conversion import reshaped_native, reshaped_numpy
from ._convert import to_backend
from ._creation import reshaped_tensor, wrap, zeros_like
from ._dims import batch, channel, merge_shapes, non_batch
from ._elementwise import where
from ._layout import layout
from ._linalg import matrix_from_function
from ._magic_ops import concat, expand, pack_dims, rename_dims, unpack_dim
from ._natives import common_backend
from ._ops import cast, exp, is_finite, maximum, safe_div, sqrt, to_float, to_int32
from ._reduce import all_, any_, max_, sum_
from ._shape import EMPTY_SHAPE, Shape
from ._tensor import Dense, Tensor, as_tensor
from ._vectors import l2_loss

_ITERATIVE = ('auto', 'CG', 'CG-adaptive', 'biCG-stab', 'biCG-stab(1)')
_DIRECT = ('direct', 'scipy-direct')
_DIVERGENCE_GROWTH = 1e5  # a squared residual this many times the initial one, after 8 iterations, counts as diverged
_SWAP = '_solve_transposed_'  # prefix of the temporary names while the rows and columns of a matrix are swapped


class Solve:
    """How to solve a system of equations `f(x) = y`: the method, the tolerances, the initial guess, the
    iteration limit and which convergence errors to return quietly instead of raising.

    Args:
        method: 'auto' (conjugate gradient), 'CG', 'CG-adaptive', 'biCG-stab' (or 'biCG-stab(1)'), or
            'direct' / 'scipy-direct' (a dense matrix solve on the backend). None means 'auto'.
        rel_tol: the tolerance relative to the norm of `y` (for 'CG', of the initial residual `y - f(x0)`);
            default 1e-5 in single precision, 1e-12 in double.
        abs_tol: the absolute tolerance of the residual's norm; same defaults. A batch entry has converged
            when `|residual| <= max(rel_tol * |y|, abs_tol)`.
        x0: the initial guess, shaped like the solution. `solve_linear` requires one.
        max_iterations: the most iterations per batch entry (a number or a tensor with batch dims).
        suppress: `NotConverged` and/or `Diverged`: return the last estimate instead of raising them.
        preprocess_y: a function applied as `preprocess_y(y, *preprocess_y_args)` to the right-hand side first.
        preprocess_y_args: its further arguments.
        preconditioner: only None: preconditioners are not offered (a ValueError names others).
        rank_deficiency: None or 0: the system is taken to have full rank (a ValueError names others).
        gradient_solve: the `Solve` for the backward pass; default: a copy of this one without `x0`.
    """

    def __init__(self, method: str | None = 'auto', rel_tol=None, abs_tol=None, x0=None, max_iterations=1000,
                 suppress: tuple | list = (), preprocess_y: Callable | None = None, preprocess_y_args: tuple = (),
                 preconditioner: str | None = None, rank_deficiency: int | None = None,
                 gradient_solve: Solve | None = None):
        method = method or 'auto'
        if not isinstance(method, str):
            raise TypeError(f'Solve(): method must be a str such as \'CG\', got {method!r}')
        if preconditioner is not None:
            raise ValueError(f'Solve(): preconditioner={preconditioner!r} is not offered by lazyphi; pass None')
        if rank_deficiency not in (None, 0):
            raise ValueError(f'Solve(): rank_deficiency={rank_deficiency!r} is not offered: lazyphi solves systems '
                             f'of full rank only; pass None or 0')
        unknown = [e for e in suppress if not (isinstance(e, type) and issubclass(e, ConvergenceException))]
        if unknown:
            raise TypeError(f'Solve(): suppress takes the exception types NotConverged and Diverged, got {unknown}')
        if gradient_solve is not None and not isinstance(gradient_solve, Solve):
            raise TypeError(f'Solve(): gradient_solve must be a Solve or None, got {gradient_solve!r}')
        self.method: str = method
        self.rel_tol: Tensor | None = None if rel_tol is None else to_float(as_tensor(rel_tol))
        self.abs_tol: Tensor | None = None if abs_tol is None else to_float(as_tensor(abs_tol))
        self.x0 = x0
        self.max_iterations: Tensor = to_int32(as_tensor(max_iterations))
        self.suppress: tuple = tuple(suppress)
        self.preprocess_y = preprocess_y
        self.preprocess_y_args: tuple = tuple(preprocess_y_args)
        self.preconditioner = preconditioner
        self.rank_deficiency = rank_deficiency
        self._gradient_solve = gradient_solve
        self.id = str(uuid.uuid4())  # copies keep it: it names the solve, not the object

    @property
    def gradient_solve(self) -> Solve:
        """The `Solve` of the backward pass: the one given, or a copy of this one without `x0`."""
        if self._gradient_solve is None:
            self._gradient_solve = _copy(self, x0=None)
        return self._gradient_solve

    def with_defaults(self, mode: str) -> Solve:
        """A copy with the default tolerances filled in; `mode` is 'solve' or 'optimization' (`rel_tol` 0)."""
        if mode not in ('solve', 'optimization'):
            raise ValueError(f"Solve.with_defaults(): mode must be 'solve' or 'optimization', got {mode!r}")
        default = wrap(_default_tolerance())
        return _copy(self, rel_tol=self.rel_tol if self.rel_tol is not None else
                     (default if mode == 'solve' else wrap(0.)),
                     abs_tol=self.abs_tol if self.abs_tol is not None else default)

    def with_preprocessing(self, preprocess_y: Callable, *args) -> Solve:
        """A copy that applies `preprocess_y(y, *args)` to the right-hand side, as do its gradient solves."""
        if self.preprocess_y is not None:
            raise ValueError(f'Solve.with_preprocessing(): {self} has a preprocessing function already')
        gradient = None if self._gradient_solve is None else self._gradient_solve.with_preprocessing(preprocess_y,
                                                                                                     *args)
        return _copy(self, preprocess_y=preprocess_y, preprocess_y_args=args, _gradient_solve=gradient)

    def __repr__(self) -> str:
        return f'{self.method} with tolerance {self.rel_tol} (rel), {self.abs_tol} (abs), ' \
               f'max_iterations={self.max_iterations}' + (' including preprocessing' if self.preprocess_y else '')

    def __eq__(self, other) -> bool:
        if not isinstance(other, Solve):
            return False
        return self.method == other.method and _same(self.rel_tol, other.rel_tol) \
            and _same(self.abs_tol, other.abs_tol) and _same(self.max_iterations, other.max_iterations) \
            and self.preprocess_y is other.preprocess_y and self.suppress == other.suppress \
            and _same(self.x0, other.x0)

    __hash__ = None  # equal solves compare their values; they are not dict keys

    def __variable_attrs__(self) -> tuple:
        return 'x0', 'rel_tol', 'abs_tol', 'max_iterations'

    def __value_attrs__(self) -> tuple:
        return self.__variable_attrs__()


def _copy(solve: Solve, **changes) -> Solve:
    result = copy.copy(solve)
    for name, value in changes.items():
        setattr(result, name, value)
    return result


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        a, b = as_tensor(a), as_tensor(b)
        return a.shape == b.shape and bool(all_(a == b, a.shape))
    return a == b


def _default_tolerance() -> float:
    return {64: 1e-12, 32: 1e-5}.get(get_precision(), 1e-2)


class SolveInfo:
    """What a solve found: its estimate `x`, the `residual` `y - f(x)`, and per batch entry the `iterations`, the
    `function_evaluations`, whether it `converged` or `diverged`, and a message `msg` (a layout of str along
    the batch dims). `method` names the algorithm; `solve_time` is the seconds the solve took; `solve` is the
    `Solve` it was given (with the default tolerances filled in).
    """

    def __init__(self, solve: Solve, x, residual, iterations: Tensor | None, function_evaluations: Tensor | None,
                 converged: Tensor, diverged: Tensor, method: str, msg, solve_time: float):
        self.solve = solve
        self.x = x
        self.residual = residual
        self.iterations = iterations
        self.function_evaluations = function_evaluations
        self.converged = converged
        self.diverged = diverged
        self.method = method
        self.msg = msg
        self.solve_time = solve_time

    def __repr__(self) -> str:
        return f'{self.method}: {int(sum_(self.converged, self.converged.shape))} converged, ' \
               f'{int(sum_(self.diverged, self.diverged.shape))} diverged'

    def convergence_check(self, only_warn: bool) -> None:
        """Raise (or with `only_warn` warn) `Diverged` or `NotConverged` unless the solve suppresses it.

        Nothing happens while a compiler traces the solve: there are no values to check yet (as in phiml).
        """
        if not (self.converged.available and self.diverged.available):
            return
        if bool(any_(self.diverged, self.diverged.shape)) and Diverged not in self.solve.suppress:
            if only_warn:
                warnings.warn(_text(self.msg), ConvergenceWarning, stacklevel=2)
            else:
                raise Diverged(self)
        if not bool(all_(self.converged, self.converged.shape)) and NotConverged not in self.solve.suppress:
            if only_warn:
                warnings.warn(_text(self.msg), ConvergenceWarning, stacklevel=2)
            else:
                raise NotConverged(self)


def _text(msg) -> str:
    """The messages of a layout as one str, one line per batch entry."""
    values = msg.native() if isinstance(msg, Tensor) else msg
    return '\n'.join(np.asarray(values, dtype=object).ravel().tolist()) if not isinstance(values, str) else values


class ConvergenceException(RuntimeError):
    """A solve did not reach its tolerance; `result` is its `SolveInfo`."""

    def __init__(self, result: SolveInfo):
        RuntimeError.__init__(self, _text(result.msg))
        self.result: SolveInfo = result


class ConvergenceWarning(RuntimeWarning):
    """Issued instead of a `ConvergenceException` where a solve only warns."""


class NotConverged(ConvergenceException):
    """The solve reached its iteration limit before its tolerance (for some batch entry)."""


class Diverged(ConvergenceException):
    """The solve stopped early: its residual became non-finite or grew far beyond the initial one."""


def solve_linear(f, y, solve: Solve, *f_args, grad_for_f=False, f_kwargs: dict | None = None, **f_kwargs_):
    """The solution `x` of the linear system `f(x) = y`.

    Args:
        f: a function linear in its first argument (a `Tensor`; `jit_compile_linear` functions included), called
            as `f(x, *f_args, **f_kwargs)`, or a matrix: a tensor whose dual dims `~d` are the dims `d` of `x`
            and whose other non-batch dims are those of `y`, applied as `f @ x`.
        y: the right-hand side, a `Tensor`; its batch dims (and those of `solve.x0` and of a matrix) list
            independent systems, each converging on its own.
        solve: the method, tolerances and initial guess `x0` (required).
        *f_args: further positional arguments of `f` (one tuple is spread out), not solved for.
        grad_for_f: also compute the gradient with respect to the matrix `f` (a matrix only).
        f_kwargs: keyword arguments of `f`, not solved for; `**f_kwargs_` adds to them.

    Returns:
        `x`, shaped like `solve.x0` with the batch dims of the systems.

    Raises:
        NotConverged: a batch entry did not reach the tolerance within `solve.max_iterations`.
        Diverged: the residual of a batch entry became non-finite or grew too large.
        ValueError: no `x0`, a method or a feature lazyphi does not offer, or a matrix without dual dims.
    """
    if not isinstance(solve, Solve):
        raise TypeError(f'solve_linear(): solve must be a Solve, got {solve!r}')
    if solve.x0 is None:
        raise ValueError('solve_linear(): the Solve has no initial guess; pass Solve(..., x0=initial_guess)')
    if solve.method not in _ITERATIVE + _DIRECT:
        raise ValueError(f'solve_linear(): method {solve.method!r} is not offered; lazyphi offers '
                         f'{", ".join(_ITERATIVE + _DIRECT)}')
    if not isinstance(y, Tensor) or not isinstance(solve.x0, Tensor):
        raise TypeError(f'solve_linear(): y and Solve.x0 must be Tensors (trees and natives are not offered), got '
                        f'{type(y).__name__} and {type(solve.x0).__name__}')
    f_kwargs = {**(f_kwargs or {}), **f_kwargs_}
    f_args = f_args[0] if len(f_args) == 1 and isinstance(f_args[0], tuple) else f_args
    if isinstance(f, Tensor):
        if not f.shape.dual:
            raise ValueError(f'solve_linear(): a matrix needs dual dims naming its columns (~x for the dim x of the '
                             f'solution), got {f.shape}')
        matrix = f
    elif callable(f):
        if grad_for_f:
            raise ValueError('solve_linear(): grad_for_f=True needs a matrix; pass math.matrix_from_function(f, '
                             'x0)[0] instead of the function')
        matrix = None
    else:
        raise TypeError(f'solve_linear(): f must be a linear function or a matrix Tensor, got {type(f).__name__}')
    if (y.dtype.kind is complex) or (solve.x0.dtype.kind is complex):
        raise ValueError('solve_linear(): complex systems are not offered; solve real and imaginary parts apart')
    if matrix is None and solve.method in _DIRECT:  # a dense matrix (phiml builds a sparse one)
        matrix, bias = matrix_from_function(_operator(None, f_args, f, f_kwargs), solve.x0)
        y = y - bias
    # everything a compiler or autodiff may trace is an argument, not a closure (JAX rejects leaked tracers)
    solve_function = custom_gradient(_forward, _backward, auxiliary_args='solve,function,f_kwargs,grad_for_f')
    return solve_function(y, matrix, f_args, solve, None if matrix is not None else f, f_kwargs, grad_for_f)


def _operator(matrix: Tensor | None, f_args: tuple, function: Callable | None, f_kwargs: dict) -> Callable:
    if matrix is not None:
        return lambda x: matrix @ x
    return lambda x: function(x, *f_args, **f_kwargs)


def _forward(y: Tensor, matrix: Tensor | None, f_args: tuple, solve: Solve, function: Callable | None,
             f_kwargs: dict, grad_for_f: bool) -> Tensor:
    solve = solve.with_defaults('solve')
    if solve.preprocess_y is not None:
        y = solve.preprocess_y(y, *solve.preprocess_y_args)
    operator = _operator(matrix, f_args, function, f_kwargs)
    start = time.perf_counter()
    if solve.method in _DIRECT:
        result = _direct(matrix, y, solve)
    else:
        with np.errstate(all='ignore'):  # a diverging solve meets non-finite values; the result reports them
            result = _iterative(operator, y, solve)
    result.solve_time = time.perf_counter() - start
    result.convergence_check(False)
    return result.x


def _backward(inputs: dict, x: Tensor, dx: Tensor) -> dict:
    """Implicit differentiation: `dy` solves the transposed system for `dx`; the matrix gets `-dy ⊗ x`."""
    solve, matrix = inputs['solve'], inputs['matrix']
    gradient_solve = solve.gradient_solve
    y = inputs['y']
    if gradient_solve.x0 is None:
        gradient_solve = _copy(gradient_solve, x0=zeros_like(y))
    if matrix is None:  # a function: taken as symmetric, as phiml does
        dy = solve_linear(inputs['function'], dx, gradient_solve, *inputs['f_args'], f_kwargs=inputs['f_kwargs'])
    else:
        dy = solve_linear(_transposed(matrix, x.shape, y.shape), dx, gradient_solve)
    result = {'y': dy}
    if inputs['grad_for_f']:
        columns = non_batch(x)
        outer = -rename_dims(x, columns, columns.as_dual()) * dy
        result['matrix'] = sum_(outer, outer.shape.without(matrix.shape.names))
    return result


def _transposed(matrix: Tensor, x_shape: Shape, y_shape: Shape) -> Tensor:
    """`matrix` with rows and columns swapped: `~x, y` becomes `~y, x` (through temporary names, as `x` and
    `y` often share theirs)."""
    columns, rows = x_shape.non_batch, y_shape.non_batch
    temporary = [f'{_SWAP}{n}' for n in rows.names]
    swapped = rename_dims(matrix, rows.names, temporary)
    swapped = rename_dims(swapped, columns.as_dual(), columns)
    return rename_dims(swapped, temporary, rows.as_dual())


# --- the iterative methods ------------------------------------------------------------------


def _dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product over the non-batch dims: one value per batch entry."""
    return sum_(a * b, non_batch)


def _iterative(operator: Callable, y: Tensor, solve: Solve) -> SolveInfo:
    y, x0 = to_float(y), to_float(solve.x0)
    r0 = y - operator(x0)
    batches = merge_shapes(batch(y), batch(x0), batch(r0), batch(solve.max_iterations), batch(solve.rel_tol),
                           batch(solve.abs_tol))
    x_shape, r_shape = batches & non_batch(x0), batches & non_batch(r0)
    rsq0 = _dot(r0, r0)
    # CG is relative to the initial residual, the others to y, as in phiml
    reference = rsq0 if solve.method == 'CG' else _dot(y, y)
    tolerance = maximum(solve.rel_tol ** 2 * reference, solve.abs_tol ** 2)

    def check(iterations: Tensor, rsq: Tensor) -> tuple:
        converged = rsq <= tolerance
        diverged = ~is_finite(rsq) | ((safe_div(rsq, rsq0) > _DIVERGENCE_GROWTH) & (iterations >= 8))
        proceed = ~converged & ~diverged & (iterations < solve.max_iterations)
        return proceed, converged, diverged
    zero = expand(to_int32(wrap(0)), batches)
    proceed, converged, diverged = check(zero, rsq0)
    common = {'continue': proceed, 'converged': converged, 'diverged': diverged, 'iterations': zero,
              'evaluations': zero + 1}
    if solve.method == 'biCG-stab' or solve.method == 'biCG-stab(1)':
        state, step, name = _bicgstab_start(x0, r0), _bicgstab_step, 'biCG-stab'
    else:
        state, step, name = _cg_start(x0, r0, rsq0), _cg_step, 'CG' if solve.method == 'CG' else 'CG-adaptive'
    shapes = {**{k: batches for k in common}, **{k: s(x_shape, r_shape, batches) for k, s in state[1].items()}}
    state = {**common, **state[0]}

    def body(values: dict) -> dict:
        active = values['continue']
        new = step(operator, values)
        evaluations = values['evaluations'] + to_int32(active) * new.pop('evaluations')
        iterations = values['iterations'] + to_int32(active)
        kept = {k: where(active, new[k], values[k]) for k in new}
        proceed, converged, diverged = check(iterations, new['rsq'])
        return {**kept, 'continue': proceed, 'converged': where(active, converged, values['converged']),
                'diverged': where(active, diverged, values['diverged']), 'iterations': iterations,
                'evaluations': evaluations}
    final = _while(body, state, shapes, int(max_(solve.max_iterations, solve.max_iterations.shape)))
    messages = _messages(final, name, solve)
    return SolveInfo(solve, final['x'], final['residual'], final['iterations'], final['evaluations'],
                     final['converged'], final['diverged'], f'lazyphi {name}', messages, 0.)


def _cg_start(x0: Tensor, r0: Tensor, rsq0: Tensor) -> tuple:
    state = {'x': x0, 'residual': r0, 'direction': r0, 'rsq': rsq0}
    shapes = {'x': lambda xs, rs, b: xs, 'residual': lambda xs, rs, b: rs, 'direction': lambda xs, rs, b: rs,
              'rsq': lambda xs, rs, b: b}
    return state, shapes


def _cg_step(operator: Callable, s: dict) -> dict:
    """One conjugate gradient step (Hestenes and Stiefel): along the direction, then a new conjugate one."""
    image = operator(s['direction'])
    alpha = safe_div(s['rsq'], _dot(s['direction'], image))
    residual = s['residual'] - alpha * image
    rsq = _dot(residual, residual)
    direction = residual + safe_div(rsq, s['rsq']) * s['direction']
    return {'x': s['x'] + alpha * s['direction'], 'residual': residual, 'direction': direction, 'rsq': rsq,
            'evaluations': 1}


def _bicgstab_start(x0: Tensor, r0: Tensor) -> tuple:
    one = expand(wrap(1.), batch(r0))
    state = {'x': x0, 'residual': r0, 'shadow': r0, 'p': r0 * 0, 'v': r0 * 0, 'rho': one, 'alpha': one,
             'omega': one, 'rsq': _dot(r0, r0)}
    vector, scalar = (lambda xs, rs, b: rs), (lambda xs, rs, b: b)
    shapes = {'x': lambda xs, rs, b: xs, 'residual': vector, 'shadow': vector, 'p': vector, 'v': vector,
              'rho': scalar, 'alpha': scalar, 'omega': scalar, 'rsq': scalar}
    return state, shapes


def _bicgstab_step(operator: Callable, s: dict) -> dict:
    """One step of BiCGStab (van der Vorst): a BiCG step, then a minimal-residual step along `A s`."""
    rho = _dot(s['shadow'], s['residual'])
    beta = safe_div(rho, s['rho']) * safe_div(s['alpha'], s['omega'])
    p = s['residual'] + beta * (s['p'] - s['omega'] * s['v'])
    v = operator(p)
    alpha = safe_div(rho, _dot(s['shadow'], v))
    half = s['residual'] - alpha * v
    t = operator(half)
    omega = safe_div(_dot(t, half), _dot(t, t))
    residual = half - omega * t
    return {'x': s['x'] + alpha * p + omega * half, 'residual': residual, 'shadow': s['shadow'], 'p': p, 'v': v,
            'rho': rho, 'alpha': alpha, 'omega': omega, 'rsq': _dot(residual, residual), 'evaluations': 2}


def _while(body: Callable, state: dict, shapes: dict, max_iterations: int) -> dict:
    """Runs `state = body(state)` while any `state['continue']` is true, on the backend's `while_loop`.

    The tensors travel as natives with the axes of `shapes` and the dtypes of the initial `state`.
    """
    names = ['continue'] + [n for n in state if n != 'continue']
    state = {n: expand(as_tensor(state[n]), shapes[n]) for n in names}
    dtypes = {n: state[n].dtype for n in names}
    backend = common_backend([state[n]._dense() for n in names])

    def natives(values: dict) -> tuple:
        return tuple(convert(_typed(values[n], dtypes[n]).native(shapes[n]), backend) for n in names)

    def tensors(values) -> dict:
        return {n: Dense(v, shapes[n], backend) for n, v in zip(names, values, strict=True)}

    final = backend.while_loop(lambda *values: natives(body(tensors(values))), natives(state), max_iterations)
    return tensors(final)


def _typed(value: Tensor, dtype: DType) -> Tensor:
    return value if value.dtype == dtype else cast(value, dtype)


def _messages(final: dict, method: str, solve: Solve) -> Tensor:
    """A message per batch entry, as a layout along the batch dims (empty while a compiler traces the solve)."""
    shape = final['converged'].shape
    if not (final['converged'].available and final['rsq'].available):
        return _per_entry(lambda index: '', shape)
    converged, diverged = final['converged'].numpy(shape), final['diverged'].numpy(shape)
    iterations, norms = final['iterations'].numpy(shape), sqrt(final['rsq']).numpy(shape)
    rel_tol = float(max_(solve.rel_tol, solve.rel_tol.shape))
    abs_tol = float(max_(solve.abs_tol, solve.abs_tol.shape))

    def message(index: tuple) -> str:
        if diverged[index]:
            return f'{method} diverged within {iterations[index]} iterations'
        if not converged[index]:
            return f'{method} did not converge to rel_tol={rel_tol:.0e}, abs_tol={abs_tol:.0e} within ' \
                   f'{iterations[index]} iterations; |residual| = {norms[index]:.3g}'
        return f'Converged within {iterations[index]} iterations.'
    return _per_entry(message, shape)


def _per_entry(message: Callable, shape: Shape) -> Tensor:
    """A layout along `shape` of `message(index)` for each index."""
    text = np.empty(shape.sizes, dtype=object)
    for index in np.ndindex(*shape.sizes):
        text[index] = message(index)
    return layout(text.tolist() if shape else text.item(), *[shape[i] for i in range(shape.rank)])


# --- the direct method ----------------------------------------------------------------------


def _direct(matrix: Tensor, y: Tensor, solve: Solve) -> SolveInfo:
    """A dense solve per batch entry by the backend's least-squares solver (exact for an invertible matrix)."""
    y, x0 = to_float(y), to_float(solve.x0)
    matrix = to_float(matrix)
    columns = x0.shape.non_batch
    missing = [d for d in columns.as_dual().names if d not in matrix.shape]
    if missing:
        raise ValueError(f'solve_linear(): the matrix {matrix.shape} lacks the dual dims {missing} of the solution\'s '
                         f'dims {columns}')
    rows = matrix.shape.non_batch.without(matrix.shape.dual.names)
    batches = merge_shapes(batch(matrix), batch(y), batch(x0))
    native_matrix = reshaped_native(expand(matrix, batches), [batches, rows, columns.as_dual()])
    native_y = reshaped_native(expand(y, batches), [batches, rows, ()])
    backend = common_backend([matrix._dense(), y._dense()])
    solution = backend.matrix_solve_least_squares(convert(native_matrix, backend), convert(native_y, backend))[0]
    x = reshaped_tensor(solution[..., 0], [batches, columns], convert=False)
    residual = y - matrix @ x
    norm = sqrt(_dot(residual, residual))
    limit = maximum(solve.rel_tol * sqrt(_dot(y, y)), solve.abs_tol)
    converged = expand(is_finite(norm) & (norm <= limit), batches)
    none = expand(to_int32(wrap(-1)), batches)
    flags, norms = (converged.numpy(converged.shape), expand(norm, batches).numpy(converged.shape)) \
        if converged.available else (None, None)

    def message(index: tuple) -> str:
        if flags is None:  # traced by a compiler: no values yet
            return ''
        return f'norm(residual)={norms[index]:.3g}' if flags[index] else \
            f'Direct solution does not satisfy tolerance: norm(residual)={norms[index]:.3g}'
    msg = _per_entry(message, converged.shape)
    return SolveInfo(solve, x, residual, none, none, converged, ~converged, 'lazyphi direct (least squares)', msg, 0.)


# --- minimisation ---------------------------------------------------------------------------

_SCIPY_GRADIENT = ('L-BFGS-B', 'BFGS', 'CG', 'SLSQP', 'trust-constr')
_SCIPY_VALUES_ONLY = ('Nelder-Mead', 'Powell', 'COBYLA')
_MINIMIZERS = ('auto', 'GD', *_SCIPY_GRADIENT, *_SCIPY_VALUES_ONLY)
_PARAMETERS = '_minimized_parameters'  # the channel dim holding every entry of x except its batch dims
_GD_FIRST_STEP = 0.1  # the step size gradient descent starts with (as phiml)
_GD_STEP_TRIES = 10  # the most step sizes gradient descent tries per iteration after the first


class _Parameters:
    """The tensors of an initial guess (a tensor or a tree of them) laid out as one float tensor, `batches` and
    a channel dim `_PARAMETERS` with all other entries, and the loss of `f` as a function of that tensor."""

    def __init__(self, f: Callable, x0):
        leaves, self._rebuild = _flatten(x0)
        if not leaves:
            raise TypeError(f'minimize(): Solve.x0 must be a Tensor or a tree of Tensors, got {x0!r}')
        self._f = f
        self._leaves = [to_float(t) for t in leaves]
        self._varargs = isinstance(x0, (tuple, list))
        self.batches = merge_shapes(*[batch(t) for t in self._leaves])

    def flat(self) -> Tensor:
        parts = [pack_dims(expand(t, self.batches), non_batch(t), channel(_PARAMETERS)) for t in self._leaves]
        return concat(parts, _PARAMETERS) if len(parts) > 1 else parts[0]

    def tree(self, flat: Tensor):
        parts, start = [], 0
        for leaf in self._leaves:
            dims = non_batch(leaf)
            part = flat[{_PARAMETERS: slice(start, start + dims.volume)}]
            parts.append(unpack_dim(part, _PARAMETERS, dims))
            start += dims.volume
        return self._rebuild(parts)

    def loss(self, flat: Tensor) -> Tensor:
        """The loss of `f` at `flat`, a value per batch entry; `f` may return a tuple starting with it."""
        x = self.tree(flat)
        output = self._f(*x) if self._varargs else self._f(x)
        loss = output[0] if isinstance(output, (tuple, list)) and output else output
        if not isinstance(loss, Tensor) or non_batch(loss).rank:
            got = loss.shape if isinstance(loss, Tensor) else type(loss).__name__
            raise ValueError(f'minimize(): f must return a loss whose dims are all batch dims (reduce the others, '
                             f'e.g. with math.l2_loss), got {got}')
        return expand(loss, self.batches)


def minimize(f: Callable, solve: Solve):
    """A minimum `x` of `f(x)`, searched from `solve.x0`, one minimisation per batch entry.

    Methods:
        'GD': gradient descent with an adaptive step size, written with lazyphi operations on the backend's
            `while_loop` (so it also runs inside `jit_compile`); a batch entry converges once a step shorter than
            `abs_tol` no longer lowers its loss. Needs automatic differentiation (torch, jax, tensorflow).
        'L-BFGS-B' (also 'auto'), 'BFGS', 'CG', 'SLSQP', 'trust-constr': `scipy.optimize.minimize`
            on the host in float64, one run per batch entry (in threads, their evaluations of `f` batched), given
            the gradient from `math.gradient`: needs torch, jax or tensorflow (NumPy raises NotImplementedError;
            no finite-difference estimate is made, as `f` evaluates in single precision by default).
        'Nelder-Mead', 'Powell', 'COBYLA': the same without gradients, so on NumPy too.
        SciPy's tolerance `tol` is `abs_tol`; convergence and the messages are SciPy's.

    Args:
        f: the function to minimise. It takes `x` (for `x0` a tuple or list, its items as positional arguments)
            and returns the loss, a tensor whose dims are batch dims (the gradient is that of their sum), or a
            tuple starting with it. Batch dims of the loss that `x0` lacks are added to `x0` (with a warning).
        solve: the method, `abs_tol` (`rel_tol` must be 0 or None), `max_iterations` (a number or a tensor with
            batch dims), `suppress` and the initial guess `x0` (required): a tensor or a tree of tensors.

    Returns:
        `x`, shaped like `solve.x0` (float), with the batch dims of the loss.

    Raises:
        NotConverged: a batch entry did not converge within `max_iterations`.
        Diverged: a batch entry failed (non-finite values, a loss that rose, or SciPy reporting failure).
        NotImplementedError: a method using gradients without a backend that has them, or a SciPy method
            while `jit_compile` traces `f` (SciPy needs values; use 'GD' there).
    """
    if not isinstance(solve, Solve):
        raise TypeError(f'minimize(): solve must be a Solve, got {solve!r}')
    if solve.x0 is None:
        raise ValueError('minimize(): the Solve has no initial guess; pass Solve(..., x0=initial_guess)')
    if solve.method not in _MINIMIZERS:
        raise ValueError(f'minimize(): method {solve.method!r} is not offered; lazyphi offers '
                         f'{", ".join(_MINIMIZERS)}')
    if solve.preprocess_y is not None:
        raise ValueError('minimize(): a Solve with preprocess_y has no y to apply it to; pass preprocess_y=None')
    solve = solve.with_defaults('optimization')
    if bool(any_(solve.rel_tol != 0, solve.rel_tol.shape)):
        raise ValueError(f'minimize(): rel_tol must be 0 (or None) as a loss has no reference scale, got '
                         f'{solve.rel_tol}; use abs_tol')
    method = 'L-BFGS-B' if solve.method == 'auto' else solve.method
    parameters = _Parameters(f, solve.x0)
    flat = parameters.flat()
    extra = batch(parameters.loss(flat)).without(parameters.batches)  # an evaluation telling the loss's dims
    if extra:
        warnings.warn(f'minimize(): the loss has the batch dims {extra}, which x0 lacks; x0 is expanded along '
                      f'them', RuntimeWarning, stacklevel=2)
        solve = _copy(solve, x0=expand(solve.x0, extra))
        parameters = _Parameters(f, solve.x0)
        flat = parameters.flat()
    backend = flat._dense().backend
    if method not in _SCIPY_VALUES_ONLY and not (backend.supports('jacobian')
                                                  or default_backend().supports('jacobian')):
        raise NotImplementedError(f'minimize(): method {method!r} needs gradients, which the {backend.name} backend '
                                  f'cannot compute; use tensors of torch, jax or tensorflow (or one of them as the '
                                  f'default backend), or a method without gradients: {", ".join(_SCIPY_VALUES_ONLY)}')
    start = time.perf_counter()
    with np.errstate(all='ignore'):  # a diverging minimisation meets non-finite values; the result reports them
        if method == 'GD':
            result = _gradient_descent(parameters, flat, solve)
        else:
            if compiling() or not flat._dense().available:
                raise NotImplementedError(f'minimize(): method {method!r} runs SciPy on values, which a function '
                                          f'traced by jit_compile does not have; use method=\'GD\' there')
            result = _scipy_minimize(method, parameters, flat, solve)
    result.solve_time = time.perf_counter() - start
    result.convergence_check(False)
    return result.x


def _loss_and_gradient(parameters: _Parameters) -> Callable:
    """`flat -> (loss, gradient)` by `math.gradient`."""
    return gradient(lambda x: parameters.loss(x), wrt='x', get_output=True)


def _gradient_descent(parameters: _Parameters, flat: Tensor, solve: Solve) -> SolveInfo:
    """Gradient descent whose step size adapts: each iteration tries step sizes along the gradient until the
    loss drops (for every batch entry, or `_GD_STEP_TRIES` times), growing the step while the slope stays
    downhill and shrinking it by a parabola fit where the loss rose; it keeps the best one tried."""
    fg = _loss_and_gradient(parameters)
    batches = parameters.batches
    abs_tol = expand(solve.abs_tol, batches)
    loss, grad = fg(flat)
    zero = expand(to_int32(wrap(0)), batches)
    diverged = any_(~is_finite(flat), _PARAMETERS)
    converged = expand(wrap(False), batches)
    shapes = {'x': flat.shape, 'grad': flat.shape, 'dx': flat.shape}

    def proceed(iterations: Tensor, converged: Tensor, diverged: Tensor) -> Tensor:
        return ~converged & ~diverged & (iterations < solve.max_iterations)

    def iteration(s: dict) -> dict:
        active, x, loss, grad = s['continue'], s['x'], s['loss'], s['grad']
        moving = to_float(active)

        def attempt(b: dict) -> dict:
            """One more step size, from the outcome of the best so far."""
            predicted = -_dot(grad, b['dx'])  # the decrease if the loss were linear
            ratio = safe_div(loss - b['loss'], predicted)
            parabola = maximum(exp((ratio - 0.5) * 3.), 0.1)
            slope = safe_div(_dot(b['grad'], b['dx']), sqrt(_dot(b['dx'], b['dx'])))
            tried = b['tried'] * where(b['loss'] > loss, parabola, where(slope < 0, 2., 0.5))
            dx = -grad * (tried * moving)
            new_loss, new_grad = fg(x + dx)
            better = new_loss < b['loss']
            best = {'step': where(better, tried, b['step']), 'dx': where(better, dx, b['dx']),
                    'loss': where(better, new_loss, b['loss']), 'grad': where(better, new_grad, b['grad'])}
            converged = b['converged'] | (active & ~better & (_dot(dx, dx) < abs_tol ** 2))
            diverged = b['diverged'] | (active & any_(~is_finite(best['grad']), _PARAMETERS))
            done = (best['loss'] < loss) | converged | diverged
            return {**best, 'continue': ~all_(done, batches), 'tried': tried, 'converged': converged,
                    'diverged': diverged, 'evaluations': b['evaluations'] + to_int32(active)}
        dx = -grad * (s['step'] * moving)
        first_loss, first_grad = fg(x + dx)
        search = {'continue': wrap(True), 'tried': s['step'], 'step': s['step'], 'dx': dx, 'loss': first_loss,
                  'grad': first_grad, 'converged': s['converged'], 'diverged': s['diverged'],
                  'evaluations': s['evaluations'] + to_int32(active)}
        search_shapes = {**{k: batches for k in search}, **shapes, 'continue': EMPTY_SHAPE}
        b = _while(attempt, search, search_shapes, _GD_STEP_TRIES)
        iterations = s['iterations'] + to_int32(active)
        diverged = b['diverged'] | (active & ~b['converged'] & (b['loss'] > loss))
        return {'continue': proceed(iterations, b['converged'], diverged), 'x': x + b['dx'], 'loss': b['loss'],
                'grad': b['grad'], 'step': b['step'], 'iterations': iterations, 'evaluations': b['evaluations'],
                'converged': b['converged'], 'diverged': diverged}
    state = {'continue': proceed(zero, converged, diverged), 'x': flat, 'loss': loss, 'grad': grad,
             'step': expand(cast(wrap(_GD_FIRST_STEP), flat.dtype), batches), 'iterations': zero,
             'evaluations': zero + 1, 'converged': converged, 'diverged': diverged}
    final = _while(iteration, state, {**{k: batches for k in state}, **shapes},
                   int(max_(solve.max_iterations, solve.max_iterations.shape)))
    messages = _minimize_messages(final, 'gradient descent')
    method = f'lazyphi gradient descent with {flat._dense().backend.name}'
    return SolveInfo(solve, parameters.tree(final['x']), final['loss'], final['iterations'], final['evaluations'],
                     final['converged'], final['diverged'], method, messages, 0.)


def _minimize_messages(final: dict, method: str) -> Tensor:
    shape = final['converged'].shape
    if not (final['converged'].available and final['loss'].available):
        return _per_entry(lambda index: '', shape)
    converged, diverged = final['converged'].numpy(shape), final['diverged'].numpy(shape)
    iterations, losses = final['iterations'].numpy(shape), final['loss'].numpy(shape)

    def message(index: tuple) -> str:
        if diverged[index]:
            return f'{method} diverged within {iterations[index]} iterations; loss = {losses[index]:.3g}'
        if not converged[index]:
            return f'{method} did not converge within {iterations[index]} iterations; loss = {losses[index]:.3g}'
        return f'Converged within {iterations[index]} iterations.'
    return _per_entry(message, shape)


class _Stopped(Exception):
    """Ends a SciPy run in its thread when the minimisation stops early."""


def _scipy_minimize(method: str, parameters: _Parameters, flat: Tensor, solve: Solve) -> SolveInfo:
    """`scipy.optimize.minimize` per batch entry, each in a thread; the main thread evaluates `f` once for all
    entries waiting for a value (the finished ones held at their result), as `f` takes the whole batch."""
    import queue
    import threading

    from scipy.optimize import minimize as scipy_minimize
    batches, backend, dtype = parameters.batches, flat._dense().backend, flat.dtype
    x0 = reshaped_numpy(flat, [batches, _PARAMETERS]).astype(np.float64)
    abs_tol = reshaped_numpy(expand(solve.abs_tol, batches), [batches])
    max_iterations = reshaped_numpy(expand(solve.max_iterations, batches), [batches])
    with_gradient = method in _SCIPY_GRADIENT
    fg = _loss_and_gradient(parameters) if with_gradient else None
    count = x0.shape[0]
    requests: queue.Queue = queue.Queue()  # (entry, x to evaluate, or its OptimizeResult, or an exception)
    replies = [queue.Queue() for _ in range(count)]  # the values for an entry; None stops it
    iterations, evaluations = [0] * count, [0] * count

    def run(entry: int) -> None:
        def fun(x: np.ndarray):
            evaluations[entry] += 1
            requests.put((entry, np.array(x, dtype=np.float64)))
            reply = replies[entry].get()
            if reply is None:
                raise _Stopped()
            return reply

        def callback(*_) -> None:
            iterations[entry] += 1
        try:
            result = scipy_minimize(fun, x0[entry], jac=with_gradient, method=method, tol=float(abs_tol[entry]),
                                    options={'maxiter': int(max_iterations[entry])}, callback=callback)
        except _Stopped:
            return
        except Exception as error:  # handed to the main thread, which raises it
            requests.put((entry, error))
            return
        requests.put((entry, result))

    def evaluate(values: np.ndarray) -> tuple:
        x = _typed(to_backend(reshaped_tensor(values, [batches, channel(_PARAMETERS)], convert=False), backend), dtype)
        if fg is None:
            return reshaped_numpy(parameters.loss(x), [batches]).astype(np.float64), None
        loss, grad = fg(x)
        return (reshaped_numpy(loss, [batches]).astype(np.float64),
                reshaped_numpy(grad, [batches, _PARAMETERS]).astype(np.float64))
    threads = [threading.Thread(target=run, args=(entry,), daemon=True) for entry in range(count)]
    for thread in threads:
        thread.start()
    results, current = [None] * count, x0.copy()
    try:
        while any(r is None for r in results):
            waiting = []
            while len(waiting) + sum(r is not None for r in results) < count:
                entry, item = requests.get()
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, np.ndarray):
                    waiting.append(entry)
                    current[entry] = item
                else:
                    results[entry] = item
                    current[entry] = item.x
            if waiting:
                losses, grads = evaluate(current)
                for entry in waiting:
                    replies[entry].put((losses[entry], grads[entry]) if with_gradient else losses[entry])
    finally:
        for entry, thread in enumerate(threads):
            if thread.is_alive():
                replies[entry].put(None)
        for thread in threads:
            thread.join()
    x = _typed(to_backend(reshaped_tensor(np.stack([r.x for r in results]), [batches, channel(_PARAMETERS)],
                                          convert=False), backend), dtype)

    def per_entry(values: list, dtype=None) -> Tensor:
        return reshaped_tensor(np.asarray(values, dtype=dtype), [batches], convert=False)
    converged = per_entry([bool(r.success) for r in results])
    diverged = per_entry([r.status not in (0, 1) for r in results])  # SciPy's 1: the iteration limit
    text = np.asarray([str(r.message) for r in results], dtype=object).reshape(batches.sizes)
    messages = _per_entry(lambda index: text[index], batches)
    return SolveInfo(solve, parameters.tree(x), per_entry([float(r.fun) for r in results]),
                     per_entry(iterations, np.int32), per_entry(evaluations, np.int32), converged, diverged,
                     f'SciPy {method} with {backend.name}', messages, 0.)


def solve_nonlinear(f: Callable, y, solve: Solve):
    """The solution `x` of `f(x) = y`, found by minimising `l2_loss(f(x) - y)` with `minimize`.

    Args:
        f: a function of `x` (for `x0` a tuple or list, its items as positional arguments) returning a tensor
            like `y`.
        y: the desired output of `f`, a tensor (or a number).
        solve: the method (see `minimize`), the initial guess `x0` (required) and the tolerances: the
            minimisation stops at `l2_loss` tolerance `max(rel_tol * l2_loss(y), abs_tol)` per batch entry.
            `preprocess_y(y, *preprocess_y_args)` is applied to `y` first.

    Returns:
        `x`, shaped like `solve.x0`.

    Raises:
        NotConverged, Diverged, NotImplementedError: as `minimize`.
    """
    if not isinstance(solve, Solve):
        raise TypeError(f'solve_nonlinear(): solve must be a Solve, got {solve!r}')
    if solve.preprocess_y is not None:
        y = solve.preprocess_y(y, *solve.preprocess_y_args)
    if not isinstance(y, (Tensor, int, float)):
        raise TypeError(f'solve_nonlinear(): y must be a Tensor or a number, got {type(y).__name__}')
    solve = solve.with_defaults('solve')
    tolerance = maximum(solve.rel_tol * l2_loss(y), solve.abs_tol)

    def residual_loss(*x) -> Tensor:
        return l2_loss(f(*x) - y)
    return minimize(residual_loss, _copy(solve, abs_tol=tolerance, rel_tol=wrap(0.), preprocess_y=None,
                                         preprocess_y_args=()))
