"""`solve_linear` of sparse matrices by the direct and 'scipy-*' methods: solved on the host with one
`scipy.sparse` matrix, never laid out densely, against NumPy's dense solve and phiml, on every backend."""

import warnings
from unittest import mock

import numpy as np
import pytest
import scipy.sparse

from lazyphi import math
from lazyphi.math import Solve, batch, channel, dual, instance, spatial
from lazyphi.math import _scipy_linear as scipy_linear
from lazyphi.math._scipy_linear import SparseDirect
from lazyphi.math._sparse import SparseTensor

pytestmark = pytest.mark.usefixtures('backend')

NX, NY = 5, 4  # a grid that is not square, so that mixing up x and y shows
RNG = np.random.default_rng(5)
Y = RNG.standard_normal((2, NX, NY))


def line(n: int, periodic: bool = False) -> scipy.sparse.csr_matrix:
    """The 1-D second difference `-u[i-1] + 2 u[i] - u[i+1]` (zero outside, or periodic)."""
    matrix = scipy.sparse.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).tolil()
    if periodic:
        matrix[0, n - 1] = matrix[n - 1, 0] = -1
    return matrix.tocsr()


def laplace(nx: int = NX, ny: int = NY, drift: float = 0., periodic: bool = False) -> scipy.sparse.csr_matrix:
    """The negative 2-D Laplace operator on an `nx` x `ny` grid, rows and columns flattened x-major (x, y), plus
    `drift` times a one-sided difference along y (not symmetric)."""
    matrix = scipy.sparse.kronsum(line(ny, periodic), line(nx, periodic))
    return (matrix + drift * scipy.sparse.diags([np.ones(nx * ny - 1)], [1])).tocsr()


def from_scipy(matrix, nx: int = NX, ny: int = NY):
    return math.tensor(matrix, spatial(x=nx, y=ny) + dual(x=nx, y=ny))


def by_sparse_tensor(matrix, nx: int = NX, ny: int = NY):
    """The same matrix built from coordinates by `math.sparse_tensor` (listed as 'coo', columns first)."""
    coo = matrix.tocoo()
    (rx, ry), (cx, cy) = np.unravel_index(coo.row, (nx, ny)), np.unravel_index(coo.col, (nx, ny))
    indices = math.tensor(np.stack([cx, cy, rx, ry], -1), instance('entries'), channel(index='~x,~y,x,y'))
    values = math.tensor(coo.data, instance('entries'))
    return math.sparse_tensor(indices, values, spatial(x=nx, y=ny) + dual(x=nx, y=ny))


BUILDERS = {'from_scipy': from_scipy, 'sparse_tensor': by_sparse_tensor}


@pytest.fixture
def never_dense(monkeypatch):
    """Makes laying out a sparse tensor densely raise inside the `with` block."""
    class NeverDense:
        def __enter__(self):
            def refuse(tensor):
                raise AssertionError(f'the sparse matrix {tensor.shape} was laid out densely')
            monkeypatch.setattr(SparseTensor, '_dense', refuse)

        def __exit__(self, *exc):
            monkeypatch.undo()
    return NeverDense()


def expected_solution(matrix, y=Y) -> np.ndarray:
    dense = matrix.toarray()
    return np.stack([np.linalg.solve(dense, entry.ravel()).reshape(NX, NY) for entry in y])


