"""`copy`, `is_composite`, `find_differences`, `enable_debug_checks`, `native_call`, `pad_to_uniform`,
`print_gradient`, `DimFilter` and `lazyphi.math.magic`, on every backend, against NumPy and phiml."""

import dataclasses
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import NUMPY
from lazyphi.math import Shape, Tensor, batch, channel, dual, instance, spatial
from lazyphi.math.kinds import Dense
from lazyphi.math.magic import value_attributes, variable_attributes

pytestmark = pytest.mark.usefixtures('backend')

ON_NUMPY = pytest.mark.parametrize('backend', ['numpy'], indirect=True)  # NumPy functions, or phiml's own state
RNG = np.random.default_rng(7)
VALUES = RNG.standard_normal((2, 4, 3)).astype(np.float32)


@pytest.fixture
def phiml_math():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return pytest.importorskip('phiml.math')


def same_memory(a, b) -> bool:
    """Whether two natives of one backend share their memory."""
    if isinstance(a, np.ndarray):
        return np.shares_memory(a, b)
    if type(a).__module__.startswith('torch'):
        return a.data_ptr() == b.data_ptr()
    return a is b  # JAX and TensorFlow arrays are immutable: a new one is a new buffer


# --- copy -----------------------------------------------------------------------------------------


def test_copy_has_equal_values_in_new_natives(backend):
    t = math.tensor(VALUES, batch('b'), spatial('x,y'))
    c = math.copy(t)
    assert c.shape == t.shape and c.dtype == t.dtype and c.backend is backend
    np.testing.assert_array_equal(c.numpy('b,x,y'), VALUES)
    assert not same_memory(c.native('b,x,y'), t.native('b,x,y'))


def test_copy_keeps_the_kind_and_copies_each_part():
    expanded = math.expand(math.tensor([1., 2.], spatial('x')), batch(b=1000))
    copied = math.copy(expanded)
    assert type(copied) is math.Expanded and copied.shape == expanded.shape
    np.testing.assert_array_equal(copied.numpy('b,x'), np.tile([1., 2.], (1000, 1)))
    ragged = math.stack([math.tensor([1, 2, 3], spatial('x')), math.tensor([4, 5], spatial('x'))], batch('b'))
    copied = math.copy(ragged)
    assert type(copied) is math.Stacked and copied.shape == ragged.shape
    for original, part in zip(ragged.parts, copied.parts, strict=True):
        np.testing.assert_array_equal(part.numpy('x'), original.numpy('x'))
        assert not same_memory(part.native('x'), original.native('x'))


def test_copy_of_trees_numbers_and_natives():
    t = math.tensor(VALUES[0], spatial('x,y'))
    tree = {'a': (t, 3), 'b': [t * 2]}
    copied = math.copy(tree)
    assert copied['a'][1] == 3 and copied['a'][0] is not t
    math.assert_close(copied['b'][0], t * 2)
    native = t.native('x,y')
    assert not same_memory(math.copy(native), native)
    assert math.copy(2.5) == 2.5 and math.copy(None) is None


@ON_NUMPY
def test_copy_values_equal_phimls(phiml_math):
    ours = math.copy(math.tensor(VALUES, batch('b'), spatial('x,y')))
    theirs = phiml_math.copy(phiml_math.tensor(VALUES, phiml_math.batch('b'), phiml_math.spatial('x,y')))
    np.testing.assert_array_equal(ours.numpy('b,x,y'), theirs.numpy('b,x,y'))


# --- is_composite ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Pair:
    a: Tensor
    label: str = 'p'


class Listed:
    def __init__(self, v):
        self.v = v

    def __value_attrs__(self):
        return ('v',)


def composite_cases(t: Tensor) -> list:
    return [(t, False), (1, False), (2.5, False), (True, False), (None, False), ('abc', False),
            (t.native('x,y'), False), ((t,), True), ([1, 2], True), ({'a': t}, True), (Pair(t), True),
            (Pair, True), (math.layout(['a', 'b'], 'i'), True), (Listed(t), True), (spatial(x=2), False)]


def test_is_composite_tells_containers_from_values():
    t = math.tensor(VALUES[0], spatial('x,y'))
    for value, expected in composite_cases(t):
        assert math.is_composite(value) is expected, value
    with pytest.raises(ValueError, match=r'is_composite.*object'):
        math.is_composite(object())


