"""Values from other cells (`index_shift`, `at_max_neighbor`, `at_min_neighbor`, `sample_subgrid`) and
`frequency_loss`, against NumPy and phiml on the same inputs, on every backend."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import batch, channel, extrapolation, spatial, vec
from lazyphi.math._neighbors import index_shift_widths

pytestmark = pytest.mark.usefixtures('backend')

VALUES = np.arange(20.).reshape(5, 4)


def grid(values=VALUES):
    return math.tensor(values, spatial('x,y'))


def close(tensor, expected, order='x,y', rtol=1e-5):
    np.testing.assert_allclose(tensor.numpy(order), expected, rtol=rtol, atol=1e-6)


@pytest.fixture(scope='module')
def phi():
    """phiml.math, imported and called with its warnings silenced (it warns on import)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        module = pytest.importorskip('phiml.math')

    def call(name, *args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return getattr(module, name)(*args, **kwargs)
    call.math = module
    return call


def phi_vec(phi, **components):
    return phi('vec', **components)


def phi_grid(phi, values=VALUES, dims='x,y'):
    return phi('tensor', values, phi.math.spatial(dims))


# --- index_shift -----------------------------------------------------------------------------


def test_index_shift_with_padding_keeps_the_size_and_takes_entry_i_plus_offset():
    zero, right, diagonal = math.index_shift(grid(), (0, vec(x=1), vec(x=-1, y=2)), extrapolation.ZERO)
    padded = np.pad(VALUES, ((1, 1), (0, 2)))  # the zero padding below x and above y
    assert zero.shape == right.shape == diagonal.shape == spatial(x=5, y=4)
    close(zero, VALUES)
    close(right, padded[2:, :4])
    close(diagonal, padded[:5, 2:])
    periodic = math.index_shift(grid(), (vec(y=-1),), extrapolation.PERIODIC)[0]
    close(periodic, np.roll(VALUES, 1, 1))


def test_index_shift_without_padding_cuts_to_the_cells_every_offset_reaches():
    zero, right, diagonal = math.index_shift(grid(), (0, vec(x=1), vec(x=-1, y=2)))
    assert zero.shape == spatial(x=3, y=2)
    close(zero, VALUES[1:4, :2])
    close(right, VALUES[2:5, :2])
    close(diagonal, VALUES[0:3, 2:4])
    first, second = math.index_shift(grid(), (vec(x=1), vec(x=2)))  # counted from the smallest offset
    close(first, VALUES[:4])
    close(second, VALUES[1:])


def test_index_shift_keeps_other_dims_and_names_bad_offsets():
    stacked = math.stack([grid(), -grid()], batch('b'))
    shifted = math.index_shift(stacked, (vec(y=1),), extrapolation.ZERO_GRADIENT)[0]
    assert shifted.shape == stacked.shape
    close(shifted.b[1], -np.concatenate([VALUES[:, 1:], VALUES[:, -1:]], 1))
    with pytest.raises(ValueError, match='an int offset must be 0, got 1'):
        math.index_shift(grid(), (0, 1))
    with pytest.raises(ValueError, match=r"names \['z'\], which the grid"):
        math.index_shift(grid(), (vec(z=1),))
    with pytest.raises(ValueError, match=r'must be integers, got 0\.5'):
        math.index_shift(grid(), (vec(x=0.5),))
    with pytest.raises(ValueError, match='along one channel dim labelled by dims'):
        math.index_shift(grid(), (math.wrap([1, 2], spatial('x')),))
    with pytest.raises(ValueError, match='at least one offset'):
        math.index_shift(grid(), ())
    with pytest.raises(TypeError, match='a tuple or list of offsets'):
        math.index_shift(grid(), vec(x=1))


@pytest.mark.parametrize('padding', [None, 'zero', 'periodic', 'zero-gradient'])
def test_index_shift_equals_phiml_where_an_offset_is_zero_along_each_dim(phi, padding):
    offsets = [0, {'x': 2}, {'x': -1, 'y': 1}, {'y': -2}]
    ours = math.index_shift(grid(), [o if o == 0 else vec(**o) for o in offsets], padding)
    theirs = phi('index_shift', phi_grid(phi), [o if o == 0 else phi_vec(phi, **o) for o in offsets], padding)
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(mine.numpy('x,y'), reference.numpy('x,y'))


def test_index_shift_widths_are_what_the_unpadded_shift_cuts(phi):
    offsets = [0, {'x': 2}, {'x': -1, 'y': 1}]
    widths = index_shift_widths([o if o == 0 else vec(**o) for o in offsets])
    assert widths == [{'x': (1, 2), 'y': (0, 1)}, {'x': (3, 0), 'y': (0, 1)}, {'x': (0, 3), 'y': (1, 0)}]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        phiml_nd = pytest.importorskip('phiml.math._nd')
        assert widths == phiml_nd.index_shift_widths([o if o == 0 else phi_vec(phi, **o) for o in offsets])
    shifted = math.index_shift(grid(), [o if o == 0 else vec(**o) for o in offsets])
    for w, result in zip(widths, shifted, strict=True):
        (x0, x1), (y0, y1) = w['x'], w['y']
        close(result, VALUES[x0:VALUES.shape[0] - x1, y0:VALUES.shape[1] - y1])
    with pytest.raises(ValueError, match='an int offset must be 0, got 1'):
        index_shift_widths([1])


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.lists(st.integers(-2, 2), min_size=1, max_size=4))
def test_index_shift_with_periodic_padding_is_a_roll(n, shifts):
    values = np.random.default_rng(n).standard_normal((n, 3))
    results = math.index_shift(grid(values), [vec(x=s) for s in shifts], extrapolation.PERIODIC)
    for s, result in zip(shifts, results, strict=True):
        close(result, np.roll(values, -s, 0))


