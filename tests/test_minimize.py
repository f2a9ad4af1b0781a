"""`minimize` and `solve_nonlinear`: known minima per batch entry, Rosenbrock, square roots, and phiml's answers."""

import warnings

import numpy as np
import pytest

from lazyphi import math
from lazyphi.math import Diverged, NotConverged, Solve, batch, channel

pytestmark = pytest.mark.usefixtures('backend')

CENTRES = np.array([1., -2., 3.5])
SQUARES = np.array([2., 9., 5.])  # from x0 = 1 (not below 1/2, where the first L-BFGS-B step lands on x = 0)
WITH_GRADIENT = ['GD', 'L-BFGS-B', 'BFGS', 'CG', 'SLSQP', 'trust-constr', 'auto']
VALUES_ONLY = ['Nelder-Mead', 'Powell', 'COBYLA']


def needs_autodiff(backend, method):
    if backend.name == 'numpy' and method not in VALUES_ONLY:
        pytest.skip('NumPy has no automatic differentiation')


def centres():
    return math.tensor(CENTRES, batch('b'))


def quadratic(x):
    """Minimal (0) at x = (c, -c/2) for the centre c of each batch entry."""
    return math.sum((x - centres() * math.tensor([1., -.5], channel('v'))) ** 2 * math.tensor([1., 3.], channel('v')),
                    'v')


def rosenbrock(x):
    return (1 - x.v[0]) ** 2 + 100 * (x.v[1] - x.v[0] ** 2) ** 2


def expected_quadratic():
    return np.stack([CENTRES, -CENTRES / 2], -1)


@pytest.mark.parametrize('method', WITH_GRADIENT + VALUES_ONLY)
def test_a_quadratic_is_minimal_at_its_centre_in_every_batch_entry(backend, method):
    needs_autodiff(backend, method)
    x0 = math.zeros(batch(b=3), channel(v='x,y'))
    x = math.minimize(quadratic, Solve(method, 0, 1e-5, x0=x0))
    assert set(x.shape.names) == {'b', 'v'}
    np.testing.assert_allclose(x.numpy('b,v'), expected_quadratic(), atol=2e-3)


def test_the_loss_adds_its_batch_dims_to_x0(backend):
    needs_autodiff(backend, 'L-BFGS-B')
    with pytest.warns(RuntimeWarning, match='expanded'):
        x = math.minimize(quadratic, Solve('L-BFGS-B', 0, 1e-6, x0=math.zeros(channel(v='x,y'))))
    np.testing.assert_allclose(x.numpy('b,v'), expected_quadratic(), atol=1e-3)


def test_rosenbrock_with_l_bfgs_b_from_two_starting_points(backend):
    needs_autodiff(backend, 'L-BFGS-B')
    x0 = math.tensor([[-1.2, 1.], [2., 2.]], batch('start'), channel(v='x,y'))
    solve = Solve('L-BFGS-B', 0, 1e-10, x0=x0)
    x = math.minimize(rosenbrock, solve)
    np.testing.assert_allclose(x.numpy('start,v'), np.ones((2, 2)), atol=1e-2)


def test_a_tuple_x0_is_passed_as_positional_arguments(backend):
    needs_autodiff(backend, 'BFGS')

    def loss(a, b):
        return (a - 2) ** 2 + math.sum((b + 1) ** 2, 'v')
    a, b = math.minimize(loss, Solve('BFGS', 0, 1e-6, x0=(math.tensor(0.), math.zeros(channel(v=2)))))
    np.testing.assert_allclose(a.numpy(), 2., atol=1e-3)
    np.testing.assert_allclose(b.numpy('v'), [-1., -1.], atol=1e-3)


@pytest.mark.parametrize('method', ['L-BFGS-B', 'GD', 'Nelder-Mead'])
def test_solve_nonlinear_finds_square_roots(backend, method):
    needs_autodiff(backend, method)
    y = math.tensor(SQUARES, batch('b'))
    x = math.solve_nonlinear(lambda x: x ** 2, y, Solve(method, 1e-6, 1e-6, x0=math.ones(batch(b=3))))
    np.testing.assert_allclose(x.numpy('b'), np.sqrt(SQUARES), atol=5e-3)


