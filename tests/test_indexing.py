"""Indexing tensors by tensors and by phiml's short forms, on every installed backend, checked against NumPy.

Every test runs once per backend (the `backend` fixture makes it the default).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi._errors import IncompatibleShapes, LabelNotFound
from lazyphi.backend import default_backend
from lazyphi.math import batch, channel, instance, spatial, vec

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims):
    """A tensor of `data` held by the default backend's natives."""
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def values(*sizes):
    return np.arange(np.prod(sizes), dtype=np.float32).reshape(sizes)


# --- index tensors ------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_gather_along_a_dim_matches_numpy_take(data):
    """An int index tensor of any dims replaces the indexed dim; dims the index shares with the values pick
    entries element by element (NumPy: take_along_axis over the shared dims)."""
    b, x, c = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    source = values(b, x, c)
    t = wrap(source, batch('b'), spatial('x'), channel('c'))
    shared = data.draw(st.booleans())
    points = data.draw(st.integers(1, 4))
    index_np = np.random.default_rng(data.draw(st.integers(0, 99))).integers(-x, x, (b, points) if shared
                                                                             else (points,))
    index = wrap(index_np, batch('b'), instance('p')) if shared else wrap(index_np, instance('p'))
    picked = t[{'x': index}]
    assert picked.shape == batch(b=b) & instance(p=points) & channel(c=c)
    if shared:
        expected = np.stack([source[i][index_np[i] % x] for i in range(b)])
    else:
        expected = np.take(source, index_np, axis=1)
    np.testing.assert_array_equal(picked.numpy('b,p,c'), expected)


def test_index_tensor_along_its_own_dim_keeps_the_dim_as_the_index_has_it():
    t = wrap(values(3, 2), spatial('x'), channel('c'))
    picked = t.x[wrap([2, 0], spatial('x'))]
    assert picked.shape == spatial(x=2) & channel(c=2)
    np.testing.assert_array_equal(picked.numpy('x,c'), values(3, 2)[[2, 0]])


def test_point_indexing_by_a_labelled_index_vector():
    grid = wrap([[1, 2, 3], [4, 5, 6]], spatial('y'), spatial('x'))
    math.assert_close(grid[vec(y=1, x=2)], 6)
    points = math.stack([vec(y=0, x=1), vec(y=1, x=0), vec(y=1, x=2)], instance('points'))
    picked = grid[points]
    assert picked.shape == instance(points=3)
    np.testing.assert_array_equal(picked.numpy(), [2, 4, 6])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_point_indexing_matches_numpy_fancy_indexing(data):
    y, x, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    source = values(y, x)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    ys, xs = rng.integers(0, y, n), rng.integers(0, x, n)
    index = wrap(np.stack([xs, ys], -1), instance('points'), channel(vector='x,y'))  # components in any order
    picked = wrap(source, spatial('y'), spatial('x'))[index]
    np.testing.assert_array_equal(picked.numpy('points'), source[ys, xs])


def test_bool_masks_select_along_their_dim():
    t = wrap(values(4, 2), spatial('x'), channel('c'))
    mask = wrap([True, False, True, True], spatial('x'))
    np.testing.assert_array_equal(t[mask].numpy('x,c'), values(4, 2)[[0, 2, 3]])
    np.testing.assert_array_equal(t.x[mask].numpy('x,c'), values(4, 2)[[0, 2, 3]])
    with pytest.raises(IncompatibleShapes, match='3 entries'):
        t.x[wrap([True, False, True], spatial('x'))]
    with pytest.raises(ValueError, match='boolean_mask'):
        t[wrap(np.ones((4, 2), bool), spatial('x'), channel('c'))]


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_mask_with_batch_dims_selects_per_batch_entry(data):
    """The mask's other dims act as batch dims: each entry keeps its own selection, so sizes may differ
    (a non-uniform result); `t.x[mask]`, `t[mask]` (its one non-batch dim) and `boolean_mask` agree."""
    b, x = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5))
    source = values(b, x, 2)
    t = wrap(source, batch('b'), spatial('x'), channel('c'))
    mask_np = np.asarray(data.draw(st.lists(st.lists(st.booleans(), min_size=x, max_size=x), min_size=b,
                                            max_size=b)))
    mask = wrap(mask_np, batch('b'), spatial('x'))
    selected = t.x[mask]
    for i in range(b):
        np.testing.assert_array_equal(selected.b[i].numpy('x,c'), source[i][mask_np[i]])
    math.assert_close(selected, t[mask], math.boolean_mask(t, 'x', mask))
    expanded = wrap(values(x), spatial('x'))[mask]  # values without the batch dim get it from the mask
    for i in range(b):
        np.testing.assert_array_equal(expanded.b[i].numpy('x'), values(x)[mask_np[i]])


def test_non_uniform_index_tensors_apply_part_by_part():
    data = wrap([[0, 1, 0, 2, 0, 1], [-1, 0, 1, 0, 2, 1]], batch('b'), spatial('seq'))
    zeros = math.nonzero(data == 0)  # (b, nonzero: 3 and 2 entries, vector: seq)
    assert not zeros.shape.is_uniform
    math.assert_close(data[zeros], 0)  # labelled components: a gather per batch entry
    math.assert_close(data[{'seq': zeros.vector['seq']}], 0)  # one dim: replaced by the index's dims
    kept = zeros[data[zeros + 1] < 2]  # a non-uniform mask, giving other sizes
    np.testing.assert_array_equal(kept.b[0].numpy('nonzero,vector'), [[0], [4]])
    np.testing.assert_array_equal(kept.b[1].numpy('nonzero,vector'), [[1]])


