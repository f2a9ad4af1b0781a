"""phiml's parallel tutorial (docs/Parallel_Compute.ipynb, docs/parallel_compute.py), its classes as written there.

Only the imports are lazyphi's, and `expensive_to_compute` sleeps 0.2 s instead of 1 s and notes when it ran
(each call appends its start, end and process to a log), so that the tests can tell that blocks overlapped.
Run on every scheduler: sync, threads, processes and a distributed LocalCluster.
"""

import itertools
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Union

import dask
import numpy as np
import pytest

from lazyphi.dataclasses import parallel_compute, parallel_property
from lazyphi.math import Tensor, batch, mean, tensor
from lazyphi.parallel import PropertyFailed, plan

LOG = os.path.join(tempfile.gettempdir(), f'lazyphi-tutorial-calls-{os.getuid()}.log')  # one test runs at a time


def expensive_to_compute(x: float) -> float:
    start = time.time()
    time.sleep(0.2)  # Simulate an expensive computation
    with open(LOG, 'a') as f:
        f.write(f'{start} {time.time()} {os.getpid()}\n')
    return 2 * x


@dataclass(frozen=True)
class ParallelComputation:
    data: Tensor

    @parallel_property
    def result(self) -> Union[Tensor, float]:  # noqa: UP007 — as the tutorial writes it
        return expensive_to_compute(float(self.data))


@dataclass(frozen=True)
class ParallelDepComputation:
    data: Tensor

    @cached_property
    def tmp_result(self) -> Union[Tensor, float]:  # noqa: UP007
        return expensive_to_compute(float(self.data))

    @cached_property
    def result(self) -> Union[Tensor, float]:  # noqa: UP007
        return self.tmp_result + 1


@dataclass(frozen=True)
class ParallelMeanComputation:
    data: Tensor

    @parallel_property
    def individual_result(self) -> Union[Tensor, float]:  # noqa: UP007
        print(f"Computing individual_result pid={os.getpid()}")
        return expensive_to_compute(float(self.data))

    @parallel_property(requires=batch)
    def mean(self) -> Union[Tensor, float]:  # noqa: UP007
        print(f"Computing mean, pid={os.getpid()}")
        return mean(self.individual_result, batch)


@dataclass(frozen=True)
class ParallelNormComputation:
    data: Tensor

    @parallel_property
    def individual_result(self) -> Union[Tensor, float]:  # noqa: UP007
        print(f"Computing individual_result pid={os.getpid()}")
        return expensive_to_compute(float(self.data))

    @parallel_property(requires=batch)
    def mean(self) -> Union[Tensor, float]:  # noqa: UP007
        print(f"Computing mean, pid={os.getpid()}")
        return mean(self.individual_result, batch)

    @parallel_property
    def normalized_result(self) -> Union[Tensor, float]:  # noqa: UP007
        print(f"Computing normalized_result pid={os.getpid()}")
        return self.individual_result - self.mean


DATA = tensor([1.0, 2.0, 3.0, 4.0], "data:b")
VALUES = np.array([1.0, 2.0, 3.0, 4.0])


@pytest.fixture
def calls():
    """The calls of `expensive_to_compute` during the test, as (start, end, process) once read."""
    if os.path.exists(LOG):
        os.remove(LOG)

    def read() -> list:
        with open(LOG) as f:
            return [(float(a), float(b), int(p)) for a, b, p in (line.split() for line in f)]
    yield read
    if os.path.exists(LOG):
        os.remove(LOG)


def overlapping(calls: list) -> bool:
    """Whether two calls ran at the same time."""
    calls = sorted(calls)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(calls))


@pytest.fixture(scope='module')
def cluster():
    distributed = pytest.importorskip('distributed')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=':0',
                                  silence_logs=logging.ERROR) as c, distributed.Client(c) as client:
        yield client


def scheduler_of(name: str, request):
    return request.getfixturevalue('cluster') if name == 'cluster' else name


SCHEDULERS = ['sync', 'threads', 'processes', 'cluster']


def test_the_plans_split_what_the_tutorial_says():
    p = plan(ParallelComputation(DATA), [ParallelComputation.result], max_workers=2)
    (stage,) = p.stages
    assert stage.split_dims == batch(data=4) and len(stage.blocks) == 4  # every worker gets work
    assert p.properties['result'].mode == 'element' and not p.fallbacks
    assert 'float() of a value with' in p.properties['result'].per_element_reason
    norm = plan(ParallelNormComputation(DATA), [ParallelNormComputation.normalized_result], max_workers=2)
    assert [([q.name for q in s.properties], s.host) for s in norm.stages] == [
        (['individual_result'], False), (['mean'], True), (['normalized_result'], False)]
    assert norm.properties['mean'].requires == {'data'} and not norm.fallbacks
    # tracing through the dependencies: normalized_result is element-wise along data, so it runs once per block
    assert norm.properties['normalized_result'].mode == 'block'
    assert len(norm.stages[0].blocks) == len(norm.stages[2].blocks) == 4