@pytest.mark.parametrize('method', ['GD', 'L-BFGS-B'])
def test_too_few_iterations_raise_not_converged_with_the_last_estimate(backend, method):
    needs_autodiff(backend, method)
    solve = Solve(method, 0, 1e-8, x0=math.tensor([[-1.2, 1.]], batch('start'), channel(v='x,y')), max_iterations=2)
    with pytest.raises(NotConverged) as raised:
        math.minimize(rosenbrock, solve)
    result = raised.value.result
    np.testing.assert_array_equal(result.converged.numpy('start'), [False])
    np.testing.assert_array_equal(result.diverged.numpy('start'), [False])
    assert result.iterations.numpy('start')[0] == 2 and result.function_evaluations.numpy('start')[0] >= 3
    assert np.abs(result.x.numpy('start,v') - 1).max() > .1
    assert result.residual.numpy('start')[0] < rosenbrock(solve.x0).numpy('start')[0]  # it went downhill
    quiet = math.minimize(rosenbrock, Solve(method, 0, 1e-8, x0=solve.x0, max_iterations=2,
                                            suppress=[NotConverged]))
    np.testing.assert_allclose(quiet.numpy('start,v'), result.x.numpy('start,v'), rtol=1e-6)


def test_a_non_finite_loss_diverges_under_gradient_descent(backend):
    needs_autodiff(backend, 'GD')
    with pytest.raises(Diverged):
        math.minimize(lambda x: math.sqrt(x), Solve('GD', 0, 1e-6, x0=math.tensor(1.)))


def test_numpy_raises_for_methods_that_need_gradients(backend):
    if backend.name != 'numpy':
        pytest.skip('the other backends differentiate')
    for method in ['GD', 'L-BFGS-B', 'auto']:
        with pytest.raises(NotImplementedError, match='gradients'):
            math.minimize(quadratic, Solve(method, 0, 1e-6, x0=math.zeros(batch(b=3), channel(v='x,y'))))


