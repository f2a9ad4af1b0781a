"""Padding with extrapolations, slice_off, shift and convolve against NumPy; widths, sizes and slices drawn
by hypothesis; every backend."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import Tensor, batch, channel, dual, extrapolation, spatial

pytestmark = pytest.mark.usefixtures('backend')
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# extrapolation -> NumPy's pad mode
MODES = {extrapolation.PERIODIC: 'wrap', extrapolation.ZERO_GRADIENT: 'edge', extrapolation.SYMMETRIC: 'symmetric',
         extrapolation.REFLECT: 'reflect'}


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


@given(size=st.integers(2, 5), lower=st.integers(0, 7), upper=st.integers(0, 7),
       mode=st.sampled_from(list(MODES)))
@SETTINGS
def test_copying_extrapolations_pad_like_numpy(size, lower, upper, mode):
    values = np.arange(size * 2).reshape(2, size) * 1.5
    padded = math.pad(wrap(values, batch('b'), spatial('x')), {'x': (lower, upper)}, mode)
    np.testing.assert_array_equal(padded.numpy('b,x'), np.pad(values, [(0, 0), (lower, upper)], MODES[mode]))


@given(lower=st.integers(-2, 3), upper=st.integers(-2, 3), value=st.integers(-3, 3))
@SETTINGS
def test_constant_padding_and_negative_widths(lower, upper, value):
    values = np.arange(1, 6)
    padded = math.pad(wrap(values, spatial('x')), {'x': (lower, upper)}, value)
    expected = np.pad(values, (max(lower, 0), max(upper, 0)), constant_values=value)
    expected = expected[max(-lower, 0):len(expected) + min(upper, 0)]
    np.testing.assert_array_equal(padded.numpy('x'), expected)


def test_padding_several_dims_fills_the_corners_from_the_padded_values():
    values = np.arange(6.).reshape(2, 3)
    padded = math.pad(wrap(values, spatial('y,x')), {'x': (1, 1), 'y': (2, 0)}, extrapolation.ZERO_GRADIENT)
    np.testing.assert_array_equal(padded.numpy('y,x'), np.pad(values, [(2, 0), (1, 1)], 'edge'))
    antisymmetric = math.pad(wrap([1., 2.], spatial('x')), {'x': (2, 1)}, extrapolation.ANTISYMMETRIC)
    assert antisymmetric.numpy('x').tolist() == [-2, -1, 1, 2, -2]


def test_pad_forms_of_widths_and_modes():
    t = wrap([1, 2, 3], spatial('x'))
    assert math.pad(t, (1, 0)).numpy('x').tolist() == [0, 1, 2, 3]
    assert math.pad(t, {spatial: 1}, 'periodic').numpy('x').tolist() == [3, 1, 2, 3, 1]
    sides = extrapolation.combine_sides(x=(extrapolation.ZERO, extrapolation.ONE))
    assert math.pad(t, {'x': (1, 1)}, sides).numpy('x').tolist() == [0, 1, 2, 3, 1]
    batched = math.pad(t, {'x': (0, 1)}, wrap([7, 8], batch('b')))
    assert batched.numpy('b,x').tolist() == [[1, 2, 3, 7], [1, 2, 3, 8]]
    with pytest.raises(ValueError, match='Unknown extrapolation'):
        math.pad(t, {'x': (1, 1)}, 'mirror')
    with pytest.raises(ValueError, match='one non-batch dim'):
        math.pad(math.zeros(spatial(x=2, y=2)), (1, 1))


def test_pad_by_slices_pads_each_selected_part_where_its_slice_says():
    ones = math.ones(spatial(x=2), channel(c='x,y'))
    padded = math.pad(ones, [{'c': 'x', 'x': slice(0, 1)}, {'c': 'y', 'x': slice(-1, None)}])
    assert padded.numpy('c,x').tolist() == [[0, 1, 1], [1, 1, 0]]
    with pytest.raises(math.IncompatibleShapes, match='different amounts'):
        math.pad(ones, [{'c': 'x', 'x': slice(0, 1)}])


@given(size=st.integers(1, 6), data=st.data())
@SETTINGS
def test_slice_off_removes_the_selected_entries(size, data):
    labels = tuple(f'l{i}' for i in range(size))
    t = math.wrap(np.arange(size), spatial(x=labels))
    selections = data.draw(st.lists(st.one_of(
        st.integers(-size, size - 1),
        st.builds(slice, st.integers(0, size), st.one_of(st.none(), st.integers(0, size + 2))),
        st.sampled_from(labels)), max_size=3))
    removed = set()
    for s in selections:
        index = labels.index(s) if isinstance(s, str) else s
        removed |= set(range(size)[index]) if isinstance(index, slice) else {index % size}
    result = math.slice_off(t, *[{'x': s} for s in selections])
    assert result.numpy('x').tolist() == [i for i in range(size) if i not in removed]


def test_slice_off_with_several_dims_per_slice_can_be_non_uniform():
    t = wrap([[1, 2, 3], [4, 5, 6]], spatial(y='y1,y2', x='x1,x2,x3'))
    result = math.slice_off(t, {'x': 'x3', 'y': 'y2'})
    assert result.y['y1'].numpy('x').tolist() == [1, 2, 3] and result.y['y2'].numpy('x').tolist() == [4, 5]
    assert math.slice_off(t) is t


def test_shift_gives_neighbours_with_values_from_the_padding():
    t = wrap([1., 2., 3., 4.], spatial('x'))
    left, right = math.shift(t, (-1, 1), padding=extrapolation.PERIODIC)
    assert left.numpy('x,shift').reshape(-1).tolist() == [4, 1, 2, 3]
    assert right.numpy('x,shift').reshape(-1).tolist() == [2, 3, 4, 1]
    (only,) = math.shift(t, (1,), padding=None, stack_dim=None)
    assert only.numpy('x').tolist() == [2, 3, 4]
    grid = wrap(np.arange(12.).reshape(3, 4), spatial('y,x'))
    (both,) = math.shift(grid, (1,), padding=0)
    assert both.shape.get_item_names('shift') == ('y', 'x')
    np.testing.assert_array_equal(both.shift['x'].numpy('y,x'), np.pad(np.arange(12.).reshape(3, 4)[:, 1:],
                                                                       [(0, 0), (0, 1)]))


@given(size=st.integers(3, 7), kernel=st.lists(st.integers(-2, 2), min_size=1, max_size=3),
       size_mode=st.sampled_from(['valid', 'same', 'full']))
@SETTINGS
def test_convolve_is_numpys_correlation(size, kernel, size_mode):
    values = np.arange(size) ** 2 % 7
    result = math.convolve(wrap(values, spatial('x')), wrap(kernel, spatial('x')), size_mode, 0)
    k = len(kernel)
    padding = {'valid': (0, 0), 'same': (k // 2, (k - 1) // 2), 'full': (k - 1, k - 1)}[size_mode]
    padded = np.pad(values, padding)
    expected = np.correlate(padded, np.asarray(kernel), 'valid')
    np.testing.assert_array_equal(result.numpy('x'), expected)


def test_convolve_in_2d_with_batch_and_channels():
    values = wrap(np.arange(2 * 5 * 4.).reshape(2, 5, 4), batch('b'), spatial('x,y'))
    vector = values * wrap([1., -1.], channel(vector='p,q'))
    kernel = wrap(np.ones((3, 3)), spatial('x,y')) * wrap([[1., 0.], [1., 1.]], channel('out'), dual('vector'))
    result = math.convolve(vector, kernel, 'same', extrapolation.PERIODIC)
    assert set(result.shape.names) == {'b', 'x', 'y', 'out'}
    box = sum(np.roll(np.roll(np.arange(40.).reshape(2, 5, 4), i, 1), j, 2) for i in (-1, 0, 1) for j in (-1, 0, 1))
    np.testing.assert_allclose(result.out[0].numpy('b,x,y'), box)
    np.testing.assert_allclose(result.out[1].numpy('b,x,y'), 0, atol=1e-9)


def _strided_size(size_mode, n: int, k: int, step: int) -> int:
    return {'same': -(-n // step), 'valid': -(-(n - k + 1) // step), 'full': (n + k - 1) // step}[size_mode]


@given(size=st.integers(4, 9), kernel=st.lists(st.integers(-2, 2), min_size=1, max_size=4),
       step=st.integers(2, 3), size_mode=st.sampled_from(['valid', 'same', 'full']))
@SETTINGS
def test_strided_convolve_is_numpys_correlation_of_the_padded_values_every_stride(size, kernel, step, size_mode):
    values = np.arange(size) ** 2 % 7
    k = len(kernel)
    out = _strided_size(size_mode, size, k, step)
    padding = max(0, step * (out - 1) + k - size)
    expected = np.correlate(np.pad(values, (padding // 2, padding - padding // 2)), np.asarray(kernel), 'valid')[::step]
    result = math.convolve(wrap(values, spatial('x')), wrap(kernel, spatial('x')), size_mode, 0, strides=step)
    np.testing.assert_array_equal(result.numpy('x'), expected[:out])


@given(n_in=st.integers(3, 10), k=st.integers(1, 4), step=st.integers(1, 3), extra=st.integers(0, 2),
       seed=st.integers(0, 99))
@SETTINGS
def test_the_transposed_convolution_is_the_adjoint_of_the_strided_one(n_in, k, step, extra, seed):
    n_out = max(1, -(-(n_in - k) // step) + 1) + extra  # enough outputs that the padding is not negative
    rng = np.random.default_rng(seed)
    x, y, kernel = (wrap(rng.normal(size=n), spatial('x')) for n in (n_in, n_out, k))
    forward = math.convolve(x, kernel, spatial(x=n_out), 0, strides=step)
    backward = math.convolve(y, kernel, spatial(x=n_in), strides=step, transpose=True)
    assert forward.shape.get_size('x') == n_out and backward.shape.get_size('x') == n_in
    np.testing.assert_allclose(float(math.sum(forward * y)), float(math.sum(x * backward)), rtol=1e-4, atol=1e-4)


def test_strided_and_transposed_convolution_as_phimls_examples_print_them():
    for size, out_size in zip([256, 257, 258, 259], [136, 137, 137, 138], strict=True):
        t = math.convolve(math.srange(x=size), math.srange(x=18), 'full', 0, strides=2)
        assert t.shape.size == out_size and t.numpy()[:4].tolist() == [17, 98, 235, 420]
    for size, out_size in zip([256, 257, 258, 259], [136, 136, 137, 137], strict=True):
        t = math.convolve(math.srange(x=size), math.srange(x=17), 'full', 0, strides=2)
        assert t.shape.size == out_size and t.numpy()[:4].tolist() == [16, 92, 220, 392]
    same = math.convolve(math.srange(x=100), math.srange(x=9), 'same', transpose=True)
    assert same.shape.size == 100 and same.numpy()[:4].tolist() == [10, 20, 35, 56]
    full = math.convolve(math.srange(x=100), math.srange(x=9), 'full', transpose=True)
    assert full.shape.size == 92 and full.numpy()[:4].tolist() == [84, 120, 156, 192]
    for size, out_size in zip([136, 137, 137, 138], [256, 258, 258, 260], strict=True):
        t = math.convolve(math.srange(x=size), math.srange(x=18), 'full', strides=2, transpose=True)
        assert t.shape.size == out_size and t.numpy()[:4].tolist() == [168, 204, 240, 285]


def test_strides_per_dim_in_2d_with_channels():
    values = wrap(np.arange(6 * 5.).reshape(6, 5), spatial('x,y')) * wrap([1., -1.], channel(vector='p,q'))
    kernel = wrap(np.ones((2, 3)), spatial('x,y')) * wrap([1., 1.], dual(vector='p,q'))
    result = math.convolve(values, kernel, 'valid', strides={'x': 2})
    assert result.shape.sizes == (3, 3)
    np.testing.assert_allclose(result.numpy('x,y'), 0)
    plain = math.convolve(values.vector['p'], math.ones(spatial(x=2, y=3)), 'valid', strides={'x': 2})
    windows = np.lib.stride_tricks.sliding_window_view(np.arange(30.).reshape(6, 5), (2, 3)).sum(axis=(2, 3))
    np.testing.assert_allclose(plain.numpy('x,y'), windows[::2])


@pytest.mark.parametrize('arguments, message', [
    ({'strides': 0}, 'positive ints'), ({'strides': 1.5}, 'positive ints'), ({'strides': True}, 'positive ints'),
    ({'strides': {'z': 2}}, 'not convolved'), ({'size': 'wide'}, "'same', 'valid', 'full'"),
    ({'size': spatial(y=3)}, "lacks the convolved dim 'x'"), ({'size': 'valid', 'transpose': True}, 'transposed'),
    ({'extrapolation': 1, 'transpose': True}, 'zeros only'),
    ({'size': 'valid', 'strides': 2, 'kernel': 9}, 'no output'),
])
def test_convolve_names_bad_arguments(arguments, message):
    arguments = dict(arguments)  # shared by the backends' runs
    kernel = math.ones(spatial(x=arguments.pop('kernel', 3)))
    with pytest.raises(ValueError, match=message):
        math.convolve(wrap(np.arange(5.), spatial('x')), kernel, **arguments)
