"""Property code runs on tracers once per class and input structure, whatever slices and plans ask (issue #34).

Slicing an instance holding cached values and `plan()` learn which dims a property mixes by running
its body on tracers. Each body counts here how often it ran on tracers (`math.is_tracing()`) and for
real, so that the tests can say exactly how often lazyphi ran user code the user did not ask for.
"""

import collections
import concurrent.futures
import dataclasses
import threading

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend

from lazyphi import math
from lazyphi.dataclasses import cached_property, cached_values, sliceable
from lazyphi.math import Tensor, batch, channel, instance
from lazyphi.parallel import Tracer, parallel_compute, plan


def counted(calls: collections.Counter, name: str) -> None:
    """Count a run of `name` in `calls`, which the cache key then takes for state (a counter), not a value."""
    key = ('traced' if math.is_tracing() else 'real', name)
    calls[key] += 1


def runs(calls: collections.Counter, kind: str) -> dict:
    return {name: n for (k, name), n in calls.items() if k == kind}


def swarm_class():
    """A fresh class (its own counters and analyses) whose properties read each other in several ways."""
    calls = collections.Counter()
    seen = {}  # what `kinetic_energy` found in self.speed, the last time it ran

    def norm(value):  # a module-level-like helper the properties call
        counted(calls, 'norm')
        return math.sqrt(math.sum(value ** 2, 'vector'))

    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Swarm:
        position: Tensor  # (run, points, vector)
        velocity: Tensor  # (run, points, vector)
        mass: float = 1.0

        @cached_property
        def speed(self) -> Tensor:
            counted(calls, 'speed')
            return norm(self.velocity)

        @cached_property
        def kinetic_energy(self) -> Tensor:  # reads speed: traced on speed's traced output
            counted(calls, 'kinetic_energy')
            seen['speed'] = self.speed
            return math.sum(0.5 * self.mass * self.speed ** 2, 'points')

        @cached_property
        def speed_squared(self) -> Tensor:  # reads speed twice
            counted(calls, 'speed_squared')
            return self.speed * self.speed

        @cached_property
        def relative_speed(self) -> Tensor:  # reads speed through a helper method; mixes runs
            counted(calls, 'relative_speed')
            return self._ratio()

        def _ratio(self) -> Tensor:
            return self.speed / math.mean(self.speed, 'run')

        @cached_property
        def centre(self) -> Tensor:
            counted(calls, 'centre')
            return math.mean(self.position, 'points')

    return Swarm, calls, seen


PROPERTIES = ('speed', 'kinetic_energy', 'speed_squared', 'relative_speed', 'centre')


def make(cls, seed: int, runs_: int = 3, points: int = 5, backend=None, dtype=np.float32):
    rng = np.random.default_rng(seed)
    dims = batch(run=runs_), instance(points=points), channel(vector='x,y')

    def field():
        values = rng.normal(size=(runs_, points, 2)).astype(dtype)
        return math.tensor(values if backend is None else backend.as_tensor(values), *dims)
    return cls(field(), field())


def compute_all(obj) -> None:
    for name in PROPERTIES:
        getattr(obj, name)


# NumPy takes ~2 s; the other libraries' tensor creation and conversions take several times longer
BACKENDS = [p if p.values[0] == 'numpy' else pytest.param(*p.values, id=p.id, marks=(*p.marks, pytest.mark.slow))
            for p in BACKEND_NAMES]


@pytest.mark.parametrize('backend', BACKENDS)
def test_100_slices_and_10_plans_run_each_property_body_on_tracers_once_in_all(backend):
    Swarm, calls, _ = swarm_class()
    b = get_backend(backend)
    first = make(Swarm, 0, backend=b)
    compute_all(first)
    assert runs(calls, 'traced') == {}  # computing runs the code for real, never on tracers
    assert runs(calls, 'real') == {**dict.fromkeys(PROPERTIES, 1), 'norm': 1}
    for i in range(100):
        obj = make(Swarm, i + 1, backend=b)
        compute_all(obj)
        dim = ('run', 'points')[i % 2]
        sliced = obj[{dim: i % 3}]
        kept = set(cached_values(sliced))
        if dim == 'run':  # relative_speed mixes runs: dropped; the others are element-wise along run
            assert kept == {'speed', 'kinetic_energy', 'speed_squared', 'centre'}
        else:  # kinetic_energy and centre reduce points; the sliced cache keeps only the others
            assert kept == {'speed', 'speed_squared', 'relative_speed'}
        for name in kept:  # carried values are the slices of the computed ones
            np.testing.assert_array_equal(getattr(sliced, name).numpy(), getattr(obj, name)[{dim: i % 3}].numpy())
    requested = [('kinetic_energy',), ('centre', 'kinetic_energy'), ('speed_squared',), ('relative_speed', 'speed'),
                 PROPERTIES]
    for i in range(10):
        obj = make(Swarm, 1000 + i, backend=b)
        p = plan(obj, [getattr(Swarm, n) for n in requested[i % 5]], parallel_dims=('run', batch, 'run,points')[i % 3])
        assert not p.fallbacks
    assert runs(calls, 'traced') == {**dict.fromkeys(PROPERTIES, 1), 'norm': 1}


