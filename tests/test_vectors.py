"""Norms, normalising, cross products, softmax and losses against NumPy, on every backend."""

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import Tensor, batch, channel, spatial

pytestmark = pytest.mark.usefixtures('backend')
VECTORS = np.asarray([[3., 4.], [0., 0.], [-1., 2.]])


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def vectors() -> Tensor:
    return wrap(VECTORS, batch('b'), channel(vector='x,y'))


def test_norms_along_the_channel_dims():
    lengths = np.linalg.norm(VECTORS, axis=1)
    np.testing.assert_allclose(math.norm(vectors()).numpy('b'), lengths, rtol=1e-6)
    np.testing.assert_allclose(math.vec_length(vectors()).numpy('b'), lengths, rtol=1e-6)
    np.testing.assert_allclose(math.squared_norm(vectors()).numpy('b'), lengths ** 2, rtol=1e-6)
    # phiml's rule, from its test__nd.py: the squared length is at least eps; below eps ** 2 afterwards (eps > 1) 0
    np.testing.assert_allclose(math.norm(vectors(), eps=0.01).numpy('b'), [5, 0.1, np.sqrt(5)], rtol=1e-6)
    np.testing.assert_allclose(math.norm(vectors(), eps=1).numpy('b'), [5, 1, np.sqrt(5)], rtol=1e-6)
    np.testing.assert_allclose(math.norm(vectors(), eps=3).numpy('b'), [5, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(math.norm(math.wrap(1 + 1j), eps=0.01).numpy(), np.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(math.norm(vectors(), 'b').numpy('vector'), np.linalg.norm(VECTORS, axis=0), rtol=1e-6)


def test_normalize_with_and_without_epsilon():
    with np.errstate(invalid='ignore'):
        plain = math.normalize(vectors()).numpy('b,vector')
    np.testing.assert_allclose(plain[0], [0.6, 0.8], rtol=1e-6)
    assert np.isnan(plain[1]).all()
    assert math.normalize(vectors(), epsilon=1e-3).numpy('b,vector')[1].tolist() == [1, 0]
    assert math.vec_normalize(vectors(), epsilon=1e-3, allow_zero=True).numpy('b,vector')[1].tolist() == [0, 0]
    infinite = math.normalize(wrap([[np.inf, 1.]], batch('b'), channel('vector')), allow_infinite=True)
    assert infinite.numpy('b,vector').tolist() == [[1, 0]]


def test_clip_length_keeps_directions():
    clipped = math.clip_length(vectors(), 1, 2)
    np.testing.assert_allclose(math.norm(clipped).numpy('b'), [2, 0, 2], rtol=1e-6)
    np.testing.assert_allclose(clipped.numpy('b,vector')[0], [1.2, 1.6], rtol=1e-6)


def test_softmax_sums_to_one_without_overflow():
    x = wrap([[1000., 1001.], [0., 0.]], batch('b'), channel('c'))
    result = math.softmax(x, 'c')
    np.testing.assert_allclose(result.numpy('b,c'), [[1 / (1 + np.e), np.e / (1 + np.e)], [.5, .5]], rtol=1e-6)


def test_cross_products_in_2d_and_3d():
    a, c = wrap([1., 2.], channel(vector='x,y')), wrap([3., 4.], channel(vector='x,y'))
    assert float(math.cross_product(a, c)) == -2
    u = wrap([1., 0., 0.], channel(vector='x,y,z'))
    v = wrap([0., 1., 0.], channel(vector='x,y,z'))
    assert math.cross(u, v).numpy('vector').tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match='2 or 3'):
        math.cross_product(wrap([1.], channel('vector')), wrap([1.], channel('vector')))


def test_losses_sum_over_non_batch_dims_and_trees():
    x = wrap([[1., -2.], [3., 0.]], batch('b'), channel('c'))
    assert math.l1_loss(x).numpy('b').tolist() == [3, 3]
    assert math.l2_loss(x).numpy('b').tolist() == [2.5, 4.5]
    assert float(math.l2_loss({'a': wrap(2.), 'b': (wrap(1.),)})) == 2.5
    assert float(math.l2_loss(wrap(1j))) == 0.5


def rotation(values) -> Tensor:
    with pytest.warns(DeprecationWarning, match='deprecated in phiml'):
        return math.rotation_matrix(values)


def test_rotation_matrices_in_2d_and_3d_as_phiml_builds_them():
    angles = wrap([0., np.pi / 2, 0.3], batch('b'))
    matrices = rotation(angles)
    c, s = np.cos(0.3), np.sin(0.3)
    np.testing.assert_allclose(matrices.numpy('b,vector,~vector')[2], [[c, -s], [s, c]], atol=1e-6)
    axis = wrap([0., 0., np.pi / 2], channel(vector='x,y,z'))  # a quarter turn about z
    np.testing.assert_allclose(rotation(axis).numpy('vector,~vector'), [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-6)
    assert rotation(axis).shape.get_labels('~vector') == ('x', 'y', 'z')
    np.testing.assert_allclose(rotation(axis * 0).numpy('vector,~vector'), np.eye(3), atol=1e-6)  # no axis: identity
    euler = wrap([0.1, 0.2, 0.3], channel(angle='x,y,z'))  # about x, then y, then z
    rx = np.array([[1, 0, 0], [0, np.cos(.1), -np.sin(.1)], [0, np.sin(.1), np.cos(.1)]])
    ry = np.array([[np.cos(.2), 0, np.sin(.2)], [0, 1, 0], [-np.sin(.2), 0, np.cos(.2)]])
    rz = np.array([[np.cos(.3), -np.sin(.3), 0], [np.sin(.3), np.cos(.3), 0], [0, 0, 1]])
    np.testing.assert_allclose(rotation(euler).numpy('vector,~vector'), rz @ ry @ rx, atol=1e-6)
    phiml = pytest.importorskip('phiml.math')
    with pytest.warns(DeprecationWarning):
        expected = phiml.rotation_matrix(phiml.vec('angle', x=0.1, y=0.2, z=0.3)).numpy('vector,~vector')
    np.testing.assert_allclose(rotation(euler).numpy('vector,~vector'), expected, atol=1e-6)


def test_rotate_vector_and_back():
    v = wrap([[1., 0.], [0., 2.]], batch('b'), channel(vector='x,y'))
    with pytest.warns(DeprecationWarning):
        turned = math.rotate_vector(v, np.pi / 2)
    np.testing.assert_allclose(turned.numpy('b,vector'), [[0, 1], [-2, 0]], atol=1e-6)
    with pytest.warns(DeprecationWarning):
        back = math.rotate_vector(turned, np.pi / 2, invert=True)
    np.testing.assert_allclose(back.numpy('b,vector'), v.numpy('b,vector'), atol=1e-6)
    with pytest.warns(DeprecationWarning):
        assert math.rotate_vector(v, None) is v
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match=r'is 3D but the vector .* is 2D'):
        math.rotate_vector(v, wrap([0., 0., 1.], channel(vector='x,y,z')))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match='needs a channel dim "vector"'):
        math.rotate_vector(wrap([1., 0.], spatial('x')), 0.5)