# --- at_max_neighbor, at_min_neighbor --------------------------------------------------------

KEYS = np.random.default_rng(5).standard_normal((5, 4))


def np_shifted(a, offsets, axis, mode):
    """The copies of `a` at `offsets` along `axis`, padded with `mode` (None: cut to where all have values)."""
    low, high = min(0, *offsets), max(0, *offsets)
    n = a.shape[axis]
    if mode is not None:
        widths = [(0, 0)] * a.ndim
        widths[axis] = (-low, high)
        a = np.pad(a, widths, mode=mode)
    else:
        n -= high - low
    return [np.take(a, np.arange(n) + o - low, axis) for o in offsets]


def np_cut(a, offsets, axes):
    """`a` cut along `axes` as the unpadded shifts cut it."""
    low, high = min(0, *offsets), max(0, *offsets)
    for axis in axes:
        a = np.take(a, np.arange(a.shape[axis] - (high - low)) - low, axis)
    return a


def np_at_neighbor(values, keys, offsets, mode, diagonal, arg=np.argmax, axes=(0, 1)):
    if diagonal:
        for axis in axes:
            candidates = np.stack(np_shifted(keys, offsets, axis, mode))
            choice = arg(candidates, 0)
            keys = np.take_along_axis(candidates, choice[None], 0)[0]
            values = np.take_along_axis(np.stack(np_shifted(values, offsets, axis, mode)), choice[None], 0)[0]
        return values
    key_parts, value_parts = [], []
    for i in range(len(offsets)):
        for axis in axes:
            other = [a for a in axes if a != axis] if mode is None else []
            key_parts.append(np_cut(np_shifted(keys, offsets, axis, mode)[i], offsets, other))
            value_parts.append(np_cut(np_shifted(values, offsets, axis, mode)[i], offsets, other))
    choice = arg(np.stack(key_parts), 0)
    return np.take_along_axis(np.stack(value_parts), choice[None], 0)[0]


@pytest.mark.parametrize('diagonal', [True, False])
@pytest.mark.parametrize(('padding', 'mode'), [(None, None), (extrapolation.ZERO, 'constant'),
                                               (extrapolation.PERIODIC, 'wrap'), (extrapolation.ZERO_GRADIENT, 'edge')])
