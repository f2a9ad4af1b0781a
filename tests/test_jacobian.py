"""math.jacobian of outputs with non-batch dims, on every backend: dims, values against analytic derivatives,
finite differences of the same function in NumPy, and phiml (row by row, where phiml differentiates)."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import batch, channel, dual, spatial

pytestmark = pytest.mark.usefixtures('backend')

A = np.array([[1., 2.], [3., 4.], [5., 6.]])


def wrap(data, *dims):
    return math.wrap(default_backend().as_tensor(np.asarray(data, np.float32)), *dims)


def needs_autodiff():
    if not default_backend().supports('jacobian'):
        with pytest.raises(NotImplementedError, match='automatic differentiation'):
            math.jacobian(lambda x: x ** 2)(wrap([1., 2.], channel('vec')))
        pytest.skip(f'{default_backend().name} has no automatic differentiation (NotImplementedError checked)')


def finite_differences(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d x of a NumPy function by central differences in float64: the output's axes, then x's."""
    x = np.asarray(x, np.float64)
    columns = []
    for i in range(x.size):
        step = np.zeros(x.size)
        step[i] = eps
        step = step.reshape(x.shape)
        columns.append((f(x + step) - f(x - step)) / (2 * eps))
    return np.stack(columns, -1).reshape(np.shape(f(x)) + x.shape)


def test_a_linear_map_gives_its_matrix_with_the_argument_dims_dual():
    needs_autodiff()
    matrix = wrap(A, channel('out'), channel('vec'))
    jac = math.jacobian(lambda x: math.dot(matrix, 'vec', x, 'vec'), get_output=False)(wrap([1., 2.], channel('vec')))
    assert isinstance(jac, list) and len(jac) == 1  # no wrt: a list of one, as gradient
    assert jac[0].shape == dual(vec=2) & channel(out=3)  # the order of phiml's matrix_from_function
    np.testing.assert_allclose(jac[0].numpy('out,~vec'), A)


def test_an_elementwise_function_gives_a_diagonal_and_the_matrix_applies_with_matmul():
    needs_autodiff()
    x = wrap([1., 2., 3.], channel('vec'))
    (out, doubled), jac = math.jacobian(lambda x: (x ** 2, x * 2), wrt='x')(x)
    assert jac.shape == dual(vec=3) & channel(vec=3)
    np.testing.assert_allclose(jac.numpy('vec,~vec'), np.diag([2., 4., 6.]), rtol=1e-6)
    np.testing.assert_allclose(out.numpy('vec'), [1, 4, 9])
    np.testing.assert_allclose(doubled.numpy('vec'), [2, 4, 6])
    direction = wrap([1., -1., 0.5], channel('vec'))
    np.testing.assert_allclose((jac @ direction).numpy('vec'), [2, -4, 3], rtol=1e-6)


def test_shared_batch_dims_give_one_jacobian_per_entry():
    needs_autodiff()
    values = np.array([[1., 2.], [3., 4.], [-1., .5]])
    x = wrap(values, batch('b'), channel('vec'))
    jac = math.jacobian(lambda x: math.sin(x) * math.sum(x, 'vec'), get_output=False, wrt=0)(x)
    assert jac.shape == batch(b=3) & dual(vec=2) & channel(vec=2)

    def per_entry(v):
        return np.sin(v) * np.sum(v)
    for b in range(3):
        np.testing.assert_allclose(jac.b[b].numpy('vec,~vec'), finite_differences(per_entry, values[b]),
                                   rtol=1e-4, atol=1e-5)


def test_batch_dims_only_the_output_or_only_the_argument_has():
    needs_autodiff()
    scale = wrap([1., 2., 3.], batch('s'))
    x = wrap([1., 2.], channel('vec'))
    jac = math.jacobian(lambda x: x * scale, get_output=False, wrt='x')(x)  # summed over s, as gradient sums
    assert jac.shape == dual(vec=2) & channel(vec=2)
    np.testing.assert_allclose(jac.numpy('vec,~vec'), np.diag([6., 6.]), rtol=1e-6)
    xb = wrap([[1., 2.], [3., 4.]], batch('b'), channel('vec'))
    jac = math.jacobian(lambda x: math.sum(x ** 2, 'b,vec') * wrap([1., 1., 1.], channel('out')), get_output=False,
                        wrt='x')(xb)
    assert jac.shape == batch(b=2) & dual(vec=2) & channel(out=3)
    np.testing.assert_allclose(jac.numpy('b,out,~vec'), np.broadcast_to(2 * np.array([[1., 2.], [3., 4.]])[:, None],
                                                                        (2, 3, 2)), rtol=1e-6)


def test_several_arguments_in_order_and_a_scalar_output_is_the_gradient():
    needs_autodiff()
    x, y = wrap([1., 2.], channel('vec')), wrap([3., 4., 5.], spatial('x'))
    output, (dx, dy) = math.jacobian(lambda a, b: a * math.sum(b ** 2, 'x'), wrt='a,b')(x, y)
    np.testing.assert_allclose(output.numpy('vec'), [50, 100])
    assert dx.shape == dual(vec=2) & channel(vec=2) and dy.shape == dual(x=3) & channel(vec=2)
    np.testing.assert_allclose(dx.numpy('vec,~vec'), np.diag([50., 50.]), rtol=1e-6)
    np.testing.assert_allclose(dy.numpy('vec,~x'), np.outer([1., 2.], [6., 8., 10.]), rtol=1e-6)
    only_y = math.jacobian(lambda a, b: a * math.sum(b ** 2, 'x'), wrt=1, get_output=False)(x, y)
    math.assert_close(only_y, dy)
    grad = math.jacobian(lambda a: math.sum(a ** 2, 'vec'), wrt='a', get_output=False)(x)
    assert grad.shape == channel(vec=2)  # no non-batch output dims: the gradient, as phiml
    np.testing.assert_allclose(grad.numpy('vec'), [2, 4], rtol=1e-6)


