"""Pairs of points (`pairwise_differences`, `find_closest`, `map_pairs`, `count_intersections`) against NumPy,
SciPy and phiml, on every backend."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import batch, channel, dual, instance, spatial, tensor, vec

pytestmark = pytest.mark.usefixtures('backend')

RNG = np.random.default_rng(11)


def phiml_math():
    """phiml.math where it is installed, to compare with; its import and calls warn about things lazyphi ignores."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return pytest.importorskip('phiml.math')


def points(values: np.ndarray, *dims):
    return math.tensor(values, *dims, channel(vector=','.join('xyz'[:values.shape[-1]])))


# --- pairwise_differences --------------------------------------------------------------------------------------

def test_pairwise_differences_as_phimls_docstring_prints_them():
    pos = vec(x=0, y=tensor([0, 1, 2.5], instance('particles')))
    dx = math.pairwise_differences(pos, format='dense', max_distance=2)
    assert set(dx.shape.names) == {'particles', '~particles', 'vector'}
    assert dual(dx) == dual(particles=3)
    np.testing.assert_allclose(dx.particles[0].numpy('~particles,vector'), [[0, 0], [0, 1], [np.nan, np.nan]])


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.floats(0.1, 2))
def test_pairwise_differences_point_from_each_point_to_each_neighbour_within_the_cut_off(count, components, cut_off):
    values = RNG.normal(size=(2, count, components))
    dx = math.pairwise_differences(points(values, batch('b'), instance('p')), max_distance=cut_off, default=-9)
    expected = values[:, None, :, :] - values[:, :, None, :]  # [b, origin, neighbour]
    expected[np.linalg.norm(expected, axis=-1) > cut_off] = -9
    np.testing.assert_allclose(dx.numpy('b,p,~p,vector'), expected, rtol=1e-5, atol=1e-6)


def test_pairwise_differences_of_a_grid_of_points_list_the_neighbours_along_the_dual_dims():
    values = RNG.normal(size=(2, 3, 2))
    dx = math.pairwise_differences(points(values, spatial('x,y')))
    assert dual(dx) == dual(x=2, y=3) and spatial(dx) == spatial(x=2, y=3)
    flat = values.reshape(6, 2)
    np.testing.assert_allclose(dx.numpy('x,y,~x,~y,vector').reshape(6, 6, 2), flat[None] - flat[:, None], rtol=1e-5)
    into = math.pairwise_differences(points(values, spatial('x,y')), format=math.zeros(dual(neighbors=6)))
    assert dual(into) == dual(neighbors=6)
    np.testing.assert_allclose(into.numpy('x,y,~neighbors,vector').reshape(6, 6, 2), flat[None] - flat[:, None],
                               rtol=1e-5)


def test_pairwise_differences_take_a_cut_off_per_point():
    pos = math.tensor([[0.], [1.], [3.]], instance('p'), channel(vector='x'))
    cut_off = math.tensor([0.5, 2.5, 1.], instance('p'))
    dx = math.pairwise_differences(pos, cut_off)
    np.testing.assert_allclose(dx.numpy('p,~p,vector')[..., 0], [[0, np.nan, np.nan], [-1, 0, 2], [np.nan, np.nan, 0]])


def test_pairwise_differences_as_phimls_own_dense_tests_check_them():
    """The 'dense' cases of phiml's test_pairwise_differences_deltas and _periodic (tests/math/test__ops.py)."""
    result = math.pairwise_differences(tensor(vec(x=[0, 1, 900], y=[0, 0, 1])), max_distance=1.1, method='scipy-kd')
    math.assert_close(vec(x=0, y=0), result.sequence[0:1].sequence.dual[0:1])
    math.assert_close(vec(x=1, y=0), result.sequence[0:1].sequence.dual[1:2])
    math.assert_close(vec(x=-1, y=0), result.sequence[1:2].sequence.dual[0:1])
    math.assert_close(vec(x=0, y=0), result.sequence[1:2].sequence.dual[1:2])
    diff = math.pairwise_differences(vec(x=(0, 0.99)), 0.1, domain=(0, 1), periodic=True, method='sparse')
    math.assert_close([[0, 0.01], [0.01, 0]], math.norm(diff), abs_tolerance=1e-6)


def test_pairwise_differences_in_a_box_periodic_along_some_components():
    pos = math.tensor([[0.1, 0.1], [0.9, 0.5]], instance('p'), channel(vector='x,y'))
    box = (vec(x=0, y=0), vec(x=1, y=2))
    both = math.pairwise_differences(pos, domain=box, periodic=True)  # phiml wraps only with a max_distance
    np.testing.assert_allclose(both.p[0].numpy('~p,vector'), [[0, 0], [-0.2, 0.4]], rtol=1e-5, atol=1e-6)
    only_y = math.pairwise_differences(pos, 5, domain=box, periodic=math.tensor([False, True], channel(vector='x,y')))
    np.testing.assert_allclose(only_y.p[1].numpy('~p,vector'), [[-0.8, -0.4], [0, 0]], rtol=1e-5, atol=1e-6)


