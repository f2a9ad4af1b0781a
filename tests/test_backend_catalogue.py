"""The parts of phiml's backend catalogue beyond NumPy's element-wise and array operations: sparse matrices, the
iterative and triangular solvers (NumPy's results checked against SciPy and direct solves here; every other backend
is checked against NumPy's in `test_backend_contract.py`), and what NumPy lacks (Hessians, variables, `minimize`,
batched sparse matrices), checked on each backend that has them against values computed by hand.
"""

import importlib.util

import numpy as np
import pytest
from backends import LIBRARIES, get_backend
from test_backend_contract import (
    ITERATIONS,
    RHS,
    SPARSE,
    SPARSE_COO,
    SPARSE_CSC,
    SPARSE_CSR,
    SYMMETRIC,
    TRIANGULAR_COO,
    UNSYMMETRIC,
    assert_matches,
    native_converter,
)

from lazyphi.backend import NUMPY, Backend, precision
from lazyphi.backend._backend import OPERATIONS


def _needs(backend: Backend, *ops: str):
    for op in ops:
        if not backend.supports(op):
            pytest.skip(f'{backend.name} lacks {op}')


# --- NumPy against SciPy ---

def test_sparse_matrices_of_numpy_are_scipys():
    from scipy import sparse
    made = {'coo': NUMPY.sparse_coo_tensor(*SPARSE_COO, (4, 3)), 'csr': NUMPY.csr_matrix(*SPARSE_CSR, (4, 3)),
            'csc': NUMPY.csc_matrix(*SPARSE_CSC, (4, 3))}
    for form, matrix in made.items():
        assert sparse.issparse(matrix) and matrix.format == form == NUMPY.get_sparse_format(matrix)
        np.testing.assert_array_equal(matrix.toarray(), SPARSE)
        assemble, parts = NUMPY.disassemble(matrix)
        np.testing.assert_array_equal(assemble(NUMPY, *parts).toarray(), SPARSE)
        np.testing.assert_allclose(NUMPY.mul_matrix_batched_vector(matrix, RHS[:, :3]), RHS[:, :3] @ SPARSE.T)
    reference = sparse.csr_matrix(SPARSE)
    for got, expected in zip(NUMPY.disassemble(made['csr'])[1], (reference.data, reference.indices, reference.indptr),
                             strict=True):
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match=r"two dims, got shape \(2, 2, 2\)"):
        NUMPY.sparse_coo_tensor(np.zeros((1, 3), int), np.ones(1), (2, 2, 2))


def test_sparse_triangular_solves_of_numpy_match_scipy():
    from scipy.linalg import solve_triangular
    rhs = RHS[:2, :3]
    dense = NUMPY.coo_to_dense(TRIANGULAR_COO[0][None], TRIANGULAR_COO[1][None, :, None], (3, 3), False)[0, ..., 0]
    matrix = NUMPY.sparse_coo_tensor(*TRIANGULAR_COO, (3, 3))
    for lower in (True, False):
        for unit in (True, False):
            expected = solve_triangular(dense, rhs.T, lower=lower, unit_diagonal=unit).T
            np.testing.assert_allclose(NUMPY.solve_triangular(matrix, rhs, lower, unit), expected, rtol=1e-6)
    assert NUMPY.solve_triangular(matrix, rhs, True, False).dtype == np.float64
    # SuperLU has no float16 solver (and SciPy no float16 sparse matrices)
    assert NUMPY.solve_triangular(matrix.astype(np.int64), rhs.astype(np.float16), True, False).dtype == np.float32


@pytest.mark.parametrize('method, matrix', [('CG', SYMMETRIC), ('CG-adaptive', SYMMETRIC), ('auto', SYMMETRIC),
                                            ('biCG-stab', UNSYMMETRIC), ('biCG-stab(1)', UNSYMMETRIC),
                                            ('biCG-stab(2)', UNSYMMETRIC), ('biCG-stab(3)', UNSYMMETRIC)])
