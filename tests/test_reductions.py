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


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_partials_merged_one_at_a_time_combine_to_the_whole(name):
    """Merging each part's partial into those before it (as a reduction over many pieces does) loses nothing,
    also where a finite_* reduction meets a part without finite values."""
    values = np.random.default_rng(2).normal(size=(3, 7))
    values[1, 0:2] = np.nan  # row 1 has no finite value in the first part
    if name in ('any', 'all'):
        values = values > 0
    elif not name.startswith('finite'):
        values = np.nan_to_num(values)
    x = wrap(values, 'b:b,x:s')
    reduction = REDUCTIONS[name]
    merged = None
    for a, b in ((0, 2), (2, 3), (3, 7)):
        partial = reduction.partial(x.x[a:b], ('x',))
        merged = partial if merged is None else reduction.merge([merged, partial])
    math.assert_close(reduction.combine([merged]), reduction(x, ('x',)), rel_tolerance=1e-5, abs_tolerance=1e-6)


def test_weighted_mean_and_where_no_weight():
    x = wrap([[1., 3.], [2., 4.]], 'b:b,x:s')
    weights = wrap([[1., 3.], [0., 0.]], 'b:b,x:s')
    with np.errstate(invalid='ignore'):
        plain = math.mean(x, 'x', weight=weights).numpy('b')
    assert plain[0] == 2.5 and np.isnan(plain[1])
    assert math.mean(x, 'x', weight=weights, where_no_weight=-1).numpy('b').tolist() == [2.5, -1]
    assert float(math.mean([wrap(1., ''), wrap(3., '')], '0', weight=[wrap(3., ''), wrap(1., '')])) == 1.5


def test_max_and_min_with_a_key_pick_entries_of_other_values():
    key = wrap([[1, 5, 2], [7, 0, 3]], 'b:b,x:s')
    value = wrap([[10, 20, 30], [40, 50, 60]], 'b:b,x:s')
    assert math.max(value, 'x', key=key).numpy('b').tolist() == [20, 40]
    assert math.min((value, -value), 'x', key=key)[1].numpy('b').tolist() == [-10, -50]


def test_shorthands_reduce_the_dims_of_one_type():
    t = math.ones(batch(b=2), spatial(x=3), math.channel(c=4), math.instance(i=5))
    assert math.ssum(t).shape == t.shape.without('x') and float(math.ssum(t).b[0].c[0].i[0]) == 3
    assert math.csum(t, dim='x').shape == t.shape.without('x')
    assert math.imax(t).shape == t.shape.without('i') and math.cmean(t).shape == t.shape.without('c')
    assert math.psum(t).shape == batch(b=2)  # primal: every dim that is neither batch nor dual
    assert float(math.finite_smean(wrap([1., np.nan, 3.], 'x:s'))) == 2
    assert math.ssort(wrap([3, 1, 2], 'x:s')).numpy('x').tolist() == [1, 2, 3]


def test_finite_reductions_give_the_default_where_nothing_is_finite():
    t = wrap([[0., 1., -1., -np.inf, np.inf, np.nan], [np.nan, np.inf, np.nan, np.nan, np.nan, np.nan]], 'b:b,x:s')
    assert math.finite_min(t, 'x', default=0).numpy('b').tolist() == [-1, 0]
    assert math.finite_max(t, 'x', default=9).numpy('b').tolist() == [1, 9]
    assert math.finite_sum(t, 'x').numpy('b').tolist()[0] == 0 and np.isnan(math.finite_sum(t, 'x').numpy('b')[1])
    np.testing.assert_allclose(math.finite_std(t, 'x').numpy('b'), [np.std([0, 1, -1]), np.nan], rtol=1e-6)


def test_sequences_reduce_along_0_or_element_by_element():
    a, c = wrap([1., 2.], 'x:s'), wrap([3., 4.], 'x:s')
    assert math.sum([a, c], '0').numpy('x').tolist() == [4, 6]
    assert [float(v) for v in math.sum([a, c])] == [3, 7]
    assert math.sum({'k': a})['k'].numpy().tolist() == 3
    assert math.sum(a, None) is a
