"""iterate, map, broadcast, map_types and perf_counter, on every backend."""

import time

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import DType, default_backend
from lazyphi.math import Tensor, batch, channel, spatial

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def test_iterate_to_the_final_state_or_along_a_trajectory():
    assert float(math.iterate(lambda x, fac: x * fac, 3, wrap(1.), fac=2.)) == 8
    trajectory = math.iterate(lambda x: x * 2, batch(t=3), wrap(1.))
    assert trajectory.numpy('t').tolist() == [1, 2, 4, 8]
    assert math.iterate(lambda x: x + 1, 0, 5) == 5


def test_iterate_passes_on_only_as_many_values_as_it_started_with():
    x, one = math.iterate(lambda x: (x + 1, x * 0 + 1), spatial(t=4), wrap(0))
    assert x.numpy('t').tolist() == [0, 1, 2, 3, 4] and one.numpy('t').tolist() == [1, 1, 1, 1]
    without_start = math.iterate(lambda x: 0 if x is None else x + 1, spatial(t=3), None)
    assert without_start.numpy('t').tolist() == [0, 1, 2]


def test_iterate_with_substeps_and_measure():
    final, elapsed = math.iterate(lambda x: x + 1, 3, wrap(0), substeps=2, measure=time.perf_counter)
    assert int(final) == 6 and isinstance(elapsed, float) and elapsed >= 0
    trajectory, steps = math.iterate(lambda x: x + 1, batch(t=2), wrap(0), substeps=2, measure=time.perf_counter)
    assert trajectory.numpy('t').tolist() == [0, 2, 4]
    assert steps.shape == batch(t=2) and steps.dtype == DType(float, 64)
    with pytest.raises(ValueError, match='substeps'):
        math.iterate(lambda x: x, 2, 0, substeps=0)
    with pytest.raises(ValueError, match='iterations'):
        math.iterate(lambda x: x, -1, 0)


def test_map_calls_per_slice_and_stacks():
    calls = []

    def f(x, y):
        calls.append((x, y))
        return x + y
    x, y = wrap([0, 1], spatial('x')), wrap([2, 4], spatial('y'))
    result = math.map(f, x, y)
    assert result.numpy('x,y').tolist() == [[2, 4], [3, 5]] and len(calls) == 4
    assert all(isinstance(a, (int, float)) for call in calls for a in call)  # scalar slices are unwrapped
    calls.clear()
    assert math.map(f, x=x, y=y, dims=x.shape).numpy('x,y').tolist() == [[2, 4], [3, 5]] and len(calls) == 2
    first, second = math.map(lambda a: (a, -a), x)
    assert first.numpy('x').tolist() == [0, 1] and second.numpy('x').tolist() == [0, -1]
    assert math.map(lambda a: None, x) is None


def test_broadcast_decorates_a_function_of_single_values():
    @math.broadcast(dims=channel)
    def describe(v):
        return len(str(v))
    assert describe(wrap([5, 10, 100], channel('c'))).numpy('c').tolist() == [1, 2, 3]
    lengths = math.broadcast(lambda v: v.shape.get_size('x'), dims=batch)
    non_uniform = math.stack([wrap([1, 2], spatial('x')), wrap([1, 2, 3], spatial('x'))], batch('b'))
    assert lengths(non_uniform).numpy('b').tolist() == [2, 3]


def test_map_types_shows_other_dim_types_inside():
    def f(x):
        assert x.shape.batch.names == ('b', 'x')
        return x * 2
    x = wrap(np.ones((2, 3)), batch('b'), spatial('x'))
    result = math.map_types(f, spatial, batch)(x)
    assert result.shape == x.shape
    result = math.map_s2b(f)(x)
    assert result.shape.get_type('x') == 'spatial'


def test_perf_counter_waits_for_the_values():
    t0 = math.perf_counter(wrap([1., 2.], spatial('x')))
    assert t0.dtype == DType(float, 64) and t0.shape.rank == 0
    assert float(math.perf_counter(wrap(0.)) - t0) >= 0