def test_iterative_solves_of_numpy_match_a_direct_solve(method, matrix):
    expected = np.linalg.solve(matrix, RHS.T).T
    with precision(64):
        for pre in (None, lambda v: v / np.diag(matrix)):
            result = NUMPY.linear_solve(method, matrix, RHS, np.zeros((1, 4)), 1e-10, 1e-12, ITERATIONS, pre)
            np.testing.assert_allclose(result.x[:2], expected[:2], rtol=1e-7, atol=1e-9)
            np.testing.assert_allclose(result.residual, RHS - result.x @ matrix.T, atol=1e-9)
            # the third entry may run 2 iterations, too few for CG and BiCGStab, enough for BiCGStab(l >= 2)
            settled = method.startswith('biCG-stab(') and method != 'biCG-stab(1)'
            assert result.converged.tolist() == [True, True, settled] and not result.diverged.any()
            assert result.iterations[2] <= 2 and result.iterations[:2].max() <= 8
            assert result.message[0].startswith('Converged within')
            assert result.message[2].startswith('Converged within') if settled else \
                'did not converge' in result.message[2]
            assert result.iterations.dtype == result.function_evaluations.dtype == np.int32
    trajectory = NUMPY.linear_solve(method, matrix, RHS, np.zeros((3, 4)), 1e-10, 1e-12,
                                    np.array([[0] * 3, [1] * 3, [30] * 3]), None)
    assert trajectory.x.shape == (3, 3, 4) and trajectory.iterations.shape == (3, 3)
    np.testing.assert_array_equal(trajectory.x[0], 0)
    assert trajectory.iterations[:2].tolist() == [[0, 0, 0], [1, 1, 1]]


def test_higher_order_bicgstab_settles_a_rotating_system_in_fewer_iterations():
    """BiCGStab(l) against BiCGStab on a system whose eigenvalues are far from the real axis (a strong skew part)."""
    size = 30
    skew = 1.5 * (np.eye(size, k=1) - np.eye(size, k=-1))
    matrix = 3 * np.eye(size) + skew + 0.3 * np.random.default_rng(3).standard_normal((size, size))
    rhs = np.random.default_rng(4).standard_normal((2, size))
    iterations = {}
    with precision(64):
        for order in (1, 2, 4):
            result = NUMPY.bi_conjugate_gradient(matrix, rhs, np.zeros((1, size)), 1e-10, 1e-12, np.array([500]), None,
                                                 poly_order=order)
            np.testing.assert_allclose(result.x, np.linalg.solve(matrix, rhs.T).T, rtol=1e-7, atol=1e-9)
            assert result.converged.all()
            np.testing.assert_array_equal(result.function_evaluations, 1 + 2 * order * result.iterations)
            iterations[order] = int(result.iterations.max())
    assert iterations[4] < iterations[2] < iterations[1], iterations


def test_iterative_solves_take_sparse_matrices():
    symmetric = NUMPY.csr_matrix(*_compressed_rows(SYMMETRIC), (4, 4))
    with precision(64):
        result = NUMPY.conjugate_gradient(symmetric, RHS, np.zeros((1, 4)), 1e-10, 1e-12, np.array([30]), None)
    np.testing.assert_allclose(result.x, np.linalg.solve(SYMMETRIC, RHS.T).T, rtol=1e-7)


def _compressed_rows(dense: np.ndarray) -> tuple:
    rows, columns = np.nonzero(dense)
    return columns, np.searchsorted(rows, np.arange(dense.shape[0] + 1)), dense[rows, columns]


def test_solver_errors_name_the_problem():
    arguments = (SYMMETRIC, RHS, np.zeros((1, 4)), 1e-5, 1e-5)
    with pytest.raises(ValueError, match=r"method must be 'auto', .* got 'Newton'"):
        NUMPY.linear_solve('Newton', *arguments, ITERATIONS, None)
    with pytest.raises(ValueError, match=r'poly_order >= 1 .* got 0'):
        NUMPY.linear_solve('biCG', *arguments, ITERATIONS, None)
    with pytest.raises(ValueError, match=r"method must be .* got 'biCG-stab\(two\)'"):
        NUMPY.linear_solve('biCG-stab(two)', *arguments, ITERATIONS, None)
    with pytest.raises(ValueError, match=r'max_iter must hold integers .* got 2\.5'):
        NUMPY.conjugate_gradient(*arguments, 2.5, None)
    with pytest.raises(ValueError, match='max_iter must be equal for all batch entries'):
        NUMPY.conjugate_gradient(*arguments, np.array([[1, 2, 1], [5, 5, 5]]), None)
    with pytest.raises(ValueError, match='max_iter has 2 batch entries but the system 3'):
        NUMPY.conjugate_gradient(*arguments, np.array([5, 5]), None)
    with pytest.raises(TypeError, match=r"pre must be None, a function .* got str"):
        NUMPY.conjugate_gradient(*arguments, ITERATIONS, 'jacobi')


