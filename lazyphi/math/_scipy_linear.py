"""The 'scipy-*' iterative methods of `solve_linear`: `scipy.sparse.linalg` run on the host, one system per
batch entry, and the 'ilu' preconditioner they take (`scipy.sparse.linalg.spilu` of the dense matrix).

SciPy works on float64 NumPy arrays. A matrix goes to it through the backend's `numpy_call` (NumPy and torch call
the host code directly, JAX through `jax.pure_callback`, TensorFlow through `tf.numpy_function`), so these methods
also run inside `jit_compile`: the compiled program hands the matrix, `y`, `x0` and the tolerances to the host and
gets back arrays of known shapes (the solutions, residuals, iteration counts, convergence flags and SciPy's status
codes). A linear function with values at hand is applied on the host instead, through a `LinearOperator` that calls
it on the backend; while a compiler traces, the caller first builds the function's matrix in the traced program.
The solution goes back to the backend and dtype of the initial guess.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..backend import DType, convert
from ._conversion import reshaped_native, reshaped_numpy
from ._convert import to_backend
from ._creation import reshaped_tensor
from ._dims import batch, merge_shapes, non_batch
from ._magic_ops import expand
from ._natives import common_backend
from ._ops import cast
from ._tensor import Tensor

# lazyphi's name -> the name of the function in scipy.sparse.linalg
SCIPY_ITERATIVE = {'scipy-CG': 'cg', 'scipy-GMres': 'gmres', 'scipy-biCG': 'bicg', 'scipy-biCG-stab': 'bicgstab',
                   'scipy-CGS': 'cgs', 'scipy-lGMres': 'lgmres', 'scipy-QMR': 'qmr', 'scipy-GCrotMK': 'gcrotmk',
                   'scipy-lsqr': 'lsqr'}
# these apply the transposed matrix, so a function is first laid out as its matrix
NEEDS_MATRIX = ('scipy-biCG', 'scipy-QMR', 'scipy-lsqr')
PRECONDITIONERS = ('ilu',)
# the status code of an entry whose 'ilu' preconditioner failed (SciPy's own codes are small integers)
ILU_FAILED = -1000


def scipy_solve(method: str, matrix: Tensor | None, operator: Callable, y: Tensor, x0: Tensor, rel_tol: Tensor,
                abs_tol: Tensor, max_iterations: Tensor, preconditioner: str | None) -> dict:
    """Solve `A x = y` per batch entry with the SciPy function that `method` names.

    `A` is `matrix` (rows named like the columns, the dual dims `~d` for the dims `d` of `x0`) where given, else
    the linear `operator` applied to a tensor like `x0` (then `y` and `x0` must have values). Returns a dict of
    tensors along the batch dims: the solution `x`, the `residual` `y - A x`, `iterations`, `evaluations`,
    `converged`, `diverged` and `status`, SciPy's status code (see `status_message`).
    """
    columns, rows = non_batch(x0), non_batch(y)
    batches = merge_shapes(batch(y), batch(x0), batch(rel_tol), batch(abs_tol), batch(max_iterations),
                           batch(matrix) if matrix is not None else ())
    groups = [[batches, rows], [batches, columns], [batches], [batches], [batches]]
    inputs = [y, x0, rel_tol, abs_tol, max_iterations]
    dtype = x0.dtype
    solve = _Solver(method, preconditioner)
    outputs = [[batches, columns], [batches, rows], [batches], [batches], [batches], [batches]]
    if matrix is None:
        backend = x0._dense().backend
        arrays = [reshaped_numpy(expand(t, batches), g) for t, g in zip(inputs, groups, strict=True)]
        found = solve(_apply_on_host(operator, batches, columns, rows, backend, dtype), *arrays)
        found = [to_backend(reshaped_tensor(v, g, convert=False), backend) for v, g in zip(found, outputs,
                                                                                             strict=True)]
    else:
        tensors = [matrix, *inputs]
        backend = common_backend([t._dense() for t in tensors])
        # SciPy's results carry no derivatives (JAX refuses to differentiate a callback); solve_linear's custom
        # gradient differentiates the solve
        natives = [backend.stop_gradient(convert(reshaped_native(expand(t, batches), g), backend))
                   for t, g in zip(tensors, [[batches, rows, columns.as_dual()], *groups], strict=True)]
        count = batches.volume
        shapes = [(count, columns.volume), (count, rows.volume), (count,), (count,), (count,), (count,)]
        dtypes = [dtype, dtype, DType(int, 32), DType(bool), DType(bool), DType(int, 32)]
        found = backend.numpy_call(solve, shapes, dtypes, *natives)
        found = [reshaped_tensor(v, g, convert=False) for v, g in zip(found, outputs, strict=True)]
    x, residual, iterations, converged, diverged, status = found
    return {'x': x if x.dtype == dtype else cast(x, dtype), 'residual': cast(residual, dtype),
            'iterations': iterations, 'evaluations': iterations + 1, 'converged': converged, 'diverged': diverged,
            'status': status}


def _apply_on_host(operator: Callable, batches, columns, rows, backend, dtype) -> Callable:
    """`apply(entry, vector)`: `A` of one batch entry applied to a NumPy `vector` by calling `operator` on the
    backend with the whole batch, zero but this entry."""
    count = batches.volume

    def apply(entry: int, vector: np.ndarray) -> np.ndarray:
        values = np.zeros((count, columns.volume))
        values[entry] = np.ravel(vector)
        x = to_backend(reshaped_tensor(values, [batches, columns], convert=False), backend)
        x = x if x.dtype == dtype else cast(x, dtype)
        return reshaped_numpy(expand(operator(x), batches), [batches, rows])[entry].astype(np.float64)
    return apply


class _Solver:
    """The host part: SciPy's `method` on NumPy arrays, one system per batch entry (the first axis)."""

    def __init__(self, method: str, preconditioner: str | None):
        self.method = method
        self.preconditioner = preconditioner

    def __call__(self, system, ys: np.ndarray, x0s: np.ndarray, rel: np.ndarray, absolute: np.ndarray,
                 limits: np.ndarray) -> tuple:
        """`system`: the matrices `(batch, rows, columns)` or a function `apply(entry, vector)`. Returns the
        solutions, residuals, iteration counts, convergence and divergence flags and status codes, per entry."""
        import scipy.sparse.linalg as sla
        ys, x0s = np.asarray(ys, np.float64), np.asarray(x0s, np.float64)
        rel, absolute = np.asarray(rel, np.float64), np.asarray(absolute, np.float64)
        limits = np.asarray(limits, np.int64)
        outputs = [[], [], [], [], [], []]
        for entry in range(ys.shape[0]):
            if callable(system):
                a = sla.LinearOperator((ys.shape[1], x0s.shape[1]), matvec=lambda v, e=entry: system(e, v),
                                       dtype=np.float64)
            else:
                a = np.asarray(system[entry], np.float64)
            found = self._one(a, ys[entry], x0s[entry], float(rel[entry]), float(absolute[entry]),
                              int(limits[entry]))
            for values, value in zip(outputs, found, strict=True):
                values.append(value)
        kinds = [np.float64, np.float64, np.int32, bool, bool, np.int32]
        return tuple(np.asarray(values, kind) for values, kind in zip(outputs, kinds, strict=True))

    def _one(self, a, y: np.ndarray, x0: np.ndarray, rel: float, absolute: float, limit: int) -> tuple:
        import scipy.sparse.linalg as sla
        function = getattr(sla, SCIPY_ITERATIVE[self.method])
        if self.method == 'scipy-lsqr':
            # lsqr stops on relative measures only: its atol and btol both take rel_tol (abs_tol is not used)
            x, status, steps = function(a, y, x0=x0, atol=rel, btol=rel, iter_lim=limit)[:3]
            return x, y - a @ x, steps, status in (0, 1), status not in (0, 1, 2), status
        steps = [0]

        def count_step(*_) -> None:
            steps[0] += 1
        options = {'x0': x0, 'rtol': rel, 'atol': absolute, 'maxiter': limit, 'callback': count_step}
        if self.preconditioner == 'ilu':
            factors = _ilu(a)
            if factors is None:
                return np.full_like(x0, np.nan), np.full_like(y, np.nan), 0, False, True, ILU_FAILED
            inverse = sla.LinearOperator(a.shape, matvec=factors.solve, dtype=np.float64,
                                         rmatvec=lambda v: factors.solve(v, 'T'))
            if self.method == 'scipy-QMR':  # QMR splits M into a left and a right part; the right one is identity
                identity = sla.LinearOperator(a.shape, matvec=lambda v: v, rmatvec=lambda v: v, dtype=np.float64)
                options.update({'M1': inverse, 'M2': identity})
            else:
                options['M'] = inverse
        if self.method == 'scipy-GMres':
            options['callback_type'] = 'pr_norm'  # called once per inner iteration
        x, status = function(a, y, **options)
        failed = status < 0 or not np.all(np.isfinite(x))
        return x, y - a @ x, steps[0], status == 0, failed, status


def status_message(method: str, status: int) -> str:
    """The message of a SolveInfo for SciPy's status code of one batch entry."""
    name = SCIPY_ITERATIVE[method]
    if status == ILU_FAILED:
        return f'Preconditioner \'ilu\' failed: SciPy\'s spilu finds the matrix singular (SciPy {name} not run)'
    if method == 'scipy-lsqr':
        return f'{_LSQR_STATUS.get(status, "stopped")} (SciPy lsqr, status {status})'
    if status == 0:
        return f'Converged (SciPy {name})'
    if status < 0:
        return f'Broke down with status {status} (SciPy {name})'
    return f'Did not converge within {status} iterations (SciPy {name})'


_LSQR_STATUS = {0: 'x = 0 solves it', 1: 'Converged', 2: 'Solved the least-squares problem only'}


def _ilu(matrix: np.ndarray):
    """An incomplete LU factorisation of one dense matrix, by `scipy.sparse.linalg.spilu`; None where SciPy finds
    a factor exactly singular."""
    import scipy.sparse
    import scipy.sparse.linalg as sla
    try:
        return sla.spilu(scipy.sparse.csc_matrix(matrix))
    except RuntimeError:  # SciPy reports an exactly singular factor this way
        return None