def test_pairwise_differences_as_phiml_gives_them_densely():
    pm = phiml_math()
    values = RNG.normal(size=(2, 5, 2))
    ours = math.pairwise_distances(points(values, batch('b'), instance('p')), max_distance=1.2)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        theirs = pm.pairwise_distances(pm.tensor(values, pm.batch('b'), pm.instance('p'), pm.channel(vector='x,y')),
                                       max_distance=1.2)
    assert set(ours.shape.names) == set(theirs.shape.names)
    np.testing.assert_allclose(ours.numpy('b,p,~p,vector'), theirs.numpy('b,p,~p,vector'), rtol=1e-5, atol=1e-6)


def test_pairwise_differences_compile(backend):
    diffs = math.jit_compile(lambda p: math.pairwise_differences(p, max_distance=1.1))
    result = diffs(tensor(vec(x=[0, 1, 900], y=[0, 0, 1])))
    np.testing.assert_allclose(result.sequence[0].numpy('~sequence,vector'), [[0, 0], [1, 0], [np.nan, np.nan]])


@pytest.mark.parametrize('fmt', ['sparse', 'coo', 'csr', 'csc'])
def test_sparse_pairs_are_the_dense_ones_within_the_distance(backend, fmt):
    rng = np.random.default_rng(5)
    points = tensor(rng.uniform(0, 3, (12, 2)), instance('p'), channel(vector='x,y'))
    dense = math.pairwise_differences(points, max_distance=1., default=0.)
    sparse = math.pairwise_differences(points, max_distance=1., format=fmt)
    assert math.is_sparse(sparse) and math.get_format(sparse) in (fmt, 'csr', 'coo')
    np.testing.assert_allclose(math.dense(sparse).numpy('p,~p,vector'), dense.numpy('p,~p,vector'), atol=1e-6)
    within = np.linalg.norm(points.numpy('p,vector')[None] - points.numpy('p,vector')[:, None], axis=-1) <= 1.
    assert math.stored_values(sparse).shape.get_size('entries') == within.sum()
    compiled = math.jit_compile(lambda p: math.pairwise_differences(p, max_distance=1., format='coo'))(points)
    np.testing.assert_allclose(math.dense(compiled).numpy('p,~p,vector'), dense.numpy('p,~p,vector'), atol=1e-6)


@pytest.mark.parametrize('kwargs, error, message', [
    ({'format': 'csr'}, ValueError, 'max_distance must be given'),
    ({'format': 'sparse', 'method': 'scipy-kd'}, ValueError, 'max_distance must be given'),
    ({'format': 'dense2'}, ValueError, "'dense', one of"),
    ({'format': 3}, TypeError, "'dense' or a tensor"),
    ({'method': 'grid'}, ValueError, 'method must be one of'),
    ({'periodic': True}, ValueError, 'pass domain='),
    ({'periodic': 'x'}, TypeError, 'periodic must be a bool'),
    ({'format': math.zeros(dual(n=2))}, ValueError, 'as many neighbours'),
])
def test_pairwise_differences_name_what_they_do_not_offer(kwargs, error, message):
    with pytest.raises(error, match=message):
        math.pairwise_differences(math.zeros(instance(p=3), channel(vector='x,y')), **kwargs)


def test_pairwise_differences_need_one_channel_dim_and_points():
    with pytest.raises(ValueError, match='exactly one channel dim'):
        math.pairwise_differences(math.zeros(instance(p=3)))
    with pytest.raises(ValueError, match='no instance or spatial dim'):
        math.pairwise_differences(math.zeros(channel(vector='x,y')))


# --- find_closest ----------------------------------------------------------------------------------------------

