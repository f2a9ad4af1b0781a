"""math.jit_compile and math.gradient on functions of lazyphi tensors, on every backend."""

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import batch, spatial

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims):
    return math.wrap(default_backend().as_tensor(np.asarray(data, np.float32)), *dims)


def test_jit_compile_keeps_names_and_values():
    def energy(x, y):
        return math.sum(x * y + 1, 'x'), {'doubled': x * 2}
    x = wrap(np.arange(6).reshape(2, 3), batch('b'), spatial('x'))
    y = wrap(np.ones(3), spatial('x'))
    compiled = math.jit_compile(energy)
    total, extra = compiled(x, y)
    expected_total, expected_extra = energy(x, y)
    math.assert_close(total, expected_total)
    math.assert_close(extra['doubled'], expected_extra['doubled'])
    assert total.shape == batch(b=2) and total.backend is default_backend()
    again, _ = compiled(x * 3, y)  # same shapes: the compiled version is reused
    math.assert_close(again, energy(x * 3, y)[0])


def test_gradient_of_a_scalar_loss():
    if not default_backend().supports('jacobian'):
        with pytest.raises(NotImplementedError, match='automatic differentiation'):
            math.gradient(lambda x: math.sum(x ** 2, 'x'))(wrap([1.0, 2.0], spatial('x')))
        return
    x = wrap([1.0, 2.0, 3.0], spatial('x'))
    loss, grad = math.gradient(lambda x: math.sum(x ** 2, 'x'))(x)
    math.assert_close(loss, 14.0)
    assert grad.shape == spatial(x=3)
    np.testing.assert_allclose(grad.numpy('x'), [2, 4, 6], rtol=1e-5)
    only = math.gradient(lambda a, b: math.sum(a * b, 'x'), wrt=1, get_output=False)(x, x * 2)
    np.testing.assert_allclose(only.numpy('x'), [1, 2, 3], rtol=1e-5)


def test_gradient_needs_a_single_value_loss():
    if not default_backend().supports('jacobian'):
        pytest.skip(f'{default_backend().name} lacks jacobian')
    with pytest.raises(ValueError, match='loss with one value'):
        math.gradient(lambda x: x * 2)(wrap([1.0, 2.0], spatial('x')))
