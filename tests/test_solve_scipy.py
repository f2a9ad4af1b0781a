"""SciPy's iterative linear solvers ('scipy-*' methods of `solve_linear`) and the 'ilu' preconditioner, against
`numpy.linalg.solve` and phiml, on every backend."""

import warnings

import numpy as np
import pytest

from lazyphi import math
from lazyphi.math import NotConverged, Solve, SolveTape, batch, dual, spatial

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


def test_jit_compile_raises_not_implemented(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy functions are not traced')

    @math.jit_compile
    def solve(y):
        return math.solve_linear(poisson, y, Solve('scipy-CG', 1e-5, 1e-5, x0=x0()))
    with pytest.raises(NotImplementedError, match='biCG-stab'):
        solve(rhs())


def test_bad_preconditioners_raise_value_errors():
    with pytest.raises(ValueError, match='jacobi'):
        Solve('scipy-CG', preconditioner='jacobi')
    with pytest.raises(ValueError, match='lsqr'):
        math.solve_linear(poisson, rhs(), Solve('scipy-lsqr', x0=x0(), preconditioner='ilu'))
    with pytest.raises(ValueError, match='biCG-stab'):
        math.solve_linear(poisson, rhs(), Solve('biCG-stab', x0=x0(), preconditioner='ilu'))


def test_a_function_returning_other_dims_than_y_raises_where_its_matrix_is_built():
    y = math.tensor([2., 3.], math.channel('b_vec'))
    x0 = math.tensor([0., 0.], math.channel('x_vec'))
    with pytest.raises(ValueError, match='b_vec'):  # phiml carries b_vec through as an extra dim
        math.solve_linear(lambda x: x * 2, y, Solve('scipy-CG', x0=x0, preconditioner='ilu'))


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
    with pytest.raises(ValueError, match='record_trajectories'):
        SolveTape(record_trajectories=True)