def test_a_dependent_property_is_traced_on_the_traced_output_of_the_property_it_reads():
    Swarm, calls, seen = swarm_class()
    p = plan(make(Swarm, 0), [Swarm.kinetic_energy], parallel_dims='run')
    assert isinstance(seen['speed'], Tracer)
    assert seen['speed'].shape == batch(run=3) & instance(points=5)
    assert runs(calls, 'traced') == {'speed': 1, 'kinetic_energy': 1, 'norm': 1}
    assert p.properties['kinetic_energy'].output.shape == batch(run=3)
    assert p.properties['kinetic_energy'].output.dtype == math.DType(float, 32)
    plan(make(Swarm, 1), [Swarm.speed_squared, Swarm.relative_speed], parallel_dims='run')  # speed: analysed
    assert runs(calls, 'traced') == {'speed': 1, 'kinetic_energy': 1, 'speed_squared': 1, 'relative_speed': 1,
                                     'norm': 1}


def test_a_new_shape_or_dtype_is_analysed_again_and_planned_for_what_it_is():
    Swarm, calls, _ = swarm_class()
    plan(make(Swarm, 0), [Swarm.kinetic_energy], parallel_dims='run')
    assert runs(calls, 'traced') == {'speed': 1, 'kinetic_energy': 1, 'norm': 1}
    wider = plan(make(Swarm, 1, runs_=7), [Swarm.kinetic_energy], parallel_dims='run')
    assert runs(calls, 'traced') == {'speed': 2, 'kinetic_energy': 2, 'norm': 2}
    assert wider.properties['kinetic_energy'].output.shape == batch(run=7)
    double = plan(make(Swarm, 2, dtype=np.float64), [Swarm.kinetic_energy], parallel_dims='run')
    assert runs(calls, 'traced') == {'speed': 3, 'kinetic_energy': 3, 'norm': 3}
    assert double.properties['kinetic_energy'].output.dtype == math.DType(float, 64)
    heavier = plan(dataclasses.replace(make(Swarm, 3), mass=2.0), [Swarm.kinetic_energy], parallel_dims='run')
    # the config values a property reads are part of its input structure: speed does not read the mass
    assert runs(calls, 'traced') == {'speed': 3, 'kinetic_energy': 4, 'norm': 3}
    assert heavier.properties['kinetic_energy'].output.shape == batch(run=3)


def test_plans_and_results_after_slicing_equal_those_without():
    Swarm, _, _ = swarm_class()
    fresh = plan(make(Swarm, 0), list(PROPERTIES), parallel_dims='run')
    Other, _, _ = swarm_class()  # the same code: analysed by slicing first, then planned
    obj = make(Other, 0)
    compute_all(obj)
    obj[{'run': 0}], obj[{'points': 1}]
    again = plan(make(Other, 0), list(PROPERTIES), parallel_dims='run')
    assert str(again).replace('Other', 'Swarm') == str(fresh)
    assert again.properties['relative_speed'].requires == {'run'}
    assert not again.properties['kinetic_energy'].requires
    target = make(Other, 5)
    parallel_compute(target, list(PROPERTIES), parallel_dims='run', scheduler='sync', progress=False)
    reference = make(Swarm, 5)
    for name in PROPERTIES:
        math.assert_close(getattr(target, name), getattr(reference, name), rel_tolerance=1e-6, abs_tolerance=0)


