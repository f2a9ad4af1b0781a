"""Linear solves (`solve_linear` with a `Solve`) against `numpy.linalg.solve` of the same matrix, on every backend."""

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import Diverged, NotConverged, Solve, batch, channel, dual, spatial, tensor

pytestmark = pytest.mark.usefixtures('backend')

RNG = np.random.default_rng(7)
Y = RNG.standard_normal((3, 6))  # three right-hand sides of a 6-cell grid
UNSYMMETRIC = np.diag(4. + np.arange(6)) + np.diag(RNG.uniform(-1, 1, 5), 1) + np.diag(RNG.uniform(-1, 1, 5), -1)


def laplace_matrix(n: int) -> np.ndarray:
    """The matrix of `laplace(x, padding=0)` on `n` cells: -2 on the diagonal, 1 beside it."""
    return np.diag(-2. * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)


def poisson(x):
    return math.laplace(x, padding=0)


def rhs(values=Y):
    return math.tensor(values, batch('b'), spatial('x'))


def x0(n: int = 6):
    return math.zeros(spatial(x=n))


def close(tensor, expected, order='b,x', tol=1e-4):
    np.testing.assert_allclose(tensor.numpy(order), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize('method', ['CG', 'auto', 'CG-adaptive', 'biCG-stab', 'biCG-stab(1)', 'direct',
                                    'scipy-direct'])
def test_a_poisson_system_is_solved_as_numpy_solves_its_matrix(method):
    x = math.solve_linear(poisson, rhs(), Solve(method, 1e-5, 1e-5, x0=x0()))  # float32: |residual| ~ 1e-6
    assert set(x.shape.names) == {'b', 'x'}
    close(x, np.linalg.solve(laplace_matrix(6), Y.T).T)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 2 ** 16))
def test_cg_solves_poisson_systems_of_any_size(n, seed):
    values = np.random.default_rng(seed).standard_normal((2, n))
    x = math.solve_linear(poisson, rhs(values), Solve('CG', 1e-6, 1e-6, x0=x0(n)))
    close(x, np.linalg.solve(laplace_matrix(n), values.T).T, tol=1e-3)


@pytest.mark.parametrize('method', ['biCG-stab', 'direct'])
def test_a_matrix_with_dual_columns_is_applied_by_matmul(method):
    matrix = math.tensor(UNSYMMETRIC, spatial('x'), dual('x'))
    x = math.solve_linear(matrix, rhs(), Solve(method, 1e-5, 1e-5, x0=x0()))
    close(x, np.linalg.solve(UNSYMMETRIC, Y.T).T)


def test_a_matrix_per_batch_entry():
    matrices = np.stack([UNSYMMETRIC, UNSYMMETRIC.T + np.eye(6)])
    matrix = math.tensor(matrices, batch('m'), spatial('x'), dual('x'))
    x = math.solve_linear(matrix, math.tensor(Y[0], spatial('x')), Solve('biCG-stab', 1e-6, 1e-6, x0=x0()))
    close(x, np.stack([np.linalg.solve(m, Y[0]) for m in matrices]), 'm,x')


def test_a_jit_compile_linear_function_with_further_arguments():
    @math.jit_compile_linear
    def scaled_poisson(x, factor, offset=0.):
        return math.laplace(x, padding=0) * factor + x * offset

    x = math.solve_linear(scaled_poisson, rhs(), Solve('CG', 1e-6, 1e-6, x0=x0()), 2., offset=-1.)
    close(x, np.linalg.solve(2 * laplace_matrix(6) - np.eye(6), Y.T).T)
    x = math.solve_linear(scaled_poisson, rhs(), Solve('direct', x0=x0()), (2.,), f_kwargs={'offset': -1.})
    close(x, np.linalg.solve(2 * laplace_matrix(6) - np.eye(6), Y.T).T)


