"""Values from other cells (`index_shift`, `at_max_neighbor`, `at_min_neighbor`, `sample_subgrid`) and
`frequency_loss`, against NumPy and phiml on the same inputs, on every backend."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import batch, extrapolation, spatial, vec

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


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.lists(st.integers(-2, 2), min_size=1, max_size=4))
def test_index_shift_with_periodic_padding_is_a_roll(n, shifts):
    values = np.random.default_rng(n).standard_normal((n, 3))
    results = math.index_shift(grid(values), [vec(x=s) for s in shifts], extrapolation.PERIODIC)
    for s, result in zip(shifts, results, strict=True):
        close(result, np.roll(values, -s, 0))
