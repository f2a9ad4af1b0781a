"""The element-wise functions of lazyphi.math against NumPy/SciPy, on every backend, for tensors, numbers,
natives and trees."""

from dataclasses import dataclass

import numpy as np
import pytest
from scipy import special

from lazyphi import math
from lazyphi.backend import DType, default_backend
from lazyphi.math import Tensor, batch, spatial

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, dims: str = 'x:s') -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), dims)


VALUES = np.asarray([-2.5, -0.3, 0.0, 0.7, 4.0])
POSITIVE = np.asarray([0.2, 1.0, 2.5, 7.0])


@pytest.mark.parametrize('name, reference, values', [
    ('erf', special.erf, VALUES),
    ('soft_plus', lambda v: np.log1p(np.exp(v)), VALUES),
    ('log_gamma', special.gammaln, POSITIVE),
    ('sigmoid', special.expit, VALUES),
    ('arcsinh', np.arcsinh, VALUES),
    ('arctanh', np.arctanh, VALUES / 5),
    ('radians_to_degrees', np.degrees, VALUES),
    ('degrees_to_radians', np.radians, VALUES),
    ('abs_square', np.square, VALUES),
    ('angle', np.angle, VALUES),
])
def test_float_functions_match_numpy(name, reference, values):
    result = getattr(math, name)(wrap(values))
    np.testing.assert_allclose(result.numpy('x'), reference(values), rtol=2e-6, atol=1e-6)
    assert result.dtype == DType(float, 32)


def test_integers_become_floats_of_the_current_precision():
    assert math.erf(wrap([0, 1])).dtype == DType(float, 32)
    with math.precision(64):
        assert math.soft_plus(wrap([0, 1])).dtype == DType(float, 64)
        assert math.to_float(wrap(np.asarray([1.5], np.float32))).dtype == DType(float, 64)
    assert math.to_float(wrap(np.asarray([1.5], np.float64))).dtype == DType(float, 32)


def test_factorial_is_exact_for_integers_and_keeps_their_type():
    for bits, n, expected in [(32, 12, 479001600), (64, 20, 2432902008176640000)]:
        result = math.factorial(math.cast(wrap([0, 1, n]), DType(int, bits)))
        assert result.dtype == DType(int, bits)
        assert result.numpy('x').tolist() == [1, 1, expected]
    np.testing.assert_allclose(math.factorial(wrap([4., 0.5])).numpy('x'), [24, special.gamma(1.5)], rtol=1e-6)


@pytest.mark.parametrize('upper', [False, True])
@pytest.mark.parametrize('regularized', [False, True])
def test_incomplete_gamma(upper, regularized):
    a, x = np.asarray([0.5, 1., 3.]), np.asarray([0.3, 1., 4.])
    result = math.incomplete_gamma(wrap(a), wrap(x), upper=upper, regularized=regularized)
    expected = (special.gammaincc if upper else special.gammainc)(a, x) * (1 if regularized else special.gamma(a))
    np.testing.assert_allclose(result.numpy('x'), expected, rtol=1e-5)


def test_arctan_with_divide_by_is_the_angle_of_a_point():
    y, x = wrap([1., 1., -1., 0.]), wrap([0., -1., 0., -1.])
    np.testing.assert_allclose(math.arctan(y, divide_by=x).numpy('x'), np.arctan2([1, 1, -1, 0], [0, -1, 0, -1]),
                               rtol=1e-6)
    np.testing.assert_allclose(math.arctan(wrap([1.])).numpy('x'), [np.pi / 4], rtol=1e-6)


def test_safe_div_gives_zero_where_the_divisor_is_zero():
    with np.errstate(divide='ignore', invalid='ignore'):
        result = math.safe_div(wrap([1., 0., 6., np.nan]), wrap([0., 0., 3., 1.]))
    np.testing.assert_array_equal(result.numpy('x'), [0, 0, 2, np.nan])
    assert math.safe_div(wrap([1, 2]), wrap([2, 0])).dtype == DType(float, 32)


def test_safe_mul_drops_non_finite_gradient_contributions():
    x, y = wrap([2., 2., np.nan], 'x:b'), wrap([3., np.nan, 3.], 'x:b')
    math.assert_close(math.safe_mul(x, y), x * y)
    if not default_backend().supports('jacobian'):
        return
    _, (dx, dy) = math.gradient(math.safe_mul, 'x,y')(x, y)
    np.testing.assert_array_equal(dx.numpy('x'), [3, 0, 3])
    np.testing.assert_array_equal(dy.numpy('x'), [2, 2, 0])


def test_nan_to_0_and_where_with_a_numeric_condition():
    np.testing.assert_array_equal(math.nan_to_0(wrap([np.nan, 1.])).numpy('x'), [0, 1])
    np.testing.assert_array_equal(math.where(wrap([0, 2, -1]), 1, 0).numpy('x'), [0, 1, 1])
    assert math.where(True, 'a', 'b') == 'a'
    with pytest.raises(ValueError, match='nonzero'):
        math.where(wrap([True]))


def test_where_combines_dicts_and_dataclasses_field_by_field():
    @dataclass(frozen=True)
    class Pair:
        a: Tensor
        b: Tensor
    condition = wrap([True, False])
    result = math.where(condition, Pair(wrap([1, 2]), wrap([3, 4])), Pair(wrap([5, 6]), wrap([7, 8])))
    assert result.a.numpy('x').tolist() == [1, 6] and result.b.numpy('x').tolist() == [3, 8]
    result = math.where(condition, {'v': wrap([1, 2])}, {'v': 0})
    assert result['v'].numpy('x').tolist() == [1, 0]


def test_maximum_minimum_and_clip():
    assert math.maximum(wrap([1, 5]), 3).numpy('x').tolist() == [3, 5]
    assert math.minimum(None, 2, allow_none=True) == 2
    assert math.clip(wrap([-1., .5, 2.])).numpy('x').tolist() == [0, .5, 1]


def test_numbers_natives_and_trees_keep_their_form():
    assert float(math.sin(0.)) == 0
    native = default_backend().as_tensor(np.asarray([[0., 1.], [2., 3.]]))
    result = math.exp(native)
    assert default_backend().staticshape(result) == (2, 2)
    np.testing.assert_allclose(default_backend().numpy(result), np.exp([[0, 1], [2, 3]]), rtol=1e-6)
    tree = math.sqrt({'a': wrap([4.]), 'b': (9., None)})
    assert tree['a'].numpy('x').tolist() == [2] and float(tree['b'][0]) == 3 and tree['b'][1] is None
    assert [float(v) for v in math.radians_to_degrees([0, np.pi])] == pytest.approx([0, 180])


def test_cast_accepts_phimls_forms_of_dtypes():
    x = wrap([1.7, -1.2])
    assert math.cast(x, int).numpy('x').tolist() == [1, -1]
    assert math.to_int64(x).dtype == DType(int, 64) and math.to_complex(x).dtype == DType(complex, 64)
    assert math.cast(x, DType(float, 16)).dtype == DType(float, 16)


def test_element_wise_functions_keep_lazy_kinds():
    lazy = math.zeros(batch(b=1000), spatial(x=1000))
    result = math.soft_plus(lazy)
    assert type(result) is math.Expanded and result.shape == lazy.shape
    np.testing.assert_allclose(float(result.b[3].x[7]), np.log(2), rtol=1e-6)
