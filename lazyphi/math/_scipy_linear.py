"""The 'scipy-*' iterative methods of `solve_linear`: `scipy.sparse.linalg` run on the host, one system per
batch entry, and the 'ilu' preconditioner they take (`scipy.sparse.linalg.spilu`); also the host part of the
direct methods for sparse matrices (`SparseDirect`: `scipy.sparse.linalg.splu`).

SciPy works on float64 NumPy arrays. A matrix goes to it through the backend's `numpy_call` (NumPy and torch call
the host code directly, JAX through `jax.pure_callback`, TensorFlow through `tf.numpy_function`), so these methods
also run inside `jit_compile`: the compiled program hands the matrix, `y`, `x0` and the tolerances to the host and
gets back arrays of known shapes (the solutions, residuals, iteration counts, convergence flags and SciPy's status
codes). A linear function with values at hand is applied on the host instead, through a `LinearOperator` that calls
it on the backend; while a compiler traces, the caller first builds the function's matrix in the traced program.
The solution goes back to the backend and dtype of the initial guess.

A sparse matrix whose indices and values are at hand and that has no batch dims (one matrix for all entries)
goes to SciPy as one `scipy.sparse.csr_matrix` (`host_matrix`), built once on the host and never laid out densely;
the compiled program (or the eager call) then hands only `y`, `x0` and the tolerances to the host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..backend import DType, convert
from ._conversion import reshaped_native, reshaped_numpy
from ._convert import to_backend
from ._creation import reshaped_tensor
from ._dims import batch, merge_shapes, non_batch
from ._magic_ops import expand
from ._natives import common_backend
from ._ops import cast, to_float
from ._shape import Shape
from ._sparse import SparseTensor
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
    if set(columns.names) == set(rows.names):  # in the rows' order, so that a symmetric matrix stays symmetric
        columns = columns.only(rows.names, reorder=True)
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
        shared = host_matrix(matrix, rows, columns.as_dual())
        if shared is None:  # dense, traced or batched: one dense matrix per entry goes to the host with the rest
            tensors, groups = [to_float(matrix), *inputs], [[batches, rows, columns.as_dual()], *groups]
        else:  # the host holds the one sparse matrix (its 'ilu' factors kept with it); only the vectors travel
            kept = matrix.derived(('ilu', rows.names, columns.names), lambda: _ilu(shared)) \
                if preconditioner == 'ilu' else None
            tensors, solve = inputs, functools.partial(solve, shared, ilu=kept)
        backend = common_backend([t._dense() for t in tensors])
        # SciPy's results carry no derivatives (JAX refuses to differentiate a callback); solve_linear's custom
        # gradient differentiates the solve
        natives = [backend.stop_gradient(convert(reshaped_native(expand(t, batches), g), backend))
                   for t, g in zip(tensors, groups, strict=True)]
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
                 limits: np.ndarray, ilu=None) -> tuple:
        """`system`: the matrices `(batch, rows, columns)`, one `scipy.sparse` matrix for all entries (with its
        'ilu' factors `ilu`, kept with its tensor) or a function `apply(entry, vector)`. Returns the solutions,
        residuals, iteration counts, convergence and divergence flags and status codes, per entry."""
        import scipy.sparse
        import scipy.sparse.linalg as sla
        ys, x0s = np.asarray(ys, np.float64), np.asarray(x0s, np.float64)
        rel, absolute = np.asarray(rel, np.float64), np.asarray(absolute, np.float64)
        limits = np.asarray(limits, np.int64)
        shared = scipy.sparse.issparse(system)
        shared_ilu = ilu if shared else None  # a sparse system comes with its kept factors (scipy_solve)
        outputs = [[], [], [], [], [], []]
        for entry in range(ys.shape[0]):
            if shared:
                a = system
            elif callable(system):
                a = sla.LinearOperator((ys.shape[1], x0s.shape[1]), matvec=lambda v, e=entry: system(e, v),
                                       dtype=np.float64)
            else:
                a = np.asarray(system[entry], np.float64)
            factors = shared_ilu if shared or self.preconditioner != 'ilu' else _ilu(a)
            found = self._one(a, ys[entry], x0s[entry], float(rel[entry]), float(absolute[entry]),
                              int(limits[entry]), factors)
            for values, value in zip(outputs, found, strict=True):
                values.append(value)
        kinds = [np.float64, np.float64, np.int32, bool, bool, np.int32]
        return tuple(np.asarray(values, kind) for values, kind in zip(outputs, kinds, strict=True))

    def _one(self, a, y: np.ndarray, x0: np.ndarray, rel: float, absolute: float, limit: int, factors) -> tuple:
        """One system; `factors`: the 'ilu' factors of `a` (None where there is no preconditioner or spilu failed)."""
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


def _ilu(matrix):
    """An incomplete LU factorisation of one matrix (dense or `scipy.sparse`), by `scipy.sparse.linalg.spilu`; None
    where SciPy finds a factor exactly singular."""
    import scipy.sparse
    import scipy.sparse.linalg as sla
    try:
        return sla.spilu(scipy.sparse.csc_matrix(matrix))
    except RuntimeError:  # SciPy reports an exactly singular factor this way
        return None


def host_matrix(matrix: Tensor, rows: Shape, columns: Shape):
    """`matrix` as one `scipy.sparse.csr_matrix` of float64 values, its rows the dims `rows` and its columns the
    (dual) dims `columns`, each side flattened row-major in the given order (as `reshaped_native` packs them), with
    repeated coordinates added up: `SparseTensor.host_csr`, kept by the tensor (not to be modified).

    None where `matrix` is not such a sparse tensor: dense, its indices or values not at hand (inside `jit_compile`
    or a trace), with batch dims (a matrix per entry), or with dims beyond the sparse ones (value dims).
    """
    if not isinstance(matrix, SparseTensor) or set(matrix.shape.names) != set(rows.names) | set(columns.names):
        return None
    return matrix.host_csr(rows.names, columns.names, DType(float, 64))


class SparseDirect:
    """The direct solution of one `scipy.sparse` matrix for many right-hand sides.

    A square matrix is factored once by `scipy.sparse.linalg.splu`; each call solves with its factors. Where the
    factor `U` has a pivot at rounding level (a singular matrix, such as a Laplace operator with periodic or
    zero-gradient boundaries) and the null space is one vector (found by two steps of inverse iteration with the
    factors, and checked: `A v` at rounding level, and no second such vector orthogonal to it), the factors' solution
    minus its part along that vector is the least-squares solution of smallest norm, as the dense direct method
    gives. Otherwise (a larger null space, a matrix that is not square or that `splu` finds exactly singular, or a
    solution that is not finite) `scipy.sparse.linalg.lsqr` solves the entry, from zero with tight tolerances: the
    same solution, by an iterative method, slow on ill-conditioned large systems.
    """

    def __init__(self, matrix):
        import scipy.sparse.linalg as sla
        self.matrix = matrix
        self.factors = None
        self.singular = True
        if matrix.shape[0] == matrix.shape[1]:
            try:
                self.factors = sla.splu(matrix.tocsc(), permc_spec=_ordering(matrix))
            except RuntimeError:  # SciPy reports an exactly singular factor this way
                self.factors = None
            self.singular = self.factors is None or _nearly_singular(self.factors.U.diagonal())
        self.null = self._null_vector() if self.singular and self.factors is not None else None
        if self.singular and self.null is None:
            self.factors = None
        self.method = 'SciPy lsqr' if self.factors is None else \
            'SciPy splu (its null space projected out)' if self.singular else 'SciPy splu'

    def _null_vector(self) -> np.ndarray | None:
        """The one vector (of norm 1) spanning the null space of the singular matrix, or None where there is none
        the factors find or more than one."""
        rng = np.random.default_rng(0)
        scale = float(np.max(np.abs(self.matrix.data), initial=0)) * self.matrix.shape[0]
        found = []
        with np.errstate(all='ignore'):
            for _ in range(2):
                v = rng.standard_normal(self.matrix.shape[0])
                for _ in range(2):  # inverse iteration: the solution is dominated by the null space
                    v = self.factors.solve(v)
                    for u in found:
                        v = v - (u @ v) * u
                    v = v / np.linalg.norm(v)
                if not np.all(np.isfinite(v)) or np.linalg.norm(self.matrix @ v) > _NULL * scale:
                    break
                found.append(v)
        return found[0] if len(found) == 1 else None

    def __call__(self, ys: np.ndarray) -> np.ndarray:
        """The solutions `(entries, columns)` of the right-hand sides `ys` `(entries, rows)`."""
        import scipy.sparse.linalg as sla
        ys = np.asarray(ys, np.float64)
        if self.factors is None:
            return np.stack([sla.lsqr(self.matrix, y, atol=_LSQR_TOL, btol=_LSQR_TOL, conlim=1e16)[0] for y in ys])
        with np.errstate(all='ignore'):
            xs = np.ascontiguousarray(self.factors.solve(np.asfortranarray(ys.T)).T)
            if not self.singular:
                return xs
            xs = xs - np.outer(xs @ self.null, self.null)
        for entry in np.nonzero(~np.all(np.isfinite(xs), axis=1))[0]:
            xs[entry] = sla.lsqr(self.matrix, ys[entry], atol=_LSQR_TOL, btol=_LSQR_TOL, conlim=1e16)[0]
        return xs


def _ordering(matrix) -> str:
    """The column ordering `splu` factors `matrix` in: a minimum degree ordering of `A^T + A` where the nonzero
    pattern is symmetric (grid operators), else SciPy's default COLAMD. A 128x128 Laplace: 23 ms and 0.66 M nonzero
    factor entries instead of 35 ms and 1.2 M; with periodic boundaries 49 ms instead of 87 ms."""
    pattern = matrix.copy()
    pattern.data[:] = 1
    return 'MMD_AT_PLUS_A' if (pattern - pattern.T).nnz == 0 else 'COLAMD'


_LSQR_TOL = 1e-12  # lsqr's atol and btol where the direct method falls back to it
_NULL = 1e-9  # |A v| up to this times n max|A| counts as zero: v is in the null space


def _nearly_singular(pivots: np.ndarray) -> bool:
    """Whether the diagonal of an LU factor `U` has a zero or non-finite pivot, or one at rounding level (the
    rank-deficient factor of a singular matrix keeps one of roughly n * eps times the largest)."""
    magnitudes = np.abs(pivots)
    if magnitudes.size == 0 or not np.all(np.isfinite(magnitudes)):
        return True
    return bool(magnitudes.min() <= magnitudes.size * np.finfo(np.float64).eps * magnitudes.max())