@ON_NUMPY
def test_is_composite_agrees_with_phiml(phiml_math):
    t = math.tensor(VALUES[0], spatial('x,y'))
    theirs_t = phiml_math.tensor(VALUES[0], phiml_math.spatial('x,y'))
    shared = [(t, theirs_t), (1, 1), (None, None), ('abc', 'abc'), (VALUES, VALUES), ((t,), (theirs_t,)),
              ({'a': t}, {'a': theirs_t}), (Pair(t), Pair(theirs_t)),
              (math.layout(['a', 'b'], 'i'), phiml_math.layout(['a', 'b'], 'i'))]
    for ours, theirs in shared:
        assert math.is_composite(ours) == phiml_math.is_composite(theirs)


# --- find_differences -----------------------------------------------------------------------------


def kinds_and_paths(differences: list) -> list:
    return [(kind, path) for kind, path, _, _ in differences]


def test_find_differences_reports_each_place_with_its_path():
    t = math.tensor(VALUES[0], spatial('x,y'))
    tree1 = {'a': (t, 1, 'x'), 'b': [t, None], 'c': Pair(t), 'd': Listed(t)}
    tree2 = {'a': (t + 1, 2, 'x'), 'b': [t, t], 'c': Pair(t.x[0]), 'd': Listed(t)}
    found = math.find_differences(tree1, tree2)
    assert kinds_and_paths(found) == [
        ('Tensor values do not match', "[a][0]"), ('Values do not match', '[a][1]'),
        ('Only one tree has a value, other is None', '[b][1]'),
        (f'Tensor shapes do not match: {t.shape} vs {t.x[0].shape}', '[c].a')]
    assert found[0][2] is t and found[1][2:] == (1, 2)
    assert math.find_differences(tree1, tree1) == []


def test_find_differences_of_structures():
    t = math.tensor(VALUES[0], spatial('x,y'))
    assert kinds_and_paths(math.find_differences([t, t], [t])) == [('Lengths do not match: 2 vs 1', '')]
    assert kinds_and_paths(math.find_differences({'a': t}, {'b': t})) == [("Keys do not match: {'a'} vs {'b'}", '')]
    assert kinds_and_paths(math.find_differences(1, 1.)) == [('Types do not match: int vs float', '')]
    assert kinds_and_paths(math.find_differences(t, VALUES[0])) == \
        [(f'Only one value is a Tensor: {type(t).__name__} vs ndarray', '')]
    layout = math.layout(['a', 'b'], 'i')
    assert kinds_and_paths(math.find_differences(layout, math.layout(['a', 'c'], 'i'))) == \
        [('Values do not match', '[1]')]
    assert kinds_and_paths(math.find_differences(layout, ['a', 'b'])) == \
        [('Only one value is a Layout, the other is list', '')]


def test_find_differences_of_tensors_by_value_id_or_own_equality():
    t = math.tensor(np.array([np.nan, 1.], np.float32), spatial('x'))
    same = math.tensor(np.array([np.nan, 1.], np.float32), spatial('x'))
    assert math.find_differences(t, same) == []  # NaN equals NaN
    assert kinds_and_paths(math.find_differences(t, same, compare_tensors_by_id=True)) == \
        [('Tensor ids do not match', '')]
    assert kinds_and_paths(math.find_differences(t, same, tensor_equality=lambda a, b: False)) == \
        [('Tensor values do not match', '')]
    grid = math.tensor(VALUES[0], spatial('x,y'))
    assert math.find_differences(grid, math.transpose(grid, 'y,x')) == []  # the same dims in another order


def test_find_differences_of_natives_of_the_backend(backend):
    a = math.tensor(np.array([np.nan, 1., 2.], np.float32), spatial('x')).native('x')
    b = math.tensor(np.array([np.nan, 1., 2.], np.float32), spatial('x')).native('x')
    c = math.tensor(np.array([np.nan, 1., 3.], np.float32), spatial('x')).native('x')
    d = math.tensor(np.zeros(4, np.float32), spatial('x')).native('x')
    assert math.find_differences(a, b) == []
    assert kinds_and_paths(math.find_differences(a, c)) == [('Values do not match', '')]
    assert kinds_and_paths(math.find_differences([a], [d])) == [('Shapes do not match: (3,) vs (4,)', '[0]')]
    ints = math.tensor(np.arange(3), spatial('x')).native('x')
    assert math.find_differences(ints, math.tensor(np.arange(3), spatial('x')).native('x')) == []


