"""Ranges, grids and random values with phiml's arguments: tensor bounds, several dims, backends; Python data next
to tensors. Tests that take the `backend` fixture run once per backend."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi._errors import IncompatibleShapes
from lazyphi.backend import NUMPY, DType
from lazyphi.math import batch, channel, instance, spatial, vec, wrap

# --- arange / range ---------------------------------------------------------------------------


def test_arange_makes_its_values_on_the_backend_given(backend):
    assert math.arange(spatial(x=3)).backend is backend
    on_numpy = math.range(spatial(x=3), 1, 7, 2, backend=NUMPY)
    assert on_numpy.backend is NUMPY and on_numpy.numpy().tolist() == [1, 3, 5]
    assert math.arange(spatial('x'), wrap([2, 3], batch('b')), backend=NUMPY).b[1].backend is NUMPY


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-4, 4), st.integers(0, 6), st.integers(1, 3)), min_size=1, max_size=4))
def test_tensor_bounds_give_one_range_per_element(bounds):
    """Each element of the bounds' other dims has its own range along the dim; lengths may differ (non-uniform)."""
    starts, lengths, steps = (np.asarray(column) for column in zip(*bounds, strict=True))
    stops = starts + lengths
    r = math.arange(instance('i'), wrap(starts, batch('b')), wrap(stops, batch('b')), wrap(steps, batch('b')))
    for k, (start, length, step) in enumerate(bounds):
        np.testing.assert_array_equal(r.b[k].numpy('i'), np.arange(start, start + length, step))
    expected_sizes = [len(range(a, a + n, s)) for a, n, s in bounds]
    assert r.shape.is_uniform == (len(set(expected_sizes)) == 1)


def test_a_tensor_stop_alone_counts_from_zero(backend):
    r = math.range(instance(i=3), math.range(spatial('x'), 1, 3))
    math.assert_close(r.i.size, [1, 2])
    math.assert_close(r.x[1], [0, 1])
    uniform = math.arange(spatial('x'), wrap([0, 10], batch('b')), wrap([3, 13], batch('b')))
    assert uniform.shape == batch(b=2) & spatial(x=3)
    np.testing.assert_array_equal(uniform.numpy('b,x'), [[0, 1, 2], [10, 11, 12]])


def test_arange_refuses_bounds_it_cannot_count():
    with pytest.raises(ValueError, match='start_or_stop'):
        math.arange(spatial(x=3), stop=2)
    with pytest.raises(ValueError, match='needs a stop'):
        math.arange(spatial('x'))
    with pytest.raises(TypeError, match='stop holds float'):
        math.arange(spatial('x'), wrap([1.5, 2.5], batch('b')))
    with pytest.raises(IncompatibleShapes, match="dim 'x'"):
        math.arange(spatial('x'), wrap([1, 2], spatial('x')))


# --- linspace ---------------------------------------------------------------------------------


def test_linspace_over_several_dims_is_a_grid_along_vector(backend):
    t = math.linspace(0, 1, spatial(x=4, y=3))
    assert t.shape == spatial(x=4, y=3) & channel(vector='x,y') and t.backend is backend
    np.testing.assert_allclose(t.vector['x'].numpy('x,y'), np.repeat(np.linspace(0, 1, 4)[:, None], 3, 1),
                               rtol=1e-6)
    np.testing.assert_allclose(t.vector['y'].numpy('x,y'), np.repeat(np.linspace(0, 1, 3)[None], 4, 0), rtol=1e-6)
    per_dim = math.linspace((0, 1), (1, 3), spatial(x=4, y=3))  # one bound per dim, along vector
    math.assert_close(per_dim.vector['x'], math.linspace(0, 1, spatial(x=4)))
    math.assert_close(per_dim.vector['y'], math.linspace(1, 3, spatial(y=3)))


def test_linspace_bounds_with_dims_add_them(backend):
    stop = wrap([1., -2.], batch('b'))
    t = math.linspace(0, stop, instance(i=5))
    assert t.shape == batch(b=2) & instance(i=5)
    np.testing.assert_allclose(t.numpy('b,i'), [np.linspace(0, 1, 5), np.linspace(0, -2, 5)], rtol=1e-6)
    vectors = math.linspace(0, (-1, 1), spatial(x=3))  # a tuple lies along vector
    np.testing.assert_allclose(vectors.numpy('x,vector'), [[0, 0], [-.5, .5], [-1, 1]])


def test_linspace_needs_sized_dims():
    with pytest.raises(ValueError, match="'y' has None"):
        math.linspace(0, 1, spatial(x=2) & spatial('y'))
    with pytest.raises(TypeError, match='Shape'):
        math.linspace(0, 1, 5)


# --- meshgrid ---------------------------------------------------------------------------------


def test_meshgrid_sizes_values_and_dim_types(backend):
    math.assert_close(math.meshgrid(x=wrap(2)), [[0], [1]])  # a 0-d int tensor is a size
    grid = math.meshgrid(instance, x=2, y=(-1., 1.))
    assert grid.shape == instance(x=2, y=2) & channel(vector='x,y')
    np.testing.assert_array_equal(grid.vector['y'].numpy('x,y'), [[-1, 1], [-1, 1]])
    native = math.meshgrid(x=np.asarray([5, 7, 9]), y=wrap([0, 1], batch('anything')))
    assert native.shape == spatial(x=3, y=2) & channel(vector='x,y')
    np.testing.assert_array_equal(native.vector['x'].numpy('x,y'), [[5, 5], [7, 7], [9, 9]])
    np.testing.assert_array_equal(native.vector['y'].numpy('x,y'), [[0, 1]] * 3)
    from_shape = math.meshgrid(spatial(x=2, y=3), stack_dim='coords')
    assert from_shape.shape == spatial(x=2, y=3) & channel(coords='x,y')
    labelled = math.meshgrid(x=2, y=2, stack_dim=channel(c='u,v'))
    assert labelled.shape.get_item_names('c') == ('u', 'v')


