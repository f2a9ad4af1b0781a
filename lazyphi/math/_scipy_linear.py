"""The 'scipy-*' iterative methods of `solve_linear`: `scipy.sparse.linalg` run on the host, one system per
batch entry, and the 'ilu' preconditioner they take (`scipy.sparse.linalg.spilu` of the dense matrix).

These need values: the matrix (or the results of the linear function) is read back as float64 NumPy arrays,
so they run eagerly on every backend but not while `jit_compile` traces (the caller raises there). The solution
goes back to the backend and dtype of the initial guess.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._conversion import reshaped_numpy
from ._convert import to_backend
from ._creation import reshaped_tensor
from ._dims import batch, merge_shapes, non_batch
from ._magic_ops import expand
from ._ops import cast
from ._tensor import Tensor

# lazyphi's name -> the name of the function in scipy.sparse.linalg
SCIPY_ITERATIVE = {'scipy-CG': 'cg', 'scipy-GMres': 'gmres', 'scipy-biCG': 'bicg', 'scipy-biCG-stab': 'bicgstab',
                   'scipy-CGS': 'cgs', 'scipy-lGMres': 'lgmres', 'scipy-QMR': 'qmr', 'scipy-GCrotMK': 'gcrotmk',
                   'scipy-lsqr': 'lsqr'}
# these apply the transposed matrix, so a function is first laid out as its matrix
NEEDS_MATRIX = ('scipy-biCG', 'scipy-QMR', 'scipy-lsqr')
PRECONDITIONERS = ('ilu',)


def scipy_solve(method: str, matrix: Tensor | None, operator: Callable, y: Tensor, x0: Tensor, rel_tol: Tensor,
                abs_tol: Tensor, max_iterations: Tensor, preconditioner: str | None) -> dict:
    """Solve `A x = y` per batch entry with the SciPy function that `method` names.

    `A` is `matrix` (rows named like the columns, the dual dims `~d` for the dims `d` of `x0`) where given, else
    the linear `operator` applied to a tensor like `x0`. Returns a dict of tensors along the batch dims (the
    solution `x`, the `residual` `y - A x`, `iterations`, `evaluations`, `converged`, `diverged`) and `msg`, a
    NumPy array of str along the batch dims.
    """
    import scipy.sparse.linalg as sla
    columns = non_batch(x0)
    rows = non_batch(y)
    batches = merge_shapes(batch(y), batch(x0), batch(rel_tol), batch(abs_tol), batch(max_iterations),
                           batch(matrix) if matrix is not None else ())
    count = batches.volume
    ys = reshaped_numpy(expand(y, batches), [batches, rows]).astype(np.float64)
    x0s = reshaped_numpy(expand(x0, batches), [batches, columns]).astype(np.float64)
    rel = reshaped_numpy(expand(rel_tol, batches), [batches]).astype(np.float64)
    absolute = reshaped_numpy(expand(abs_tol, batches), [batches]).astype(np.float64)
    limits = reshaped_numpy(expand(max_iterations, batches), [batches]).astype(np.int64)
    matrices = None
    if matrix is not None:
        matrices = reshaped_numpy(expand(matrix, batches), [batches, rows, columns.as_dual()]).astype(np.float64)
    backend, dtype = x0._dense().backend, x0.dtype

    def apply(entry: int, vector: np.ndarray) -> np.ndarray:
        """`A` of one batch entry applied to `vector`: the operator on the whole batch, zero but this entry."""
        values = np.zeros((count, columns.volume))
        values[entry] = np.ravel(vector)
        x = to_backend(reshaped_tensor(values, [batches, columns], convert=False), backend)
        x = x if x.dtype == dtype else cast(x, dtype)
        return reshaped_numpy(expand(operator(x), batches), [batches, rows])[entry].astype(np.float64)
    function = getattr(sla, SCIPY_ITERATIVE[method])
    xs, residuals, iterations, converged, diverged, messages = [], [], [], [], [], []
    for entry in range(count):
        if matrices is not None:
            a = matrices[entry]
        else:
            a = sla.LinearOperator((rows.volume, columns.volume), matvec=lambda v, e=entry: apply(e, v),
                                   dtype=np.float64)
        steps = [0]

        def count_step(*_, steps=steps) -> None:
            steps[0] += 1
        if method == 'scipy-lsqr':
            # lsqr stops on relative measures only: its atol and btol both take rel_tol (abs_tol is not used)
            result = function(a, ys[entry], x0=x0s[entry], atol=rel[entry], btol=rel[entry],
                              iter_lim=int(limits[entry]))
            x, status, steps[0] = result[0], result[1], result[2]
            ok, failed = status in (0, 1), status not in (0, 1, 2)
            text = f'{_LSQR_STATUS.get(status, "stopped")} (SciPy lsqr, status {status})'
        else:
            options = {'x0': x0s[entry], 'rtol': rel[entry], 'atol': absolute[entry], 'maxiter': int(limits[entry]),
                       'callback': count_step}
            if preconditioner == 'ilu':
                factors = _ilu(a, method)
                inverse = sla.LinearOperator(a.shape, matvec=factors.solve, dtype=np.float64,
                                             rmatvec=lambda v, f=factors: f.solve(v, 'T'))
                if method == 'scipy-QMR':  # QMR splits M into a left and a right part; the right one is identity
                    identity = sla.LinearOperator(a.shape, matvec=lambda v: v, rmatvec=lambda v: v, dtype=np.float64)
                    options.update({'M1': inverse, 'M2': identity})
                else:
                    options['M'] = inverse
            if method == 'scipy-GMres':
                options['callback_type'] = 'pr_norm'  # called once per inner iteration
            x, status = function(a, ys[entry], **options)
            ok = status == 0
            failed = status < 0 or not np.all(np.isfinite(x))
            text = f'Converged (SciPy {function.__name__})' if ok else \
                f'Broke down with status {status} (SciPy {function.__name__})' if status < 0 else \
                f'Did not converge within {status} iterations (SciPy {function.__name__})'
        xs.append(x)
        residuals.append(ys[entry] - a @ x)
        iterations.append(steps[0])
        converged.append(ok)
        diverged.append(failed)
        messages.append(text)

    def along_batches(values: list, axes: list, numpy_dtype=None) -> Tensor:
        return reshaped_tensor(np.asarray(values, dtype=numpy_dtype), axes, convert=False)
    x = to_backend(along_batches(xs, [batches, columns]), backend)
    residual = to_backend(along_batches(residuals, [batches, rows]), backend)
    steps = along_batches(iterations, [batches], np.int32)
    return {'x': x if x.dtype == dtype else cast(x, dtype), 'residual': cast(residual, dtype), 'iterations': steps,
            'evaluations': steps + 1, 'converged': along_batches(converged, [batches], bool),
            'diverged': along_batches(diverged, [batches], bool),
            'msg': np.asarray(messages, dtype=object).reshape(batches.sizes)}


_LSQR_STATUS = {0: 'x = 0 solves it', 1: 'Converged', 2: 'Solved the least-squares problem only'}


def _ilu(matrix: np.ndarray, method: str):
    """An incomplete LU factorisation of one dense matrix, by `scipy.sparse.linalg.spilu`."""
    import scipy.sparse
    import scipy.sparse.linalg as sla
    try:
        return sla.spilu(scipy.sparse.csc_matrix(matrix))
    except RuntimeError as error:  # SciPy reports an exactly singular factor this way
        raise ValueError(f'solve_linear(): preconditioner \'ilu\' for {method!r} failed on a matrix SciPy finds '
                         f'singular ({error}); pass preconditioner=None') from error