def brute_force(candidates: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The flat index of the closest candidate `(n, c)` to each query `(m, c)`."""
    return np.argmin(((queries[:, None, :] - candidates[None, :, :]) ** 2).sum(-1), 1)


@pytest.mark.parametrize('method', ['kd', 'dense'])
def test_find_closest_gives_the_index_of_the_nearest_candidate(method):
    candidates, queries = RNG.uniform(size=(7, 2)), RNG.uniform(size=(5, 2))
    index = math.find_closest(points(candidates, instance('c')), points(queries, instance('q')), method=method)
    assert index.shape == instance(q=5) & channel(index='c') and index.dtype == math.DType(int, 64)
    np.testing.assert_array_equal(index.numpy('q,index')[:, 0], brute_force(candidates, queries))
    plain = math.find_closest(points(candidates, instance('c')), points(queries, instance('q')), method, None)
    np.testing.assert_array_equal(plain.numpy('q'), brute_force(candidates, queries))


@pytest.mark.parametrize('method', ['kd', 'dense'])
def test_find_closest_among_a_grid_of_candidates_per_batch_entry(method):
    candidates, queries = RNG.uniform(size=(2, 3, 4, 3)), RNG.uniform(size=(2, 6, 3))
    vectors = points(candidates, batch('b'), spatial('x,y'))
    index = math.find_closest(vectors, points(queries, batch('b'), instance('q')), method=method)
    assert index.shape == batch(b=2) & instance(q=6) & channel(index='x,y')
    for b in range(2):
        flat = np.ravel_multi_index(tuple(index.b[b].numpy('index,q')), (3, 4))
        np.testing.assert_array_equal(flat, brute_force(candidates[b].reshape(12, 3), queries[b]))
    closest = vectors[index]  # the index picks the closest vectors
    np.testing.assert_allclose(closest.b[0].q[0].numpy('vector'),
                               candidates[0].reshape(12, 3)[brute_force(candidates[0].reshape(12, 3),
                                                                        queries[0])[0]], rtol=1e-6)


def test_find_closest_of_queries_with_dims_of_their_own_and_the_names_of_the_candidates():
    candidates, queries = RNG.uniform(size=(5, 2)), RNG.uniform(size=(3, 5, 2))
    vectors = points(candidates, instance('p'))
    query = points(queries, batch('c'), instance('p'))  # five query points along a dim named like the candidates'
    for method in ('kd', 'dense'):
        index = math.find_closest(vectors, query, method=method, index_dim=channel('closest'))
        assert index.shape == batch(c=3) & instance(p=5) & channel(closest='p')
        np.testing.assert_array_equal(index.numpy('c,p,closest')[..., 0],
                                      [brute_force(candidates, q) for q in queries])


def test_find_closest_without_a_query_gives_a_function_reusing_its_trees():
    candidates = RNG.uniform(size=(2, 6, 2))
    find = math.find_closest(points(candidates, batch('b'), instance('c')))
    for _ in range(2):
        queries = RNG.uniform(size=(4, 2))
        index = find(points(queries, instance('q')))
        for b in range(2):
            np.testing.assert_array_equal(index.b[b].numpy('q,index')[:, 0], brute_force(candidates[b], queries))


def test_find_closest_compiled_computes_densely_what_the_tree_finds(backend):
    candidates, queries = RNG.uniform(size=(8, 2)), RNG.uniform(size=(5, 2))
    find = math.jit_compile(lambda v, q: math.find_closest(v, q))
    index = find(points(candidates, instance('c')), points(queries, instance('q')))
    assert index.backend is backend or backend.name == 'numpy'
    np.testing.assert_array_equal(index.numpy('q,index')[:, 0], brute_force(candidates, queries))


def test_find_closest_as_phiml_finds_it():
    pm = phiml_math()
    candidates, queries = RNG.uniform(size=(2, 3, 2, 2)), RNG.uniform(size=(4, 2))
    ours = math.find_closest(points(candidates, batch('b'), spatial('x,y')), points(queries, instance('q')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        theirs = pm.find_closest(pm.tensor(candidates, pm.batch('b'), pm.spatial('x,y'), pm.channel(vector='x,y')),
                                 pm.tensor(queries, pm.instance('q'), pm.channel(vector='x,y')))
    assert set(ours.shape.names) == set(theirs.shape.names) and ours.shape.get_labels('index') == ('x', 'y')
    np.testing.assert_array_equal(ours.numpy('b,q,index'), theirs.numpy('b,q,index'))


def test_find_closest_names_what_it_cannot_do():
    vectors = math.zeros(spatial(x=2, y=2), channel(vector='x,y'))
    with pytest.raises(ValueError, match="'kd' or 'dense'"):
        math.find_closest(vectors, vectors, method='ball')
    with pytest.raises(ValueError, match='needs candidates listed along one dim'):
        math.find_closest(vectors, index_dim=None)
    with pytest.raises(ValueError, match='no instance, spatial or dual dim'):
        math.find_closest(math.zeros(channel(vector='x,y')))
    with pytest.raises(ValueError, match="components' dims"):
        math.find_closest(vectors, math.zeros(instance(q=2)))


# --- map_pairs -------------------------------------------------------------------------------------------------

def test_map_pairs_applies_the_function_to_every_pair_of_a_dense_connection_matrix():
    values = RNG.normal(size=(4, 2))
    received = []

    def distance(origin, neighbor):
        received.append(origin.shape)
        return math.vec_length(neighbor - origin)
    connections = math.tensor(np.eye(4), instance('p'), dual('p'))  # the values do not matter: all pairs are stored
    result = math.map_pairs(distance, points(values, instance('p')), connections)
    assert received == [instance(entries=16) & channel(vector='x,y')]
    assert set(result.shape.names) == {'p', '~p'}
    np.testing.assert_allclose(result.numpy('p,~p'), np.linalg.norm(values[None] - values[:, None], axis=-1),
                               rtol=1e-5)


def test_map_pairs_as_phiml_gives_it_for_a_connection_matrix_storing_all_pairs():
    """phiml's result for a sparse matrix storing every pair (for a dense one it depends on the order of the
    connection's axes in memory: with `p` before `~p` it comes out transposed)."""
    pm = phiml_math()
    values, connections = RNG.normal(size=(3, 2)), np.ones((3, 3))
    ours = math.map_pairs(lambda a, b: b - a, points(values, instance('p')),
                          math.tensor(connections, instance('p'), dual('p')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sparse = pm.to_format(pm.tensor(connections, pm.instance('p'), pm.dual('p')), 'coo')
        theirs = pm.dense(pm.map_pairs(lambda a, b: b - a, pm.tensor(values, pm.instance('p'),
                                                                     pm.channel(vector='x,y')), sparse))
    assert set(ours.shape.names) == set(theirs.shape.names)
    np.testing.assert_allclose(ours.numpy('p,~p,vector'), theirs.numpy('p,~p,vector'), rtol=1e-5)


def test_map_pairs_names_bad_connections():
    values = math.zeros(instance(p=3))
    with pytest.raises(ValueError, match='dual dim ~d for a dim d'):
        math.map_pairs(lambda a, b: b, values, math.zeros(instance(p=3), dual(q=3)))
    with pytest.raises(ValueError, match='as many as the entries'):
        math.map_pairs(lambda a, b: b, values, math.zeros(dual(p=2)))
    with pytest.raises(ValueError, match='no dual dims'):
        math.map_pairs(lambda a, b: b, math.zeros(dual(p=3)), math.zeros(dual(p=3)))


# --- count_intersections ---------------------------------------------------------------------------------------

def shared_counts(lists: np.ndarray) -> np.ndarray:
    """The number of distinct values each pair of the rows of `lists` shares; 0 on the diagonal."""
    n = len(lists)
    return np.array([[0 if i == j else len(np.intersect1d(lists[i], lists[j])) for j in range(n)] for i in range(n)])


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 8))
def test_count_intersections_counts_the_distinct_shared_elements_of_each_pair_of_lists(lists, length, high):
    values = RNG.integers(0, high, size=(2, lists, length))
    counts = math.count_intersections(math.tensor(values, batch('b'), spatial('lists'), instance('elements')), 'lists')
    assert set(counts.shape.names) == {'b', 'lists', '~lists'} and counts.dtype == math.DType(int, 64)
    for b in range(2):
        np.testing.assert_array_equal(counts.b[b].numpy('lists,~lists'), shared_counts(values[b]))


def test_count_intersections_on_every_backend_with_nan_and_vector_elements(backend):
    floats = np.array([[1.5, 2, np.nan, 2], [np.nan, 1.5, 3, 2]])
    counts = math.count_intersections(math.tensor(floats, instance('lists'), spatial('e')), 'lists', spatial)
    np.testing.assert_array_equal(counts.numpy('lists,~lists'), [[0, 2], [2, 0]])  # NaN equals nothing
    pairs = np.array([[[1, 2], [3, 4]], [[3, 4], [2, 1]], [[1, 2], [1, 2]]])  # elements equal in both components
    counts = math.count_intersections(math.tensor(pairs, instance('lists'), spatial('e'), channel('c')), 'lists',
                                      spatial)
    np.testing.assert_array_equal(counts.numpy('lists,~lists'), [[0, 1, 1], [1, 0, 0], [1, 0, 0]])


def test_count_intersections_as_phiml_counts_them():
    pm = phiml_math()
    values = np.array([[1, 2, 3, 3], [2, 3, 4, 5], [7, 8, 9, 1]])
    ours = math.count_intersections(math.tensor(values, instance('lists'), instance('elements')), 'lists')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        theirs = pm.count_intersections(pm.tensor(values, pm.instance('lists'), pm.instance('elements')), 'lists')
    assert set(ours.shape.names) == set(theirs.shape.names)
    np.testing.assert_array_equal(ours.numpy('lists,~lists'), theirs.numpy('lists,~lists'))


def test_count_intersections_names_bad_dims():
    values = math.zeros(instance(lists=2, e=3))
    with pytest.raises(ValueError, match='arg_dims=batch'):
        math.count_intersections(values, batch)
    with pytest.raises(ValueError, match='no lists'):
        math.count_intersections(values, 'z')
    with pytest.raises(ValueError, match='no elements'):
        math.count_intersections(values, 'lists', spatial)