def test_sparse_natives_are_tensors_that_go_to_numpy_as_scipy_matrices(backend):
    t = native_converter(backend)
    made = [backend.sparse_coo_tensor(*map(t, SPARSE_COO), (4, 3))]
    if backend.supports('csr_matrix'):
        made.append(backend.csr_matrix(*map(t, SPARSE_CSR), (4, 3)))
    for matrix in made:
        assert backend.is_tensor(matrix, True) and backend.is_sparse(matrix)
        assert tuple(backend.staticshape(matrix)) == (4, 3)
        on_host = backend.numpy(matrix)
        assert NUMPY.is_sparse(on_host) and NUMPY.get_sparse_format(on_host) == backend.get_sparse_format(matrix)
        np.testing.assert_array_equal(on_host.toarray(), SPARSE)
    assert not backend.is_sparse(t(RHS)) and backend.get_sparse_format(t(RHS)) == 'dense'


# --- what NumPy lacks, on each backend that has it ---

def _loss(b):
    """A loss per batch entry of `x (batch, 3)` and `w (batch, 1)` whose derivatives are written out in
    `_derivatives`, and a further output."""
    def f(x, w):
        loss = b.sum(x ** 3, -1) * w[:, 0] + x[:, 0] * x[:, 1] * w[:, 0] ** 2
        return loss, (b.mul(loss, 2.0),)
    return f


def _derivatives(x, w):
    w = w[:, 0]
    gradient_x = 3 * x ** 2 * w[:, None] + np.stack([x[:, 1], x[:, 0], 0 * w], -1) * w[:, None] ** 2
    gradient_w = (np.sum(x ** 3, -1) + 2 * x[:, 0] * x[:, 1] * w)[:, None]
    mixed = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    h_xx = np.stack([np.diag(6 * x[b]) * w[b] + w[b] ** 2 * mixed for b in range(len(w))])
    h_xw = (3 * x ** 2 + 2 * w[:, None] * np.stack([x[:, 1], x[:, 0], 0 * w], -1))[:, :, None]
    h_ww = (2 * x[:, 0] * x[:, 1])[:, None, None]
    return (gradient_x, gradient_w), ((h_xx, h_xw), (h_xw.transpose(0, 2, 1), h_ww))


@pytest.mark.slow  # seconds on JAX and TensorFlow, which compile each of the many small operations
@pytest.mark.parametrize('compiled', [False, True], ids=['eager', 'compiled'])
def test_hessian_per_batch_entry(backend, compiled):
    _needs(backend, 'jit_compile_hessian' if compiled else 'hessian')
    t = native_converter(backend)
    x, w = np.array([[1., 2, 3], [.5, -1, 2]]), np.array([[2.], [3]])
    gradients, hessian = _derivatives(x, w)
    loss = np.sum(x ** 3, -1) * w[:, 0] + x[:, 0] * x[:, 1] * w[:, 0] ** 2
    transform = backend.jit_compile_hessian if compiled else backend.hessian
    with precision(64):  # torch makes the arguments differentiated by floats of the current precision
        assert_matches(backend, transform(_loss(backend), [0, 1], True, True)(t(x), t(w)),
                       ((2 * loss,), gradients, hessian))
        assert_matches(backend, transform(_loss(backend), [1], False, False)(t(x), t(w)), (((hessian[1][1],),),))
        assert_matches(backend, transform(_loss(backend), [0], False, True)(t(x), t(w)),
                       ((gradients[0],), ((hessian[0][0],),)))