def test_batch_entries_converge_each_on_its_own():
    values = Y.copy()
    values[1] = 0  # solved by the initial guess already
    with pytest.raises(NotConverged) as raised:
        math.solve_linear(poisson, rhs(values), Solve('CG', 1e-6, 1e-6, x0=x0(),
                                                      max_iterations=math.tensor([1, 100, 100], batch('b'))))
    result = raised.value.result
    np.testing.assert_array_equal(result.converged.numpy('b'), [False, True, True])
    np.testing.assert_array_equal(result.diverged.numpy('b'), [False, False, False])
    iterations = result.iterations.numpy('b')
    assert iterations[0] == 1 and iterations[1] == 0 and 1 < iterations[2] <= 6  # CG: at most n steps
    np.testing.assert_array_equal(result.function_evaluations.numpy('b'), iterations + 1)
    expected = np.linalg.solve(laplace_matrix(6), values.T).T
    close(result.x.b[1:], expected[1:])
    assert np.abs(result.x.b[0].numpy('x') - expected[0]).max() > 1e-2  # one step is not enough
    close(result.residual.b[1:], np.zeros((2, 6)))
    assert result.method == 'lazyphi CG' and 'did not converge' in result.msg.b[0].native()
    assert result.msg.b[2].native().startswith('Converged within')


def test_not_converged_carries_the_last_estimate_and_suppress_returns_it():
    solve = Solve('CG', 1e-6, 1e-6, x0=x0(), max_iterations=2)
    with pytest.raises(NotConverged) as raised:
        math.solve_linear(poisson, rhs(), solve)
    assert isinstance(raised.value, RuntimeError) and 'did not converge' in str(raised.value)
    np.testing.assert_array_equal(raised.value.result.iterations.numpy('b'), [2, 2, 2])
    quiet = math.solve_linear(poisson, rhs(), Solve('CG', 1e-6, 1e-6, x0=x0(), max_iterations=2,
                                                    suppress=[NotConverged]))
    close(quiet, raised.value.result.x.numpy('b,x'), tol=1e-6)


def test_a_non_finite_residual_diverges():
    values = Y.copy()
    values[0, 2] = np.inf
    with pytest.raises(Diverged) as raised:
        math.solve_linear(poisson, rhs(values), Solve('CG', 1e-6, 1e-6, x0=x0()))
    np.testing.assert_array_equal(raised.value.result.diverged.numpy('b'), [True, False, False])
    x = math.solve_linear(poisson, rhs(values), Solve('CG', 1e-6, 1e-6, x0=x0(), suppress=(Diverged,)))
    close(x.b[1:], np.linalg.solve(laplace_matrix(6), Y[1:].T).T)


def test_preprocess_y_applies_to_the_right_hand_side():
    solve = Solve('CG', 1e-6, 1e-6, x0=x0(), preprocess_y=lambda y, factor: y * factor, preprocess_y_args=(3.,))
    close(math.solve_linear(poisson, rhs(), solve), np.linalg.solve(laplace_matrix(6), 3 * Y.T).T)


def test_solve_settings_defaults_and_copies():
    solve = Solve(x0=x0())
    assert solve.method == 'auto' and solve.rel_tol is None and int(solve.max_iterations) == 1000
    filled = solve.with_defaults('solve')
    assert float(filled.rel_tol) == float(filled.abs_tol) == pytest.approx(1e-5)  # single precision
    assert float(solve.with_defaults('optimization').rel_tol) == 0
    assert solve.gradient_solve.x0 is None and solve.gradient_solve.id == solve.id
    assert Solve('CG', 1e-3) == Solve('CG', 1e-3) and Solve('CG', 1e-3) != Solve('CG', 1e-4)


@pytest.mark.parametrize(('call', 'message'), [
    (lambda: math.solve_linear(poisson, rhs(), Solve('CG')), 'initial guess'),
    (lambda: math.solve_linear(poisson, rhs(), Solve('GMRES', x0=x0())), 'GMRES'),
    (lambda: math.solve_linear(poisson, rhs(), Solve('biCG-stab(2)', x0=x0())), 'biCG-stab(2)'),
    (lambda: math.solve_linear(math.tensor(UNSYMMETRIC, spatial('x,y')), rhs(), Solve('CG', x0=x0())), 'dual'),
    (lambda: Solve('CG', preconditioner='jacobi'), 'preconditioner'),
    (lambda: math.solve_linear(poisson, rhs(), Solve('CG', x0=x0(), preconditioner='ilu')), 'scipy-'),
    (lambda: Solve('CG', rank_deficiency=1), 'rank_deficiency'),
])
def test_what_is_not_offered_raises_a_value_error_naming_it(call, message):
    with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)')):
        call()


@pytest.mark.parametrize('method', ['CG', 'biCG-stab', 'direct'])
def test_solves_compile(backend, method):
    @math.jit_compile
    def solve(y):
        return math.solve_linear(poisson, y, Solve(method, 1e-5, 1e-5, x0=x0()))  # float32: |residual| ~ 1e-6
    close(solve(rhs()), np.linalg.solve(laplace_matrix(6), Y.T).T)
    close(solve(rhs(2 * Y)), np.linalg.solve(laplace_matrix(6), 2 * Y.T).T)