def test_find_differences_attributes_of_dataclasses_and_attribute_lists():
    @dataclasses.dataclass
    class Tracked:
        a: Tensor
        b: Tensor
        variable_attrs: tuple = ('a',)
    t = math.tensor(VALUES[0], spatial('x,y'))
    one, other = Tracked(t, t), Tracked(t, t + 1)
    assert value_attributes(one) == ('a', 'b') and variable_attributes(one) == ('a',)
    assert kinds_and_paths(math.find_differences(one, other)) == [('Tensor values do not match', '.b')]
    assert math.find_differences(one, other, attr_type=variable_attributes) == []
    assert kinds_and_paths(math.find_differences(Pair(t, 'p'), Pair(t, 'q'))) == []  # config fields hold no values
    with pytest.raises(ValueError, match=r'value_attributes.*object'):
        value_attributes(object())


@ON_NUMPY
def test_find_differences_agrees_with_phiml(phiml_math):
    def trees(m, wrap):
        t = wrap(VALUES[0])
        return ({'a': (t, 1, 'x'), 'b': [t, None], 'c': [t, t]},
                {'a': (wrap(VALUES[0] + 1), 2, 'x'), 'b': [t, t], 'c': [t]})
    ours = trees(math, lambda v: math.tensor(v, spatial('x,y')))
    theirs = trees(phiml_math, lambda v: phiml_math.tensor(v, phiml_math.spatial('x,y')))
    assert kinds_and_paths(math.find_differences(*ours)) == kinds_and_paths(phiml_math.find_differences(*theirs))


# --- enable_debug_checks --------------------------------------------------------------------------


@pytest.fixture
def debug_checks(monkeypatch):
    """Checks on for one test: the constructors it replaces are put back afterwards."""
    for cls in (Shape, Dense, math.Expanded):
        monkeypatch.setattr(cls, '__init__', cls.__init__)
    math.enable_debug_checks()
    math.enable_debug_checks()  # a second call adds nothing


def test_debug_checks_catch_broken_shapes_and_tensors(debug_checks):
    with pytest.raises(ValueError, match="dim 'x' has the size -1"):
        Shape((-1,), ('x',), ('spatial',), (None,))
    with pytest.raises(ValueError, match="type 'sideways'"):
        Shape((2,), ('x',), ('sideways',), (None,))
    with pytest.raises(ValueError, match="dim 'v' has size 3 but 2 labels"):
        Shape((3,), ('v',), ('channel',), (('a', 'b'),))
    with pytest.raises(ValueError, match='tuples of one length'):
        Shape((3, 4), ('x',), ('spatial',), (None,))
    with pytest.raises(ValueError, match=r'the native has the axes \(3,\)'):
        Dense(np.zeros(3), spatial(x=4), NUMPY)
    with pytest.raises(ValueError, match='does not lie within'):
        math.Expanded(math.tensor([1., 2.], spatial('x')), batch(b=3))


def test_operations_run_with_debug_checks_on(debug_checks, backend):
    t = math.tensor(VALUES, batch('b'), spatial('x,y'))
    result = math.sum(math.pad(math.expand(t, channel(c='u,v')), {'x': (1, 1)}, 0) ** 2, 'y')
    assert result.shape == batch(b=2) & spatial(x=6) & channel(c='u,v')
    np.testing.assert_allclose(result.c['u'].numpy('b,x')[:, 1:-1], (VALUES ** 2).sum(-1), rtol=1e-5)


def test_without_debug_checks_nothing_is_checked():
    assert Shape((-1,), ('x',), ('spatial',), (None,)).sizes == (-1,)  # the constructor stores what it is given


# --- native_call ----------------------------------------------------------------------------------