@pytest.mark.parametrize('build', BUILDERS)
@pytest.mark.parametrize('method', ['direct', 'scipy-direct', 'scipy-CG', 'scipy-GMres', 'scipy-biCG'])
def test_a_sparse_matrix_is_solved_without_densifying(backend, build, method, never_dense):
    drift = 0. if method == 'scipy-CG' else .7  # CG needs a symmetric matrix
    scipy_matrix = laplace(drift=drift)
    matrix = BUILDERS[build](scipy_matrix)
    y = math.tensor(Y, batch('b'), spatial('x,y'))
    x0 = math.zeros(batch(b=2), spatial(y=NY, x=NX))  # its dims in another order than the matrix's
    preconditioner = 'ilu' if method in ('scipy-GMres', 'scipy-biCG') else None
    with never_dense:
        x = math.solve_linear(matrix, y, Solve(method, 1e-6, 1e-6, x0=x0, preconditioner=preconditioner))
    assert x.backend is backend
    assert x.dtype == x0.dtype
    assert set(x.shape.names) == {'b', 'x', 'y'}
    np.testing.assert_allclose(x.numpy('b,x,y'), expected_solution(scipy_matrix), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('method', ['direct', 'scipy-GMres'])
def test_batch_dims_of_y_alone_and_of_x0(method, never_dense):
    scipy_matrix = laplace(drift=.3)
    y = math.tensor(Y, batch('b'), spatial('x,y'))
    with never_dense:
        x = math.solve_linear(from_scipy(scipy_matrix), y, Solve(method, 1e-6, 1e-6, x0=math.zeros(spatial(x=NX,
                                                                                                      y=NY))))
        again = math.solve_linear(from_scipy(scipy_matrix), y[{'b': 0}],
                                  Solve(method, 1e-6, 1e-6, x0=math.ones(batch(c=3), spatial(x=NX, y=NY))))
    expected = expected_solution(scipy_matrix)
    np.testing.assert_allclose(x.numpy('b,x,y'), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(again.numpy('c,x,y'), np.stack([expected[0]] * 3), rtol=1e-4, atol=1e-4)


def test_the_solution_is_as_precise_as_x0(backend):
    scipy_matrix = laplace(drift=.5)
    with math.precision(64):
        y = math.tensor(Y, batch('b'), spatial('x,y'))
        x0 = math.zeros(spatial(x=NX, y=NY))
        x = math.solve_linear(from_scipy(scipy_matrix), y, Solve('direct', 1e-12, 1e-12, x0=x0))
    assert x.dtype == x0.dtype and x.dtype.bits == 64
    np.testing.assert_allclose(x.numpy('b,x,y'), expected_solution(scipy_matrix), rtol=1e-10)


@pytest.mark.parametrize('method', ['direct', 'scipy-GMres'])
def test_the_gradient_by_y_equals_that_of_the_dense_matrix(backend, method, never_dense):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    scipy_matrix = laplace(drift=.7)
    matrix = from_scipy(scipy_matrix)
    x0 = math.zeros(spatial(x=NX, y=NY))

    def loss(y, m):
        return math.sum(math.solve_linear(m, y, Solve(method, 1e-5, 1e-5, x0=x0)) ** 2, 'b,x,y')
    y = math.tensor(Y, batch('b'), spatial('x,y'))
    dense_gradient = math.gradient(loss, 'y', get_output=False)(y, math.dense(matrix))
    with never_dense:
        sparse_gradient = math.gradient(loss, 'y', get_output=False)(y, matrix)
    x = expected_solution(scipy_matrix)
    dense = scipy_matrix.toarray()
    expected = np.stack([np.linalg.solve(dense.T, 2 * entry.ravel()).reshape(NX, NY) for entry in x])
    np.testing.assert_allclose(sparse_gradient.numpy('b,x,y'), expected, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(sparse_gradient.numpy('b,x,y'), dense_gradient.numpy('b,x,y'), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize('build', sorted(BUILDERS))
@pytest.mark.parametrize('method', ['CG', 'direct', 'scipy-CG'])
def test_the_gradient_by_a_sparse_matrix_is_sparse_with_its_entries(backend, build, method):
    """grad_for_f=True: the matrix's gradient `-dy ⊗ x` at its stored entries only, as phiml differentiates by a
    sparse matrix's values; the initial guess `0 * y` is traced with `y` (JAX leaked it before)."""
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    scipy_matrix = laplace()  # symmetric, for CG
    matrix = BUILDERS[build](scipy_matrix)

    def loss(m, y):
        x = math.solve_linear(m, y, Solve(method, 1e-6, 1e-6, x0=0 * y), grad_for_f=True)
        return math.sum(x ** 2, 'b,x,y')
    y = math.tensor(Y, batch('b'), spatial('x,y'))
    by_matrix, by_y = math.gradient(loss, 'm,y', get_output=False)(matrix, y)
    assert isinstance(by_matrix, SparseTensor)
    assert math.stored_values(by_matrix).shape.volume == math.stored_values(matrix).shape.volume
    dense = scipy_matrix.toarray()
    x = expected_solution(scipy_matrix)
    dy = np.stack([np.linalg.solve(dense.T, 2 * entry.ravel()) for entry in x])
    expected = -np.einsum('bi,bj->ij', dy, x.reshape(len(x), -1)) * (dense != 0)
    found = math.dense(by_matrix).numpy('x,y,~x,~y').reshape(NX * NY, NX * NY)
    np.testing.assert_allclose(found, expected, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(by_y.numpy('b,x,y'), dy.reshape(Y.shape), rtol=1e-3, atol=1e-4)


def test_a_singular_matrix_gets_the_least_squares_solution_of_smallest_norm(never_dense):
    """A periodic Laplace operator is singular (constants are its null space); its LU factor has a pivot at
    rounding level, so the direct method projects the null vector out of the factors' solution, which gives what the
    dense least-squares solver gives."""
    scipy_matrix = laplace(periodic=True)
    singular = SparseDirect(scipy_matrix)
    assert singular.method == 'SciPy splu (its null space projected out)' and SparseDirect(laplace()).method == \
        'SciPy splu'
    np.testing.assert_allclose(np.abs(singular.null), 1 / np.sqrt(NX * NY), rtol=1e-6)  # the constants
    # two separate periodic grids: a null space of two vectors, which lsqr solves
    twice = scipy.sparse.block_diag([laplace(periodic=True)] * 2).tocsr()
    assert SparseDirect(twice).method == 'SciPy lsqr'
    ys = np.concatenate([Y[0] - Y[0].mean(), Y[1] - Y[1].mean()]).reshape(1, -1)
    np.testing.assert_allclose(SparseDirect(twice)(ys)[0], np.linalg.lstsq(twice.toarray(), ys[0], rcond=None)[0],
                               atol=1e-6)
    y_values = Y - Y.mean(axis=(1, 2), keepdims=True)  # in the range of the matrix
    with math.precision(64):
        y = math.tensor(y_values, batch('b'), spatial('x,y'))
        x0 = math.zeros(spatial(x=NX, y=NY))
        with never_dense:
            x = math.solve_linear(from_scipy(scipy_matrix), y, Solve('direct', 1e-8, 1e-8, x0=x0))
    dense = scipy_matrix.toarray()
    expected = np.stack([np.linalg.lstsq(dense, entry.ravel(), rcond=None)[0].reshape(NX, NY) for entry in y_values])
    np.testing.assert_allclose(x.numpy('b,x,y'), expected, rtol=1e-6, atol=1e-6)


def test_inside_jit_compile_the_dense_path_still_solves(backend):
    scipy_matrix = laplace(drift=.3)
    matrix = from_scipy(scipy_matrix)

    @math.jit_compile
    def solve(y, m):
        return math.solve_linear(m, y, Solve('direct', 1e-6, 1e-6, x0=math.zeros(spatial(x=NX, y=NY))))
    y = math.tensor(Y, batch('b'), spatial('x,y'))
    for _ in range(2):  # tracing, then compiled
        np.testing.assert_allclose(solve(y, matrix).numpy('b,x,y'), expected_solution(scipy_matrix), rtol=1e-4,
                                   atol=1e-4)


def test_a_system_too_large_to_lay_out_densely(backend):
    """40000 unknowns: the dense matrix would need 12.8 GB in float64; the sparse one is solved as it is."""
    n = 200
    scipy_matrix = laplace(n, n)
    with math.precision(64):
        y = math.tensor(np.ones((n, n)), spatial('x,y'))
        x0 = math.zeros(spatial(x=n, y=n))
        x = math.solve_linear(from_scipy(scipy_matrix, n, n), y, Solve('direct', 1e-9, 1e-9, x0=x0))
    residual = np.ones(n * n) - scipy_matrix @ x.numpy('x,y').ravel()
    assert np.linalg.norm(residual) <= 1e-9 * n


@pytest.mark.parametrize('method', ['direct', 'scipy-direct', 'scipy-CG'])
def test_phiml_finds_the_same_solution(method):
    phiml = pytest.importorskip('phiml.math')
    scipy_matrix = laplace()

    def run(m):
        matrix = m.tensor(scipy_matrix, m.spatial(x=NX, y=NY) & m.dual(x=NX, y=NY))
        y = m.tensor(Y, m.batch('b'), m.spatial('x,y'))
        return m.solve_linear(matrix, y, m.Solve(method, 1e-6, 1e-6, x0=m.zeros(m.spatial(x=NX, y=NY)))).numpy('b,x,y')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # phiml's sparse matrices warn
        expected = run(phiml)
    np.testing.assert_allclose(run(math), expected, rtol=1e-4, atol=1e-4)


def test_one_matrix_is_factored_once_for_all_its_direct_solves(never_dense):
    matrix = from_scipy(laplace())
    factored = []

    class Counted(SparseDirect):
        def __init__(self, host):
            factored.append(host.shape)
            SparseDirect.__init__(self, host)
    x0 = math.zeros(spatial(x=NX, y=NY))
    with mock.patch('lazyphi.math._optimize.SparseDirect', Counted):
        for entry in range(2):
            y = math.tensor(Y[entry], spatial('x,y'))
            for method in ('direct', 'scipy-direct'):
                x = math.solve_linear(matrix, y, Solve(method, x0=x0))
                expected = scipy.sparse.linalg.spsolve(laplace(), Y[entry].ravel())
                np.testing.assert_allclose(x.numpy('x,y').ravel(), expected, rtol=1e-4, atol=1e-5)
    assert factored == [(NX * NY, NX * NY)]  # kept with the matrix: later solves only substitute


def test_the_ilu_factors_of_one_matrix_are_kept_for_its_later_solves(never_dense):
    matrix = from_scipy(laplace(drift=.5))
    real, factored = scipy_linear._ilu, []

    def counted(host):
        factored.append(host.shape)
        return real(host)
    x0 = math.zeros(spatial(x=NX, y=NY))
    with mock.patch.object(scipy_linear, '_ilu', counted):
        for entry in range(2):
            y = math.tensor(Y[entry], spatial('x,y'))
            x = math.solve_linear(matrix, y, Solve('scipy-GMres', 1e-8, 1e-8, x0=x0, preconditioner='ilu'))
            expected = scipy.sparse.linalg.spsolve(laplace(drift=.5), Y[entry].ravel())
            np.testing.assert_allclose(x.numpy('x,y').ravel(), expected, rtol=1e-4, atol=1e-5)
    assert factored == [(NX * NY, NX * NY)]


def test_symmetric_patterns_are_factored_in_a_minimum_degree_ordering_of_their_sum_with_the_transpose():
    symmetric, lopsided = laplace(), laplace().tolil()
    lopsided[0, NX * NY - 1] = 1.  # one entry without its mirror
    assert scipy_linear._ordering(symmetric) == 'MMD_AT_PLUS_A'
    assert scipy_linear._ordering(lopsided.tocsr()) == 'COLAMD'
    for matrix in (symmetric, lopsided.tocsr()):
        ys = RNG.standard_normal((2, NX * NY))
        np.testing.assert_allclose(SparseDirect(matrix)(ys), np.linalg.solve(matrix.toarray(), ys.T).T, rtol=1e-9,
                                   atol=1e-9)