def test_the_gradient_solves_the_transposed_system(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    matrix = math.tensor(UNSYMMETRIC, spatial('x'), dual('x'))

    def loss(y, matrix):
        x = math.solve_linear(matrix, y, Solve('biCG-stab', 1e-7, 1e-7, x0=x0()), grad_for_f=True)
        return math.sum(x ** 2, 'b,x')

    _, (dy, dmatrix) = math.gradient(loss, wrt='y,matrix')(rhs(), matrix)
    x = np.linalg.solve(UNSYMMETRIC, Y.T)  # columns: the batch entries
    expected_dy = np.linalg.solve(UNSYMMETRIC.T, 2 * x)
    close(dy, expected_dy.T, tol=1e-3)
    close(dmatrix, -expected_dy @ x.T, 'x,~x', tol=1e-3)

    def poisson_loss(y):
        return math.sum(math.solve_linear(poisson, y, Solve('CG', 1e-7, 1e-7, x0=x0())) ** 2, 'b,x')
    x = np.linalg.solve(laplace_matrix(6), Y.T)
    close(math.gradient(poisson_loss, get_output=False)(rhs())[0], np.linalg.solve(laplace_matrix(6), 2 * x).T,
          tol=1e-3)


@pytest.mark.parametrize('method', ['CG', 'biCG-stab', 'auto'])
def test_phiml_finds_the_same_solution(method):
    phiml = pytest.importorskip('phiml.math')
    expected = phiml.solve_linear(lambda x: phiml.laplace(x, padding=0), phiml.tensor(Y, phiml.batch('b'),
                                                                                         phiml.spatial('x')),
                                  phiml.Solve(method, 1e-6, 1e-6, x0=phiml.zeros(phiml.spatial(x=6))))
    x = math.solve_linear(poisson, rhs(), Solve(method, 1e-6, 1e-6, x0=x0()))
    close(x, expected.numpy('b,x'))


@pytest.mark.parametrize('method', ['auto', 'CG', 'biCG-stab', 'direct'])
def test_a_matrix_whose_rows_are_named_apart_from_its_columns(backend, method):
    """phiml's Linear_Solves notebook: rows `b_vec` (the dims of `y`), columns `~x_vec` (the dims of `x0`)."""
    A = tensor([[0, 1], [1, 0]], channel('b_vec'), dual('x_vec'))
    b = tensor([2, 3], channel('b_vec'))
    x0 = tensor([0, 0], channel('x_vec'))
    x = math.solve_linear(A, b, Solve(method, x0=x0))
    assert x.shape.names == ('x_vec',)
    np.testing.assert_allclose(x.numpy('x_vec'), [3, 2], atol=1e-5)
    if backend.name != 'numpy':
        def loss(b):
            return math.l2_loss(math.solve_linear(A, b, Solve(method, x0=x0)))
        gradient = math.gradient(loss, 'b', get_output=False)(tensor([2., 5.], channel('b_vec')))
        np.testing.assert_allclose(gradient.numpy('b_vec'), [2, 5], atol=1e-4)  # A swaps: |x| = |b|


def test_rows_that_do_not_pair_with_the_columns_raise():
    matrix = math.ones(channel(rows=3) & dual(cols=2))
    with pytest.raises(ValueError, match='pair up'):
        math.solve_linear(matrix, math.ones(channel(rows=3)), Solve('CG', x0=math.zeros(channel(cols=2))))


@pytest.mark.parametrize('method', ['auto', 'biCG-stab', 'direct'])
def test_native_arrays_are_solved_and_answered_natively(backend, method):
    """phiml's Linear_Solves notebook (with torch.tensor replaced by the backend's arrays)."""
    A = backend.as_tensor(np.array([[0., 1], [1, 0]]))
    b = backend.as_tensor(np.array([2., 3]))
    x0 = backend.as_tensor(np.array([0., 0]))
    x = math.solve_linear(A, b, Solve(method, x0=x0))
    assert backend.is_tensor(x, True)
    np.testing.assert_allclose(backend.numpy(x), [3, 2], atol=1e-5)
    # batch axes in front, several right-hand sides behind
    matrices = np.stack([UNSYMMETRIC + UNSYMMETRIC.T, 2 * (UNSYMMETRIC + UNSYMMETRIC.T)])  # CG: symmetric
    x = math.solve_linear(backend.as_tensor(matrices), backend.as_tensor(np.stack([Y[:2].T, Y[1:].T])),
                          Solve(method, 1e-6, 1e-6, x0=backend.as_tensor(np.zeros((2, 6, 2)))))
    np.testing.assert_allclose(backend.numpy(x), np.linalg.solve(matrices, np.stack([Y[:2].T, Y[1:].T])),
                               rtol=1e-4, atol=1e-4)


def test_a_function_of_native_arrays():
    """phiml's Examples notebook, without the preconditioner."""
    def laplace_1d(x):
        return math.pad(x[1:], (0, 1)) + math.pad(x[:-1], (1, 0)) - 2 * x

    b = np.ones((6,))
    solve = math.Solve('CG', rel_tol=1e-5, x0=0 * b)
    sol = math.solve_linear(math.jit_compile_linear(laplace_1d), b, solve)
    np.testing.assert_allclose(sol, np.linalg.solve(laplace_matrix(6), b), rtol=1e-4)
    with pytest.raises(ValueError, match='same number of axes'):
        math.solve_linear(laplace_1d, b, Solve(x0=np.zeros((1, 6))))
    with pytest.raises(TypeError, match='both be Tensors, both native'):
        math.solve_linear(laplace_1d, b, Solve(x0=x0()))


@pytest.mark.parametrize('method', ['CG', 'direct', 'scipy-CG'])
def test_an_initial_guess_computed_from_y_inside_the_differentiated_function(backend, method):
    """`x0=0 * y`, as phiml's examples write it: traced with `y` (JAX raised UnexpectedTracerError)."""
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    matrix = math.tensor(laplace_matrix(6), spatial('x'), dual('x'))

    def loss(y):
        x = math.solve_linear(matrix, y, Solve(method, 1e-5, 1e-5, x0=0 * y))
        return math.sum(x ** 2, 'b,x')
    x = np.linalg.solve(laplace_matrix(6), Y.T)
    close(math.gradient(loss, get_output=False)(rhs())[0], np.linalg.solve(laplace_matrix(6), 2 * x).T, tol=1e-3)


def test_the_gradient_by_the_arguments_of_a_function_as_in_phimls_linear_solves_notebook(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    x0 = tensor([0, 0], channel('x_vec'))

    @math.jit_compile_linear
    def conditioned_linear_function(x, conditioning):
        return x * conditioning

    def loss_function(conditioning):
        b = math.ones_like(conditioning)
        x = math.solve_linear(conditioned_linear_function, b, Solve(x0=x0), conditioning=conditioning,
                              grad_for_f=True)
        return math.l2_loss(x)

    gradient_function = math.gradient(loss_function, 'conditioning', get_output=False)
    grad = gradient_function(tensor([1., 2.], channel('x_vec')))
    np.testing.assert_allclose(grad.numpy('x_vec'), [-1, -1 / 8], rtol=1e-4)  # d/dc (1 / (2 c^2)) = -1 / c^3


@math.jit_compile_linear
def explicit_burgers(u, u_prev, dt, diffusivity, boundary='periodic'):
    """phiml's Examples notebook: an upwind Burgers step, linear in `u`, its matrix not symmetric."""
    dx = 1 / math.wrap(spatial(u), channel(u))
    left, right = math.shift(u_prev, (-1, 1), padding=boundary, stack_dim=channel('adv'))
    positive_winds = math.maximum(0, (u_prev + left) / 2)
    negative_winds = math.minimum(0, (u_prev + right) / 2)
    forward_diff = math.spatial_gradient(u, dx, 'forward', padding=boundary, stack_dim=channel('adv'))
    backward_diff = math.spatial_gradient(u, dx, 'backward', padding=boundary, stack_dim=channel('adv'))
    advection = math.sum(backward_diff * positive_winds + forward_diff * negative_winds, 'adv')  # sum required for n-d
    diffusion = diffusivity * math.laplace(u, padding=boundary)
    return u + dt * (diffusion - advection)


def test_the_default_method_settles_the_unsymmetric_burgers_system_of_phimls_examples_notebook(backend):
    @math.jit_compile
    def implicit_burgers(u_prev, dt, diffusivity=1e-4):
        return math.solve_linear(explicit_burgers, u_prev, math.Solve(x0=u_prev), u_prev=u_prev, dt=-dt,
                                 diffusivity=diffusivity)

    x = math.linspace(0, 1, spatial(x=100))
    u0 = math.sin(x * 2 * math.PI) + 0.3
    expected = math.solve_linear(explicit_burgers, u0, Solve('direct', x0=u0), u_prev=u0, dt=-0.01,
                                 diffusivity=1e-4)
    close(implicit_burgers(u0, 0.01), expected.numpy('x'), 'x', tol=1e-3)
    with pytest.raises(NotConverged):  # plain CG does not settle it
        math.solve_linear(explicit_burgers, u0, Solve('CG', x0=u0), u_prev=u0, dt=-0.01, diffusivity=1e-4)
    u_trj = math.iterate(implicit_burgers, batch(t=8), u0, dt=0.01)
    assert float(math.max(abs(u_trj), 't,x')) < 1.4  # stays bounded: u0 peaks at 1.3


@pytest.mark.parametrize('method', ['CG', 'auto', 'biCG-stab', 'direct'])
@pytest.mark.parametrize('as_matrix', [False, True])
def test_dims_of_y_that_the_system_lacks_list_independent_systems(method, as_matrix):
    """phiml's batched solves: y has a channel dim `vector` the operator does not act on; each component is a
    system of its own that converges on its own, and the solution lists the independent dims first."""
    f = math.jit_compile_linear(poisson)
    if as_matrix:
        f = math.matrix_from_function(f, x0())[0]
    y = math.tensor(Y[:2].T, spatial('x'), channel(vector='a,b'))
    with math.SolveTape() as tape:
        x = math.solve_linear(f, y, Solve(method, 1e-5, 1e-5, x0=x0()))
    assert x.shape.names == ('vector', 'x')
    close(x, np.linalg.solve(laplace_matrix(6), Y[:2].T).T, 'vector,x')
    if method != 'direct':
        assert tape[0].iterations.shape.names == ('vector',)
        assert float(math.max(abs(tape[0].residual), 'vector,x')) < 1e-4


def test_x0_with_a_dim_the_function_ignores_lists_independent_systems():
    x0 = math.zeros(spatial(x=6), channel(vector='a,b'))
    x = math.solve_linear(poisson, math.tensor(Y[0], spatial('x')), Solve('CG', 1e-5, 1e-5, x0=x0))
    expected = np.linalg.solve(laplace_matrix(6), Y[0])
    close(x, np.stack([expected, expected]), 'vector,x')


@pytest.mark.parametrize('method', ['CG', 'auto', 'biCG-stab', 'direct'])
@pytest.mark.parametrize('compiled', [False, True])
def test_an_affine_function_is_solved_by_its_linear_part(method, compiled):
    """A Laplacian padded with ones is affine, `A x + b`: the solution of `A x + b = y` (phiml's Dirichlet test)."""
    def dirichlet(x):
        return math.laplace(x, padding=1)
    f = math.jit_compile_linear(dirichlet) if compiled else dirichlet
    bias = np.zeros(6)
    bias[[0, -1]] = 1
    x = math.solve_linear(f, rhs(), Solve(method, 1e-5, 1e-5, x0=x0()))
    close(x, np.linalg.solve(laplace_matrix(6), (Y - bias).T).T)


def test_an_affine_function_inside_jit_compile(backend):
    @math.jit_compile
    def solve(y):
        return math.solve_linear(lambda x: math.laplace(x, padding=1), y, Solve('CG', 1e-5, 1e-5, x0=x0()))
    bias = np.zeros(6)
    bias[[0, -1]] = 1
    close(solve(rhs()), np.linalg.solve(laplace_matrix(6), (Y - bias).T).T)


@pytest.mark.parametrize('method', ['CG', 'direct'])
def test_y_with_other_dims_than_the_function_returns_as_in_phimls_linear_solves_notebook(method):
    y = math.tensor([2., 3.], channel('b_vec'))
    x0 = math.tensor([0., 0.], channel('x_vec'))
    x = math.solve_linear(math.jit_compile_linear(lambda x: x * 2), y, Solve(method, x0=x0))
    np.testing.assert_allclose(x.numpy('b_vec,x_vec'), [[1, 1], [1.5, 1.5]], rtol=1e-5)
    x = math.solve_linear(lambda x: x * 2, y, Solve('scipy-CG', x0=x0))  # SciPy: b_vec as batch entries
    np.testing.assert_allclose(x.numpy('b_vec,x_vec'), [[1, 1], [1.5, 1.5]], rtol=1e-5)


@pytest.mark.parametrize('method', ['CG', 'CG-adaptive', 'biCG-stab', 'direct'])
def test_phimls_linear_solves_notebook_cells_as_printed(backend, method):
    """Cells 7, 8 and 11 of phiml's Linear_Solves notebook: `x * (2, 1)` needs `x` without `b_vec`, which only `y`
    has; the function is called on each `b_vec` slice. phiml prints (1, 2, 1.5, 3) and the gradient (2.5, 3.75)."""
    def linear_function(x):
        return x * (2, 1)
    b = tensor([2, 3], channel('b_vec'))
    x0 = tensor([0, 0], channel('x_vec'))
    for f in (linear_function, math.jit_compile_linear(linear_function)):
        x = math.solve_linear(f, b, Solve(method, x0=x0))
        np.testing.assert_allclose(x.numpy('b_vec,x_vec'), [[1, 2], [1.5, 3]], rtol=1e-5)
    if backend.name == 'numpy' or method == 'direct':
        return  # NumPy has no automatic differentiation; 'direct' builds a matrix: its gradient is tested above

    def loss_function(b):
        x = math.solve_linear(math.jit_compile_linear(linear_function), b, Solve(method, x0=x0))
        return math.l2_loss(x)
    gradient = math.gradient(loss_function, 'b', get_output=False)(math.to_float(b))
    np.testing.assert_allclose(gradient.numpy('b_vec'), [2.5, 3.75], rtol=1e-4)  # b * (1/4 + 1)


@pytest.mark.parametrize('method', ['CG', 'biCG-stab', 'direct'])
def test_python_numbers_are_solved_as_native_scalars(method):
    """phiml's test_solve_scalar: `solve_linear(f, 84, Solve(x0=0))` for `f(x) = 2 x`."""
    x = math.solve_linear(lambda x: 2 * x, 84, Solve(method, 1e-5, x0=0))
    assert not isinstance(x, math.Tensor) and np.shape(x) == ()
    np.testing.assert_allclose(float(x), 42, rtol=1e-5)
    with pytest.raises(TypeError, match='both be Tensors, both native'):
        math.solve_linear(lambda x: 2 * x, 84, Solve(method, x0=math.tensor(0.)))


@pytest.mark.parametrize('method', ['CG', 'auto', 'biCG-stab'])
def test_a_recorded_trajectory_lists_every_iteration_count(method):
    """As phiml: `max_iterations + 1` states along the batch dim `trajectory`, the initial one first and the final
    one repeated; a tape that does not record gets the final state; the solution has no trajectory."""
    solve = Solve(method, 1e-5, 1e-5, x0=x0(), max_iterations=20)
    with math.SolveTape() as plain, math.SolveTape(record_trajectories=True) as recorded:
        x = math.solve_linear(poisson, rhs(), solve)
    assert 'trajectory' not in x.shape and 'trajectory' not in plain[solve].x.shape
    found = recorded[solve]
    assert found.x.shape.get_size('trajectory') == 21 and found.residual.shape.get_size('trajectory') == 21
    close(found.x.trajectory[0], np.zeros((3, 6)))
    close(found.x.trajectory[-1], x.numpy('b,x'))
    close(found.x.trajectory[-1], plain[solve].x.numpy('b,x'))
    np.testing.assert_array_equal(found.iterations.trajectory[-1].numpy('b'), plain[solve].iterations.numpy('b'))
    assert found.iterations.trajectory[1].numpy('b').tolist() == [1, 1, 1]
    norms = math.sqrt(math.sum(found.residual ** 2, 'x')).numpy('trajectory,b')
    assert (norms[-1] < 1e-4).all() and (norms[0] > 0.1).all()


def test_methods_without_trajectories_refuse_to_record():
    with math.SolveTape(record_trajectories=True), pytest.raises(ValueError, match='records no trajectory'):
        math.solve_linear(poisson, rhs(), Solve('direct', x0=x0()))
    solve = Solve('direct', x0=x0())
    with math.SolveTape(Solve('CG', x0=x0()), record_trajectories=True):  # records other solves only
        math.solve_linear(poisson, rhs(), solve)


def test_a_diverging_recorded_solve_raises():
    """phiml's test_solve_diverge: the Laplacian with periodic padding is singular."""
    y = math.ones(spatial(x=2)) * math.tensor([1, 2], spatial('x'))
    with math.SolveTape(record_trajectories=True), pytest.raises(Diverged):
        math.solve_linear(math.laplace, y, Solve('CG', 0, 1e-3, x0=math.zeros(spatial(x=2)), max_iterations=100))


@dataclass(frozen=True)
class Pair:
    u: math.Tensor
    v: math.Tensor


def coupled(s: Pair) -> Pair:
    """A symmetric positive definite system of two fields: u couples to v."""
    return Pair(2 * s.u - math.laplace(s.u, padding=0) + s.v, 3 * s.v + s.u)


@pytest.mark.parametrize('method', ['CG', 'biCG-stab', 'direct'])
def test_trees_of_tensors_are_solved_as_one_system(method):
    """phiml solves trees (PhiTreeNodes): here a dataclass of two fields, a tuple and a dict."""
    y = Pair(tensor(Y[:, :4], batch('b'), spatial('x')), tensor(Y[:, 4:5].repeat(4, 1), batch('b'), spatial('x')))
    x0 = Pair(math.zeros(spatial(x=4)), math.zeros(spatial(x=4)))
    x = math.solve_linear(coupled, y, Solve(method, 1e-6, 1e-6, x0=x0))
    assert isinstance(x, Pair) and x.u.shape.get_size('b') == 3
    matrix = np.block([[2 * np.eye(4) - laplace_matrix(4), np.eye(4)], [np.eye(4), 3 * np.eye(4)]])
    expected = np.linalg.solve(matrix, np.concatenate([y.u.numpy('b,x'), y.v.numpy('b,x')], 1).T).T
    close(x.u, expected[:, :4])
    close(x.v, expected[:, 4:])
    pair = math.solve_linear(lambda t: (2 * t[0], 4 * t[1]), (tensor(2.), tensor([4., 8.], spatial('x'))),
                             Solve(method, 1e-6, 1e-6, x0=(tensor(0.), math.zeros(spatial(x=2)))))
    assert float(pair[0]) == pytest.approx(1, rel=1e-5)
    close(pair[1], [1, 2], order='x')
    named = math.solve_linear(lambda d: {'a': 4 * d['a']}, {'a': tensor([4., 8.], spatial('x'))},
                              Solve(method, 1e-6, 1e-6, x0={'a': math.zeros(spatial(x=2))}))
    close(named['a'], [1, 2], order='x')


def test_trees_need_matching_leaves_and_a_function():
    x0 = Pair(math.zeros(spatial(x=4)), math.zeros(spatial(x=4)))
    y = Pair(math.ones(spatial(x=4)), math.ones(spatial(x=3)))
    with pytest.raises(ValueError, match='f returned a tree of the non-batch shapes'):
        math.solve_linear(coupled, y, Solve('CG', x0=x0))
    with pytest.raises(TypeError, match='trees of Tensors are solved for a linear function'):
        math.solve_linear(tensor(np.eye(4), spatial('x'), dual('x')), x0, Solve('CG', x0=x0))
    with pytest.raises(TypeError, match='both trees of Tensors'):
        math.solve_linear(coupled, x0, Solve('CG', x0=math.zeros(spatial(x=4))))


def test_the_gradient_by_a_tree(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')
    x0 = Pair(math.zeros(spatial(x=4)), math.zeros(spatial(x=4)))

    def loss(y: Pair):
        x = math.solve_linear(coupled, y, Solve('CG', 1e-6, 1e-6, x0=x0))
        return math.l2_loss(x.u) + math.l2_loss(x.v)
    y = Pair(math.to_float(tensor(Y[0, :4], spatial('x'))), math.to_float(tensor(Y[1, :4], spatial('x'))))
    gradient = math.gradient(loss, 'y', get_output=False)(y)
    matrix = np.block([[2 * np.eye(4) - laplace_matrix(4), np.eye(4)], [np.eye(4), 3 * np.eye(4)]])
    flat = np.linalg.solve(matrix, np.concatenate([Y[0, :4], Y[1, :4]]))
    expected = np.linalg.solve(matrix.T, flat)  # d/dy of |A^-1 y|^2 / 2
    np.testing.assert_allclose(np.concatenate([gradient.u.numpy('x'), gradient.v.numpy('x')]), expected, rtol=1e-3,
                               atol=1e-4)
