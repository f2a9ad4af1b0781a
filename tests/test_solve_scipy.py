"""SciPy's iterative linear solvers ('scipy-*' methods of `solve_linear`) and the 'ilu' preconditioner, against
`numpy.linalg.solve` and phiml, on every backend."""

import warnings

import numpy as np
import pytest

from lazyphi import math
from lazyphi.math import Diverged, NotConverged, Solve, SolveTape, batch, dual, spatial

pytestmark = pytest.mark.usefixtures('backend')

RNG = np.random.default_rng(11)
Y = RNG.standard_normal((3, 6))
UNSYMMETRIC = np.diag(4. + np.arange(6)) + np.diag(RNG.uniform(-1, 1, 5), 1) + np.diag(RNG.uniform(-1, 1, 5), -1)
LAPLACE = np.diag(-2. * np.ones(6)) + np.diag(np.ones(5), 1) + np.diag(np.ones(5), -1)
METHODS = ['scipy-CG', 'scipy-GMres', 'scipy-biCG', 'scipy-biCG-stab', 'scipy-CGS', 'scipy-lGMres', 'scipy-QMR',
           'scipy-GCrotMK', 'scipy-lsqr']


def poisson(x):
    return math.laplace(x, padding=0)


def rhs(values=Y):
    return math.tensor(values, batch('b'), spatial('x'))


def x0():
    return math.zeros(spatial(x=6))


