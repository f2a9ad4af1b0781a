"""Reductions give phiml's values on every backend and tensor kind, including the cases that once drifted apart."""

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import batch, spatial
from lazyphi.math.kinds import REDUCTIONS

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, dims: str):
    return math.wrap(default_backend().as_tensor(np.asarray(data)), dims)


def test_std_of_a_non_uniform_stack_pools_the_parts():
    a = wrap([[1, 2, 3], [4, 5, 6]], 'b:b,x:s')
    c = wrap([[10, 0], [1, 1]], 'b:b,x:s')
    result = math.std(math.stack([a, c], batch('s')), 's,x')
    math.assert_close(result, wrap([np.std([1, 2, 3, 10, 0]), np.std([4, 5, 6, 1, 1])], 'b:b'), rel_tolerance=1e-6)
    math.assert_close(result, wrap([3.544009, 2.0591261], 'b:b'), rel_tolerance=1e-6)


def test_std_of_a_repeated_value_is_zero():
    assert float(math.std(math.ones(spatial(x=4)))) == 0
    assert float(math.std(math.ones(spatial(x=4)) * 5)) == 0


def test_reducing_a_dim_the_value_lacks():
    x = wrap([1., 2., 3.], 'x:s')
    np.testing.assert_array_equal(math.std(x, 'y').numpy(), [0, 0, 0])
    np.testing.assert_array_equal(math.mean(x, 'y').numpy(), [1, 2, 3])
    np.testing.assert_array_equal(math.sum(x, 'y').numpy(), [1, 2, 3])


def test_finite_mean_without_finite_values_is_nan_without_a_warning():
    x = wrap([[np.nan, np.inf], [1., np.nan]], 'b:b,x:s')
    np.testing.assert_array_equal(math.finite_mean(x, 'x').numpy(), [np.nan, 1.])


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_partials_combine_to_the_whole(name):
    """Splitting along x into parts and combining their partials equals reducing everything at once."""
    values = np.random.default_rng(1).normal(size=(3, 7))
    if name in ('any', 'all'):
        values = values > 0
    x = wrap(values, 'b:b,x:s')
    reduction = REDUCTIONS[name]
    partials = [reduction.partial(x.x[a:b], ('x',)) for a, b in ((0, 2), (2, 3), (3, 7))]
    math.assert_close(reduction.combine(partials), reduction(x, ('x',)), rel_tolerance=1e-5, abs_tolerance=1e-6)
