"""Tensor creation, access, element-wise operators, slicing and the tensor kinds, on every installed backend.

Every test runs once per backend (the `backend` fixture makes it the default); `wrap` puts test data
into that backend's natives, and results are compared through `.numpy()`.
"""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi._errors import DimNotFound, IncompatibleShapes
from lazyphi.backend import DType, default_backend
from lazyphi.math import Expanded, Stacked, Tensor, batch, channel, instance, spatial
from lazyphi.math._tensor import Dense

pytestmark = pytest.mark.usefixtures('backend')


def arr(*sizes, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).normal(size=sizes).astype(dtype)


def wrap(data, *dims):
    """A tensor of `data` held by the default backend's natives."""
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def numpy_only():
    if default_backend().name != 'numpy':
        pytest.skip('NumPy-specific: read-only views of NumPy natives')


# --- creation ---------------------------------------------------------------------------

def test_tensor_from_native_names_axes_in_order():
    data = arr(2, 3)
    t = math.tensor(data, batch('b'), spatial('x'))
    assert t.shape == batch(b=2) & spatial(x=3)
    assert t.dtype == DType(float, 32)
    np.testing.assert_array_equal(t.numpy('b,x'), data)
    np.testing.assert_array_equal(t.numpy('x,b'), data.T)


def test_tensor_from_dim_spec_strings():
    t = math.tensor(arr(2, 3, 2), 'b:b,x:s,vector:c')
    assert t.shape.names == ('b', 'x', 'vector')
    assert t.shape.types == ('batch', 'spatial', 'channel')


def test_tensor_from_list_defaults_to_vector_dim_and_precision():
    t = math.tensor([1.0, 2.0, 3.0])
    assert t.shape == channel(vector=3)
    assert t.dtype == DType(float, 32)
    with math.precision(64):
        assert math.tensor([1.0]).dtype == DType(float, 64)


def test_tensor_checks_labels_and_sizes():
    with pytest.raises(IncompatibleShapes, match="'vector' has 2 labels"):
        math.tensor(arr(3), channel(vector='x,y'))
    with pytest.raises(IncompatibleShapes, match="'x' was given size 4"):
        math.tensor(arr(3), spatial(x=4))
    with pytest.raises(IncompatibleShapes, match='2 axes'):
        math.tensor(arr(2, 3), spatial('x'))


def test_wrapped_numpy_is_read_only_through_the_tensor():
    numpy_only()
    data = arr(4)
    t = wrap(data, spatial('x'))
    with pytest.raises(ValueError, match='read-only'):
        t.numpy()[0] = 1
    with pytest.raises(ValueError, match='read-only'):
        t.native()[0] = 1
    assert data.flags.writeable  # the caller's array is untouched


def test_numpy_returns_views_not_copies():
    numpy_only()
    data = arr(3, 4)
    t = wrap(data, spatial('x,y'))
    assert np.shares_memory(t.numpy('x,y'), data)
    assert np.shares_memory(t.numpy('y,x'), data)


def test_vec_and_labels():
    v = math.vec(x=1, y=2)
    assert v.shape == channel(vector='x,y')
    assert int(v['y']) == 2
    assert int(v.vector['x']) == 1
    np.testing.assert_array_equal(v['y,x'].numpy(), [2, 1])


def test_vec_of_tensors_stacks_and_broadcasts():
    x = math.linspace(0, 1, spatial(x=3))
    v = math.vec(x=x, y=0)
    assert v.shape == spatial(x=3) & channel(vector='x,y')
    np.testing.assert_allclose(v.vector['y'].numpy(), 0)


def test_zeros_ones_are_lazily_expanded():
    z = math.zeros(batch(b=1000), spatial(x=1000))
    assert isinstance(z, Expanded)
    assert default_backend().staticshape(z.native(force_expand=False)) == (1, 1)
    assert float(math.sum(z + 1, 'b,x')) == 1e6
    assert math.ones_like(math.tensor(arr(3), spatial('x'))).shape == spatial(x=3)
    assert math.zeros(spatial(x=2), dtype=int).dtype == DType.as_dtype(int)


