"""`lazyphi.math.perm`: random permutations and picks, all permutations, and the optimal assignment against
itertools, NumPy and SciPy; every backend."""

from itertools import permutations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import batch, dual, instance, spatial
from lazyphi.math.perm import all_permutations, optimal_perm, pick_random, random_permutation

pytestmark = pytest.mark.usefixtures('backend')
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def wrap(data, *dims):
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def test_random_permutation_is_a_permutation_per_batch_entry(backend):
    p = random_permutation(spatial(x=7), batch(b=5))
    assert p.backend is backend and set(p.shape.names) == {'b', 'x'}
    assert (np.sort(p.numpy('b,x'), axis=1) == np.arange(7)).all()
    multi = random_permutation(spatial(x=2, y=3), batch(b=4))
    assert multi.shape.get_item_names('index') == ('x', 'y')
    flat = multi.numpy('b,x,y,index') @ np.array([3, 1])
    assert (np.sort(flat.reshape(4, -1), axis=1) == np.arange(6)).all()
    with pytest.raises(ValueError, match='batch'):
        random_permutation(spatial(x=3), dims=math.batch)


@given(n=st.integers(1, 5), count=st.integers(1, 7))
@SETTINGS
def test_pick_random_picks_distinct_entries_while_there_are_enough(n, count):
    values = wrap(np.arange(n) * 10, instance('i'))
    picked = pick_random(values, 'i', count=instance(picks=count), selections=batch(s=3))
    got = picked.numpy('s,picks')
    if count <= n:
        assert all(len(set(row)) == count and set(row) <= set(range(0, 10 * n, 10)) for row in got)
    else:
        assert (got == np.arange(count) % n * 10).all()
    assert pick_random(values, 'i').shape.rank == 0
    assert sorted(pick_random(range, instance(i=n), count=None).numpy('i').tolist()) == list(range(n))


def test_pick_random_follows_the_weights():
    math.seed(0)
    weight = wrap([0., 1., 3.], instance('i'))
    firsts = pick_random(range, instance(i=3), count=1, weight=weight, selections=batch(s=4000)).numpy('s')
    share = np.bincount(firsts, minlength=3) / len(firsts)
    assert share[0] == 0 and abs(share[2] - 0.75) < 0.03


def test_all_permutations_lists_itertools_order(backend):
    p = all_permutations(spatial(x=3), index_dim=None, convert=True)
    assert p.backend is backend and p.shape.get_size('~perm') == 6
    assert p.numpy('~perm,x').tolist() == [list(q) for q in permutations(range(3))]
    multi = all_permutations(spatial(x=2, y=2))
    assert multi.shape.get_size('~perm') == 24 and multi.shape.get_item_names('index') == ('x', 'y')
    assert math.max(multi).numpy() == 1 and math.min(multi).numpy() == 0
    with pytest.raises(ValueError, match='index_dim'):
        all_permutations(spatial(x=2, y=2), index_dim=None)


@given(n=st.integers(1, 5), data=st.data())
@SETTINGS
def test_optimal_perm_finds_the_least_total_cost(n, data):
    costs = np.asarray(data.draw(st.lists(st.integers(0, 20), min_size=2 * n * n, max_size=2 * n * n)),
                       dtype=np.float64).reshape(2, n, n)
    perm, cost = optimal_perm(wrap(costs, batch('b'), spatial('x'), dual('x')))
    assert perm.shape.get_item_names('index') == ('~x',)
    chosen = perm.numpy('b,x,index')[..., 0]
    best = [min(sum(c[i, q[i]] for i in range(n)) for q in permutations(range(n))) for c in costs]
    assert all(sorted(row) == list(range(n)) for row in chosen)
    np.testing.assert_allclose(cost.numpy('b,x'), np.take_along_axis(costs, chosen[..., None], 2)[..., 0])
    np.testing.assert_allclose(cost.numpy('b,x').sum(axis=1), best)
    with pytest.raises(ValueError, match='primal and one dual'):
        optimal_perm(wrap(costs, batch('b'), spatial('x'), spatial('y')))


def test_optimal_perm_matches_phiml():
    phiml_perm = pytest.importorskip('phiml.math.perm')
    pmath = pytest.importorskip('phiml.math')
    o, i = np.array([0., 10., 100., 3.]), np.array([90., -2., 0., 5.])
    ours, our_cost = optimal_perm((wrap(i, dual('x')) - wrap(o, spatial('x'))) ** 2)
    pairs = (pmath.wrap(i, pmath.dual('x')) - pmath.wrap(o, pmath.spatial('x'))) ** 2
    theirs, their_cost = phiml_perm.optimal_perm(pairs)
    assert ours.numpy('x,index').tolist() == theirs.numpy('x,index').tolist()
    np.testing.assert_allclose(our_cost.numpy('x'), their_cost.numpy('x'))


def test_optimal_cost_carries_gradients(backend):
    if backend.name in ('numpy', 'jax'):
        pytest.skip('numpy has no gradients; jax traces the function it differentiates, and SciPy needs values')
    costs = wrap(np.array([[1., 5.], [4., 2.]]), spatial('x'), dual('x'))
    grad = math.gradient(lambda c: math.sum(optimal_perm(c)[1]), wrt='c', get_output=False)(costs)
    assert grad.numpy('x,~x').tolist() == [[1, 0], [0, 1]]
