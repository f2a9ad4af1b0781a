"""phiml's Tensor API in lazyphi: creation from any data, Python values as operands, attributes, printing,
equality modes, Dict, conversions and files. Tests that take the `backend` fixture run once per backend."""

import dataclasses

import numpy as np
import pytest

from lazyphi import math
from lazyphi._errors import IncompatibleShapes
from lazyphi.backend import NUMPY, DType, default_backend
from lazyphi.math import (
    Dict,
    Expanded,
    NonUniform,
    Shape,
    Stacked,
    Tensor,
    batch,
    channel,
    dual,
    instance,
    spatial,
    vec,
)


def native(data):
    return default_backend().as_tensor(np.asarray(data))


# --- creation ---------------------------------------------------------------------------------


def test_tensor_converts_to_the_default_backend_and_wrap_keeps(backend):
    numpy_data = np.ones(4, np.float32)
    assert math.tensor(numpy_data).backend is backend and math.wrap(numpy_data).backend is NUMPY
    assert math.tensor(numpy_data).shape == channel(vector=4)  # one axis: the default list dim
    assert math.tensor(1.5).backend is backend and math.wrap(1.5).backend is NUMPY
    with NUMPY:
        stacked = math.stack([math.zeros(spatial(x=2)), math.zeros(spatial(x=3))], batch('b'))
    converted = math.tensor(stacked)
    assert isinstance(converted, Stacked) and converted.b[1].backend is backend
    assert math.tensor(stacked, batch('n1', 'n2')).shape.names == ('n1', 'n2')


def test_tensor_from_shapes_sequences_and_reshaped_natives():
    t = math.tensor(spatial(x=4, y=3))
    assert t.shape == channel(dims='x,y') and t.numpy().tolist() == [4, 3]
    assert math.tensor(spatial(x=4), instance('s')).shape == instance(s='x')
    nested = math.wrap(([1, 2, 3], math.zeros(channel(vector=3))), batch(stack=2), channel(vector=3))
    assert nested.shape == batch(stack=2) & channel(vector=3)
    np.testing.assert_array_equal(nested.numpy('stack,vector'), [[1, 2, 3], [0, 0, 0]])
    s = spatial(x=4, y=3)
    matrix = math.reshaped_tensor(np.arange(144).reshape(12, 12), [s, s.as_dual()])
    assert set(matrix.shape.names) == {'x', 'y', '~x', '~y'}
    assert matrix[{'x': 1, 'y': 2, '~x': 0, '~y': 0}] == 5 * 12
    assert math.tensor(np.ones((2, 6)), [batch('b'), spatial(x=2, y=3)]).shape == batch(b=2) & spatial(x=2, y=3)
    with pytest.raises(IncompatibleShapes, match='axis 1 has 6'):
        math.reshaped_tensor(np.ones((2, 6)), [batch('b'), spatial(x=2, y=2)], check_sizes=True)


def test_ranges_vectors_and_non_uniform_creation():
    r = math.range_tensor(spatial(x=2, y=3))
    np.testing.assert_array_equal(r.numpy('x,y'), np.arange(6).reshape(2, 3))
    assert math.range is math.arange and math.randn is math.random_normal and math.rand is math.random_uniform
    v = vec(batch('size'), 2, 4, 8)
    assert v.shape == batch(size='2,4,8') and v.numpy().tolist() == [2, 4, 8]
    assert vec(x=0, y=(0, 1)).shape == spatial(sequence=2) & channel(vector='x,y')
    assert vec(x=0, y=[0, 1]).shape == instance(sequence=2) & channel(vector='x,y')
    non_uniform = Shape((2, NonUniform((3, 4), ('b',))), ('b', 'x'), ('batch', 'spatial'), (None, None))
    for make in (math.zeros, math.ones, math.random_normal, math.random_uniform):
        assert make(non_uniform).shape == non_uniform
    assert math.random_normal(channel(v=3), dtype=(int, 32)).dtype == DType(int, 32)


def test_is_scalar_choose_backend_convert_and_dense(backend):
    assert all(math.is_scalar(v) for v in (1., -3, True, 1j, math.zeros(), np.zeros(())))
    assert not any(math.is_scalar(v) for v in (math.zeros(spatial(x=4)), np.zeros((1,)), 'a'))
    t = math.tensor([1., 2.])
    assert math.choose_backend(t) is backend and math.choose_backend(1.) is NUMPY
    assert math.choose_backend([math.wrap(np.ones(2)), t]) is backend
    on_numpy = math.convert({'a': t, 'b': [t]}, NUMPY)
    assert on_numpy['a'].backend is NUMPY and on_numpy['b'][0].backend is NUMPY
    assert math.convert(t).backend is backend
    lazy = math.expand(t, batch(b=3))
    assert isinstance(lazy, Expanded) and type(math.dense(lazy)).__name__ == 'Dense'
    math.assert_close(math.dense(lazy), lazy)