def test_is_tracing_is_true_only_while_property_code_runs_on_tracers():
    states = []

    @dataclasses.dataclass(frozen=True)
    class Probe:
        data: Tensor

        @cached_property
        def doubled(self) -> Tensor:
            states.append(math.is_tracing())
            return self.data * 2

    assert not math.is_tracing()
    assert Probe(math.ones(batch(b=2))).doubled.shape == batch(b=2)
    plan(Probe(math.ones(batch(b=2))), [Probe.doubled])
    assert states == [False, True]
    assert not math.is_tracing()


def test_a_property_whose_reads_are_unknown_sees_the_others_traced_outputs():
    calls = collections.Counter()

    def through(obj):  # self escapes the dependency analysis: it may read anything
        return obj.base * 3

    @dataclasses.dataclass(frozen=True)
    class Escaping:
        data: Tensor

        @cached_property
        def base(self) -> Tensor:
            counted(calls, 'base')
            return math.sum(self.data, 'x')

        @cached_property
        def escaping(self) -> Tensor:
            counted(calls, 'escaping')
            return through(self)

    data = math.ones(batch(b=4), instance(x=3))
    p = plan(Escaping(data), [Escaping.escaping])
    assert p.properties['escaping'].output.shape == batch(b=4)
    plan(Escaping(data), [Escaping.base, Escaping.escaping])
    assert runs(calls, 'traced') == {'base': 1, 'escaping': 1}


def test_len_of_a_vector_along_a_dim_not_split_goes_on_in_plans_and_slices():
    calls = collections.Counter()

    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Weighted:
        data: Tensor  # (b, x)
        weights: Tensor  # (x,)

        @cached_property
        def mean(self) -> Tensor:
            counted(calls, 'mean')
            return math.sum(self.data * self.weights, 'x') / len(self.weights)

    obj = Weighted(math.random_normal(batch(b=4), instance(x=3)), math.ones(instance(x=3)))
    p = plan(obj, [Weighted.mean])
    assert p.properties['mean'].mode == 'block' and not p.fallbacks
    assert p.properties['mean'].output.shape == batch(b=4)
    assert obj.mean.shape == batch(b=4)
    sliced = obj[{'b': 1}]
    assert 'mean' in cached_values(sliced)  # element-wise along b: carried
    np.testing.assert_array_equal(sliced.mean.numpy(), obj.mean.b[1].numpy())
    assert 'mean' not in cached_values(obj[{'x': 1}])  # len() of a value along x: not provably element-wise


def test_threads_slicing_new_instances_at_once_analyse_each_property_once():
    Swarm, calls, _ = swarm_class()
    objects = [make(Swarm, i) for i in range(8)]
    for obj in objects:
        compute_all(obj)
    barrier = threading.Barrier(len(objects), timeout=60)

    def slice_one(obj):
        barrier.wait()
        return set(cached_values(obj[{'run': 0}]))

    with concurrent.futures.ThreadPoolExecutor(len(objects)) as pool:
        kept = list(pool.map(slice_one, objects))
    assert kept == [{'speed', 'kinetic_energy', 'speed_squared', 'centre'}] * len(objects)
    assert runs(calls, 'traced') == {**dict.fromkeys(PROPERTIES, 1), 'norm': 1}


def test_plan_analyses_again_when_a_helper_the_property_calls_was_redefined():
    calls = collections.Counter()

    def helper(x):
        return x * 2

    @dataclasses.dataclass(frozen=True)
    class Scaled:
        data: Tensor

        @cached_property
        def scaled(self) -> Tensor:
            counted(calls, 'scaled')
            return helper(self.data)

    data = math.ones(batch(b=4), instance(x=3))
    obj = Scaled(data)
    assert obj.scaled.shape == data.shape
    assert 'scaled' in cached_values(math.slice(obj, {'b': 1}))  # analysed by slicing, without a code token
    assert not plan(Scaled(data), [Scaled.scaled]).properties['scaled'].requires  # taken by the plan
    assert runs(calls, 'traced') == {'scaled': 1}

    def helper(x):  # noqa: F811  redefined, as in a notebook: now it mixes b
        return x - math.mean(x, 'b')

    p = plan(Scaled(data), [Scaled.scaled])
    assert runs(calls, 'traced') == {'scaled': 2}
    assert p.properties['scaled'].requires == {'b'}
    fresh = Scaled(data)
    math.assert_close(fresh.scaled, 0)
    assert 'scaled' not in cached_values(math.slice(fresh, {'b': 1}))  # slicing takes the plan's new analysis
    assert runs(calls, 'traced') == {'scaled': 2}