@pytest.mark.parametrize(('call', 'message'), [
    (lambda: math.minimize(quadratic, Solve('L-BFGS-B')), 'initial guess'),
    (lambda: math.minimize(quadratic, Solve('Newton-CG', x0=math.zeros(channel(v=2)))), 'Newton-CG'),
    (lambda: math.minimize(quadratic, Solve('Powell', 1e-3, x0=math.zeros(channel(v=2)))), 'rel_tol'),
    (lambda: math.minimize(lambda x: x ** 2, Solve('Powell', 0, x0=math.zeros(channel(v=2)))), 'batch dims'),
    (lambda: math.minimize(quadratic, Solve('Powell', 0, x0=math.zeros(channel(v=2)),
                                            preprocess_y=lambda y: y)), 'preprocess_y'),
])
def test_what_is_not_offered_raises_a_value_error_naming_it(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_gradient_descent_compiles_and_scipy_refuses_traced_values(backend):
    needs_autodiff(backend, 'GD')
    y = math.tensor(SQUARES, batch('b'))

    @math.jit_compile
    def square_root(y, method: str):
        return math.solve_nonlinear(lambda x: x ** 2, y, Solve(method, 1e-6, 1e-6, x0=math.ones(batch(b=3))))
    np.testing.assert_allclose(square_root(y, 'GD').numpy('b'), np.sqrt(SQUARES), atol=5e-3)
    if backend.name in ('jax', 'tensorflow'):
        with pytest.raises(NotImplementedError, match='GD'):
            square_root(y, 'L-BFGS-B')


def phiml_torch():
    """phiml.math with torch as its default backend (its minimize needs gradients); its import warnings ignored."""
    phiml = pytest.importorskip('phiml.math')
    pytest.importorskip('torch')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        phiml.use('torch')
    return phiml


@pytest.mark.parametrize('method', ['L-BFGS-B', 'BFGS'])
def test_phiml_finds_the_same_minimum(backend, method):
    needs_autodiff(backend, method)
    phiml = phiml_torch()
    try:
        x0 = phiml.tensor([[-1.2, 1.], [2., 2.]], phiml.batch('start'), phiml.channel(v='x,y'))
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            expected = phiml.minimize(lambda x: (1 - x.v[0]) ** 2 + 100 * (x.v[1] - x.v[0] ** 2) ** 2,
                                      phiml.Solve(method, 0, 1e-6, x0=x0, suppress=[phiml.NotConverged]))
    finally:
        phiml.use('numpy')
    solve = Solve(method, 0, 1e-6, x0=math.tensor([[-1.2, 1.], [2., 2.]], batch('start'), channel(v='x,y')),
                  suppress=[NotConverged])
    x = math.minimize(rosenbrock, solve)
    np.testing.assert_allclose(x.numpy('start,v'), expected.numpy('start,v'), atol=2e-3)


def test_gradient_descent_takes_as_many_steps_as_phiml(backend):
    needs_autodiff(backend, 'GD')
    phiml = phiml_torch()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            weights = phiml.tensor([1., 3.], phiml.channel('v'))
            centres = phiml.tensor(CENTRES, phiml.batch('b')) * phiml.tensor([1., -.5], phiml.channel('v'))
            with phiml.SolveTape() as tape:
                expected = phiml.minimize(lambda x: phiml.sum((x - centres) ** 2 * weights, 'v'),
                                          phiml.Solve('GD', 0, 1e-5, x0=phiml.zeros(phiml.batch(b=3),
                                                                                    phiml.channel(v='x,y'))))
            iterations = int(tape[0].iterations.numpy('b').max())
            evaluations = tape[0].function_evaluations.numpy('b')
    finally:
        phiml.use('numpy')
    x0 = math.zeros(batch(b=3), channel(v='x,y'))
    x = math.minimize(quadratic, Solve('GD', 0, 1e-5, x0=x0, max_iterations=iterations))
    np.testing.assert_allclose(x.numpy('b,v'), expected.numpy('b,v'), atol=1e-4)
    with pytest.raises(NotConverged) as raised:
        math.minimize(quadratic, Solve('GD', 0, 1e-5, x0=x0, max_iterations=iterations - 1))
    np.testing.assert_array_equal(raised.value.result.function_evaluations.numpy('b') + 2, evaluations)


def test_phiml_minimizes_the_same_residual(backend):
    """phiml 1.16.1's own solve_nonlinear fails (it compares a Python 0 with `.all`), so its minimize of the
    residual `l2_loss(f(x) - y)` stands in for it."""
    needs_autodiff(backend, 'L-BFGS-B')
    phiml = phiml_torch()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            y = phiml.tensor([2., 10., -1.], phiml.batch('b'))
            expected = phiml.minimize(lambda x: phiml.l2_loss(x ** 3 + x - y),
                                      phiml.Solve('L-BFGS-B', 0, 1e-6, x0=phiml.zeros(phiml.batch(b=3))))
    finally:
        phiml.use('numpy')
    x = math.solve_nonlinear(lambda x: x ** 3 + x, math.tensor([2., 10., -1.], batch('b')),
                             Solve('L-BFGS-B', 1e-6, 1e-6, x0=math.zeros(batch(b=3))))
    np.testing.assert_allclose(x.numpy('b'), expected.numpy('b'), atol=1e-3)
    np.testing.assert_allclose(x.numpy('b') ** 3 + x.numpy('b'), [2., 10., -1.], atol=1e-2)


def test_an_error_in_f_during_a_scipy_run_propagates_and_ends_its_threads(backend):
    import threading
    calls = []

    def failing(x):
        calls.append(1)
        if len(calls) > 3:
            raise ArithmeticError('stop here')
        return math.sum(x ** 2, 'v')
    before = threading.active_count()
    with pytest.raises(ArithmeticError, match='stop here'):
        math.minimize(failing, Solve('Nelder-Mead', 0, 1e-6, x0=math.ones(batch(b=3), channel(v=2))))
    assert threading.active_count() == before


@pytest.mark.parametrize('method', ['GD', 'L-BFGS-B', 'Nelder-Mead'])
def test_python_numbers_in_x0_are_minimised_and_answered_natively(backend, method):
    """phiml's `minimize(f, Solve('GD', x0=3))`: a number is a scalar parameter; its minimum comes back as a
    native scalar of the backend, beside tensors where x0 has tensors."""
    needs_autodiff(backend, method)
    seen = []

    def loss(a, b):
        seen.append(type(a))
        return (a - 2) ** 2 + math.sum((b + 1) ** 2, 'v')
    a, b = math.minimize(loss, Solve(method, 0, 1e-6, x0=(3, math.zeros(channel(v=2)))))
    assert not isinstance(a, math.Tensor) and math.choose_backend(a).name == backend.name
    np.testing.assert_allclose(float(a), 2., atol=1e-2)
    np.testing.assert_allclose(b.numpy('v'), [-1., -1.], atol=1e-2)
    assert all(t is not int for t in seen)  # f gets tensors


def test_a_single_number_as_x0(backend):
    needs_autodiff(backend, 'GD')
    x = math.minimize(lambda x: x ** 2, Solve('GD', 0, 1e-5, x0=3, max_iterations=20))
    assert abs(float(x)) < 1e-5


@pytest.mark.parametrize('method', ['GD', 'L-BFGS-B', 'Nelder-Mead'])
def test_a_non_uniform_x0_keeps_its_shape(backend, method):
    """phiml's test: vectors of different lengths stacked along an instance dim, each component minimised."""
    needs_autodiff(backend, method)
    x0 = math.stack([math.vec(x=0.), math.vec(x=1., y=2.)], math.instance('vectors'))
    centres = math.stack([math.vec(x=3.), math.vec(x=-1., y=4.)], math.instance('vectors'))
    x = math.minimize(lambda x: math.sum(math.l2_loss(x - centres, 'vector'), 'vectors'),
                      Solve(method, 0, 1e-6, x0=x0))
    assert x.shape == x0.shape
    np.testing.assert_allclose(x.vectors[0].numpy('vector'), [3.], atol=1e-2)
    np.testing.assert_allclose(x.vectors[1].numpy('vector'), [-1., 4.], atol=1e-2)


def test_phiml_minimizes_a_number_alike(backend):
    if backend.name != 'torch':
        pytest.skip('compared on torch, which phiml uses here')
    phiml = phiml_torch()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            expected = phiml.minimize(lambda x: (x - 1.5) ** 2, phiml.Solve('L-BFGS-B', 0, 1e-6, x0=3))
    finally:
        phiml.use('numpy')
    x = math.minimize(lambda x: (x - 1.5) ** 2, Solve('L-BFGS-B', 0, 1e-6, x0=3))
    assert type(x) is type(expected)
    np.testing.assert_allclose(float(x), float(expected), atol=1e-4)


@pytest.mark.parametrize('method', ['GD', 'L-BFGS-B', 'Nelder-Mead'])
def test_a_recorded_minimisation_lists_x_and_the_loss_per_iteration(backend, method):
    """As phiml: x, residual (the loss) and function_evaluations gain the batch dim `trajectory`, starting at x0
    and ending at the minimum; iterations, converged and diverged are the final ones."""
    needs_autodiff(backend, method)
    x0 = math.zeros(batch(b=3), channel(v='x,y'))
    solve = Solve(method, 0, 1e-5, x0=x0)
    with math.SolveTape() as plain, math.SolveTape(record_trajectories=True) as recorded:
        x = math.minimize(quadratic, solve)
    found = recorded[solve]
    assert 'trajectory' not in x.shape and 'trajectory' not in plain[solve].x.shape
    length = found.x.shape.get_size('trajectory')
    assert length > 2 and found.residual.shape.get_size('trajectory') == length
    assert found.function_evaluations.shape.get_size('trajectory') == length
    np.testing.assert_allclose(found.x.trajectory[0].numpy('b,v'), 0)
    np.testing.assert_allclose(found.x.trajectory[-1].numpy('b,v'), x.numpy('b,v'), atol=1e-6)
    np.testing.assert_allclose(found.residual.trajectory[-1].numpy('b'), plain[solve].residual.numpy('b'),
                               rtol=1e-5, atol=1e-7)
    assert 'trajectory' not in found.iterations.shape
    np.testing.assert_array_equal(found.iterations.numpy('b'), plain[solve].iterations.numpy('b'))
