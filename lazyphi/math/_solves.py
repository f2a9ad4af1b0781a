"""What configures and reports a solve: `Solve`, `SolveInfo`, the convergence errors, and `SolveTape`, which records the
`SolveInfo` of the solves run while it is open (per thread), with the states of their iterations where it asks for them.

`solve_linear` (`_optimize.py`) and `minimize` / `solve_nonlinear` (`_minimize.py`) share them.
"""

from __future__ import annotations

import copy
import threading
import uuid
import warnings
from collections.abc import Callable

import numpy as np

from ..backend import get_precision
from ._creation import wrap
from ._dims import batch
from ._magic_ops import stack
from ._ops import to_float, to_int32
from ._reduce import all_, any_, sum_
from ._scipy_linear import PRECONDITIONERS
from ._shape import EMPTY_SHAPE, Shape
from ._tensor import Tensor, as_tensor
from ._tree import tree_map


class Solve:
    """How to solve a system of equations `f(x) = y`: the method, the tolerances, the initial guess, the
    iteration limit and which convergence errors to return quietly instead of raising.

    Args:
        method: 'auto' ('CG-adaptive'), 'CG', 'CG-adaptive' (conjugate gradients whose steps are measured against
            the residual, as phiml's: they also settle many unsymmetric systems), 'biCG-stab' (or 'biCG-stab(1)'),
            'direct' / 'scipy-direct' (a dense matrix solve on the backend), or one of SciPy's iterative solvers run
            on the host: 'scipy-CG', 'scipy-GMres', 'scipy-biCG', 'scipy-biCG-stab', 'scipy-CGS', 'scipy-lGMres',
            'scipy-QMR', 'scipy-GCrotMK', 'scipy-lsqr' (see `solve_linear`). None means 'auto'.
        rel_tol: the tolerance relative to the norm of `y` (for 'CG', of the initial residual `y - f(x0)`);
            default 1e-5 in single precision, 1e-12 in double.
        abs_tol: the absolute tolerance of the residual's norm; same defaults. A batch entry has converged
            when `|residual| <= max(rel_tol * |y|, abs_tol)`.
        x0: the initial guess, shaped like the solution. `solve_linear` requires one.
        max_iterations: the most iterations per batch entry (a number or a tensor with batch dims).
        suppress: `NotConverged` and/or `Diverged`: return the last estimate instead of raising them.
        preprocess_y: a function applied as `preprocess_y(y, *preprocess_y_args)` to the right-hand side first.
        preprocess_y_args: its further arguments.
        preconditioner: None, or 'ilu': an incomplete LU factorisation (SciPy's `spilu`) of the dense matrix,
            taken by the 'scipy-*' iterative methods only (`solve_linear` raises a ValueError for the others).
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
        if preconditioner is not None and preconditioner not in PRECONDITIONERS:
            raise ValueError(f'Solve(): preconditioner={preconditioner!r} is not offered by lazyphi; pass None or '
                             f'\'ilu\' (for the \'scipy-*\' iterative methods)')
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
        converged, diverged = _last(self.converged), _last(self.diverged)
        return f'{self.method}: {int(sum_(converged, converged.shape))} converged, ' \
               f'{int(sum_(diverged, diverged.shape))} diverged'

    def snapshot(self, index: int) -> SolveInfo:
        """The state after `index` entries of a recorded trajectory (-1: the final one), without the dim
        `trajectory`; values that have no trajectory stay as they are."""
        def pick(value):
            return tree_map(lambda t: t[{TRAJECTORY: index}] if TRAJECTORY in t.shape else t, value)
        return SolveInfo(self.solve, pick(self.x), pick(self.residual), pick(self.iterations),
                         pick(self.function_evaluations), pick(self.converged), pick(self.diverged), self.method,
                         self.msg, self.solve_time)

    def convergence_check(self, only_warn: bool) -> None:
        """Raise (or with `only_warn` warn) `Diverged` or `NotConverged` unless the solve suppresses it.

        Nothing happens while a compiler traces the solve: there are no values to check yet (as in phiml).
        """
        if not (self.converged.available and self.diverged.available):
            return
        converged, diverged = _last(self.converged), _last(self.diverged)
        if bool(any_(diverged, diverged.shape)) and Diverged not in self.solve.suppress:
            if only_warn:
                warnings.warn(_text(self.msg), ConvergenceWarning, stacklevel=2)
            else:
                raise Diverged(self)
        if not bool(all_(converged, converged.shape)) and NotConverged not in self.solve.suppress:
            if only_warn:
                warnings.warn(_text(self.msg), ConvergenceWarning, stacklevel=2)
            else:
                raise NotConverged(self)


TRAJECTORY = 'trajectory'  # the batch dim along which a recorded SolveInfo lists the states of the iterations


def _last(value: Tensor) -> Tensor:
    """`value` after the last iteration: the final entry along `trajectory` where it has the dim."""
    return value[{TRAJECTORY: -1}] if TRAJECTORY in value.shape else value


def recording(solve: Solve) -> bool:
    """Whether a `SolveTape` entered in this thread records the trajectory of `solve`."""
    return any(tape.should_record_trajectory_for(solve) for tape in _tapes())


def _trajectory(states: list, length: int | None = None) -> dict:
    """The states of a recorded loop stacked along the batch dim `trajectory`, the last one repeated up to
    `length` entries."""
    states = states + [states[-1]] * ((length or len(states)) - len(states))
    return {n: stack([state[n] for state in states], batch(TRAJECTORY)) for n in states[0]}


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


class SolveTape:
    """Records the `SolveInfo` of every solve (`solve_linear`, `minimize`, `solve_nonlinear`) run while it is
    entered as a context manager, in this thread; nested tapes all record.

    Look a result up by position (`tape[0]`) or by the `Solve` it was given (`tape[solve]`, matched by its `id`,
    which copies keep). Iterating and `len` go over the results in order.

    Args:
        *solves: record only the solves configured by these; none given: record every solve.
        record_trajectories: record the state after each iteration: the `SolveInfo` values gain a batch dim
            `trajectory` listing them, the initial state first, as phiml's. A linear solve lists
            `max_iterations + 1` states (the final one repeated); `minimize` lists `x`, `residual` (the loss) and
            `function_evaluations` per iteration until every batch entry stopped. lazyphi's own linear methods and
            all `minimize` methods record; the direct and 'scipy-*' linear methods raise a ValueError. Tapes that
            do not record get the final state.
    """

    def __init__(self, *solves: Solve, record_trajectories: bool = False):
        unknown = [s for s in solves if not isinstance(s, Solve)]
        if unknown:
            raise TypeError(f'SolveTape(): the solves to record must be Solve objects, got {unknown}')
        self.record_only_ids: list = [s.id for s in solves]
        self.record_trajectories: bool = bool(record_trajectories)
        self.solves: list[SolveInfo] = []

    def should_record_trajectory_for(self, solve: Solve) -> bool:
        """Whether this tape records the trajectory of `solve`."""
        return self.record_trajectories and (not self.record_only_ids or solve.id in self.record_only_ids)

    def __enter__(self) -> SolveTape:
        _tapes().append(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        _tapes().remove(self)

    def _add(self, result: SolveInfo) -> None:
        if self.record_only_ids and result.solve.id not in self.record_only_ids:
            return
        if any(s.solve.id == result.solve.id for s in self.solves):
            warnings.warn('SolveTape: a second result for the same Solve; tape[solve] returns the first',
                          RuntimeWarning, stacklevel=4)
        recorded = TRAJECTORY in _last_shape(result)
        self.solves.append(result if self.record_trajectories or not recorded else result.snapshot(-1))

    def __getitem__(self, item: int | Solve) -> SolveInfo:
        if isinstance(item, int):
            return self.solves[item]
        if not isinstance(item, Solve):
            raise TypeError(f'SolveTape[]: index by position (int) or by Solve, got {type(item).__name__}')
        for result in self.solves:
            if result.solve.id == item.id:
                return result
        raise KeyError(f'SolveTape: no solve recorded for {item}')

    def __iter__(self):
        return iter(self.solves)

    def __len__(self) -> int:
        return len(self.solves)


def _last_shape(result: SolveInfo) -> Shape:
    return result.function_evaluations.shape if isinstance(result.function_evaluations, Tensor) else EMPTY_SHAPE


_TAPES = threading.local()


def _tapes() -> list:
    """The `SolveTape`s entered in this thread, innermost last."""
    if not hasattr(_TAPES, 'stack'):
        _TAPES.stack = []
    return _TAPES.stack


def record(result: SolveInfo) -> None:
    """Hands `result` to every `SolveTape` entered in this thread."""
    for tape in _tapes():
        tape._add(result)
