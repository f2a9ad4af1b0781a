"""Minimising batched functions with `scipy.optimize.minimize`, one run per batch entry: the driver that
`Backend.minimize` and the math layer's `minimize` share.

`f` takes the whole batch, so the runs go in threads of their own while the calling thread evaluates `f` (and
its gradient) once for all the entries waiting for a value, the finished ones held at their result. SciPy is
imported on the first run.
"""

import importlib
import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._linear_solvers import SolveResult

GRADIENT_METHODS = ('L-BFGS-B', 'BFGS', 'CG', 'SLSQP', 'trust-constr')
VALUE_METHODS = ('Nelder-Mead', 'Powell', 'COBYLA')


class _Stopped(Exception):
    """Ends a SciPy run in its thread when the minimisation stops early."""


class ScipyRuns(NamedTuple):
    """What the runs of `run_scipy_minimize` found, per batch entry."""

    results: list  # SciPy's OptimizeResult
    iterations: list[int]
    evaluations: list[int]
    trajectories: list | None  # per entry: (x, loss, evaluations) at the start and after each iteration


def run_scipy_minimize(method: str, evaluate: Callable, x0: np.ndarray, abs_tol: np.ndarray,
                       max_iterations: np.ndarray, record: bool) -> ScipyRuns:
    """Runs `scipy.optimize.minimize(method)` from each row of `x0 (batch, parameters)`.

    Args:
        method: One of `GRADIENT_METHODS` (which take the gradient from `evaluate`) or `VALUE_METHODS`.
        evaluate: Takes float64 parameters `(batch, parameters)` and returns the float64 losses `(batch,)` and,
            for `GRADIENT_METHODS`, the gradients `(batch, parameters)` (else None).
        abs_tol: SciPy's `tol` per entry `(batch,)`.
        max_iterations: SciPy's `maxiter` per entry `(batch,)`.
        record: Whether to record each run's trajectory.
    """
    scipy_minimize = importlib.import_module('scipy.optimize').minimize
    with_gradient = method in GRADIENT_METHODS
    count = x0.shape[0]
    requests: queue.Queue = queue.Queue()  # (entry, x to evaluate, or its OptimizeResult, or an exception)
    replies = [queue.Queue() for _ in range(count)]  # the values for an entry; None stops it
    iterations, evaluations = [0] * count, [0] * count
    recent = [[] for _ in range(count)]  # per entry: the losses since its last iteration
    trajectories = [[] for _ in range(count)] if record else None

    def run(entry: int) -> None:
        def fun(x: np.ndarray) -> Any:
            evaluations[entry] += 1
            requests.put((entry, np.array(x, dtype=np.float64)))
            reply = replies[entry].get()
            if reply is None:
                raise _Stopped()
            recent[entry].append(float(reply[0] if with_gradient else reply))
            if trajectories is not None and not trajectories[entry]:
                trajectories[entry].append((x0[entry], recent[entry][0], 1))
            return reply

        def callback(*args: Any) -> None:
            iterations[entry] += 1
            if trajectories is not None:  # the best loss since the last iteration, as phiml records it
                trajectories[entry].append((np.array(args[0], dtype=np.float64), min(recent[entry]),
                                            evaluations[entry]))
            recent[entry].clear()
        try:
            result = scipy_minimize(fun, x0[entry], jac=with_gradient, method=method, tol=float(abs_tol[entry]),
                                    options={'maxiter': int(max_iterations[entry])}, callback=callback)
        except _Stopped:
            return
        except Exception as error:  # handed to the main thread, which raises it
            requests.put((entry, error))
            return
        requests.put((entry, result))

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
    return ScipyRuns(results, iterations, evaluations, trajectories)


def trajectory_points(runs: ScipyRuns) -> list[list[tuple]]:
    """Per entry, `(x, loss, evaluations)` at the start and after each iteration, the final state replacing the
    last iteration's, the shorter trajectories repeating their final state to the length of the longest."""
    finals = [(r.x, float(r.fun), runs.evaluations[entry]) for entry, r in enumerate(runs.results)]
    length = max(len(t) for t in runs.trajectories)
    return [t[:-1] + [last] * (length - len(t) + 1) for t, last in zip(runs.trajectories, finals, strict=True)]


def minimize(b: Any, method: str, f: Callable, x0: Any, atol: Any, max_iter: Any, trj: bool) -> Any:
    """`Backend.minimize` on backend `b`: see there."""
    method = 'L-BFGS-B' if method == 'auto' else method
    if method not in GRADIENT_METHODS + VALUE_METHODS:
        raise ValueError(f"minimize method must be 'auto' or one of {GRADIENT_METHODS + VALUE_METHODS}, "
                         f"got {method!r}")
    dtype = b.dtype(b.to_float(x0))
    start = np.asarray(b.numpy(x0), np.float64)
    if start.ndim != 2:
        raise ValueError(f"x0 must be laid out (batch, parameters), got the shape {start.shape}")
    count = start.shape[0]
    abs_tol = np.broadcast_to(np.asarray(b.numpy(atol) if b.is_tensor(atol, True) else atol, np.float64), (count,))
    limits = np.asarray(max_iter)
    limits = np.broadcast_to(limits[-1] if limits.ndim == 2 else limits, (count,))  # (checkpoints, batch): the last

    def loss_with_output(x: Any) -> tuple:
        loss = f(x)
        return b.sum(loss), (loss,)
    fg = b.jacobian(loss_with_output, [0], get_output=True, is_f_scalar=True) if method in GRADIENT_METHODS else None

    def evaluate(values: np.ndarray) -> tuple:
        x = b.cast(b.as_tensor(values), dtype)
        if fg is None:
            return np.asarray(b.numpy(f(x)), np.float64).reshape(count), None
        loss, grad = fg(x)
        return (np.asarray(b.numpy(loss), np.float64).reshape(count),
                np.asarray(b.numpy(grad), np.float64).reshape(start.shape))
    runs = run_scipy_minimize(method, evaluate, start, abs_tol, limits, trj)
    name = f'SciPy {method} with {b.name}'
    iterations, evaluations = np.asarray(runs.iterations, np.int32), np.asarray(runs.evaluations, np.int32)
    converged = np.asarray([bool(r.success) for r in runs.results])
    diverged = np.asarray([r.status not in (0, 1) for r in runs.results])  # SciPy's 1: the iteration limit
    messages = [str(r.message) for r in runs.results]

    def result(x: np.ndarray, loss: Any, done: np.ndarray, counts: Any, steps: np.ndarray) -> SolveResult:
        return SolveResult(name, b.cast(b.as_tensor(x), dtype), b.cast(b.as_tensor(np.asarray(loss)), dtype),
                           b.as_tensor(steps), b.as_tensor(np.asarray(counts, np.int32)), b.as_tensor(done & converged),
                           b.as_tensor(done & diverged), messages)
    if not trj:
        return result(np.stack([r.x for r in runs.results]), [float(r.fun) for r in runs.results],
                      np.ones(count, bool), evaluations, iterations)
    points = trajectory_points(runs)
    return [result(np.stack([p[k][0] for p in points]), [p[k][1] for p in points], k >= iterations,
                   [p[k][2] for p in points], np.minimum(k, iterations).astype(np.int32))
            for k in range(len(points[0]))]