@pytest.mark.parametrize('offsets', [(0, 1), (-1, 0, 1), (-2, 1)])
def test_neighbour_selection_matches_a_numpy_search(diagonal, padding, mode, offsets):
    largest = math.at_max_neighbor(grid(), grid(KEYS), padding=padding, offsets=offsets, diagonal=diagonal)
    close(largest, np_at_neighbor(VALUES, KEYS, offsets, mode, diagonal))
    smallest = math.at_min_neighbor(grid(), grid(KEYS), padding=padding, offsets=offsets, diagonal=diagonal)
    close(smallest, np_at_neighbor(VALUES, KEYS, offsets, mode, diagonal, np.argmin))


def test_neighbour_selection_takes_trees_and_values_with_other_dims():
    values = math.stack([grid(), -grid()], channel(vector='a,b'))
    pair = math.at_max_neighbor((values, {'twice': 2 * grid()}), grid(KEYS), 'x', extrapolation.ZERO_GRADIENT)
    expected = np_at_neighbor(VALUES[:, :, None] * [1, -1], KEYS[:, :, None], (0, 1), 'edge', True, axes=(0,))
    assert pair[0].shape == values.shape
    close(pair[0], expected, order='x,y,vector')
    close(pair[1]['twice'], 2 * expected[..., 0])
    along_y = math.tensor(np.arange(4.), spatial('y'))  # the same along x
    close(math.at_min_neighbor(along_y, grid(KEYS), padding=None),
          np_at_neighbor(np.broadcast_to(np.arange(4.), (5, 4)), KEYS, (0, 1), None, True, np.argmin))
    keys = math.stack([grid(KEYS), -grid(KEYS)], batch('b'))  # a key per batch entry picks per entry
    per_entry = math.at_max_neighbor(grid(), keys)
    assert per_entry.shape == batch(b=2) & spatial(x=4, y=3)
    close(per_entry.b[1], np_at_neighbor(VALUES, KEYS, (0, 1), None, True, np.argmin))
    with pytest.raises(ValueError, match=r'offsets must be a non-empty tuple of ints, got \(0, 0\.5\)'):
        math.at_max_neighbor(grid(), grid(KEYS), offsets=(0, 0.5))


@pytest.mark.parametrize('name', ['at_max_neighbor', 'at_min_neighbor'])
@pytest.mark.parametrize(('padding', 'diagonal'), [(None, True), ('zero', True), ('periodic', False),
                                                   ('zero-gradient', False)])
def test_neighbour_selection_equals_phiml(phi, name, padding, diagonal):
    values = (grid(), 3 * grid())
    ours = getattr(math, name)(values, grid(KEYS), padding=padding, offsets=(-1, 0, 2), diagonal=diagonal)
    theirs = phi(name, (phi_grid(phi), phi_grid(phi, 3 * VALUES)), phi_grid(phi, KEYS), padding=padding,
                 offsets=(-1, 0, 2), diagonal=diagonal)
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(mine.numpy('x,y'), reference.numpy('x,y'))


@settings(max_examples=20, deadline=None)
@given(st.integers(3, 6), st.integers(3, 6), st.sampled_from([(0, 1), (-1, 0, 1), (-1, 1)]), st.booleans())
def test_neighbour_selection_of_random_grids(nx, ny, offsets, diagonal):
    rng = np.random.default_rng(nx * 7 + ny)
    keys, values = rng.standard_normal((nx, ny)), rng.standard_normal((nx, ny))
    result = math.at_max_neighbor(grid(values), grid(keys), padding=extrapolation.PERIODIC, offsets=offsets,
                                  diagonal=diagonal)
    close(result, np_at_neighbor(values, keys, offsets, 'wrap', diagonal))


# --- sample_subgrid --------------------------------------------------------------------------


def np_subgrid(values, start, size):
    """Linear interpolation of `values` at `start + i` along each axis, one axis after the other."""
    for axis, (first, k) in enumerate(zip(start, size, strict=True)):
        whole = int(np.floor(first))
        fraction = first - whole
        lower = np.take(values, np.arange(whole, whole + k), axis)
        upper = np.take(values, np.arange(whole + 1, whole + 1 + k), axis) if fraction else lower
        values = (1 - fraction) * lower + fraction * upper
    return values