@ON_NUMPY
def test_native_call_lays_out_batch_spatial_and_channels_for_numpy_functions():
    data = RNG.standard_normal((2, 4, 3, 2))
    t = math.tensor(data, batch('b'), spatial('x,y'), channel(vector='u,v'))
    scale = math.tensor(data[0, :, :, 0], spatial('x,y'))
    seen = []

    def record(x, y):
        seen.append((x.shape, y.shape))
        return x * y
    result = math.native_call(record, t, scale, channels_last=True)
    assert seen == [((2, 4, 3, 2), (2, 4, 3, 1))]  # the batch repeated for the input without it
    assert result.shape == batch(b=2) & spatial(x=4, y=3) & channel(vector=2)
    np.testing.assert_allclose(result.numpy('b,x,y,vector'), data * data[0, :, :, 0][None, :, :, None])
    first = math.native_call(lambda x: (seen.append(x.shape), x)[1], t, channels_last=False)
    assert seen[-1] == (2, 2, 4, 3)
    np.testing.assert_array_equal(first.numpy('b,x,y,vector'), data)


@ON_NUMPY
def test_native_call_names_results_by_their_axes():
    data = RNG.standard_normal((2, 4, 3, 2))
    t = math.tensor(data, batch('b'), spatial('x,y'), channel(vector='u,v'))
    summed = math.native_call(lambda x: x.sum(axis=(1, 2)), t, channels_last=True)
    assert summed.shape == batch(b=2) & channel(vector=2)
    np.testing.assert_allclose(summed.numpy('b,vector'), data.sum(axis=(1, 2)))
    total = math.native_call(lambda x: x.sum(axis=(1, 2, 3)), t, channels_last=True)
    assert total.shape == batch(b=2)
    cut = math.native_call(lambda x: x[:, 1:], t, channels_last=True)  # sizes come from the result
    assert cut.shape == batch(b=2) & spatial(x=3, y=3) & channel(vector=2)
    along_k = math.native_call(lambda x: x[:, 0], t, channels_last=True, spatial_dim='k')
    assert along_k.shape == batch(b=2) & spatial(k=3) & channel(vector=2)
    labelled = math.native_call(lambda x: x, t, channels_last=True, channel_dim=channel(c='p,q'))
    assert labelled.shape.get_labels('c') == ('p', 'q')
    flat = math.native_call(lambda x: x[..., 0], t, channels_last=True, channel_dim=None)
    assert flat.shape == batch(b=2) & spatial(x=4, y=3)
    scalar = math.native_call(lambda x: x, math.tensor(VALUES[0, 0, 0], ()))
    assert scalar.shape.rank == 0 and float(scalar) == pytest.approx(float(VALUES[0, 0, 0]))
    pair = math.native_call(lambda x: (x, 2 * x), t, channels_last=True)
    math.assert_close(pair[1], 2 * pair[0])


@ON_NUMPY
def test_native_call_packs_batch_and_dual_dims_and_channels():
    data = RNG.standard_normal((2, 3, 4, 5))
    t = math.tensor(data, batch('b'), dual('k'), spatial('x'), channel('c'))
    seen = []
    result = math.native_call(lambda x: (seen.append(x.shape), x)[1], t, channels_last=True)
    assert seen == [(6, 4, 5)]
    assert result.shape == batch(b=2) & dual(k=3) & spatial(x=4) & channel(vector=5)
    np.testing.assert_array_equal(result.numpy('b,~k,x,vector'), data)


@ON_NUMPY
def test_native_call_rejects_what_has_no_axis():
    t = math.tensor(VALUES, batch('b'), spatial('x'), instance('i'))
    with pytest.raises(ValueError, match='instance dims'):
        math.native_call(lambda x: x, t)
    ragged = math.stack([math.tensor([1, 2, 3], spatial('x')), math.tensor([4, 5], spatial('x'))], batch('b'))
    with pytest.raises(ValueError, match='non-uniform'):
        math.native_call(lambda x: x, ragged)
    with pytest.raises(TypeError, match='pass tensors'):
        math.native_call(lambda x: x, VALUES)
    with pytest.raises(math.IncompatibleShapes, match=r'native_call.*channel_dim'):
        math.native_call(lambda x: x[..., 0], math.tensor(VALUES, batch('b'), spatial('x,y')))


