"""close, equal, always_close and assert_close, on every backend."""

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import Tensor, batch, spatial

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def test_close_reduces_all_dims_to_a_bool_or_keeps_some():
    a = wrap([1., 2., 3.], spatial('x'))
    assert math.close(a, a + 1e-6) is True and math.close(a, a + 1) is False
    per_x = math.close(a, wrap([1., 2.5, 3.], spatial('x')), reduce=None)
    assert per_x.numpy('x').tolist() == [True, False, True]
    tolerance = wrap([0, 1], batch('b'))
    assert math.close(0, 0.1, abs_tolerance=tolerance, reduce=None).numpy('b').tolist() == [False, True]
    assert math.close(wrap([1, 2], spatial('x')), wrap([1, 2, 3], spatial('x'))) is False  # incompatible shapes
    assert math.close(None, None) and not math.close(None, a)
    assert math.close(wrap([np.nan], spatial('x')), np.nan, equal_nan=True)
    assert not math.close(wrap([np.nan], spatial('x')), np.nan)


def test_close_on_non_uniform_tensors():
    t = math.stack([math.zeros(spatial(x=4)), math.zeros(spatial(x=3))], batch('s'))
    assert math.close(t, t + 0) and not math.close(t, t + 1)
    assert math.close(t, 0, reduce='x').numpy('s').tolist() == [True, True]


def test_equal_compares_values_or_objects():
    assert math.equal(1, 1) and math.equal(1., wrap(1)) and math.equal(None, None)
    assert math.equal('a', 'a') and not math.equal('a', 'b')
    with math.precision(64):
        assert not math.equal(1., 1.000000001)


def test_always_close_inside_a_compiled_function_compares_references():
    results = []

    @math.jit_compile
    def f(x, y):
        results.append((math.always_close(x, x), math.always_close(x, math.wrap(x.native())),
                        math.always_close(x, y), math.always_close(x, 0)))
        return x
    f(wrap(0.), wrap(0.))
    compiles = default_backend().supports('jit_compile')
    assert results[0] == ((True, True, False, False) if compiles else (True, True, True, True))
    assert not math.always_close(math.vec(x=0), math.vec(x=0, y=1))


def test_assert_close_explains_the_largest_difference():
    a = wrap([[1., 2.], [3., 4.]], batch('b'), spatial('x'))
    math.assert_close(a, a + 1e-7, a * (1 + 1e-7))
    with pytest.raises(AssertionError, match=r"largest difference 0\.5.*'b': 1, 'x': 0"):
        math.assert_close(a, a + wrap([[0., 0.], [0.5, 0.]], batch('b'), spatial('x')))
    math.assert_close((a, {'k': a}), (a * 1, {'k': a + 0}))
    with pytest.raises(AssertionError, match='structure'):
        math.assert_close((a, a), (a,))
    math.assert_close(np.asarray([1, 2]), np.asarray([1, 2]), [1, 2])
    non_uniform = math.stack([math.ones(spatial(x=2)), math.ones(spatial(x=1))], batch('s'))
    math.assert_close(non_uniform, 1)
    with pytest.raises(AssertionError, match='non-uniform part s=0'):
        math.assert_close(non_uniform, 2)