def test_meshgrid_without_stack_dim_is_one_axis():
    math.assert_close(math.meshgrid(x=3, stack_dim=None), math.range(spatial(x=3)))
    assert math.meshgrid(x=3, stack_dim=channel()).shape == spatial(x=3)
    with pytest.raises(ValueError, match='needs a stack_dim'):
        math.meshgrid(x=2, y=2, stack_dim=None)
    with pytest.raises(ValueError, match='one of the grid dims'):
        math.meshgrid(x=2, vector=2)
    with pytest.raises(IncompatibleShapes, match='one dim'):
        math.meshgrid(x=math.zeros(spatial(a=2, b=2)))
    with pytest.raises(TypeError, match='dim type'):
        math.meshgrid('x')


# --- random_uniform ----------------------------------------------------------------------------


def test_uniform_bounds_as_tensors_act_element_by_element(backend):
    low, high = wrap([0., -10.], batch('b')), wrap([1., -9.], batch('b'))
    t = math.random_uniform(instance(i=500), low=low, high=high)
    assert t.shape == instance(i=500) & batch(b=2) and t.dtype == DType(float, 32) and t.backend is backend
    for k, (a, b) in enumerate([(0, 1), (-10, -9)]):
        values = t.b[k].numpy()
        assert np.all((values >= a) & (values < b)) and np.ptp(values) > .5
    assert math.random_uniform(instance(i=10), low=wrap([0, -1], batch(b=2))).rank == 2


def test_uniform_int_complex_and_bool_with_tensor_bounds(backend):
    ints = math.random_uniform(instance(i=400), low=wrap([0, 100], batch('b')), high=wrap([3, 102], batch('b')),
                               dtype=(int, 32))
    assert ints.dtype == DType(int, 32)
    assert set(ints.b[0].numpy().tolist()) == {0, 1, 2} and set(ints.b[1].numpy().tolist()) == {100, 101}
    box = math.random_uniform(instance(i=300), low=wrap([0, 1j], batch('b')), high=wrap([1 + 1j, 3 + 2j], batch('b')),
                              dtype=(complex, 64))
    assert box.dtype == DType(complex, 64)
    for k, (low, high) in enumerate([(0, 1 + 1j), (1j, 3 + 2j)]):
        z = box.b[k].numpy()
        assert np.all((z.real >= low.real) & (z.real < high.real))
        assert np.all((z.imag >= low.imag) & (z.imag < high.imag))
    real = math.random_uniform(instance(i=20), low=-1, high=wrap([0, 1], batch('b')), dtype=(complex, 64))
    math.assert_close(real.imag, 0)
    flags = math.random_uniform(instance(i=50), low=wrap([0, 1], batch('b')), dtype=bool)
    assert flags.dtype.kind is bool and flags.shape == instance(i=50) & batch(b=2)


# --- Python data next to tensors, vec, ones_like -------------------------------------------------


def test_data_with_as_many_axes_as_the_tensor_has_dims_follows_its_shape(backend):
    t = math.zeros(batch(b=2) & spatial(x=3))
    math.assert_close((t + [[1, 2, 3], [4, 5, 6]]).b[1], [4, 5, 6])  # noqa: RUF005 (tensor + list)
    math.assert_close(math.sort(wrap([[3, 2, 1], [-1, 5, 2]], batch('b'), spatial('x'))), [[1, 2, 3], [-1, 2, 5]])
    with pytest.raises(IncompatibleShapes, match='order of its shape'):
        t + np.ones((2, 3, 1))


def test_vec_labels_its_dim_only_by_distinct_non_empty_strings():
    strings = vec('vector', 'a', 'bc', '')
    assert strings.shape == channel(vector=3) and strings.shape.get_item_names('vector') is None
    math.assert_close(math.broadcast(len, channel)(strings), [1, 2, 0])
    assert vec('vector', 'a', 'bc').shape == channel(vector='a,bc')
    assert vec('vector', 1, 1).shape.get_item_names('vector') is None


def test_ones_like_takes_phimls_parameter_name(backend):
    ones = math.ones_like(value=wrap(np.zeros((2, 3), np.float64), batch('b'), spatial('x')))
    assert ones.shape == batch(b=2) & spatial(x=3) and ones.dtype == DType(float, 64)
    math.assert_close(ones, 1)


def test_seed_repeats_the_draws_of_the_default_backend(backend):
    math.seed(7)
    first = math.random_normal(spatial(x=4)), math.random_uniform(batch(b=3))
    math.seed(7)
    second = math.random_normal(spatial(x=4)), math.random_uniform(batch(b=3))
    math.seed(8)
    other = math.random_normal(spatial(x=4))
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(other.numpy(), first[0].numpy())
    with pytest.raises(TypeError, match=r'A seed is an int or None, got 1\.5'):
        math.seed(1.5)
    math.seed(None)


def test_seed_reaches_a_backend_loaded_after_it():
    pytest.importorskip('torch')
    script = textwrap.dedent("""
        import sys
        from lazyphi import math
        from lazyphi.backend import backend_by_name
        from lazyphi.math import spatial
        math.seed(4)
        assert 'torch' not in sys.modules
        with backend_by_name('torch'):
            first = math.random_normal(spatial(x=5)).numpy()
        math.seed(4)
        with backend_by_name('torch'):
            second = math.random_normal(spatial(x=5)).numpy()
        assert (first == second).all(), (first, second)
    """)
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