def test_native_call_hands_the_backends_own_arrays_to_its_functions(backend):
    data = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    t = math.tensor(data, batch('b'), spatial('x,y'), channel('c'))
    if backend.name == 'numpy':
        result = math.native_call(lambda x: np.flip(x, axis=1), t)
        expected = np.flip(data, 1)
    elif backend.name == 'torch':
        import torch
        kernel = np.zeros((4, 3, 3, 3), np.float32)
        kernel[:, :, 1, 1] = RNG.standard_normal((4, 3))
        result = math.native_call(torch.nn.functional.conv2d, t, weight=torch.tensor(kernel), padding=1)
        expected = np.einsum('bxyc,oc->bxyo', data, kernel[:, :, 1, 1])
    elif backend.name == 'jax':
        import jax
        result = math.native_call(lambda x: jax.nn.softmax(x, axis=-1), t)
        expected = np.exp(data) / np.exp(data).sum(-1, keepdims=True)
    else:
        import tensorflow as tf
        kernel = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
        result = math.native_call(tf.nn.conv2d, t, filters=tf.constant(kernel), strides=1, padding='SAME')
        expected = np.einsum('bxyc,co->bxyo', data, kernel[0, 0])
    assert result.backend is backend
    assert result.shape.non_channel == batch(b=2) & spatial(x=6, y=6)
    np.testing.assert_allclose(result.numpy('b,x,y,vector'), expected, rtol=1e-4, atol=1e-5)


def test_native_call_sends_numpy_inputs_to_the_default_backend(backend):
    t = math.tensor(VALUES, batch('b'), spatial('x,y'), convert=False)
    assert t.backend is NUMPY
    types = []
    math.native_call(lambda x: (types.append(type(x)), x)[1], t)
    assert type(backend.as_tensor(np.zeros(1))) is types[0]


@ON_NUMPY
def test_native_call_equals_phimls(phiml_math):
    data = RNG.standard_normal((2, 4, 3, 2)).astype(np.float32)  # phiml casts to the precision's float32
    ours = math.native_call(lambda x: np.cumsum(x, 1), math.tensor(data, batch('b'), spatial('x,y'), channel('c')),
                            channels_last=True)
    theirs = phiml_math.native_call(lambda x: np.cumsum(x, 1), phiml_math.tensor(
        data, phiml_math.batch('b'), phiml_math.spatial('x,y'), phiml_math.channel('c')), channels_last=True)
    assert ours.shape.names == theirs.shape.names
    np.testing.assert_allclose(ours.numpy('b,x,y,vector'), theirs.numpy('b,x,y,vector'))


# --- pad_to_uniform -------------------------------------------------------------------------------


def ragged_tensor(lengths: list, dtype=np.float32):
    parts = [math.tensor(np.arange(1, n + 1, dtype=dtype), spatial('x')) for n in lengths]
    return math.stack(parts, batch('b'))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(0, 3), st.sampled_from([0, -1.5]))
def test_pad_to_uniform_fills_the_end_of_each_part(lengths, extra, pad_value):
    target = max(lengths) + extra
    padded = math.pad_to_uniform(ragged_tensor(lengths), spatial(x=target) if extra else math.EMPTY_SHAPE, pad_value)
    expected = np.full((len(lengths), target), pad_value, np.float32)
    for i, n in enumerate(lengths):
        expected[i, :n] = np.arange(1, n + 1)
    assert padded.shape == batch(b=len(lengths)) & spatial(x=target) and padded.shape.is_uniform
    np.testing.assert_array_equal(padded.numpy('b,x'), expected)


def test_pad_to_uniform_in_several_dims_and_with_uniform_dims_kept():
    parts = [math.ones(spatial(x=2, y=3), channel(c=2)), 2 * math.ones(spatial(x=3, y=1), channel(c=2))]
    padded = math.pad_to_uniform(math.stack(parts, instance('i')), spatial(y=4))
    assert padded.shape == instance(i=2) & spatial(x=3, y=4) & channel(c=2)
    expected = np.zeros((2, 3, 4, 2), np.float32)
    expected[0, :2, :3] = 1
    expected[1, :3, :1] = 2
    np.testing.assert_array_equal(padded.numpy('i,x,y,c'), expected)


def test_pad_to_uniform_of_a_uniform_tensor_pads_to_the_target(backend):
    t = math.tensor(np.arange(3), spatial('x'))
    assert math.pad_to_uniform(t) is t
    padded = math.pad_to_uniform(t, spatial(x=5), pad_value=9)
    assert padded.backend is backend
    np.testing.assert_array_equal(padded.numpy('x'), [0, 1, 2, 9, 9])  # phiml pads uniform tensors with 0 only