def test_sample_subgrid_interpolates_between_cells_and_slices_at_whole_starts():
    between = math.sample_subgrid(grid(), vec(x=1.5, y=0.25), spatial(x=3, y=3))
    assert between.shape == spatial(x=3, y=3)
    close(between, np_subgrid(VALUES, (1.5, 0.25), (3, 3)))
    close(between, 4 * np.arange(1.5, 4.5)[:, None] + np.arange(0.25, 3.25)[None, :])  # linear values stay exact
    reordered = math.sample_subgrid(grid(), vec(y=0.25, x=1.5), spatial(y=3, x=3))  # labels name the dims
    close(reordered, np_subgrid(VALUES, (1.5, 0.25), (3, 3)))
    close(math.sample_subgrid(grid(), (1.5, 0.25), spatial(x=3, y=3)), np_subgrid(VALUES, (1.5, 0.25), (3, 3)))
    integers = math.tensor(VALUES.astype(np.int32), spatial('x,y'))
    whole = math.sample_subgrid(integers, vec(x=1, y=2), spatial(x=4, y=2))
    assert whole.dtype == integers.dtype
    np.testing.assert_array_equal(whole.numpy('x,y'), VALUES[1:5, 2:4])


def test_sample_subgrid_keeps_other_dims_and_names_bad_arguments():
    stacked = math.stack([grid(), -grid()], channel(vector='a,b'))
    sampled = math.sample_subgrid(stacked, vec(x=0.5, y=1), spatial(x=4, y=2))
    assert sampled.shape == spatial(x=4, y=2) & channel(vector='a,b')
    close(sampled.vector['b'], -np_subgrid(VALUES, (0.5, 1), (4, 2)))
    with pytest.raises(ValueError, match=r"4 cells from 1\.5 along 'x' reach beyond the 5 cells"):
        math.sample_subgrid(grid(), vec(x=1.5, y=0), spatial(x=4, y=2))
    with pytest.raises(ValueError, match=r"reach beyond"):
        math.sample_subgrid(grid(), vec(x=-0.5, y=0), spatial(x=2, y=2))
    with pytest.raises(ValueError, match=r"size must be a Shape with the spatial dims \('x', 'y'\)"):
        math.sample_subgrid(grid(), vec(x=0, y=0), spatial(x=2))
    with pytest.raises(ValueError, match='start has 1 entries for the 2 spatial dims'):
        math.sample_subgrid(grid(), vec(x=0), spatial(x=2, y=2))
    with pytest.raises(ValueError, match='start must be a vector'):
        math.sample_subgrid(grid(), math.zeros(batch(b=2), channel(vector='x,y')), spatial(x=2, y=2))


@pytest.mark.parametrize(('start', 'size'), [((1.5, 0.25), (3, 3)), ((0, 1), (5, 3)), ((3.75, 2.5), (1, 1))])
def test_sample_subgrid_equals_phiml(phi, start, size):
    ours = math.sample_subgrid(grid(KEYS), vec(x=start[0], y=start[1]), spatial(x=size[0], y=size[1]))
    theirs = phi('sample_subgrid', phi_grid(phi, KEYS), phi_vec(phi, x=start[0], y=start[1]),
                 phi.math.spatial(x=size[0], y=size[1]))
    np.testing.assert_allclose(ours.numpy('x,y'), theirs.numpy('x,y'), rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.floats(0, 1, exclude_max=True), st.floats(0, 1, exclude_max=True))
def test_sample_subgrid_of_random_starts(kx, ky, fx, fy):
    start = ((5 - kx) * fx, (4 - ky) * fy)  # every sub-grid that fits
    result = math.sample_subgrid(grid(KEYS), vec(x=start[0], y=start[1]), spatial(x=kx, y=ky))
    close(result, np_subgrid(KEYS, start, (kx, ky)), rtol=1e-4)


# --- frequency_loss --------------------------------------------------------------------------