# --- Python values as operands ------------------------------------------------------------------


def test_tuples_lists_shapes_and_arrays_as_operands(backend):
    v = math.ones(batch(b=2) & spatial(x=4, y=3) & channel(vector=2))
    math.assert_close(v + [0, 1], math.wrap([1, 2], channel('vector')))  # noqa: RUF005 (tensor + list)
    math.assert_close(math.ones(channel(vector=3)) + (0, 1, 2), (1, 2, 3))  # noqa: RUF005
    scaled = math.ones(spatial(x=4, y=3) & channel(vector=2)) * spatial(x=4, y=3)
    math.assert_close(scaled.vector[0], 4)
    math.assert_close(scaled.vector[1], 3)
    i = math.linspace(0, 1, instance(particles=10))
    result = vec('something', x=0, y=1) + (0, i)  # noqa: RUF005
    assert result.shape == instance(particles=10) & channel(something='x,y')
    math.assert_close(result.something['y'], i + 1)
    math.assert_close(math.range(spatial(x=3)) + np.arange(3), [0, 2, 4])  # one dim: matched to it
    with pytest.raises(IncompatibleShapes, match='wrap it with dim names'):
        math.zeros(spatial(x=2, y=2)) + np.ones(2)


def test_numpy_ufuncs_and_bit_shifts():
    t = math.stack([1, 2, 3], channel('vector'))
    a = np.asarray(1.)
    for x, y in [(a, t), (t, a)]:
        math.assert_close(x - y, np.subtract(x, y))
        math.assert_close(x / y, np.divide(x, y))
        math.assert_close(x < y, np.less(x, y))
        math.assert_close(x >= y, np.greater_equal(x, y))
    ints = math.range_tensor(spatial(x=4))
    math.assert_close(ints << 1, [0, 2, 4, 6])
    math.assert_close(1 << ints, [1, 2, 4, 8])
    math.assert_close(np.int32(1) >> ints, [1, 0, 0, 0])


# --- attributes, iteration, printing -----------------------------------------------------------


def test_reduction_properties_device_and_backend(backend):
    t = math.meshgrid(x=2, y=2)
    assert t.mean == 0.5 and t.std == 0.5 and t.max == 1 and t.min == 0 and t.sum == 4
    assert not t.all and t.any
    assert math.tensor([1., np.nan]).finite_mean == 1
    assert t.default_backend is backend and t.device == backend.get_default_device()
    assert t.rank == 3 and 'x' in t and spatial('y') in t and 'z' not in t
    c = math.wrap(np.array([1 + 2j]), channel('c'))
    math.assert_close(c.real, 1)
    math.assert_close(c.imag, 2)
    assert math.wrap(7).item() == 7


def test_iteration_of_any_rank():
    assert list(math.ones()) == [1]
    assert list(math.wrap([[1, 2], [3, 4]], spatial('x'), spatial('y'))) == [1, 2, 3, 4]
    assert [v.numpy().tolist() for v in math.zeros(channel(vector='x,y')).vector] == [0, 0]


def test_numpy_raises_floats_to_the_current_precision_but_never_lowers():
    t = math.random_uniform(spatial(x=4))
    assert t.numpy().dtype == np.float32
    with math.precision(64):
        assert t.numpy().dtype == np.float64
    doubles = math.wrap(np.ones(2), spatial('x'))
    assert doubles.numpy().dtype == np.float64  # phiml would give float32; lazyphi keeps every bit


def test_transposes_swap_dims_and_their_duals():
    m = math.zeros(instance(i=2) & spatial(x=3) & dual(j=4))
    assert set(m.Ti.shape.names) == {'~i', 'x', 'j'} and m.Ti.shape.get_type('~i') == 'dual'
    assert m.Ti.shape.get_type('j') == 'instance' and m.Ti.Ti.shape == m.shape
    assert set(m.Ts.shape.names) == {'i', '~x', 'j'}


def test_format_specs():
    t = math.wrap(np.array([1.5, 2.25]), channel(vector='x,y'))
    assert f'{t:.1f}' == '(x=1.5, y=2.2) float64'
    assert f'{t:no-dtype:.2f}' == '(x=1.50, y=2.25)'
    assert f'{t:summary:no-dtype}' == '(vectorᶜ=x,y) 1.88 ± 0.375 (1.5...2.25)'
    assert f'{t:numpy}' == '[1.5  2.25]'
    assert 'const 0' in repr(math.zeros(batch(b=10)))
    assert f'{math.range(spatial(x=3))}' == '(0, 1, 2) along xˢ int64'
    assert f'{math.wrap(3)}' == '3'
    with pytest.raises(ValueError, match='Unknown option'):
        f'{t:sideways}'


# --- equality modes, Dict, files -----------------------------------------------------------------