@pytest.mark.parametrize('name', SCHEDULERS)
def test_parallel_computation(name, request, calls):
    computation = ParallelComputation(DATA)
    parallel_compute(computation, [ParallelComputation.result], max_workers=2, scheduler=scheduler_of(name, request),
                     progress=False)
    np.testing.assert_array_equal(computation.result.numpy('data'), 2 * VALUES)
    assert computation.result.shape == batch(data=4)
    assert len(calls()) == 4
    assert overlapping(calls()) == (name != 'sync')  # blocks ran at the same time on every parallel scheduler


@pytest.mark.parametrize('name', SCHEDULERS)
def test_parallel_dep_computation(name, request, calls):
    computation = ParallelDepComputation(DATA)
    parallel_compute(computation, [ParallelDepComputation.result], max_workers=2,
                     scheduler=scheduler_of(name, request), progress=False)
    np.testing.assert_array_equal(computation.result.numpy('data'), 2 * VALUES + 1)
    assert 'tmp_result' not in computation.__dict__  # not requested: not kept
    assert overlapping(calls()) == (name != 'sync')


@pytest.mark.parametrize('name', SCHEDULERS)
def test_parallel_mean_computation(name, request, calls):
    computation = ParallelMeanComputation(DATA)
    parallel_compute(computation, [ParallelMeanComputation.mean], max_workers=2,
                     scheduler=scheduler_of(name, request), progress=False)
    assert float(computation.mean) == pytest.approx(5.0)
    assert overlapping(calls()) == (name != 'sync')


@pytest.mark.parametrize('keep', [False, True], ids=['requested-only', 'keep_intermediate'])
@pytest.mark.parametrize('name', SCHEDULERS)
def test_parallel_norm_computation(name, keep, request, calls):
    computation = ParallelNormComputation(DATA)
    parallel_compute(computation, [ParallelNormComputation.normalized_result], max_workers=2, keep_intermediate=keep,
                     scheduler=scheduler_of(name, request), progress=False)
    np.testing.assert_allclose(computation.normalized_result.numpy('data'), 2 * VALUES - 5)
    assert ('individual_result' in computation.__dict__) == keep and ('mean' in computation.__dict__) == keep
    if keep:
        assert float(computation.mean) == pytest.approx(5.0)
    assert len(calls()) == 4 and overlapping(calls()) == (name != 'sync')


def test_dask_compute_and_a_client_fill_the_instance(cluster, calls):
    computation = ParallelComputation(DATA)
    (values,) = dask.compute(plan(computation, [ParallelComputation.result], scheduler=cluster))
    np.testing.assert_array_equal(values['result'].numpy('data'), 2 * VALUES)
    np.testing.assert_array_equal(computation.result.numpy('data'), 2 * VALUES)
    other = ParallelComputation(DATA)
    cluster.compute(plan(other, [ParallelComputation.result], scheduler=cluster)).result()
    np.testing.assert_array_equal(other.result.numpy('data'), 2 * VALUES)


def test_dask_config_scheduler_is_used_when_none_is_given(calls):
    computation = ParallelComputation(DATA)
    with dask.config.set(scheduler='sync'):
        p = parallel_compute(computation, [ParallelComputation.result], progress=False)
    assert p.max_workers == 1 and not overlapping(calls())
    np.testing.assert_array_equal(computation.result.numpy('data'), 2 * VALUES)


def test_a_misspelt_parallel_dim_warns_naming_the_dims_the_instance_has():
    with pytest.warns(UserWarning, match=r"parallel_dims='time' names dims the instance lacks: time; its dims are "
                                         r"data, so everything runs on the host"):
        p = plan(ParallelComputation(DATA), [ParallelComputation.result], 'time')
    assert all(s.host for s in p.stages)
    computation = ParallelComputation(DATA)  # on the host, float() of all four values fails, as the warning foretold
    with pytest.warns(UserWarning, match='lacks: time'), pytest.raises(PropertyFailed, match=r'float\(\) needs'):
        parallel_compute(computation, [ParallelComputation.result], 'time', scheduler='sync', progress=False)

