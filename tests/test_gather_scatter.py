"""gather, scatter, nonzero, boolean_mask, histogram and occurrence counts on every backend; gathering and
masking against NumPy's indexing with hypothesis."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import DType, default_backend
from lazyphi.math import Tensor, batch, channel, instance, spatial

pytestmark = pytest.mark.usefixtures('backend')
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


@given(data=st.data())
@SETTINGS
def test_gather_picks_points_along_several_dims(data):
    sizes = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)))
    values = np.arange(np.prod(sizes)).reshape(sizes)
    count = data.draw(st.integers(1, 5))
    xs = data.draw(st.lists(st.integers(0, sizes[1] - 1), min_size=count, max_size=count))
    ys = data.draw(st.lists(st.integers(0, sizes[2] - 1), min_size=count, max_size=count))
    grid = wrap(values, batch('b'), spatial('x,y'))
    indices = wrap(np.stack([ys, xs], -1), instance('points'), channel(vector='y,x'))
    result = math.gather(grid, indices)
    assert result.shape.names == ('b', 'points')
    np.testing.assert_array_equal(result.numpy('b,points'), values[:, xs, ys])


@given(data=st.data())
@SETTINGS
def test_gather_points_with_negative_components_and_per_batch_indices_matches_numpy(data):
    sizes = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)),
             data.draw(st.integers(1, 2)))
    values = np.arange(np.prod(sizes)).reshape(sizes)
    count = data.draw(st.integers(0, 5))
    points = st.tuples(st.integers(-sizes[1], sizes[1] - 1), st.integers(-sizes[2], sizes[2] - 1))
    per_batch = [data.draw(st.lists(points, min_size=count, max_size=count)) for _ in range(sizes[0])]
    grid = wrap(values, batch('b'), spatial('x,y'), channel('c'))
    indices = wrap(np.asarray(per_batch, np.int64).reshape(sizes[0], count, 2), batch('b'), instance('points'),
                   channel(vector='x,y'))
    result = math.gather(grid, indices)
    expected = np.stack([values[b][tuple(np.asarray(per_batch[b], np.int64).reshape(count, 2).T)]
                         for b in range(sizes[0])])
    np.testing.assert_array_equal(result.numpy('b,points,c'), expected)


def test_gather_points_outside_a_dim_raise_naming_the_dim():
    grid = wrap(np.arange(12).reshape(3, 4), spatial('x,y'))
    with pytest.raises(IndexError, match="along 'y' reach 4, outside the 4 entries"):
        math.gather(grid, wrap([(0, 1), (2, 4)], instance('p'), channel(vector='x,y')))
    with pytest.raises(IndexError, match="along 'x' reach -4"):
        math.gather(grid, wrap([(-4, 0)], instance('p'), channel(vector='x,y')))


@given(data=st.data())
@SETTINGS
def test_scatter_add_of_points_with_channels_matches_numpy(data):
    sizes = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)))
    count = data.draw(st.integers(0, 6))
    points = st.tuples(st.integers(0, sizes[0] - 1), st.integers(0, sizes[1] - 1))
    listed = np.asarray(data.draw(st.lists(points, min_size=count, max_size=count)), np.int64).reshape(count, 2)
    updates = np.arange(count * 2, dtype=np.float64).reshape(count, 2) + 1
    base = np.ones((*sizes, 2))
    points = wrap(listed, instance('p'), channel(vector='x,y'))
    result = math.scatter(wrap(base, spatial('x,y'), channel('c')), points, wrap(updates, instance('p'), channel('c')),
                          mode='add', outside_handling='undefined')
    expected = base.copy()
    np.add.at(expected, tuple(listed.T), updates)
    np.testing.assert_array_equal(result.numpy('x,y,c'), expected)


def test_gather_along_one_dim_with_shared_batch_dims_and_trees():
    t = wrap([[1, 2, 3, 4], [5, 6, 7, 8]], batch('b'), spatial('x'))
    indices = wrap([[0, 3], [1, 1]], batch('b'), instance('points'))
    assert math.gather(t, indices).numpy('b,points').tolist() == [[1, 4], [6, 6]]
    pair = math.gather((t, -t), wrap([2], instance('p')), 'x')
    assert isinstance(pair, tuple) and pair[1].numpy('b,p').tolist() == [[-3], [-7]]
    assert math.gather(t, wrap([0], instance('p')), 'z').shape == t.shape & instance(p=1)  # not indexed: expanded
    with pytest.raises(ValueError, match='spatial and instance'):
        math.gather(wrap([[1]], instance('i'), spatial('x')), wrap([0], instance('p')))


def test_scatter_modes_onto_a_grid_and_a_shape():
    base = wrap([1., 1., 1., 1.], spatial('x'))
    indices, values = wrap([1, 2, 1], instance('p')), wrap([10., 20., 30.], instance('p'))
    assert math.scatter(base, indices, values, mode='add').numpy('x').tolist() == [1, 41, 21, 1]
    assert math.scatter(base, indices, values, mode='mean').numpy('x').tolist() == [1, 20, 20, 1]
    assert math.scatter(base, indices, values, mode=math.max).numpy('x').tolist() == [1, 30, 20, 1]
    assert math.scatter(base, indices, values, mode=math.prod).numpy('x').tolist() == [1, 300, 20, 1]
    grid = math.scatter(spatial(x=3), indices[{'p': slice(0, 2)}], wrap([2, 3], instance('p')), mode='min')
    assert grid.numpy('x').tolist() == [np.inf, 2, 3]
    assert math.scatter(spatial(x=3), indices, wrap([1, 0, 0], instance('p')), mode=math.any).numpy('x').tolist() == \
        [False, True, False]
    assert math.scatter(spatial(x=3), indices, wrap([1, 0, 0], instance('p')), mode=math.all).numpy('x').tolist() == \
        [True, False, False]
    with pytest.raises(ValueError, match='mode must be'):
        math.scatter(base, indices, values, mode='median')


def test_scatter_batched_in_any_input():
    base = math.zeros(spatial(x=4)) + wrap([0., 1.], batch('b'))
    indices = wrap([[0, 1], [1, 2]], batch('b'), instance('p'))
    values = wrap([[11., 12.], [-11., -12.]], batch('b'), instance('p'))
    result = math.scatter(base, indices, values, outside_handling='undefined')
    assert result.numpy('b,x').tolist() == [[11, 12, 0, 0], [1, -11, -12, 1]]
    vectors = math.zeros(spatial(x=3), channel(c=2))
    result = math.scatter(vectors, wrap([1], instance('p')), wrap([5.], instance('p')))
    assert result.numpy('x,c').tolist() == [[0, 0], [5, 5], [0, 0]]


def test_scatter_outside_handling_on_a_2d_grid():
    base = math.ones(spatial(x=3, y=2))
    indices = wrap([(-1, 0), (0, 1), (3, 1)], instance('p'), channel(vector='x,y'))
    values = wrap([11., 12., 13.], instance('p'))
    discarded = math.scatter(base, indices, values, outside_handling='discard')
    assert discarded.numpy('y,x').tolist() == [[1, 1, 1], [12, 1, 1]]
    clamped = math.scatter(base, indices, values, outside_handling='clamp')
    assert clamped.numpy('y,x').tolist() == [[11, 1, 1], [12, 1, 13]]
    with pytest.raises(IndexError, match='outside the grid'):
        math.scatter(base, indices, values)
    with pytest.raises(ValueError, match='outside_handling'):
        math.scatter(base, indices, values, outside_handling='wrap')


def test_nonzero_lists_positions_per_batch_entry():
    grid = wrap([[[0, 1]], [[0, 0]]], batch('b'), spatial('x,y'))
    positions = math.nonzero(grid)
    assert positions.shape.names == ('b', 'nonzero', 'vector')
    assert positions.b[0].shape.get_item_names('vector') == ('x', 'y') and positions.dtype == DType(int, 64)
    assert positions.b[0].numpy('nonzero,vector').tolist() == [[0, 1]]
    assert positions.b[1].shape.get_size('nonzero') == 0
    first = math.nonzero(wrap([0, 3, 0, 4], spatial('x')), list_dim=1)
    assert first.numpy('nonzero,vector').tolist() == [[1]]
    vectors = wrap([[0, 0], [0, 2], [1, 0]], spatial('x'), channel('c'))
    assert math.nonzero(vectors).numpy('nonzero,vector').tolist() == [[1], [2]]


@given(data=st.data())
@SETTINGS
def test_boolean_mask_keeps_what_numpy_keeps(data):
    size = data.draw(st.integers(1, 6))
    mask = np.asarray(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    values = np.arange(size * 2).reshape(size, 2)
    result = math.boolean_mask(wrap(values, spatial('x'), channel('c')), 'x', wrap(mask, spatial('x')))
    np.testing.assert_array_equal(result.numpy('x,c'), values[mask])


def test_boolean_mask_with_batch_dims_is_non_uniform():
    x = wrap([[0, 1, 2, 3], [0, -1, -2, -3]], batch('b'), spatial('x'))
    mask = wrap([[True, False, True, False], [False, True, False, False]], batch('b'), spatial('x'))
    selected = math.boolean_mask(x, 'x', mask)
    assert not selected.shape.is_uniform
    assert selected.b[0].numpy('x').tolist() == [0, 2] and selected.b[1].numpy('x').tolist() == [-1]
    missing = math.boolean_mask(wrap([5, 6], spatial('x')), 'sel', wrap([True, False, True], batch('sel')))
    assert set(missing.shape.names) == {'x', 'sel'} and missing.shape.get_size('sel') == 2
    labelled = math.wrap(np.arange(3), spatial(x='a,b,c'))
    assert math.boolean_mask(labelled, 'x', wrap([True, False, True], spatial('x')), preserve_names=True) \
        .shape.get_item_names('x') == ('a', 'c')


def test_histogram_counts_values_in_equal_bins():
    data = wrap([0, .11, .11, .21, .11, .21, .31, .51], instance('losses'))
    hist, edges, centers = math.histogram(data, instance(loss=10))
    assert hist.numpy('loss').tolist() == [1, 0, 3, 0, 2, 0, 1, 0, 0, 1]
    assert edges.shape.get_size('loss') == 11 and centers.shape.get_size('loss') == 10
    weighted, _, _ = math.histogram(data, instance(loss=2), weights=wrap([2.] * 8, instance('losses')))
    assert weighted.numpy('loss').tolist() == [12, 4]
    batched, _, _ = math.histogram(wrap([[0, 1, 1], [5, 5, 6]], batch('b'), instance('i')), instance(bins=2))
    assert batched.numpy('b,bins').tolist() == [[1, 2], [2, 1]]


def test_count_occurrences_and_contains():
    a = wrap([(0, 0), (1, 1), (1, 2), (1, 2)], instance('points'), channel(vector='x,y'))
    b = wrap([(1, 2), (1, 0)], spatial('query'), channel(vector='x,y'))
    assert math.count_occurrences(a, b).numpy('query').tolist() == [2, 0]
    assert math.contains(a, b).numpy('query').tolist() == [True, False]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 4), st.data())
def test_ravel_index_and_unravel_index_are_numpys_and_inverse_to_each_other(nx, ny, points, data):
    positions = np.array(data.draw(st.lists(st.tuples(st.integers(0, nx - 1), st.integers(0, ny - 1)),
                                            min_size=points, max_size=points)))
    resolution = spatial(x=nx, y=ny)
    index = math.wrap(positions, instance('p'), channel(vector='x,y'))
    flat = math.ravel_index(index, resolution)
    np.testing.assert_array_equal(flat.numpy('p'), np.ravel_multi_index(tuple(positions.T), (nx, ny)))
    back = math.unravel_index(flat, resolution)
    assert back.shape == instance(p=points) & channel(index='x,y')
    np.testing.assert_array_equal(back.numpy('p,index'), positions)


def test_ravel_index_modes_and_labels_and_dim_mask_and_normalize_to():
    resolution = spatial(x=3, y=4)
    outside = math.wrap([[5, 1], [-1, 2]], instance('p'), channel(vector='x,y'))
    assert math.ravel_index(outside, resolution, mode='periodic').numpy('p').tolist() == [9, 10]
    assert math.ravel_index(outside, resolution, mode=-1).numpy('p').tolist() == [-1, -1]
    with pytest.raises(ValueError, match='3 components for the 2 dims'):
        math.ravel_index(math.wrap([[0, 0, 0]], instance('p'), channel('c')), resolution)
    mask = math.dim_mask(spatial('x,y,z'), 'x,z')
    assert mask.shape == channel(vector='x,y,z') and mask.numpy().tolist() == [True, False, True]
    assert math.dim_mask(('x', 'y'), 'y', channel('m')).shape == channel(m='x,y')
    scaled = math.normalize_to(math.wrap([1., 3.], spatial('x')), math.wrap([2., 2., 4.], spatial('y')))
    assert scaled.numpy().tolist() == [2., 6.]