def test_equality_modes():
    x, y = np.asarray(1.), math.wrap([1, 2], channel('vector'))
    with math.equality_by_ref():
        assert not bool(x == y) and bool(x != y) and bool(y == y)
    a = math.wrap([1., 2.], channel('vector'))
    with math.equality_by_shape_and_value(rel_tolerance=0.1):
        assert a == a * 1.05 and a != a * 2 and a != math.wrap([1., 2.], spatial('x'))
    assert isinstance(a == a, math.Tensor)  # element-wise again outside
    assert math.close(a, [1., 2.]) and not math.close(math.ones(channel(vector='x,y')), 3)


def test_dict_rounds_each_value():
    d = Dict(a=1.4, b=math.ones(spatial(x=3)) * 1.6)
    assert round(d).a == 1
    math.assert_close(round(d).b, 2)


def test_to_dict_from_dict_and_npz_files(tmp_path):
    t = math.random_normal(batch(b=2), spatial(x=3), channel(vector='x,y'))
    math.assert_close(t, math.from_dict(math.to_dict(t)))
    assert math.from_dict(math.to_dict(t.shape)) == t.shape
    data = math.random_normal(batch(b=3), spatial(x=4))
    files = -math.f - f'{tmp_path}/data/test_{math.range(batch(b=3))}.npz'
    math.save(files, data)
    math.assert_close(data.b[0], math.load(f'{tmp_path}/data/test_0.npz'))
    math.assert_close(data, math.load(files))
    tree = {'lazy': math.expand(math.ones(spatial(x=2)), batch(b=2)), 'name': 'n',
            'parts': math.stack([math.ones(spatial(x=2)), math.ones(spatial(x=3))], batch('s'))}
    math.save(str(tmp_path / 'tree'), tree)
    loaded = math.load(str(tmp_path / 'tree'))
    assert isinstance(loaded['lazy'], Expanded) and loaded['name'] == 'n' and isinstance(loaded['parts'], Stacked)
    math.assert_close(loaded['lazy'], 1)


def test_phimls_small_helpers_dtype_is_numeric_is_none_all_available_object_dims():
    assert math.dtype(math.zeros(spatial(x=2), dtype=DType(float, 64))) == DType(float, 64)
    assert math.dtype(np.int32(3)) == DType(int, 32) and math.dtype(True).kind is bool
    assert [math.is_numeric(v) for v in (1, 2.5, 1j, np.zeros(2), math.zeros(spatial(x=2)))] == [True] * 5
    assert not any(math.is_numeric(v) for v in (True, 'a', None, math.wrap(['a', 'b']), math.zeros(spatial(x=2)) > 0))
    assert math.is_none(None) and math.is_none(math.wrap(None)) and not math.is_none(0)
    assert math.all_available(math.zeros(spatial(x=2)), (1, math.ones(batch(b=2))))
    seen = []

    @math.jit_compile
    def traced(x):
        seen.append(math.all_available(x))
        return x
    traced(math.zeros(spatial(x=2)))
    assert seen == [math.zeros(spatial(x=2)).backend.name in ('numpy', 'torch')]  # eager backends run it as is
    assert math.object_dims(math.layout([1, 'a'], instance('i'))) == instance(i=2)
    assert math.object_dims(math.zeros(spatial(x=2))) == math.EMPTY_SHAPE
    assert math.as_extrapolation('periodic') is math.extrapolation.PERIODIC
    assert isinstance(math.as_extrapolation(0), math.Extrapolation)


def test_const_vec_and_tensor_like_as_phiml_documents_them():
    assert math.const_vec(0, 'x,y').shape == channel(vector='x,y')
    assert math.const_vec(1.5, spatial(x=4, y=3)).numpy().tolist() == [1.5, 1.5]
    assert math.const_vec(2, instance(points=3)).shape == instance(points=3)
    with pytest.raises(ValueError, match='mixes spatial dims'):
        math.const_vec(0, spatial(x=2) & channel(c=2))
    grid = math.zeros(batch(b=2), spatial(x=2, y=3))
    assert math.tensor_like(grid, 5).shape == spatial(x=2, y=3) and float(math.tensor_like(grid, 5).x[1].y[2]) == 5
    filled = math.tensor_like(grid, math.range(instance(i=6)))
    assert filled.numpy('x,y').tolist() == [[0, 1, 2], [3, 4, 5]]


def test_replace_and_copy_with_copy_an_object_with_new_attributes():
    @dataclasses.dataclass(frozen=True)
    class Particle:
        position: Tensor
        mass: float = 1.

    p = Particle(math.zeros(spatial(x=2)))
    heavier = math.replace(p, mass=2.)
    assert heavier.mass == 2. and p.mass == 1. and heavier.position is p.position
    assert math.copy_with(p, mass=3.).mass == 3. and math.copy_with is math.replace
    assert math.replace(5, anything=1) == 5

    class Plain:
        def __init__(self):
            self.value = 1
    plain = Plain()
    assert math.replace(plain, value=2).value == 2 and plain.value == 1