def test_variable_holds_its_value(backend):
    _needs(backend, 'variable')
    variable = backend.variable(native_converter(backend)(RHS))
    assert backend.is_tensor(variable, True)
    np.testing.assert_allclose(backend.numpy(variable), RHS.astype(np.float32), rtol=1e-6)
    gradient = backend.jacobian(lambda v: (backend.sum(v * v), ()), [0], False, True)(variable)[0]
    np.testing.assert_allclose(backend.numpy(gradient), 2 * RHS, rtol=1e-5)


@pytest.mark.parametrize('method', ['auto', 'BFGS', 'Nelder-Mead'])
def test_minimize_per_batch_entry(backend, method):
    _needs(backend, 'minimize')
    t = native_converter(backend)
    target, x0 = t(RHS[:2, :2]), t(np.zeros((2, 2)))

    def loss(x):
        return backend.sum((x - target) ** 2, -1)
    with precision(64):
        found = backend.minimize(method, loss, x0, 1e-9, np.array([300, 300]), False)
        trajectory = backend.minimize(method, loss, x0, 1e-9, np.array([300, 300]), True)
    np.testing.assert_allclose(backend.numpy(found.x), RHS[:2, :2], atol=1e-4)
    assert backend.numpy(found.converged).tolist() == [True, True]
    assert found.method == f"SciPy {'L-BFGS-B' if method == 'auto' else method} with {backend.name}"
    assert np.all(backend.numpy(found.iterations) > 0) and np.all(backend.numpy(found.residual) < 1e-8)
    np.testing.assert_array_equal(backend.numpy(trajectory[0].x), 0)
    np.testing.assert_allclose(backend.numpy(trajectory[-1].x), backend.numpy(found.x), atol=1e-6)
    with pytest.raises(ValueError, match=r"minimize method must be 'auto' or one of .* got 'Newton'"):
        backend.minimize('Newton', loss, x0, 1e-5, np.array([5, 5]), False)


def _densified(matrix):
    """A sparse native as a dense one, in the library's own way (no backend operation does this)."""
    if hasattr(matrix, 'to_dense'):  # torch
        return matrix.to_dense()
    if hasattr(matrix, 'todense'):  # jax.experimental.sparse
        return matrix.todense()
    import tensorflow as tf
    return tf.sparse.to_dense(matrix)


def test_batched_sparse_matrices(backend):
    _needs(backend, 'sparse_coo_tensor_batched')
    t = native_converter(backend)
    indices, values = SPARSE_COO
    batched = backend.sparse_coo_tensor_batched(t(np.stack([indices.T, indices.T])), t(np.stack([values, -values])),
                                                (4, 3))
    np.testing.assert_array_equal(backend.numpy(_densified(batched)), np.stack([SPARSE, -SPARSE]))
    if backend.supports('csr_matrix_batched'):
        columns, pointers, values = SPARSE_CSR
        batched = backend.csr_matrix_batched(t(np.stack([columns] * 2)), t(np.stack([pointers] * 2)),
                                             t(np.stack([values, 2 * values])), (4, 3))
        np.testing.assert_array_equal(backend.numpy(_densified(batched)), np.stack([SPARSE, 2 * SPARSE]))
    if backend.supports('csc_matrix_batched'):
        column_pointers, rows, values = SPARSE_CSC
        batched = backend.csc_matrix_batched(t(np.stack([column_pointers] * 2)), t(np.stack([rows] * 2)),
                                             t(np.stack([values, 2 * values])), (4, 3))
        np.testing.assert_array_equal(backend.numpy(_densified(batched)), np.stack([SPARSE, 2 * SPARSE]))


# --- the catalogue as a whole ---

def test_every_catalogue_operation_runs_on_some_backend():
    """Each operation of phiml's backend catalogue (`OPERATIONS`) is supported by at least one backend."""
    missing_libraries = [library for library in LIBRARIES.values() if importlib.util.find_spec(library) is None]
    if missing_libraries:
        pytest.skip(f'needs every library; {missing_libraries} not installed')
    backends = [get_backend(name) for name in LIBRARIES]
    unsupported = sorted(op for op in OPERATIONS if not any(b.supports(op) for b in backends))
    assert unsupported == []