def test_arange_linspace_meshgrid():
    np.testing.assert_array_equal(math.arange(spatial(x=4)).numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(math.arange(instance('i'), 2, 8, 2).numpy(), [2, 4, 6])
    np.testing.assert_allclose(math.linspace(0, 1, spatial(x=5)).numpy(), np.linspace(0, 1, 5))
    grid = math.meshgrid(x=3, y=2)
    assert grid.shape == spatial(x=3, y=2) & channel(vector='x,y')
    np.testing.assert_array_equal(grid.vector['y'].numpy('x,y'), [[0, 1]] * 3)


def test_random():
    t = math.random_normal(batch(b=10), spatial(x=100))
    assert t.shape == batch(b=10) & spatial(x=100) and t.dtype == DType(float, 32)
    u = math.random_uniform(spatial(x=1000), low=2, high=3)
    assert float(math.min(u, 'x')) >= 2 and float(math.max(u, 'x')) < 3


def test_scalar_conversions():
    t = math.tensor(3.5)
    assert float(t) == 3.5 and int(t) == 3 and bool(t) and complex(t) == 3.5
    with pytest.raises(ValueError, match='one value'):
        float(math.tensor(arr(2), spatial('x')))


# --- element-wise ---------------------------------------------------------------------

def test_broadcasting_by_name_not_position():
    a = math.tensor(arr(2, 3), spatial('x'), spatial('y'))
    b = math.tensor(arr(3, 2, seed=1), spatial('y'), spatial('x'))
    np.testing.assert_allclose((a + b).numpy('x,y'), a.numpy('x,y') + b.numpy('x,y'))
    c = math.tensor(arr(4, seed=2), batch('b'))
    out = a * c
    assert out.shape == batch(b=4) & spatial(x=2, y=3)
    np.testing.assert_allclose(out.numpy('b,x,y'), c.numpy()[:, None, None] * a.numpy('x,y')[None])


@pytest.mark.parametrize('op', ['__add__', '__sub__', '__mul__', '__truediv__', '__pow__', '__mod__',
                                '__floordiv__', '__radd__', '__rsub__', '__rmul__', '__rtruediv__'])
def test_operators_match_numpy(op):
    data = np.abs(arr(5)) + 0.5
    t = wrap(data, spatial('x'))
    result = getattr(t, op)(2.0)
    np_op = getattr(data, op)
    np.testing.assert_allclose(result.numpy(), np_op(np.float32(2.0)), rtol=1e-6)
    assert result.dtype == DType(float, 32)


def test_comparisons_and_logic():
    t = wrap(np.arange(5), spatial('x'))
    np.testing.assert_array_equal((t > 2).numpy(), [False, False, False, True, True])
    np.testing.assert_array_equal((t <= 2).numpy(), [True, True, True, False, False])
    np.testing.assert_array_equal(((t > 1) & (t < 4)).numpy(), [False, False, True, True, False])
    np.testing.assert_array_equal((~(t == 2)).numpy(), [True, True, False, True, True])
    np.testing.assert_array_equal((-t).numpy(), -np.arange(5))


FUNCTIONS = {
    'sqrt': np.sqrt, 'exp': np.exp, 'log': np.log, 'log2': np.log2, 'log10': np.log10, 'sin': np.sin,
    'cos': np.cos, 'tan': np.tan, 'arcsin': np.arcsin, 'arccos': np.arccos, 'arctan': np.arctan, 'sinh': np.sinh,
    'cosh': np.cosh, 'tanh': np.tanh, 'arcsinh': np.arcsinh, 'arctanh': np.arctanh, 'abs': np.abs,
    'sign': np.sign, 'round': np.round, 'ceil': np.ceil, 'floor': np.floor,
    'sigmoid': lambda x: 1 / (1 + np.exp(-x)), 'is_nan': np.isnan, 'is_finite': np.isfinite, 'is_inf': np.isinf,
}


@pytest.mark.parametrize('name', sorted(FUNCTIONS))
def test_elementwise_functions_match_numpy(name):
    data = np.random.default_rng(3).uniform(0.1, 0.9, size=(3, 4)).astype(np.float32)
    t = wrap(data, batch('b'), spatial('x'))
    result = getattr(math, name)(t)
    assert result.shape == t.shape
    np.testing.assert_allclose(result.numpy('b,x'), FUNCTIONS[name](data), rtol=1e-5)


def test_float_functions_of_integers_use_the_precision():
    assert math.sqrt(wrap(np.arange(4), spatial('x'))).dtype == DType(float, 32)
    assert math.arccosh(math.tensor(2.0)).dtype == DType(float, 32)


def test_complex_parts():
    t = wrap(np.array([1 + 2j, 3 - 1j], dtype=np.complex64), spatial('x'))
    np.testing.assert_array_equal(math.real(t).numpy(), [1, 3])
    np.testing.assert_array_equal(math.imag(t).numpy(), [2, -1])
    np.testing.assert_array_equal(math.conj(t).numpy(), [1 - 2j, 3 + 1j])


def test_where_maximum_minimum_clip_cast():
    t = wrap(np.arange(5, dtype=np.float32), spatial('x'))
    np.testing.assert_array_equal(math.where(t > 2, t, 0).numpy(), [0, 0, 0, 3, 4])
    np.testing.assert_array_equal(math.maximum(t, 2).numpy(), [2, 2, 2, 3, 4])
    np.testing.assert_array_equal(math.minimum(t, 2).numpy(), [0, 1, 2, 2, 2])
    np.testing.assert_array_equal(math.clip(t, 1, 3).numpy(), [1, 1, 2, 3, 3])
    assert math.cast(t, int).dtype.kind is int
    assert math.to_int32(t).dtype == DType(int, 32)
    np.testing.assert_allclose(math.arctan2(t, 1).numpy(), np.arctan2(np.arange(5), 1), rtol=1e-6)


def test_mixed_float_precisions_follow_the_global_precision():
    a = math.cast(wrap(np.ones(3), spatial('x')), DType(float, 64))
    b = math.cast(wrap(np.ones(3), spatial('x')), DType(float, 32))
    assert (a + b).dtype == DType(float, 32)
    with math.precision(64):
        assert (a + b).dtype == DType(float, 64)


def test_unnamed_arrays_are_matched_to_the_only_dim_or_the_channel_dims():
    t = wrap(arr(3), spatial('x'))
    assert (t + np.ones(3)).shape == t.shape
    grid = wrap(np.ones((2, 3)), spatial('x'), spatial('y'))
    with pytest.raises(IncompatibleShapes, match='wrap it with dim names'):
        grid + np.ones(3)


@pytest.mark.parametrize('bits', [32, 64])
def test_float_results_have_the_precision_on_every_backend(bits):
    """True division of ints, means of ints, and stacking or joining mixed dtypes give floats of the precision."""
    ints = wrap(np.arange(1, 4), spatial('x'))
    floats = wrap(np.ones(3, np.float32), spatial('x'))
    with math.precision(64):
        doubles = wrap(np.ones(3, np.float64), spatial('x'))
    assert (floats.dtype, doubles.dtype) == (DType(float, 32), DType(float, 64))
    with math.precision(bits):
        results = {
            'int / int': ints / ints, 'int / 2': ints / 2, '2 / int': 2 / ints, 'int / float': ints / floats,
            'mean(int)': math.mean(ints), 'std(int)': math.std(ints, 'x'), 'finite_mean(int)': math.finite_mean(ints),
            'stack(float32, int)': math.stack([floats, ints], channel('c')),
            'stack(float64, float32)': math.stack([doubles, floats], channel('c')),
            'concat(float32, float64)': math.concat([floats, doubles], 'x'),
            'vec(x=float32, y=0)': math.vec(x=floats, y=0),
        }
        wrong = {k: str(v.dtype) for k, v in results.items() if v.dtype != DType(float, bits)}
        assert not wrong, f'expected float{bits}: {wrong}'
        assert (ints // 2).dtype.kind is int and (ints * 2).dtype.kind is int  # integer results stay integers
    np.testing.assert_allclose(results['int / 2'].numpy(), [0.5, 1, 1.5])
    np.testing.assert_allclose(results['mean(int)'].numpy(), 2)


# --- reductions and fft -----------------------------------------------------------------

REDUCTIONS = {'sum': np.sum, 'prod': np.prod, 'mean': np.mean, 'std': np.std, 'max': np.max, 'min': np.min}


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_reductions_match_numpy(name):
    data = arr(2, 3, 4)
    t = wrap(data, batch('b'), spatial('x'), channel('c'))
    np.testing.assert_allclose(getattr(math, name)(t, 'x').numpy('b,c'), REDUCTIONS[name](data, axis=1), rtol=1e-5)
    default = getattr(math, name)(t)  # every non-batch dim
    assert default.shape == batch(b=2)
    np.testing.assert_allclose(default.numpy(), REDUCTIONS[name](data, axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(float(getattr(math, name)(t, lambda s: s)), REDUCTIONS[name](data), rtol=1e-4)


def test_any_all_and_finite_reductions():
    data = np.array([[1.0, np.nan, 3.0], [np.inf, 2.0, 4.0]], dtype=np.float32)
    t = wrap(data, batch('b'), spatial('x'))
    np.testing.assert_array_equal(math.finite_sum(t).numpy(), [4, 6])
    np.testing.assert_array_equal(math.finite_mean(t).numpy(), [2, 3])
    np.testing.assert_array_equal(math.finite_max(t).numpy(), [3, 4])
    np.testing.assert_array_equal(math.finite_min(t).numpy(), [1, 2])
    np.testing.assert_array_equal(math.any(math.is_nan(t)).numpy(), [True, False])
    np.testing.assert_array_equal(math.all(math.is_finite(t)).numpy(), [False, False])


def test_fft_over_spatial_dims_by_default():
    data = arr(3, 8, 8)
    t = wrap(data, batch('b'), spatial('x,y'))
    k = math.fft(t)
    assert k.dtype == DType(complex, 64) and k.shape == t.shape
    np.testing.assert_allclose(k.numpy('b,x,y'), np.fft.fft2(data), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(math.ifft(k).numpy('b,x,y').real, data, atol=1e-5)
    np.testing.assert_allclose(math.fft(t, 'x').numpy('b,x,y'), np.fft.fft(data, axis=1), rtol=1e-4, atol=1e-4)


# --- slicing ----------------------------------------------------------------------------

def test_slicing_by_dim_attribute_and_dict():
    data = arr(4, 5, 2)
    t = wrap(data, batch('b'), spatial('x'), channel(vector='x,y'))
    np.testing.assert_array_equal(t.x[1:3].numpy('b,x,vector'), data[:, 1:3])
    np.testing.assert_array_equal(t.x[-1].numpy('b,vector'), data[:, -1])
    assert t.x[-1].shape == batch(b=4) & channel(vector='x,y')
    np.testing.assert_array_equal(t[{'b': 0, 'vector': 'y'}].numpy('x'), data[0, :, 1])
    np.testing.assert_array_equal(t['y'].numpy('b,x'), data[..., 1])
    assert t['y,x'].shape.get_item_names('vector') == ('y', 'x')
    assert t[{'missing': 3}] is t


def test_slicing_errors_name_the_problem():
    t = wrap(arr(3), spatial('x'))
    with pytest.raises(IndexError, match="Index 3 is out of range for dim 'x' of size 3"):
        t.x[3]
    with pytest.raises(KeyError, match="'z'"):
        math.vec(x=1, y=2)['z']
    assert not t.y.exists  # t.<name> of a dim the tensor lacks is a view of it, as in phiml
    with pytest.raises(AttributeError, match='_private'):
        _ = t._private


def test_index_tensors():
    data = arr(5, 2)
    t = wrap(data, spatial('x'), channel('c'))
    mask = wrap(np.array([True, False, True, False, True]), spatial('x'))
    np.testing.assert_array_equal(t[mask].numpy('x,c'), data[[0, 2, 4]])
    idx = wrap(np.array([[4, 0], [1, 1]]), instance('i'), instance('j'))
    picked = t[{'x': idx}]
    assert picked.shape == instance(i=2, j=2) & channel(c=2)
    np.testing.assert_array_equal(picked.numpy('i,j,c'), data[np.array([[4, 0], [1, 1]])])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_slicing_matches_numpy(data):
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    names = ['a', 'b', 'c'][:len(sizes)]
    values = np.arange(np.prod(sizes)).reshape(sizes)
    t = wrap(values, *[spatial(n) for n in names])
    selection, np_index = {}, []
    for n, s in zip(names, sizes, strict=True):
        choice = data.draw(st.sampled_from(['none', 'int', 'slice']))
        if choice == 'int':
            i = data.draw(st.integers(-s, s - 1))
            selection[n] = i
            np_index.append(i)
        elif choice == 'slice':
            sl = slice(data.draw(st.integers(0, s)), data.draw(st.integers(0, s)), data.draw(st.integers(1, 3)))
            selection[n] = sl
            np_index.append(sl)
        else:
            np_index.append(slice(None))
    result = t[selection]
    kept = [n for n in names if not isinstance(selection.get(n), int)]
    np.testing.assert_array_equal(result.numpy(kept), values[tuple(np_index)])


# --- structure ----------------------------------------------------------------------------

def test_stack_list_and_dict():
    a, b = wrap(arr(3), spatial('x')), wrap(arr(3, seed=1), spatial('x'))
    s = math.stack([a, b], batch('b'))
    assert s.shape == batch(b=2) & spatial(x=3)
    np.testing.assert_array_equal(s.b[1].numpy(), b.numpy())
    d = math.stack({'first': a, 'second': b}, channel('c'))
    assert d.shape.get_item_names('c') == ('first', 'second')
    np.testing.assert_array_equal(d['second'].numpy(), b.numpy())


def test_stack_non_uniform_keeps_parts():
    a, b = wrap(arr(3), spatial('x')), wrap(arr(5), spatial('x'))
    s = math.stack([a, b], batch('b'))
    assert isinstance(s, Stacked) and not s.shape.is_uniform
    np.testing.assert_allclose((s * 2).b[1].numpy(), b.numpy() * 2)
    np.testing.assert_allclose(math.sum(s, 'x').numpy(), [a.numpy().sum(), b.numpy().sum()], rtol=1e-6)
    np.testing.assert_allclose(float(math.mean(s, 'b,x')), np.concatenate([a.numpy(), b.numpy()]).mean(),
                               rtol=1e-6)
    with pytest.raises(IncompatibleShapes, match='non-uniform'):
        s.numpy('b,x')


def test_a_non_uniform_stack_has_the_dtype_its_parts_combine_to():
    ints = wrap(default_backend().as_tensor(np.arange(3)), spatial('x'))
    floats = wrap(default_backend().as_tensor(np.ones(2, np.float32)), spatial('x'))
    s = math.stack([ints, floats], batch('b'))
    assert isinstance(s, Stacked) and (s.b[0].dtype.kind, s.b[1].dtype) == (int, DType(float, 32))
    assert s.dtype == DType(float, 32) and 'float32' in repr(s)
    assert math.stack([ints, ints.x[:2]], batch('b')).dtype == ints.dtype  # non-uniform, one dtype


def test_unstack_then_stack_is_identity():
    t = wrap(arr(3, 4), batch('b'), spatial('x'))
    parts = math.unstack(t, 'b')
    assert len(parts) == 3
    math.assert_close(math.stack(parts, batch('b')), t)


def test_concat_joins_sizes_and_labels():
    a = wrap(arr(2, 3), spatial('x'), channel(c='u,v,w'))
    b = wrap(arr(4, 3), spatial('x'), channel(c='u,v,w'))
    c = math.concat([a, b], 'x')
    assert c.shape.get_size('x') == 6
    np.testing.assert_array_equal(c.numpy('x,c'), np.concatenate([a.numpy('x,c'), b.numpy('x,c')]))
    v = math.concat([math.vec(x=1), math.vec(y=2)], 'vector')
    assert v.shape.get_item_names('vector') == ('x', 'y')


def test_concat_keeps_the_dim_order_of_the_first_value():
    grid = math.random_normal(spatial(x=3, y=4))
    assert math.concat([grid, grid], 'y').shape.names == ('x', 'y')
    assert math.concat([grid, math.random_normal(spatial(y=2, x=3))], 'y').shape == spatial(x=3, y=6)
    for kind in (math.zeros(spatial(x=3, y=4)), math.expand(math.random_normal(spatial(y=4)), spatial(x=3))):
        assert math.concat([kind, grid], 'y').shape.names == kind.shape.names  # lazily expanded kinds too
    # phiml's N_Dimensional notebook: the neighbours of a grid keep the grid's dim order
    for dims in (spatial(x=3, y=3), spatial(y=3, x=3)):
        left, right = math.shift(math.zeros(dims), (-1, 1))
        assert left.shape == dims & channel(shift=dims.names) and right.shape == left.shape


def test_expand_does_not_materialise():
    t = wrap(arr(3), spatial('x'))
    e = math.expand(t, batch(b=1000))
    assert isinstance(e, Expanded)
    assert e.shape == batch(b=1000) & spatial(x=3)
    np.testing.assert_allclose(math.sum(e, 'b').numpy(), t.numpy() * 1000, rtol=1e-5)
    np.testing.assert_array_equal(e.b[7].numpy(), t.numpy())
    assert default_backend().staticshape((e * 2).native(force_expand=False)) == (1, 3)


def test_rename_pack_unpack_flatten_transpose():
    data = arr(2, 3, 4)
    t = wrap(data, batch('b'), spatial('x'), spatial('y'))
    r = math.rename_dims(t, 'x', 'u')
    assert r.shape.names == ('b', 'u', 'y')
    r2 = math.rename_dims(t, 'x', instance('points'))
    assert r2.shape.get_type('points') == 'instance'
    p = math.pack_dims(t, 'x,y', instance('points'))
    assert p.shape == batch(b=2) & instance(points=12)
    np.testing.assert_array_equal(p.numpy('b,points'), data.reshape(2, 12))
    u = math.unpack_dim(p, 'points', spatial(x=3), spatial('y'))
    math.assert_close(u, t)
    assert math.flatten(t).shape == batch(b=2) & instance(flat=12)  # batch dims stay, as in phiml
    f = math.flatten(t, flatten_batch=True)
    assert f.shape == instance(flat=24)
    tr = math.transpose(t, 'y,x,b')
    assert tr.shape.names == ('y', 'x', 'b')
    np.testing.assert_array_equal(tr.native(), data.transpose(2, 1, 0))


def test_iterate_final_value_and_trajectory():
    assert float(math.iterate(lambda x: x * 2, 3, math.tensor(1.0))) == 8
    traj = math.iterate(lambda x: x + 1, batch(time=4), math.tensor(0.0))
    np.testing.assert_array_equal(traj.numpy(), [0, 1, 2, 3, 4])
    x, _ = math.iterate(lambda x, v: (x + v, v), 2, math.tensor(0.0), math.tensor(1.5))
    assert float(x) == 3


def test_assert_close_reports_location():
    a = wrap(np.array([1.0, 2.0, 3.0]), spatial('x'))
    math.assert_close(a, a + 1e-9)
    with pytest.raises(AssertionError, match=r"largest difference .* at \{'x': 1\}"):
        math.assert_close(a, a + wrap(np.array([0, 1.0, 0]), spatial('x')))


# --- protocol -----------------------------------------------------------------------------

def test_a_slice_pickles_its_own_elements_only():
    """What a task or a cluster worker receives for one block of a large input (torch pickles whole storages)."""
    whole = wrap(arr(1000, 100), batch('b'), spatial('x'))
    part = whole.b[10:20]
    assert len(pickle.dumps(part)) < 2 * 10 * 100 * 4 + 2000 < len(pickle.dumps(whole)) // 10
    math.assert_close(pickle.loads(pickle.dumps(part)), part)
    assert pickle.loads(pickle.dumps(part)).backend is part.backend


def test_pickle_round_trip_keeps_backend_and_shape():
    t = wrap(arr(2, 3), batch('b'), channel(vector='x,y,z'))
    back = pickle.loads(pickle.dumps(t))
    assert back.shape == t.shape and back.backend is t.backend
    math.assert_close(back, t)
    e = pickle.loads(pickle.dumps(math.zeros(spatial(x=1000))))
    assert isinstance(e, Expanded)


def test_dask_token_is_deterministic_and_content_based():
    a = wrap(arr(4), spatial('x'))
    b = wrap(arr(4), spatial('x'))
    c = wrap(arr(4, seed=5), spatial('x'))
    assert a.__dask_tokenize__() == b.__dask_tokenize__()
    assert a.__dask_tokenize__() != c.__dask_tokenize__()
    assert a.__dask_tokenize__() != math.rename_dims(a, 'x', 'y').__dask_tokenize__()


def test_repr_shows_shape_and_values():
    assert repr(wrap(np.arange(3), spatial('x'))) == '(0, 1, 2) along xˢ int64'
    # a channel dim is named unless it is 'vector' (phiml's Matrices and Linear_Solves notebooks)
    assert repr(wrap(np.arange(2), channel('b_vec'))) == '(0, 1) along b_vecᶜ int64'
    assert repr(wrap(np.arange(2), channel('vector'))) == '(0, 1) int64'
    assert 'yˢ=3' in repr(wrap(np.ones((2, 3)), spatial('x'), spatial('y')))
    assert '±' in repr(math.random_normal(spatial(x=100)))
    assert repr(math.tensor(2.0)) == '2.0'


def test_tensors_are_not_hashable_because_eq_is_elementwise():
    t = wrap(arr(2), spatial('x'))
    assert isinstance(t == t, Tensor)
    with pytest.raises(TypeError):
        hash(t)


def test_dense_kind_is_the_default():
    assert type(wrap(arr(2), spatial('x'))) is Dense


def test_dim_not_found_in_native_order():
    t = wrap(arr(2, 3), spatial('x,y'))
    with pytest.raises(DimNotFound, match="missing \\('y',\\)"):
        t.native('x')


def test_dask_token_is_equal_across_backends_and_kinds():
    data = arr(3, 2)
    here = wrap(data, spatial('x'), channel('c'))
    on_numpy = math.wrap(data, spatial('x'), channel('c'))
    assert here.__dask_tokenize__() == on_numpy.__dask_tokenize__()
    lazy = math.expand(wrap(arr(2), channel('c')), spatial(x=3))
    assert lazy.__dask_tokenize__() == lazy._dense().__dask_tokenize__()


def test_stacking_tensors_of_different_backends_converts_to_one():
    numpy_part = math.wrap(arr(3), spatial('x'))
    native_part = wrap(arr(3, seed=1), spatial('x'))
    stacked = math.stack([native_part, numpy_part], batch('b'))
    np.testing.assert_allclose(stacked.numpy('b,x'), np.stack([arr(3, seed=1), arr(3)]))


def test_joined_parts_behave_like_their_concatenation():
    from lazyphi.math._kinds import Joined
    parts = [wrap(arr(n, 3, seed=n), batch('b'), spatial('x')) for n in (2, 3, 4)]
    joined = Joined(parts, 'b')
    dense = math.concat(parts, 'b')
    assert joined.shape == dense.shape == batch(b=9) & spatial(x=3)
    math.assert_close(joined * 2 + dense, dense * 3)
    assert isinstance(joined * 2, Joined)
    math.assert_close(joined.b[4], dense.b[4])
    math.assert_close(joined.b[1:7], dense.b[1:7])
    math.assert_close(joined.x[1], dense.x[1])
    for reduce in (math.sum, math.max, math.min, math.mean):
        math.assert_close(reduce(joined, 'b,x'), reduce(dense, 'b,x'), rel_tolerance=1e-5)
        math.assert_close(reduce(joined, 'x'), reduce(dense, 'x'), rel_tolerance=1e-5)
    renamed = math.rename_dims(joined, 'b', 'c')
    assert renamed.shape.names[0] == 'c'
    np.testing.assert_allclose(joined.numpy('b,x'), dense.numpy('b,x'))
