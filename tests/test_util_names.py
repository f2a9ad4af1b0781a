"""`copy` and `print_gradient`, on every backend, against NumPy and phiml."""

import warnings

import numpy as np
import pytest

from lazyphi import math
from lazyphi.math import batch, spatial

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