def test_index_tensors_of_other_dtypes_are_refused():
    t = wrap(values(3), spatial('x'))
    with pytest.raises(TypeError, match='integers'):
        t.x[wrap([0.5, 1.5], instance('i'))]
    with pytest.raises(TypeError, match='integers'):
        t[wrap([0.5, 1.5], instance('i'))]


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_an_unlabelled_int_index_gathers_along_the_spatial_or_else_instance_dims(data):
    """As phiml's gather: without channel labels, `t[index]` indexes the spatial dims, or else the instance dims,
    one component of the index's channel dim per dim (or the index itself for one dim)."""
    kind = data.draw(st.sampled_from([spatial, instance]))
    x, n, c = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    source = values(2, x, c)
    t = wrap(source, batch('b'), kind('x'), channel('c'))
    picks = np.random.default_rng(data.draw(st.integers(0, 99))).integers(0, x, n)
    with_channel = data.draw(st.booleans())
    index = wrap(picks[:, None], instance('p'), channel('idx')) if with_channel else wrap(picks, instance('p'))
    picked = t[index]
    assert picked.shape == batch(b=2) & instance(p=n) & channel(c=c)
    np.testing.assert_array_equal(picked.numpy('b,p,c'), source[:, picks])
    math.assert_close(picked, math.gather(t, index))


def test_an_unlabelled_int_index_needs_one_kind_of_dims_to_index():
    index = wrap([0, 1], instance('p'))
    with pytest.raises(ValueError, match='spatial and instance dims'):
        wrap(values(2, 3), instance('i'), spatial('x'))[index]
    with pytest.raises(ValueError, match='no spatial or instance dims'):
        wrap(values(2, 3), batch('b'), channel('c'))[index]
    grid = wrap(values(2, 3), spatial('y'), spatial('x'))
    with pytest.raises(IncompatibleShapes, match='2 dims are indexed'):
        grid[index]  # two spatial dims need a component each
    np.testing.assert_array_equal(grid[wrap([[1, 2], [0, 0]], instance('p'), channel('v'))].numpy('p'), [5, 0])


def test_gather_on_every_kind_matches_dense():
    dense = wrap(values(2, 3), batch('b'), spatial('x'))
    index = wrap([2, 2, 0], instance('i'))
    kinds = [math.expand(wrap(values(3), spatial('x')), batch(b=2)),
             math.stack([dense.b[0], dense.b[1]], batch('b')),
             math.concat([dense.x[:1], dense.x[1:]], 'x')]
    for t in kinds:
        expected = math.dense(t)[{'x': index}]
        math.assert_close(t[{'x': index}], expected)


# --- phiml's short forms of t[item] ------------------------------------------------------------


def test_an_int_slice_or_list_selects_along_the_only_channel_or_non_batch_dim():
    t = wrap(values(2, 3), batch('b'), channel(c='x,y,z'))
    math.assert_close(t[0], t.c[0])
    math.assert_close(t[[0, 2]], t.c[[0, 2]])
    math.assert_close(t[1:], t.c[1:])
    s = wrap(values(2, 4), batch('b'), spatial('x'))
    math.assert_close(s[-1], s.x[3])
    with pytest.raises(TypeError, match='one channel dim'):
        wrap(values(2, 2), spatial('x'), spatial('y'))[0]


def test_labels_shapes_and_numpy_ints_select():
    t = math.tensor(spatial(x=4, y=3))
    assert t.shape == channel(dims='x,y')
    math.assert_close(t['y'], 3)
    math.assert_close(t.dims['y,x'], (3, 4))
    math.assert_close(t.dims[('y', 'x')], (3, 4))
    math.assert_close(t.dims[spatial('x,y')], (4, 3))
    r = math.range(batch(b=10))
    math.assert_close(r.b[np.int32(1):np.int16(4):np.int64(1)], [1, 2, 3])
    math.assert_close(r.b[math.wrap(1):math.wrap(4)], [1, 2, 3])
    with pytest.raises(LabelNotFound, match="'w'"):
        t.dims['w']


def test_reversing_keeps_the_labels_in_place_as_in_phiml():
    t = math.zeros(spatial(x=4, y=3), channel(vector='x,y'))
    assert t.vector[::-1].vector.item_names == ('x', 'y')
    assert t.vector[1::-1].vector.item_names == ('y', 'x')
    np.testing.assert_array_equal(wrap([1, 2], channel(vector='x,y')).vector[::-1].numpy(), [2, 1])


def test_positional_channel_tuples_and_ellipsis():
    t = wrap(values(2, 3, 4), batch('b'), channel('c'), channel('d'))
    math.assert_close(t[1, 2], t.c[1].d[2])
    math.assert_close(t[..., 1, 2], t.c[1].d[2])
    with pytest.raises(TypeError, match='selects 1 channel dims by position'):
        t[..., 1]


def test_a_dim_filter_names_the_dim_it_selects_as_a_slicing_key():
    data = math.random_normal(batch(b=2), spatial(x=4, y=3))
    picked = data[{batch: 1, 'x': slice(1, 3)}]  # phiml's Tensors notebook
    assert picked.shape == spatial(x=2, y=3)
    np.testing.assert_array_equal(picked.numpy('x,y'), data.numpy('b,x,y')[1, 1:3])
    assert math.slice((data, 1.), {batch: 0})[0].shape == spatial(x=4, y=3)
    assert data[{instance: 0}] is data or data[{instance: 0}].shape == data.shape  # selects no dim: nothing changes
    with pytest.raises(TypeError, match=r"Cannot slice along spatial: it selects the dims \('x', 'y'\)"):
        data[{spatial: 0}]
