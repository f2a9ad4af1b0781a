"""Finite differences on grids (`spatial_gradient`, `laplace`, `neighbor_*`) against NumPy stencils, on every
backend."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import batch, channel, extrapolation, spatial, vec

pytestmark = pytest.mark.usefixtures('backend')

VALUES = np.random.default_rng(3).standard_normal((5, 4))


def grid(values=VALUES):
    return math.tensor(values, spatial('x,y'))


def edge(values=VALUES):
    return np.pad(values, 1, mode='edge')  # ZERO_GRADIENT: the values at the edges continue


def close(tensor, expected, order='x,y', rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(tensor.numpy(order), expected, rtol=rtol, atol=atol)


def test_central_differences_list_a_derivative_per_dim_along_the_gradient_dim():
    g, e = grid(), edge()
    derivatives = math.spatial_gradient(g)
    assert derivatives.shape == spatial(x=5, y=4) & channel(gradient='x,y')
    close(derivatives.gradient['x'], (e[2:, 1:-1] - e[:-2, 1:-1]) / 2)
    close(derivatives.gradient['y'], (e[1:-1, 2:] - e[1:-1, :-2]) / 2)


@pytest.mark.parametrize(('difference', 'expected'), [
    ('forward', lambda a: np.roll(a, -1, 0) - a),
    ('backward', lambda a: a - np.roll(a, 1, 0)),
    ('central', lambda a: (np.roll(a, -1, 0) - np.roll(a, 1, 0)) / 2),
])
def test_one_sided_and_central_differences_with_periodic_padding_and_a_spacing(difference, expected):
    derivative = math.spatial_gradient(grid(), dx=0.5, difference=difference, padding=extrapolation.PERIODIC,
                                       dims='x', stack_dim=None)
    assert derivative.shape == spatial(x=5, y=4)
    close(derivative, expected(VALUES) / 0.5)


def test_a_spacing_per_dim_and_the_order_the_stack_dims_labels_give():
    g = grid()
    by_vector = math.spatial_gradient(g, dx=vec(x=0.5, y=2.), difference='forward', padding=extrapolation.PERIODIC,
                                      stack_dim=channel(gradient='y,x'))
    assert by_vector.shape.get_labels('gradient') == ('y', 'x')
    close(by_vector.gradient['x'], (np.roll(VALUES, -1, 0) - VALUES) / 0.5)
    close(by_vector.gradient['y'], (np.roll(VALUES, -1, 1) - VALUES) / 2)
    by_tuple = math.spatial_gradient(g, dx=(0.5, 2.), difference='forward', padding=extrapolation.PERIODIC)
    math.assert_close(by_tuple, by_vector.gradient[['x', 'y']], abs_tolerance=1e-6)
    single = math.spatial_gradient(g, dx=(0.5,), dims='x', stack_dim=None, difference='forward',
                                   padding=extrapolation.PERIODIC)
    assert single.shape == g.shape
    close(single, (np.roll(VALUES, -1, 0) - VALUES) / 0.5)


def test_without_padding_the_result_is_smaller_and_pad_extends_it():
    unpadded = math.spatial_gradient(grid(), padding=None, dims='x', stack_dim=None)
    assert unpadded.shape == spatial(x=3, y=4)
    close(unpadded, (VALUES[2:] - VALUES[:-2]) / 2)
    extended = math.spatial_gradient(grid(), dims='x', stack_dim=None, pad=1)
    assert extended.shape == spatial(x=7, y=4)


def test_a_size_one_stack_dim_on_the_grid_is_replaced_and_bad_arguments_are_named():
    g = math.expand(grid(), channel(gradient=1))
    assert math.spatial_gradient(g).shape == spatial(x=5, y=4) & channel(gradient='x,y')
    with pytest.raises(ValueError, match=r"one of \('central', 'forward', 'backward'\), got 'upwind'"):
        math.spatial_gradient(grid(), difference='upwind')
    with pytest.raises(ValueError, match=r"labels \('x', 'z'\) of stack_dim are not the dims"):
        math.spatial_gradient(grid(), stack_dim=channel(gradient='x,z'))
    with pytest.raises(ValueError, match=r"which the grid .* has already"):
        math.spatial_gradient(math.expand(grid(), channel(gradient=2)))


def test_laplace_sums_the_second_differences_with_spacings_and_weights():
    g, e = grid(), edge()
    second_x = e[2:, 1:-1] + e[:-2, 1:-1] - 2 * VALUES
    second_y = e[1:-1, 2:] + e[1:-1, :-2] - 2 * VALUES
    assert math.laplace(g).shape == g.shape
    close(math.laplace(g), second_x + second_y)
    close(math.laplace(g, dx=(1., 2.)), second_x + second_y / 4)
    close(math.laplace(g, dx=vec(y=2., x=1.)), second_x + second_y / 4)
    close(math.laplace(g, weights=vec(x=3., y=0.)), 3 * second_x)
    close(math.laplace(g, dims='y'), second_y)
    assert math.laplace(g, padding=None).shape == spatial(x=3, y=2)
    vectors = math.stack([g, 2 * g], channel(vector='a,b'))  # components on their own
    close(math.laplace(vectors).vector['b'], 2 * (second_x + second_y))


def test_neighbor_reductions_combine_each_cell_with_its_upper_neighbours():
    g = grid()
    quads = np.stack([VALUES[:-1, :-1], VALUES[1:, :-1], VALUES[:-1, 1:], VALUES[1:, 1:]])
    assert math.neighbor_mean(g).shape == spatial(x=4, y=3)
    close(math.neighbor_mean(g), quads.mean(0))
    close(math.neighbor_sum(g), quads.sum(0))
    close(math.neighbor_max(g), quads.max(0))
    close(math.neighbor_min(g), quads.min(0))
    along_x = math.neighbor_reduce(math.mean, g, 'x', padding=extrapolation.ZERO_GRADIENT)
    assert along_x.shape == g.shape
    close(along_x, (VALUES + np.concatenate([VALUES[1:], VALUES[-1:]])) / 2)
    assert math.neighbor_mean(math.zeros(batch(b=2), spatial(x=3))).shape == batch(b=2) & spatial(x=2)


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 7), st.integers(3, 7), st.floats(0.1, 3.))
def test_laplace_of_random_grids_matches_the_five_point_stencil(nx, ny, dx):
    values = np.random.default_rng(nx * 10 + ny).standard_normal((nx, ny))
    e = edge(values)
    stencil = (e[2:, 1:-1] + e[:-2, 1:-1] + e[1:-1, 2:] + e[1:-1, :-2] - 4 * values) / dx ** 2
    np.testing.assert_allclose(math.laplace(grid(values), dx=dx).numpy('x,y'), stencil, rtol=1e-4, atol=1e-4)


def test_fftfreq_lists_the_frequencies_of_each_spatial_dim():
    frequencies = math.fftfreq(batch(b=2) & spatial(x=4, y=3), dx=vec(x=0.5, y=2.))
    assert frequencies.shape == spatial(x=4, y=3) & channel(vector='x,y')
    close(frequencies.vector['x'], np.repeat(np.fft.fftfreq(4, 0.5)[:, None], 3, 1))
    close(frequencies.vector['y'], np.repeat(np.fft.fftfreq(3, 2.)[None, :], 4, 0))
    assert math.fftfreq(spatial(x=4), dtype=math.DType(float, 64)).dtype == math.DType(float, 64)
    with pytest.raises(ValueError, match='needs a Shape with spatial dims'):
        math.fftfreq(batch(b=3))


def test_fourier_laplace_is_exact_for_periodic_waves_and_fourier_poisson_inverts_it():
    n, length = 16, 2 * np.pi
    x, y = np.meshgrid(np.arange(n) * length / n, np.arange(n) * length / n, indexing='ij')
    wave = np.sin(x) * np.cos(2 * y)  # the Laplace operator multiplies it by -(1 + 4)
    g = math.tensor(wave, spatial('x,y'))
    dx = length / n
    # computed in complex numbers of the current precision (32 bits): the zeros of a wave of amplitude 25 come out at
    # up to 1.5e-5 (PyTorch's FFT on this machine's CPU)
    spectral = {'rtol': 1e-4, 'atol': 1e-4}
    close(math.fourier_laplace(g, dx), -5 * wave, **spectral)
    close(math.fourier_laplace(g, dx, times=2), 25 * wave, **spectral)
    close(math.fourier_poisson(math.fourier_laplace(g, dx), dx), wave, **spectral)  # the wave has mean zero
    shifted = math.fourier_poisson(math.fourier_laplace(g + 3, dx), dx)  # the constant is lost, as it must be
    close(shifted, wave, **spectral)
    assert math.fourier_laplace(g, dx).dtype == g.dtype
    smooth = math.laplace(g, dx, padding=extrapolation.PERIODIC)
    assert float(math.max(abs(smooth - math.fourier_laplace(g, dx)), "x,y")) < 0.25  # within 5 %, not the same


def test_downsample2x_averages_neighbours_and_pads_odd_sizes():
    halved = math.downsample2x(grid())
    e = np.concatenate([VALUES, VALUES[-1:]])  # x has 5 cells: the edge value continues
    pairs_x = (e[0::2] + e[1::2]) / 2
    assert halved.shape == spatial(x=3, y=2)
    close(halved, (pairs_x[:, 0::2] + pairs_x[:, 1::2]) / 2)
    assert math.downsample2x(grid(), dims='y').shape == spatial(x=5, y=2)


def test_upsample2x_interpolates_a_quarter_of_the_way_to_each_neighbour():
    line = math.tensor(np.array([0., 1., 4.]), spatial('x'))
    close(math.upsample2x(line), [0., 0.25, 0.75, 1.75, 3.25, 4.], order='x')
    close(math.upsample2x(line, padding=extrapolation.PERIODIC), [1., 0.25, 0.75, 1.75, 3.25, 3.], order='x')
    assert math.upsample2x(grid()).shape == spatial(x=10, y=8)
    e = edge()[:, 1:-1]  # along x only
    expected = np.empty((10, 4))
    expected[0::2], expected[1::2] = 0.75 * VALUES + 0.25 * e[:-2], 0.75 * VALUES + 0.25 * e[2:]
    close(math.upsample2x(grid(), dims='x'), expected)


HOLES = np.array([[1., np.nan, 3.], [np.nan, np.nan, np.nan], [7., np.nan, 9.]])


def test_finite_fill_spreads_the_mean_of_finite_neighbours_one_cell_per_step():
    holes = math.tensor(HOLES, spatial('x,y'))
    close(math.finite_fill(holes), [[1, 2, 3], [4, 5, 6], [7, 8, 9]])  # the centre sees all four corners
    faces = math.finite_fill(holes, diagonal=False)
    assert np.isnan(faces.numpy('x,y')[1, 1])  # no finite neighbour along x or y yet: it stays
    close(faces.x[0], [1, 2, 3], order='y')
    close(math.finite_fill(holes, diagonal=False, distance=2), [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    line = math.tensor(np.array([np.nan, 2., np.inf, np.nan]), spatial('x'))
    close(math.finite_fill(line, distance=3), [2, 2, 2, 2], order='x')
    # the padding extends the validity too: ONE gives valid ones beyond the edges, ZERO nothing valid
    close(math.finite_fill(line, padding=extrapolation.ONE), [1.5, 2, 2, 1], order='x')
    assert np.isnan(math.finite_fill(line, padding=extrapolation.ZERO).numpy('x')[3])


def test_masked_fill_fills_where_the_mask_is_zero_and_says_what_is_valid_after():
    values = math.tensor(np.nan_to_num(HOLES), spatial('x,y'))
    valid = math.tensor(np.isfinite(HOLES), spatial('x,y'))
    filled, now_valid = math.masked_fill(values, valid)
    close(filled, [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    close(now_valid, np.ones((3, 3)))
    corner = math.tensor(np.array([[5., 0., 0.], [0., 0., 0.], [0., 0., 0.]]), spatial('x,y'))
    once, reached = math.masked_fill(corner, corner != 0)
    close(reached, [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    close(once, [[5, 5, 0], [5, 5, 0], [0, 0, 0]])
