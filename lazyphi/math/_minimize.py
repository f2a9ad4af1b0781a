"""Minimising a scalar function, `minimize`, and solving `f(x) = y` for a non-linear `f`, `solve_nonlinear`,
configured by the same `Solve` as linear systems and reported by a `SolveInfo` (`_solves.py`).

The parameters (`x0`, a tensor or a tree of them) are laid out as one tensor per batch entry with a channel dim
listing every value. Gradient descent is written with lazyphi operations and `gradient` on the backend's
`while_loop`, as the iterative linear solvers are; the SciPy methods run `scipy.optimize.minimize` once per batch
entry, each in a thread of its own, while this thread evaluates `f` (and its gradient) for all the entries
waiting for a value at once.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from ..backend import GRADIENT_METHODS, VALUE_METHODS, default_backend, run_scipy_minimize, trajectory_points
from ._autodiff import compiling, gradient
from ._conversion import reshaped_numpy
from ._convert import to_backend
from ._creation import reshaped_tensor, wrap
from ._dims import batch, channel, merge_shapes, non_batch
from ._elementwise import where
from ._magic_ops import concat, expand, pack_dims, stack, unpack_dim, unstack
from ._ops import cast, exp, is_finite, maximum, safe_div, sqrt, to_float, to_int32
from ._optimize import _dot, _per_entry, _typed, _while
from ._reduce import all_, any_, max_
from ._shape import EMPTY_SHAPE
from ._solves import TRAJECTORY, Solve, SolveInfo, _copy, _trajectory, record, recording
from ._tensor import Tensor
from ._tree import tree_map
from ._vectors import l2_loss

_MINIMIZERS = ('auto', 'GD', *GRADIENT_METHODS, *VALUE_METHODS)
_PARAMETERS = '_minimized_parameters'  # the channel dim holding every entry of x except its batch dims
_GD_FIRST_STEP = 0.1  # the step size gradient descent starts with (as phiml)
_GD_STEP_TRIES = 10  # the most step sizes gradient descent tries per iteration after the first


def _is_value(value) -> bool:
    """Whether `value` is a leaf of `x0`: a tensor or a Python number (not a bool)."""
    return isinstance(value, Tensor) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _map_values(fn: Callable, tree):
    """`tree` with `fn` applied to its tensors and Python numbers (bools are kept)."""
    return tree_map(lambda v: fn(v) if _is_value(v) else v, tree, (Tensor, int, float))


def _uniform_pieces(t: Tensor) -> tuple:
    """The uniform pieces of `t` (unstacked along the dims it varies along) and a function restacking them,
    taking the pieces from an iterator."""
    if t.shape.is_uniform:
        return [t], lambda pieces: next(pieces)
    along = t.shape.non_uniform_shape[0]
    splits = [_uniform_pieces(p) for p in unstack(t, along.name)]
    return [p for found, _ in splits for p in found], \
        lambda pieces: stack([join(pieces) for _, join in splits], along)


class _Parameters:
    """The values of an initial guess (a tensor, a Python number or a tree of them) laid out as one float tensor,
    `batches` and a channel dim `_PARAMETERS` with all other entries, and the loss of `f` as a function of that
    tensor. A non-uniform tensor is laid out piece by piece; a number becomes a scalar tensor of the default
    backend."""

    def __init__(self, f: Callable, x0):
        found = []
        _map_values(lambda v: found.append(v) or v, x0)
        if not found:
            raise TypeError(f'minimize(): Solve.x0 must be a Tensor, a number or a tree of them, got {x0!r}')
        self._f = f
        self._x0 = x0
        self._numbers = [not isinstance(v, Tensor) for v in found]
        self._leaves, self._joins = [], []
        for value in found:
            value = value if isinstance(value, Tensor) else to_backend(wrap(value), default_backend())
            pieces, join = _uniform_pieces(to_float(value))
            self._leaves.extend(pieces)
            self._joins.append(join)
        self._varargs = isinstance(x0, (tuple, list))
        self.batches = merge_shapes(*[batch(t) for t in self._leaves])

    def expanded_x0(self, dims) -> object:
        """`x0` with its values expanded along `dims` (numbers become tensors)."""
        return _map_values(lambda v: expand(v if isinstance(v, Tensor) else wrap(v), dims), self._x0)

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
        pieces = iter(parts)
        values = iter([join(pieces) for join in self._joins])
        return _map_values(lambda _: next(values), self._x0)

    def natives_for_numbers(self, x):
        """`x` (a result of `tree`) with native arrays where `x0` has Python numbers, as phiml answers them."""
        numbers = iter(self._numbers)
        return _map_values(lambda v: v.native(v.shape) if next(numbers) else v, x)

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

    `solve.method` picks the algorithm:

    - 'GD': gradient descent with an adaptive step size, written with lazyphi operations on the backend's
      `while_loop` (so it also runs inside `jit_compile`); a batch entry converges once a step shorter than
      `abs_tol` no longer lowers its loss. Needs automatic differentiation (torch, jax, tensorflow).
    - 'L-BFGS-B' (also 'auto'), 'BFGS', 'CG', 'SLSQP', 'trust-constr': `scipy.optimize.minimize` on the host in
      float64, one run per batch entry (in threads, their evaluations of `f` batched), given the gradient from
      `math.gradient`: needs torch, jax or tensorflow (NumPy raises NotImplementedError; no finite-difference
      estimate is made, as `f` evaluates in single precision by default).
    - 'Nelder-Mead', 'Powell', 'COBYLA': the same without gradients, so on NumPy too.

    For the SciPy methods, SciPy's tolerance `tol` is `abs_tol`; convergence and the messages are SciPy's.

    Args:
        f: the function to minimise. It takes `x` (for `x0` a tuple or list, its items as positional arguments)
            and returns the loss, a tensor whose dims are batch dims (the gradient is that of their sum), or a
            tuple starting with it. Batch dims of the loss that `x0` lacks are added to `x0` (with a warning).
        solve: the method, `abs_tol` (`rel_tol` must be 0 or None), `max_iterations` (a number or a tensor with
            batch dims), `suppress` and the initial guess `x0` (required): a tensor, a Python number or a tree of
            them; tensors may be non-uniform. `f` receives numbers as scalar tensors.

    Returns:
        `x`, shaped like `solve.x0` (float), with the batch dims of the loss; where `x0` has Python numbers, native
        scalars of the default backend (as phiml answers them).

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
        solve = _copy(solve, x0=parameters.expanded_x0(extra))
        parameters = _Parameters(f, solve.x0)
        flat = parameters.flat()
    backend = flat._dense().backend
    if method not in VALUE_METHODS and not (backend.supports('jacobian')
                                                  or default_backend().supports('jacobian')):
        raise NotImplementedError(f'minimize(): method {method!r} needs gradients, which the {backend.name} backend '
                                  f'cannot compute; use tensors of torch, jax or tensorflow (or one of them as the '
                                  f'default backend), or a method without gradients: {", ".join(VALUE_METHODS)}')
    start = time.perf_counter()
    with np.errstate(all='ignore'):  # a diverging minimisation meets non-finite values; the result reports them
        if method == 'GD':
            x, result = _gradient_descent(parameters, flat, solve)
        else:
            if compiling() or not flat._dense().available:
                raise NotImplementedError(f'minimize(): method {method!r} runs SciPy on values, which a function '
                                          f'traced by jit_compile does not have; use method=\'GD\' there')
            x, result = _scipy_minimize(method, parameters, flat, solve)
    result.solve_time = time.perf_counter() - start
    record(result)
    result.convergence_check(False)
    return parameters.natives_for_numbers(x)


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
    states = [] if recording(solve) else None
    final = _while(iteration, state, {**{k: batches for k in state}, **shapes},
                   int(max_(solve.max_iterations, solve.max_iterations.shape)), states)
    found = final if states is None else _trajectory(states)
    messages = _minimize_messages(final, 'gradient descent')
    method = f'lazyphi gradient descent with {flat._dense().backend.name}'
    return parameters.tree(final['x']), SolveInfo(solve, parameters.tree(found['x']), found['loss'],
                                                  final['iterations'], found['evaluations'], final['converged'],
                                                  final['diverged'], method, messages, 0.)


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


def _scipy_minimize(method: str, parameters: _Parameters, flat: Tensor, solve: Solve) -> SolveInfo:
    """`scipy.optimize.minimize` per batch entry (`run_scipy_minimize`), `f` evaluated for all waiting entries."""
    batches, backend, dtype = parameters.batches, flat._dense().backend, flat.dtype
    x0 = reshaped_numpy(flat, [batches, _PARAMETERS]).astype(np.float64)
    abs_tol = reshaped_numpy(expand(solve.abs_tol, batches), [batches])
    max_iterations = reshaped_numpy(expand(solve.max_iterations, batches), [batches])
    fg = _loss_and_gradient(parameters) if method in GRADIENT_METHODS else None

    def evaluate(values: np.ndarray) -> tuple:
        x = _typed(to_backend(reshaped_tensor(values, [batches, channel(_PARAMETERS)], convert=False), backend), dtype)
        if fg is None:
            return reshaped_numpy(parameters.loss(x), [batches]).astype(np.float64), None
        loss, grad = fg(x)
        return (reshaped_numpy(loss, [batches]).astype(np.float64),
                reshaped_numpy(grad, [batches, _PARAMETERS]).astype(np.float64))
    runs = run_scipy_minimize(method, evaluate, x0, abs_tol, max_iterations, recording(solve))
    results, iterations, evaluations, trajectories = runs
    x = _typed(to_backend(reshaped_tensor(np.stack([r.x for r in results]), [batches, channel(_PARAMETERS)],
                                          convert=False), backend), dtype)

    def per_entry(values: list, dtype=None) -> Tensor:
        return reshaped_tensor(np.asarray(values, dtype=dtype), [batches], convert=False)
    converged = per_entry([bool(r.success) for r in results])
    diverged = per_entry([r.status not in (0, 1) for r in results])  # SciPy's 1: the iteration limit
    text = np.asarray([str(r.message) for r in results], dtype=object).reshape(batches.sizes)
    messages = _per_entry(lambda index: text[index], batches)
    loss, counts = per_entry([float(r.fun) for r in results]), per_entry(evaluations, np.int32)
    x_found = x
    if trajectories is not None:  # the final state replaces the last iteration's; the shorter ones repeat it
        points = trajectory_points(runs)
        steps = [batch(TRAJECTORY), batches]
        x_found = _typed(to_backend(reshaped_tensor(np.stack([[p[0] for p in entry] for entry in points], 1),
                                                    [*steps, channel(_PARAMETERS)], convert=False), backend), dtype)
        loss = reshaped_tensor(np.asarray([[p[1] for p in entry] for entry in points]).T, steps, convert=False)
        counts = reshaped_tensor(np.asarray([[p[2] for p in entry] for entry in points], np.int32).T, steps,
                                 convert=False)
    return parameters.tree(x), SolveInfo(solve, parameters.tree(x_found), loss, per_entry(iterations, np.int32),
                                         counts, converged, diverged, f'SciPy {method} with {backend.name}',
                                         messages, 0.)


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