def test_pad_to_uniform_rejects_targets_that_cut_or_name_other_dims():
    ragged = ragged_tensor([3, 2])
    with pytest.raises(ValueError, match=r"dim 'x' has up to 3 entries.*size 2"):
        math.pad_to_uniform(ragged, spatial(x=2))
    with pytest.raises(ValueError, match=r"names dims \['z'\]"):
        math.pad_to_uniform(ragged, spatial(z=4))
    with pytest.raises(TypeError, match='takes a Tensor'):
        math.pad_to_uniform([1, 2])


@ON_NUMPY
def test_pad_to_uniform_equals_phimls(phiml_math):
    ours = math.pad_to_uniform(ragged_tensor([3, 1, 2], np.int64), spatial(x=4), pad_value=-1)
    theirs = phiml_math.pad_to_uniform(phiml_math.stack(
        [phiml_math.tensor(np.arange(1, n + 1), phiml_math.spatial('x')) for n in (3, 1, 2)],
        phiml_math.batch('b')), phiml_math.spatial(x=4), pad_value=-1)
    np.testing.assert_array_equal(ours.numpy('b,x'), theirs.numpy('b,x'))


# --- print_gradient -------------------------------------------------------------------------------


def test_print_gradient_prints_the_gradient_in_the_backward_pass(backend, capsys):
    x = math.tensor(np.array([1., 2., 3.], np.float32), spatial('x'))
    if not backend.supports('jacobian'):
        assert math.print_gradient(x, 'dx') is x  # NumPy has no backward pass: the value itself, as in phiml
        return

    def loss(x):
        return math.l2_loss(math.print_gradient(x, 'dx') * 2)
    grad = math.gradient(loss, 'x', get_output=False)(x)
    np.testing.assert_allclose(grad.numpy('x'), [4., 8., 12.])
    assert capsys.readouterr().out == f'dx: {grad}\n'

    def detailed(x):
        return math.l2_loss(math.print_gradient(x, 'dx', detailed=True) * 2)
    math.gradient(detailed, 'x', get_output=False)(x)
    out = capsys.readouterr().out
    assert out.startswith('dx: (xˢ=3) float32') and '4.' in out and '12.' in out


def test_print_gradient_inside_jit_prints_after_each_call(backend, capsys):
    if not backend.supports('jacobian'):
        pytest.skip(f'{backend.name} has no backward pass')

    def loss(x):
        return math.l2_loss(math.print_gradient(x) * 3)
    compiled = math.jit_compile(math.gradient(loss, 'x', get_output=False))
    for offset in (0., 1.):
        x = math.tensor(np.array([1., 2.], np.float32) + offset, spatial('x'))
        grad = compiled(x)
        np.testing.assert_allclose(grad.numpy('x'), 9 * x.numpy('x'))
        assert capsys.readouterr().out == f'{grad}\n'


def test_print_gradient_of_numpy_values_under_a_differentiating_default(backend, capsys):
    if not backend.supports('jacobian'):
        pytest.skip(f'{backend.name} has no backward pass')
    x = math.tensor(np.array([1., 2.], np.float32), spatial('x'), convert=False)
    grad = math.gradient(lambda x: math.sum(math.print_gradient(x, 'g') ** 2), 'x', get_output=False)(x)
    np.testing.assert_allclose(grad.numpy('x'), [2., 4.])
    assert capsys.readouterr().out.startswith('g: ')
    with pytest.raises(TypeError, match='takes a Tensor'):
        math.print_gradient(np.ones(2))


# --- DimFilter and magic --------------------------------------------------------------------------


def test_dim_filter_names_the_accepted_forms_and_sets_are_filters():
    assert {str, set, Shape, type(None)} <= set(math.DimFilter.__args__)
    t = math.tensor(VALUES, batch('b'), spatial('x,y'))
    math.assert_close(math.sum(t, {'x', 'y'}), math.sum(t, 'x,y'))
    packed = math.pack_dims(t, {'y', 'x'}, instance('p'))  # a set takes the order of the shape
    np.testing.assert_array_equal(packed.numpy('b,p'), VALUES.reshape(2, 12))


def test_magic_is_an_attribute_after_importing_the_package():
    code = 'import lazyphi.math; print(lazyphi.math.magic.PhiTreeNode.__name__)'
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == 'PhiTreeNode'