def close(tensor, expected, tol=1e-4):
    np.testing.assert_allclose(tensor.numpy('b,x'), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize('method', METHODS)
@pytest.mark.parametrize('preconditioner', [None, 'ilu'])
def test_a_function_and_a_matrix_match_numpy(method, preconditioner):
    if method == 'scipy-lsqr' and preconditioner:
        pytest.skip('lsqr takes no preconditioner')
    solve = Solve(method, 1e-6, 1e-6, x0=x0(), preconditioner=preconditioner)
    close(math.solve_linear(poisson, rhs(), solve), np.linalg.solve(LAPLACE, Y.T).T)
    if method != 'scipy-CG':  # CG needs a symmetric matrix
        matrix = math.tensor(UNSYMMETRIC, spatial('x'), dual('x'))
        close(math.solve_linear(matrix, rhs(), solve), np.linalg.solve(UNSYMMETRIC, Y.T).T)


def test_the_solution_keeps_the_backend_and_dtype_of_x0(backend):
    x = math.solve_linear(poisson, rhs(), Solve('scipy-GMres', 1e-6, 1e-6, x0=x0()))
    assert x.dtype == x0().dtype
    assert backend.is_tensor(x.native('b,x'), True)


def test_solve_info_reports_iterations_and_residuals():
    solve = Solve('scipy-CG', 1e-6, 1e-6, x0=x0())
    with SolveTape() as tape:
        x = math.solve_linear(poisson, rhs(), solve)
    info = tape[solve]
    assert info.method == 'SciPy CG'
    assert bool(math.all(info.converged, 'b')) and not bool(math.any(info.diverged, 'b'))
    iterations = info.iterations.numpy('b')
    assert np.all(iterations >= 1) and np.all(iterations <= 6)  # CG settles 6 unknowns in 6 steps (up to rounding)
    np.testing.assert_array_equal(info.function_evaluations.numpy('b'), iterations + 1)
    np.testing.assert_allclose(info.residual.numpy('b,x'), Y - (LAPLACE @ x.numpy('b,x').T).T, atol=1e-4)


def test_an_iteration_limit_raises_not_converged_with_the_last_estimate():
    with pytest.raises(NotConverged) as caught:
        math.solve_linear(poisson, rhs(), Solve('scipy-biCG-stab', 1e-9, 1e-9, x0=x0(), max_iterations=1))
    assert caught.value.result.x.shape.get_size('b') == 3
    x = math.solve_linear(poisson, rhs(), Solve('scipy-biCG-stab', 1e-9, 1e-9, x0=x0(), max_iterations=1,
                                                suppress=[NotConverged]))
    assert np.all(np.isfinite(x.numpy('b,x')))


BATCHED = np.stack([UNSYMMETRIC + k * np.eye(6) for k in range(3)])  # one matrix per entry of 'b'


@pytest.mark.parametrize('method', METHODS)
@pytest.mark.parametrize('preconditioner', [None, 'ilu'])
def test_inside_jit_compile_each_method_matches_the_eager_solve_and_numpy(method, preconditioner):
    if method == 'scipy-lsqr' and preconditioner:
        pytest.skip('lsqr takes no preconditioner')
    solve = Solve(method, 1e-6, 1e-6, x0=x0(), preconditioner=preconditioner)
    matrices = math.tensor(BATCHED, batch('b'), spatial('x'), dual('x'))

    @math.jit_compile
    def solve_both(y, matrix):
        return math.solve_linear(poisson, y, solve), math.solve_linear(matrix, y, solve)
    for _ in range(2):  # traced, then the compiled version
        of_function, of_matrix = solve_both(rhs(), matrices)
        close(of_function, np.linalg.solve(LAPLACE, Y.T).T)
        close(of_function, math.solve_linear(poisson, rhs(), solve).numpy('b,x'))
        if method != 'scipy-CG':  # CG needs a symmetric matrix
            close(of_matrix, np.linalg.solve(BATCHED, Y[..., None])[..., 0])
            close(of_matrix, math.solve_linear(matrices, rhs(), solve).numpy('b,x'))


def test_inside_jit_compile_an_iteration_limit_raises_not_converged_once_the_call_returns():
    @math.jit_compile
    def solve(y, limit_reached_ok: bool):
        suppress = [NotConverged] if limit_reached_ok else []
        return math.solve_linear(poisson, y, Solve('scipy-biCG-stab', 1e-9, 1e-9, x0=x0(), max_iterations=1,
                                                   suppress=suppress))
    for _ in range(2):
        with pytest.raises(NotConverged, match='Did not converge within 1 iterations') as caught:
            solve(rhs(), False)
        result = caught.value.result
        assert result.method == 'SciPy biCG-stab' and not bool(math.any(result.converged, 'b'))
        np.testing.assert_array_equal(result.iterations.numpy('b'), [1, 1, 1])
        assert np.all(np.isfinite(result.x.numpy('b,x')))
        np.testing.assert_allclose(solve(rhs(), True).numpy('b,x'), result.x.numpy('b,x'))


def test_a_failed_ilu_preconditioner_reports_a_divergence_eagerly_and_inside_jit_compile():
    singular = math.tensor(np.zeros((6, 6)), spatial('x'), dual('x'))
    solve = Solve('scipy-GMres', 1e-6, 1e-6, x0=x0(), preconditioner='ilu')
    with pytest.raises(Diverged, match='spilu'):
        math.solve_linear(singular, rhs(), solve)
    with pytest.raises(Diverged, match='spilu'):
        math.jit_compile(lambda y: math.solve_linear(singular, y, solve))(rhs())


def test_gradients_flow_through_a_jit_compiled_scipy_solve(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    matrix = math.tensor(UNSYMMETRIC + UNSYMMETRIC.T, spatial('x'), dual('x'))  # the function must be symmetric

    def loss(y):
        return math.sum(math.solve_linear(lambda x: matrix @ x, y, Solve('scipy-GMres', 1e-9, 1e-9, x0=x0())) ** 2,
                        'x')
    inverse = np.linalg.inv(UNSYMMETRIC + UNSYMMETRIC.T)
    expected = 2 * (inverse @ inverse @ Y.T).T  # d/dy |A^-1 y|^2 = 2 A^-T A^-1 y
    compiled = math.jit_compile(math.gradient(loss, 'y', get_output=False))
    for _ in range(2):
        close(compiled(rhs()), expected, 1e-3)


@pytest.mark.parametrize('example', ['function', 'matrix'])
def test_phimls_linear_solves_notebook_inside_jit_compile_with_agreeing_dims(example):
    """Cells 3 and 10 of phiml's docs/Linear_Solves.ipynb, with y named like the function's output (lazyphi raises
    a ValueError where they differ)."""
    phiml = pytest.importorskip('phiml.math')

    def run(m):
        a = m.tensor([[2, 1], [1, 3]], m.channel('b_vec'), m.dual('b_vec'))
        b = m.tensor([2, 3], m.channel('b_vec'))
        x0 = m.tensor([0, 0], m.channel('b_vec'))
        linear_function = (lambda x: x * (2, 1)) if example == 'function' else (lambda x: a @ x)

        @m.jit_compile
        def jit_perform_solve(b):
            return m.solve_linear(m.jit_compile_linear(linear_function), b,
                                  m.Solve('scipy-CG', x0=x0, preconditioner='ilu'))
        return m.solve_linear(a, b, m.Solve(x0=x0)), jit_perform_solve(b), jit_perform_solve(b)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # phiml's sparse matrices and tracers warn
        expected = [t.numpy('b_vec') for t in run(phiml)]
    found = run(math)
    np.testing.assert_allclose(found[0].numpy('b_vec'), np.linalg.solve([[2, 1], [1, 3]], [2, 3]), rtol=1e-5)
    for f, e in zip(found, expected, strict=True):
        np.testing.assert_allclose(f.numpy('b_vec'), e, rtol=1e-5)
    np.testing.assert_allclose(found[1].numpy('b_vec'), [1, 3] if example == 'function' else [.6, .8], rtol=1e-5)


def test_bad_preconditioners_raise_value_errors():
    with pytest.raises(ValueError, match='jacobi'):
        Solve('scipy-CG', preconditioner='jacobi')
    with pytest.raises(ValueError, match='lsqr'):
        math.solve_linear(poisson, rhs(), Solve('scipy-lsqr', x0=x0(), preconditioner='ilu'))
    with pytest.raises(ValueError, match='biCG-stab'):
        math.solve_linear(poisson, rhs(), Solve('biCG-stab', x0=x0(), preconditioner='ilu'))


@pytest.mark.parametrize('method', ['scipy-CG', 'scipy-GMres', 'scipy-biCG-stab'])
def test_phimls_linear_solves_notebook_cells_9_and_10_as_printed(method):
    """y along `b_vec`, x0 along `x_vec`: each entry of `b_vec` is a system of its own (as batch entries for SciPy),
    with the matrix of `x * (2, 1)` built for 'ilu', eagerly and inside `jit_compile`; phiml prints (1, 2, 1.5, 3)."""
    def linear_function(x):
        return x * (2, 1)
    b = math.tensor([2, 3], math.channel('b_vec'))
    x0 = math.tensor([0, 0], math.channel('x_vec'))
    expected = [[1, 2], [1.5, 3]]
    x = math.solve_linear(math.jit_compile_linear(linear_function), b, Solve(method, x0=x0, preconditioner='ilu'))
    np.testing.assert_allclose(x.numpy('b_vec,x_vec'), expected, rtol=1e-5)
    assert x.shape.get_type('b_vec') == 'channel'  # the dim's type comes back

    @math.jit_compile
    def jit_perform_solve(b):
        return math.solve_linear(math.jit_compile_linear(linear_function), b, Solve(method, x0=x0,
                                                                                    preconditioner='ilu'))
    for _ in range(2):  # tracing, then compiled
        np.testing.assert_allclose(jit_perform_solve(b).numpy('b_vec,x_vec'), expected, rtol=1e-5)
    matrix_free = math.solve_linear(linear_function, b, Solve(method, x0=x0))
    np.testing.assert_allclose(matrix_free.numpy('b_vec,x_vec'), expected, rtol=1e-5)


@pytest.mark.parametrize('method', ['scipy-CG', 'scipy-GMres', 'scipy-biCG-stab'])
def test_phiml_finds_the_same_solution(method):
    phiml = pytest.importorskip('phiml.math')
    with warnings.catch_warnings():  # phiml calls gmres without callback_type, which SciPy warns about
        warnings.simplefilter('ignore', DeprecationWarning)
        expected = phiml.solve_linear(lambda x: phiml.laplace(x, padding=0),
                                      phiml.tensor(Y, phiml.batch('b'), phiml.spatial('x')),
                                      phiml.Solve(method, 1e-6, 1e-6, x0=phiml.zeros(phiml.spatial(x=6))))
    close(math.solve_linear(poisson, rhs(), Solve(method, 1e-6, 1e-6, x0=x0())), expected.numpy('b,x'))


def test_a_solve_tape_records_solves_by_position_and_by_solve():
    first, second = Solve('CG', 1e-6, 1e-6, x0=x0()), Solve('scipy-GMres', 1e-6, 1e-6, x0=x0())
    with SolveTape() as everything, SolveTape(second) as only_second:
        math.solve_linear(poisson, rhs(), first)
        math.solve_linear(poisson, rhs(), second)
    assert len(everything) == 2 and len(only_second) == 1
    assert everything[0] is everything[first] and everything[1] is only_second[second]
    assert everything[0].method == 'lazyphi CG' and everything[1].method == 'SciPy GMres'
    assert [info.solve.id for info in everything] == [first.id, second.id]
    math.solve_linear(poisson, rhs(), first)  # outside: not recorded
    assert len(everything) == 2
    with pytest.raises(KeyError):
        only_second[first]


def test_a_solve_tape_records_minimize_and_solve_nonlinear():
    solve = Solve('Nelder-Mead', 0, 1e-6, x0=math.tensor(1.))
    with SolveTape() as tape:
        math.minimize(lambda x: (x - 2) ** 2, solve)
        math.solve_nonlinear(lambda x: 3 * x, math.tensor(6.), Solve('Nelder-Mead', 0, 1e-6, x0=math.tensor(1.)))
    assert len(tape) == 2 and tape[solve] is tape[0]
    np.testing.assert_allclose(tape[0].x.numpy(), 2, atol=1e-2)
    np.testing.assert_allclose(tape[1].x.numpy(), 2, atol=1e-2)
    assert tape[0].method.startswith('SciPy Nelder-Mead')
    with SolveTape(record_trajectories=True) as recorded:
        math.minimize(lambda x: (x - 2) ** 2, solve)
    assert recorded[solve].x.shape.get_size('trajectory') > 2
    with SolveTape(record_trajectories=True), pytest.raises(ValueError, match='records no trajectory'):
        math.solve_linear(lambda x: 2 * x, math.tensor(4.), Solve('scipy-CG', x0=math.tensor(0.)))