def test_inside_jit_compile():
    needs_autodiff()
    x = wrap([[1., 2.], [3., 4.]], batch('b'), channel('vec'))
    matrix = wrap(A, channel('out'), channel('vec'))

    @math.jit_compile
    def jac_of_tanh(x):
        return math.jacobian(lambda v: math.tanh(math.dot(matrix, 'vec', v, 'vec')), get_output=False, wrt='v')(x)
    for _ in range(2):
        jac = jac_of_tanh(x)
        assert jac.shape == batch(b=2) & dual(vec=2) & channel(out=3)
        for b, v in enumerate(np.array([[1., 2.], [3., 4.]])):
            expected = (1 - np.tanh(A @ v) ** 2)[:, None] * A
            np.testing.assert_allclose(jac.b[b].numpy('out,~vec'), expected, rtol=1e-4, atol=1e-6)


def test_errors_name_the_problem():
    needs_autodiff()
    with pytest.raises(ValueError, match='dual dim'):
        math.jacobian(lambda x: x * 2, get_output=False)(wrap([1., 2.], dual(vec=2)))
    with pytest.raises(ValueError, match='share a name'):
        math.jacobian(lambda x: math.rename_dims(x, 'vec', dual('vec')) * 2, get_output=False)(
            wrap([1., 2.], channel('vec')))
    with pytest.raises(ValueError, match='Tensor'):
        math.jacobian(lambda x: 1.0, get_output=False)(wrap([1., 2.], channel('vec')))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2 ** 31 - 1))
def test_against_finite_differences_for_varying_shapes(batch_size, n, m, seed):
    needs_autodiff()
    rng = np.random.default_rng(seed)
    matrix, values = rng.normal(size=(m, n)), rng.normal(size=(batch_size, n))

    def numpy_f(v):
        return np.sin(matrix @ v) * v[0]
    weights = wrap(matrix, channel('out'), spatial('x'))
    jac = math.jacobian(lambda v: math.sin(math.dot(weights, 'x', v, 'x')) * v.x[0], get_output=False, wrt='v')(
        wrap(values, batch('b'), spatial('x')))
    assert jac.shape == batch(b=batch_size) & dual(x=n) & channel(out=m)
    for b in range(batch_size):
        np.testing.assert_allclose(jac.b[b].numpy('out,~x'), finite_differences(numpy_f, values[b]),
                                   rtol=1e-3, atol=1e-4)


def phiml_entry(pm, row: int):
    return lambda x: (pm.exp(x) * pm.sum(x ** 2, 'vec')).vec[row]


def test_rows_agree_with_phimls_derivative_of_each_output_entry():
    """phiml 1.16 differentiates only outputs whose dims are batch dims on torch and jax (its jacobian raises for
    others, and TensorFlow's result keeps the argument's dims), so each row is compared with phiml's derivative
    of that output entry, on the same backend."""
    needs_autodiff()
    phiml = pytest.importorskip('phiml')
    pm = phiml.math
    values = np.array([[.5, -1.], [2., .25]], np.float32)
    native = default_backend().as_tensor(values)
    x = math.wrap(native, batch('b'), channel('vec'))
    jac = math.jacobian(lambda x: math.exp(x) * math.sum(x ** 2, 'vec'), get_output=False, wrt='x')(x)
    for row in range(2):
        with warnings.catch_warnings():  # phiml's own deprecation warnings (numpy.core)
            warnings.simplefilter('ignore')
            px = pm.wrap(native, pm.batch('b'), pm.channel('vec'))
            theirs = pm.jacobian(phiml_entry(pm, row), get_output=False, wrt='x')(px)
        assert theirs.shape.names == ('b', 'vec')
        np.testing.assert_allclose(jac.vec[row].numpy('b,~vec'), theirs.numpy('b,vec'), rtol=1e-5)


def test_phimls_docstring_example():
    """phiml's `jacobian` docstring: a loss and a prediction, differentiated by x, then by x and y with the output."""
    needs_autodiff()
    phiml = pytest.importorskip('phiml')
    pm = phiml.math
    x_values, y_values = np.array([1., 2., 3.], np.float32), np.array([0., 1., 5.], np.float32)

    def run(lib, x, y):
        def loss_function(x, y):
            prediction = x * 2
            loss = lib.l2_loss(prediction - y)
            return loss, prediction
        dx = lib.jacobian(loss_function, wrt='x', get_output=False)(x, y)
        (loss, prediction), (dx2, dy) = lib.jacobian(loss_function, wrt='x,y', get_output=True)(x, y)
        return dx, loss, prediction, dx2, dy
    b = default_backend()
    ours = run(math, *(math.wrap(b.as_tensor(v), spatial('x')) for v in (x_values, y_values)))
    with warnings.catch_warnings():  # phiml's own deprecation warnings (numpy.core)
        warnings.simplefilter('ignore')
        theirs = run(pm, *(pm.wrap(b.as_tensor(v), pm.spatial('x')) for v in (x_values, y_values)))
    for mine, other in zip(ours, theirs, strict=True):
        assert mine.shape.names == other.shape.names
        np.testing.assert_allclose(mine.numpy(mine.shape.names), other.numpy(other.shape.names), rtol=1e-6)
    assert str(ours[0]) == str(theirs[0]) == '(4.000, 6.000, 2.000) along xˢ'  # 2 * (2x - y), as printed