def np_frequency_loss(values, falloff=100, threshold=1e-5, ignore_mean=False, n=2, axes=(-2, -1)):
    """The loss of each leading entry of `values`, whose last two axes are spatial."""
    if ignore_mean:
        values = values - values.mean(axis=tuple(range(1, values.ndim)), keepdims=True)
    k = np.meshgrid(*[np.fft.fftfreq(values.shape[a]) for a in axes], indexing='ij')
    weights = np.exp(-0.5 * falloff ** 2 * sum(f ** 2 for f in k))
    amplitude = np.sqrt(np.maximum(np.abs(np.fft.fftn(values, axes=axes) * weights) ** 2, threshold))
    summed = tuple(range(1, values.ndim))
    return (amplitude ** 2).sum(summed) / 2 if n == 2 else amplitude.sum(summed)


BATCHED = np.random.default_rng(9).standard_normal((2, 6, 5))


@pytest.mark.parametrize('kwargs', [{}, {'frequency_falloff': 1}, {'frequency_falloff': 0.3, 'n': 1},
                                    {'ignore_mean': True, 'threshold': 0, 'frequency_falloff': 0.5},
                                    {'frequency_falloff': 2, 'threshold': 1}])
def test_frequency_loss_matches_numpy_per_batch_entry(kwargs):
    x = math.tensor(BATCHED, batch('b'), spatial('x,y'))
    loss = math.frequency_loss(x, **kwargs)
    assert loss.shape == batch(b=2)
    expected = np_frequency_loss(BATCHED, kwargs.get('frequency_falloff', 100), kwargs.get('threshold', 1e-5),
                                 kwargs.get('ignore_mean', False), kwargs.get('n', 2))
    np.testing.assert_allclose(loss.numpy('b'), expected, rtol=1e-4)


def test_frequency_loss_sums_channels_and_trees_and_names_bad_arguments():
    vectors = math.tensor(BATCHED[0][..., None] * [1, 2], spatial('x,y'), channel(vector='x,y'))
    # the mean over all non-batch dims, channels included, is subtracted (as phiml does)
    expected = np_frequency_loss(np.moveaxis(BATCHED[0][..., None] * [1, 2], -1, 0)[None], 1, ignore_mean=True,
                                 axes=(-2, -1))
    np.testing.assert_allclose(float(math.frequency_loss(vectors, 1, ignore_mean=True)), expected[0], rtol=1e-4)
    single = math.tensor(BATCHED[0], spatial('x,y'))
    assert math.frequency_loss(math.zeros(spatial(x=4, y=3))).shape.rank == 0
    np.testing.assert_allclose(float(math.frequency_loss(math.zeros(spatial(x=4, y=3)))), 12 * 1e-5 / 2, rtol=1e-5)
    np.testing.assert_allclose(float(math.frequency_loss({'a': single, 'b': (single, 2 * single)}, 1)),
                               np_frequency_loss(BATCHED[:1], 1)[0] * (2 + 4), rtol=1e-4)
    with pytest.raises(ValueError, match='n must be 1 or 2, got 3'):
        math.frequency_loss(single, n=3)
    with pytest.raises(ValueError, match='needs spatial dims to transform along'):
        math.frequency_loss(math.zeros(batch(b=3)))
    with pytest.raises(ValueError, match=r'needs a tensor or a tree of tensors, got 1\.5'):
        math.frequency_loss(1.5)


@pytest.mark.parametrize('kwargs', [{}, {'frequency_falloff': 1, 'n': 1},
                                    {'ignore_mean': True, 'frequency_falloff': 2}])
def test_frequency_loss_equals_phiml(phi, kwargs):
    values = BATCHED[..., None] * [1, -3]
    ours = math.frequency_loss(math.tensor(values, batch('b'), spatial('x,y'), channel('c')), **kwargs)
    theirs = phi('frequency_loss', phi('tensor', values, phi.math.batch('b'), phi.math.spatial('x,y'),
                                       phi.math.channel('c')), **kwargs)
    np.testing.assert_allclose(ours.numpy('b'), theirs.numpy('b'), rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 7), st.integers(1, 6), st.floats(0.1, 5))
def test_frequency_loss_of_random_grids(nx, ny, falloff):
    values = np.random.default_rng(nx * 10 + ny).standard_normal((1, nx, ny))
    loss = math.frequency_loss(math.tensor(values[0], spatial('x,y')), falloff)
    np.testing.assert_allclose(float(loss), np_frequency_loss(values, falloff)[0], rtol=1e-4)
