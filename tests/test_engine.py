"""parallel_compute on Dask: results, caching rules, schedulers, the collection protocol and failures."""

import os
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass

import dask
import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import DType
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.math.kinds import REDUCTIONS, Dense, Joined
from lazyphi.parallel import MIXED, PropertyFailed, _cluster, _engine, _graph, parallel_compute, parallel_property, plan
from lazyphi.storage import DiskTensor

DATA = math.random_normal(batch(example=24), spatial(x=8, y=8))
CALLS = []


@dataclass(frozen=True)
class Model:
    data: Tensor
    offset: float = 1.0

    @cached_property
    def plus(self) -> Tensor:
        CALLS.append('plus')
        return self.data + self.offset

    @parallel_property(requires=batch, persistent=True)
    def batch_mean(self) -> Tensor:
        return math.mean(self.plus, batch)

    @cached_property
    def normalized(self) -> Tensor:
        return self.plus - self.batch_mean

    @parallel_property(requires=spatial)
    def spectrum(self) -> Tensor:
        return math.fft(self.data)

    @cached_property
    def scaled(self) -> float:
        return float(math.mean(self.data)) * 2

    @parallel_property(requires=MIXED)
    def total(self) -> Tensor:
        return math.sum(self.data * 2, 'example,x,y')


def host_values():
    plus = DATA + 1.0
    mean = math.mean(plus, batch)
    return {'plus': plus, 'batch_mean': mean, 'normalized': plus - mean, 'spectrum': math.fft(DATA),
            'total': math.sum(DATA * 2, 'example,x,y'),
            'scaled': math.stack([float(math.mean(DATA.example[i])) * 2 for i in range(24)], batch(example=24))}


@pytest.mark.parametrize('scheduler', ['sync', 'threads', 'processes'])
def test_results_equal_host_computation(scheduler):
    m = Model(DATA)
    parallel_compute(m, [Model.normalized, Model.spectrum, Model.scaled, Model.total], scheduler=scheduler,
                     progress=False)
    expected = host_values()
    for name in ('normalized', 'spectrum', 'scaled'):
        np.testing.assert_array_equal(m.__dict__[name].numpy(expected[name].shape.names),
                                      expected[name].numpy(expected[name].shape.names), err_msg=name)
    math.assert_close(m.total, expected['total'], rel_tolerance=1e-5)  # MIXED splits the float sum


@dataclass(frozen=True)
class Moments:
    data: Tensor

    @parallel_property(requires=MIXED)
    def spread(self) -> Tensor:
        return math.std(self.data, 'example,x')

    @parallel_property(requires=MIXED)
    def score(self) -> Tensor:  # two split reductions, finished on the host
        return (math.mean(self.data ** 2, 'example') - math.mean(self.data, batch)) / math.std(self.data, batch)


@dataclass(frozen=True)
class WhereItRuns:
    data: Tensor

    @parallel_property
    def here(self) -> float:
        return float(threading.current_thread() is threading.main_thread()) + 0 * float(self.data)


def test_max_workers_zero_runs_every_block_here_in_this_thread_as_phiml_runs_on_the_host():
    instance = WhereItRuns(math.range(batch(example=8)))
    assert threading.current_thread() is threading.main_thread()
    p = parallel_compute(instance, [WhereItRuns.here], max_workers=0, progress=False)
    assert len(p.stages[0].blocks) == 2  # one worker planned: two blocks
    np.testing.assert_array_equal(instance.here.numpy('example'), [1.] * 8)


@pytest.mark.parametrize('scheduler', ['sync', 'threads'])
def test_mixed_mean_and_std_combine_blocks_of_unequal_size(scheduler):
    data = math.random_normal(batch(example=23), spatial(x=5, y=3)) * 3 + 1
    m = Moments(data)
    p = plan(m, [Moments.spread, Moments.score], block_size=5)
    sizes = [b.size for b in p.stages[0].blocks]
    assert len(sizes) > 2 and sizes[-1] < sizes[0]  # the last block is smaller
    assert p.properties['spread'].mode == p.properties['score'].mode == 'mixed' and not p.fallbacks
    assert [op for _, op in p.properties['spread'].partials] == ['std']
    assert sorted(op for _, op in p.properties['score'].partials) == ['mean', 'mean', 'std']
    parallel_compute(m, [Moments.spread, Moments.score], scheduler=scheduler, block_size=5, progress=False)
    math.assert_close(m.spread, math.std(data, 'example,x'), rel_tolerance=1e-5, abs_tolerance=1e-6)
    expected = (math.mean(data ** 2, 'example') - math.mean(data, batch)) / math.std(data, batch)
    math.assert_close(m.score, expected, rel_tolerance=1e-4, abs_tolerance=1e-5)


def test_intermediates_are_dropped_unless_kept_or_persistent():
    m = Model(DATA)
    parallel_compute(m, [Model.normalized], scheduler='sync', progress=False)
    assert 'normalized' in m.__dict__ and 'batch_mean' in m.__dict__  # persistent
    assert 'plus' not in m.__dict__
    k = Model(DATA)
    parallel_compute(k, [Model.normalized], scheduler='sync', keep_intermediate=True, progress=False)
    assert 'plus' in k.__dict__


def test_properties_already_cached_are_not_recomputed():
    m = Model(DATA)
    _ = m.plus
    CALLS.clear()
    parallel_compute(m, [Model.plus, Model.normalized], scheduler='sync', progress=False)
    assert CALLS == []


def test_plan_is_a_dask_collection():
    m = Model(DATA)
    p = plan(m, [Model.spectrum])
    (values,) = dask.compute(p, scheduler='sync')
    math.assert_close(values['spectrum'], math.fft(DATA))
    assert 'spectrum' in m.__dict__
    assert dask.base.tokenize(p) == dask.base.tokenize(plan(Model(DATA), [Model.spectrum]))
    assert dask.base.tokenize(p) != dask.base.tokenize(plan(Model(DATA, offset=2.0), [Model.spectrum]))
    persisted = dask.persist(plan(Model(DATA), [Model.spectrum]), scheduler='sync')[0]
    (again,) = dask.compute(persisted, scheduler='sync')
    math.assert_close(again['spectrum'], math.fft(DATA))


def test_building_the_graph_computes_nothing():
    def refuse(graph, keys, **kwargs):
        raise AssertionError('the graph was run')
    m = Model(DATA)
    p = plan(m, [Model.normalized])
    graph = p.__dask_graph__()
    assert any('normalized' in str(k) for k in graph)
    fields = [k for k in graph if str(k).startswith('field(data)')]
    assert len(fields) == 1  # one node for a field every block needs
    with dask.config.set(scheduler=refuse), pytest.raises(AssertionError, match='was run'):
        dask.compute(p)
    assert 'normalized' not in m.__dict__


def test_dashboard_groups_name_the_properties_their_tasks_compute():
    from dask.utils import key_split
    m = Model(DATA)
    graph = plan(m, [Model.normalized, Model.total], max_workers=2).__dask_graph__()
    groups = {key_split(k) for k in graph}
    assert {'plus,total', 'batch_mean', 'normalized', 'assemble(plus,total)', 'assemble(normalized)', 'field(data)',
            'template(Model)', 'result(normalized,total)'} <= groups, groups  # plus and total: one stage
    assert not groups & {'host', 'assemble', 'template', 'result', 'field', 'cached'}


def test_a_resumed_run_says_how_many_blocks_it_reused(tmp_path):
    first = parallel_compute(Model(DATA), [Model.spectrum], scheduler='sync', cache_dir=str(tmp_path), progress=False)
    assert first.reused == 0 and first.resumable == len(first.stages[0].blocks) > 1
    assert f'reused 0 of {first.resumable} blocks from the cache; computed {first.resumable}' in str(first)
    again = parallel_compute(Model(DATA), [Model.spectrum], scheduler='sync', cache_dir=str(tmp_path), progress=False)
    assert again.reuse == f'reused {again.resumable} of {again.resumable} blocks from the cache; computed 0'
    assert 'ran in' in str(again) and plan(Model(DATA), [Model.spectrum]).reuse is None  # not run: nothing to say


def test_a_run_with_every_block_on_disk_starts_no_worker_process(tmp_path):
    from lazyphi.parallel import _schedulers
    first = parallel_compute(Model(DATA), [Model.spectrum], scheduler='processes', max_workers=2,
                             cache_dir=str(tmp_path), progress=False)
    assert first.reused == 0 and _schedulers._pool is not None
    _schedulers.discard_pool()
    again = Model(DATA)
    p = parallel_compute(again, [Model.spectrum], scheduler='processes', max_workers=2, cache_dir=str(tmp_path),
                         progress=False)
    assert p.reused == p.resumable > 1
    assert _schedulers._pool is None  # the blocks were read here
    math.assert_close(again.spectrum, math.fft(DATA))


@pytest.mark.parametrize('memory_limit', [1, None])
def test_a_run_with_only_disk_references_left_uses_no_scheduler(tmp_path, memory_limit):
    import dask.local
    first = parallel_compute(Model(DATA), [Model.spectrum], scheduler='sync', cache_dir=str(tmp_path),
                             memory_limit=memory_limit, progress=False)
    assert first.reused == 0
    calls = []

    def recording(graph, keys):
        calls.append(len(graph))
        return dask.local.get_sync(graph, keys)
    again = Model(DATA)
    p = parallel_compute(again, [Model.spectrum], scheduler=recording, cache_dir=str(tmp_path),
                         memory_limit=memory_limit, progress=False)
    assert p.reused == p.resumable > 1
    # outputs kept on disk: only references to make, on the calling thread; outputs kept in memory: the scheduler
    # loads the blocks
    assert bool(calls) == (memory_limit is None)
    assert isinstance(again.spectrum, DiskTensor) == (memory_limit == 1)
    math.assert_close(again.spectrum, math.fft(DATA))


def test_a_stage_found_whole_on_disk_is_read_by_one_task(tmp_path):
    from lazyphi.parallel._graph import blocks_on_disk, compiled, without_finished_blocks
    first = parallel_compute(Model(DATA), [Model.spectrum], scheduler='sync', cache_dir=str(tmp_path), memory_limit=1,
                             progress=False)
    assert len(first.stages[0].blocks) > 1
    again = Model(DATA)
    graph = compiled(plan(again, [Model.spectrum], cache_dir=str(tmp_path), memory_limit=1))
    finished, _ = blocks_on_disk(graph)
    nodes = without_finished_blocks(graph, finished)
    reads = [node for node in nodes.values() if getattr(node, 'func', None) is _engine.read_stage]
    assert len(reads) == 1 and not finished & nodes.keys()  # the whole array at once, no task per block
    assert dask.get(nodes, graph.result_key)['spectrum'].shape == math.fft(DATA).shape


def test_a_resumed_run_sends_no_inputs_of_finished_blocks(tmp_path, monkeypatch):
    import dask.local
    from dask.task_spec import DataNode

    from lazyphi.parallel import _graph
    monkeypatch.setattr(_graph, 'PRESLICE_BYTES', 0)  # every block gets its own slice of the data
    first = parallel_compute(Model(DATA), [Model.spectrum], scheduler='sync', cache_dir=str(tmp_path), progress=False)
    blocks = len(first.stages[0].blocks)
    records = next(tmp_path.glob('*/spectrum.done'))
    os.remove(records / sorted(os.listdir(records))[-1])  # the last block is to be computed again
    ran = {}

    def recording(graph, keys):
        ran.update(graph)
        return dask.local.get_sync(graph, keys)
    again = Model(DATA)
    p = parallel_compute(again, [Model.spectrum], scheduler=recording, cache_dir=str(tmp_path), progress=False)
    assert p.reused == blocks - 1
    slices = [k for k, node in ran.items() if isinstance(node, DataNode) and isinstance(node.value, Tensor)]
    assert len(slices) == 1  # the input of the one block computed again
    read = [k for k, node in ran.items() if getattr(node, 'func', None) is _engine.read_stage]
    assert len(read) == blocks - 1
    math.assert_close(again.spectrum, math.fft(DATA))


def test_failure_names_property_and_block():
    @dataclass(frozen=True)
    class Failing:
        data: Tensor

        @cached_property
        def broken(self) -> Tensor:
            if float(math.max(self.data)) > 1e9:
                return self.data
            raise ValueError('bad input')

    f = Failing(math.random_normal(batch(b=8)))
    with pytest.raises(PropertyFailed, match=r"Failing.broken raised ValueError on element b=(\d) of block "
                                             r"b\[\d:\d\]: bad input") as info:
        parallel_compute(f, [Failing.broken], scheduler='sync', progress=False)
    assert 'Original traceback' in str(info.value) and "raise ValueError('bad input')" in str(info.value)
    assert 'broken' not in f.__dict__


def test_unknown_scheduler_is_an_error():
    with pytest.raises(ValueError, match="scheduler must be one of"):
        parallel_compute(Model(DATA), [Model.plus], scheduler='gpu', progress=False)


MAIN_SCRIPT = textwrap.dedent('''
    from dataclasses import dataclass
    import numpy as np
    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial
    from lazyphi.parallel import parallel_compute

    @math.jit_compile  # compiled in this process before the run: its copy on a worker compiles its own
    def helper(x):
        return x * 3

    @dataclass(frozen=True)
    class Notebook:
        data: Tensor

        @cached_property
        def tripled(self) -> Tensor:
            import os
            if KILL and self.data.available and not os.path.exists(KILL):  # the first task kills its worker
                open(KILL, 'w').close()
                os._exit(1)
            return helper(self.data)

    KILL = None

    if __name__ == '__main__':
        {setup}
        data = math.random_normal(batch(b=6), spatial(x=4))
        helper(data)
        n = Notebook(data)
        parallel_compute(n, [Notebook.tripled], scheduler={scheduler}, max_workers=2, progress=False)
        np.testing.assert_allclose(n.tripled.numpy('b,x'), data.numpy('b,x') * 3)
        print('OK')
        {teardown}
''')
SETUPS = {
    'processes': ('pass', "'processes'", 'pass'),
    'cluster, a worker killed mid-run': (
        'from distributed import Client, LocalCluster; cluster = LocalCluster(n_workers=2, threads_per_worker=1, '
        'processes=True, dashboard_address=":0"); client = Client(cluster); import os, tempfile; '
        'KILL = os.path.join(tempfile.mkdtemp(), "killed")', 'client', 'client.close(); cluster.close()'),
    'cluster': ('from distributed import Client, LocalCluster; cluster = LocalCluster(n_workers=2, '
                'threads_per_worker=1, processes=True, dashboard_address=":0"); client = Client(cluster)',
                'client', 'client.close(); cluster.close()'),
}


@pytest.mark.slow
@pytest.mark.parametrize('scheduler', sorted(SETUPS))
def test_main_module_classes_and_helpers_reach_workers(tmp_path, scheduler):
    setup, name, teardown = SETUPS[scheduler]
    path = tmp_path / 'notebook_like.py'
    path.write_text(MAIN_SCRIPT.format(setup=setup, scheduler=name, teardown=teardown))
    env = {**os.environ, 'PYTHONWARNINGS': 'ignore'}
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'OK' in result.stdout


def test_precision_and_backend_are_captured_when_planning_and_reapplied_in_tasks():
    @dataclass(frozen=True)
    class Precise:
        data: Tensor

        @cached_property
        def scaled(self) -> Tensor:
            return self.data * math.tensor(0.5)  # a new float tensor: takes the precision of the context

    with math.precision(64):
        p = Precise(DATA)
        parallel_compute(p, [Precise.scaled], scheduler='threads', max_workers=2, progress=False)
    assert p.scaled.dtype == DType(float, 64)


@dataclass(frozen=True)
class Fragile:
    """Kills the worker process that first computes it (the marker file remembers), then works."""

    data: Tensor
    marker: str

    @cached_property
    def doubled(self) -> Tensor:
        if self.data.available and not os.path.exists(self.marker):  # tracing runs this on tracers first
            with open(self.marker, 'w'):
                pass
            os._exit(1)
        return self.data * 2


@pytest.mark.slow
def test_lost_process_worker_reruns_the_lost_work_once(tmp_path, caplog):
    f = Fragile(DATA, str(tmp_path / 'killed'))
    parallel_compute(f, [Fragile.doubled], scheduler='processes', max_workers=2, progress=False)
    math.assert_close(f.doubled, DATA * 2)
    assert os.path.exists(f.marker)
    assert 'worker process was lost' in caplog.text


def test_the_reference_layouts_names_resolve_to_the_same_functions():
    import lazyphi.dataclasses
    import lazyphi.parallel
    for name in ('parallel_compute', 'parallel_property', 'get_cache_files', 'on_load_into_memory', 'set_cache_ttl',
                 'load_cache_as', 'INFER', 'MIXED'):
        assert getattr(lazyphi.dataclasses, name) is getattr(lazyphi.parallel, name)
    with pytest.raises(AttributeError, match='no attribute'):
        _ = lazyphi.dataclasses.not_a_name


def test_assembled_outputs_keep_the_blocks_apart_without_copying():
    m = Model(DATA)
    done = parallel_compute(m, [Model.spectrum], scheduler='threads', progress=False)
    assert isinstance(m.spectrum, Joined)
    assert len(m.spectrum.parts) == len(done.stages[0].blocks)
    math.assert_close(m.spectrum, math.fft(DATA))


# --- large inputs -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Weighted:
    data: Tensor
    weights: Tensor

    @cached_property
    def weighted(self) -> Tensor:
        return self.data * self.weights


def _big_input():
    data = math.random_normal(batch(example=16), spatial(x=128, y=160))  # 1.25 MiB in float32: sliced per block
    weights = math.random_uniform(spatial(x=128, y=160))  # no block dim: one node, whole
    return Weighted(data, weights)


def test_large_host_values_reach_each_block_as_its_own_slice():
    w = _big_input()
    p = plan(w, [Weighted.weighted], max_workers=2, block_size=4)
    from lazyphi.math.kinds import memory_bytes
    from lazyphi.parallel._graph import PRESLICE_BYTES, compiled

    assert memory_bytes(w.data) > PRESLICE_BYTES >= memory_bytes(w.weights)
    nodes = compiled(p).graph
    big_weights = Weighted(w.data, math.expand(w.weights, spatial(z=16)) * 1.0)  # large, but without the block dim
    assert memory_bytes(big_weights.weights) > PRESLICE_BYTES
    shared = compiled(plan(big_weights, [Weighted.weighted], block_size=4)).graph
    assert sum('field(weights)-' in str(k) for k in shared) == 1
    data_nodes = {k: v.value for k, v in nodes.items() if type(v).__name__ == 'DataNode'}
    pieces = [v for k, v in data_nodes.items() if isinstance(k, tuple) and k[0].startswith('field(data)-')]
    assert [piece.shape.get_size('example') for piece in pieces] == [4, 4, 4, 4]
    assert not [k for k in data_nodes if isinstance(k, str) and k.startswith('field(data)-')]  # never whole
    assert [k for k in data_nodes if isinstance(k, str) and k.startswith('field(weights)-')]  # small: shared
    parallel_compute(w, [Weighted.weighted], scheduler='processes', max_workers=2, block_size=4, progress=False)
    math.assert_close(w.weighted, w.data * w.weights)


def test_dask_counts_a_tensors_memory():
    from dask.sizeof import sizeof

    assert sizeof(math.zeros(batch(b=1000), spatial(x=10))) == 1000 * 10 * 4
    assert sizeof(math.ones(spatial(x=8), dtype=DType(int, 64))) == 64


def _recorded_submissions(client) -> list:
    """The list that each graph `client.get` is given from now on is appended to, as a dict of its tasks."""
    sent = []
    original = client.get

    def recording_get(graph, keys, **kwargs):
        sent.append(graph if isinstance(graph, dict) else dict(graph.__dask_graph__()))
        return original(graph, keys, **kwargs)
    client.get = recording_get
    return sent


def test_large_inputs_are_scattered_to_a_cluster_not_sent_in_the_graph():
    distributed = pytest.importorskip('distributed')
    w = _big_input()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        sent = _recorded_submissions(client)
        weights = math.expand(w.weights, spatial(z=16)) * 1.0  # 1.25 MiB, no block dim: scattered whole
        for _ in range(2):  # the same plan twice in a row: its graph keys repeat, the scattered data's do not
            again = Weighted(w.data, weights)
            parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
            math.assert_close(again.weighted, w.data * weights)
        data = [v.value for graph in sent for v in graph.values() if type(v).__name__ == 'DataNode']
        assert max((distributed.sizeof.sizeof(value) for value in data), default=0) <= 2 ** 20  # none large
        aliases = [v for graph in sent for v in graph.values() if type(v).__name__ == 'Alias']
        scattered = {key for alias in aliases for key in alias.dependencies}
        assert len(scattered) == 2  # the weights, once per run, under keys of their own
        deadline = time.monotonic() + 30
        while scattered & set(client.who_has()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not scattered & set(client.who_has())  # and released after the run


@pytest.mark.parametrize('copy_bytes,group', [
    (_engine.JOIN_COPY_BYTES, _graph.JOIN_GROUP), (_engine.JOIN_COPY_BYTES, 7), (0, _graph.JOIN_GROUP)],
    ids=['small outputs', 'small outputs in groups, sent in parts', 'large outputs'])
def test_a_cluster_joins_small_outputs_of_many_blocks_on_a_worker_and_larger_ones_here(monkeypatch, copy_bytes, group):
    """Outputs small enough to be joined into one array (`JOIN_COPY_BYTES`) are joined on a worker, and the client
    fetches one value; larger ones are fetched block by block from the workers that made them and kept apart.
    Blocks to join on a worker are collected `JOIN_GROUP` at a time, so that a graph sent in parts (`SUBMIT_BATCH`)
    holds few nodes of its earlier parts for its later ones."""
    distributed = pytest.importorskip('distributed')
    monkeypatch.setattr(_engine, 'JOIN_COPY_BYTES', copy_bytes)
    monkeypatch.setattr(_graph, 'JOIN_COPY_BYTES', copy_bytes)
    monkeypatch.setattr(_graph, 'JOIN_GROUP', group)
    monkeypatch.setattr(_cluster, 'SUBMIT_BATCH', 10 if group < 100 else _cluster.SUBMIT_BATCH)
    data = math.tensor(np.arange(100.0), batch('example'))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        sent = _recorded_submissions(client)
        m = Model(data)
        parallel_compute(m, [Model.plus], scheduler=client, block_size=1, progress=False)
    np.testing.assert_array_equal(m.plus.numpy('example'), np.arange(100.0) + 1)
    joined_there = any(str(key).startswith('assemble(plus)') for graph in sent for key in graph)
    assert joined_there == (copy_bytes > 0)
    groups = {key[1] for graph in sent for key in graph if isinstance(key, tuple) and key[0].startswith('group(plus)')}
    assert len(groups) == (-(-100 // group) if group < 100 else 0)  # 100 blocks
    assert group >= 100 or len(sent) > 10  # 100 blocks, their groups and a few other nodes, in parts of 10
    assert (type(m.plus) is Dense) == (copy_bytes > 0) and (type(m.plus) is Joined) == (copy_bytes == 0)


HELD = threading.Event()  # lets the elements of `HeldThenFailing` other than 7 finish
FINISHED = []


@dataclass(frozen=True)
class HeldThenFailing:
    data: Tensor

    @cached_property
    def checked(self) -> Tensor:
        value = float(self.data)  # element by element
        if value == 7:
            raise ValueError('seven')
        HELD.wait(60)
        FINISHED.append(value)
        return self.data


def test_a_failure_among_the_results_gathered_later_stops_the_run_while_earlier_ones_still_compute(monkeypatch):
    """Results come back one batch at a time (`GATHER_BATCH`, here 1); one failing in a later batch ends the wait for
    an earlier one. (Which result is gathered first is up to the order of a set: 1 time in 8 it is the failing one.)"""
    distributed = pytest.importorskip('distributed')
    monkeypatch.setattr(_cluster, 'GATHER_BATCH', 1)
    HELD.clear()
    FINISHED.clear()
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=8, processes=False,
                                      dashboard_address=':0') as cl, distributed.Client(cl) as client:
            held = HeldThenFailing(math.range(batch(b=8)) * 1.0)
            with pytest.raises(PropertyFailed, match='seven'):
                parallel_compute(held, [HeldThenFailing.checked], scheduler=client, block_size=1, progress=False)
            assert not FINISHED  # every other block still waits
            HELD.set()
    finally:
        HELD.set()


def test_data_of_exactly_the_scatter_size_and_graphs_too_large_for_distributed_are_scattered():
    """distributed warns 'Sending large graph' over 10 MB: 16 blocks of exactly 1 MiB were all sent in the graph."""
    mib = 2 ** 20
    assert _cluster._to_scatter({f'block{i}': mib for i in range(16)}) == {f'block{i}' for i in range(16)}
    just_under = {f'block{i}': mib - 1 for i in range(16)}
    chosen = _cluster._to_scatter(just_under)
    assert sum(n for key, n in just_under.items() if key not in chosen) <= _cluster.GRAPH_DATA_BYTES < 16 * mib
    assert _cluster._to_scatter({'small': 1000, ('tuple', 0): 1000}) == set()  # keys of any kind


def test_a_graph_of_many_tasks_and_little_data_sends_without_a_large_graph_warning():
    """distributed's 'Sending large graph' warning is about data in the graph, which lazyphi scatters: a graph that is
    large for its many tasks (10^5 blocks make 13 MB) does not raise it. The threshold is lowered here so that 500
    blocks cross it; the suite turns warnings into errors."""
    distributed = pytest.importorskip('distributed')
    w = Weighted(math.random_normal(batch(b=500)), math.ones(batch(b=500)))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client, \
            dask.config.set({'distributed.admin.large-graph-warning-threshold': '20kB'}):
        parallel_compute(w, [Weighted.weighted], scheduler=client, block_size=1, progress=False)
        math.assert_close(w.weighted, w.data * w.weights)


def test_small_inputs_travel_on_a_cluster_inside_the_tasks_that_read_them():
    distributed = pytest.importorskip('distributed')
    from dask.utils import key_split
    w = _big_input()
    shared = math.expand(w.weights, spatial(z=4)) * 1.0  # 320 KiB read by each of the 4 blocks: 1.25 MiB of copies
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        sent = _recorded_submissions(client)
        for weights, inside in ((w.weights, True), (shared, False)):
            sent.clear()
            again = Weighted(w.data, weights)
            parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
            math.assert_close(again.weighted, w.data * weights)
            (graph,) = sent
            nodes = {key_split(key) for key, node in graph.items() if type(node).__name__ == 'DataNode'}
            assert not nodes & {'field(data)', 'template(Weighted)'}  # a slice per block, and the small template
            assert ('field(weights)' in nodes) != inside


def test_a_submission_to_a_cluster_hashes_none_of_its_data(monkeypatch):
    distributed = pytest.importorskip('distributed')
    from lazyphi.math import _tensor
    w = _big_input()
    hashed = []
    original = _tensor.content_hash

    def recording(native, backend):
        hashed.append(tuple(native.shape))
        return original(native, backend)
    monkeypatch.setattr(_tensor, 'content_hash', recording)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        again = Weighted(w.data, w.weights)
        parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
        math.assert_close(again.weighted, w.data * w.weights)
    # the inputs are hashed for the plan's key (once each while they live); the blocks' slices never
    assert (4, 128, 160) not in hashed and (16, 128, 160) in hashed


@pytest.mark.parametrize('processes, chosen, direct', [(False, None, True), (True, None, True), (True, False, False)])
def test_inputs_and_results_skip_the_scheduler_on_a_cluster_of_this_machine(processes, chosen, direct):
    distributed = pytest.importorskip('distributed')
    w = _big_input()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=':0') \
            as cl, distributed.Client(cl, direct_to_workers=chosen) as client:
        calls = []

        def recorded(name: str):
            original = getattr(client, name)

            def recording(*args, **kwargs):
                calls.append((name, kwargs.get('direct')))
                return original(*args, **kwargs)
            return recording
        client.scatter, client.gather = recorded('scatter'), recorded('gather')
        weights = math.expand(w.weights, spatial(z=16)) * 1.0  # 1.25 MiB, no block dim: scattered whole
        again = Weighted(w.data, weights)
        parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
        math.assert_close(again.weighted, w.data * weights)
        # a LocalCluster's scheduler listens on a loopback address (or in this process): its workers are reachable
        assert {name for name, _ in calls} == {'scatter', 'gather'}
        assert {flag for _, flag in calls} == {direct}


def test_a_runs_keys_are_released_after_the_next_graph_is_sent_or_soon_after_the_run(monkeypatch):
    """Released at the end of a run, the keys would open the client's 10 ms batching window, and a graph
    submitted right after would wait in it."""
    distributed = pytest.importorskip('distributed')
    monkeypatch.setattr(_cluster, 'RELEASE_AFTER', 60.0)  # longer than this test: only a submission releases
    w = _big_input()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        messages = []
        original = client.scheduler_comm.send

        def recording(message):
            messages.append(message)
            return original(message)
        client.scheduler_comm.send = recording
        weights = math.expand(w.weights, spatial(z=16)) * 1.0  # 1.25 MiB, no block dim: scattered whole
        for _ in range(2):
            again = Weighted(w.data, weights)
            parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
            math.assert_close(again.weighted, w.data * weights)
        ended = len(messages)
        first, second = [i for i, m in enumerate(messages) if m['op'] == 'update-graph']

        def released(since: int, until: int) -> set:
            return {key for m in messages[since:until] if m['op'] == 'client-releases-keys' for key in m['keys']}
        assert not released(0, second)
        # the first run's results and its scattered weights, once the second run's graph was sent
        assert released(second, ended) > messages[first]['keys']
        assert len(released(second, ended) - messages[first]['keys']) == 1
        assert messages[second]['keys'] <= set(client.who_has())  # still held

        monkeypatch.setattr(_cluster, 'RELEASE_AFTER', 0.05)
        again = Weighted(w.data, weights)
        parallel_compute(again, [Weighted.weighted], scheduler=client, block_size=4, progress=False)
        deadline = time.monotonic() + 30
        while client.who_has() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not client.who_has()  # the last run's too, with no run after it, soon after it ended


def test_a_scheduler_on_another_host_gets_the_data_to_relay_unless_the_client_says_otherwise():
    from types import SimpleNamespace

    direct_transfers = _cluster.direct_transfers

    def client(address, chosen=None):
        return SimpleNamespace(direct_to_workers=chosen, scheduler=SimpleNamespace(address=address))
    assert not direct_transfers(client('tcp://10.1.2.3:8786'))  # Dask's default: workers may be unreachable
    assert not direct_transfers(client('tcp://login1.cluster:8786'))
    assert direct_transfers(client('tcp://10.1.2.3:8786', chosen=True))
    assert direct_transfers(client('tcp://127.0.0.1:8786')) and direct_transfers(client('tcp://[::1]:8786'))
    assert direct_transfers(client('tcp://localhost:8786')) and direct_transfers(client('inproc://10.0.0.1/1/2'))
    assert not direct_transfers(client('tcp://127.0.0.1:8786', chosen=False))


# --- costs that defaults must not add --------------------------------------------------------------------

def test_the_progress_bar_draws_nothing_for_a_short_run_and_draws_once_a_run_is_long():
    import io

    from lazyphi.parallel._progress import LateProgressBar

    graph = {'slow': (time.sleep, 0.3), 'quick': (abs, -1)}
    out = io.StringIO()
    with LateProgressBar(after=60, out=out):
        dask.get(graph, ['quick'])
    assert out.getvalue() == ''  # nothing drawn, and the run did not wait for the bar's thread
    with LateProgressBar(after=0.05, interval=0.05, out=out):
        dask.threaded.get(graph, ['slow'])
    assert '100% Completed' in out.getvalue() and out.getvalue().endswith('\n')


def test_the_allocator_is_tuned_only_where_a_nanny_pinned_its_thresholds():
    script = ('from lazyphi.parallel._engine import restore_allocator_thresholds; '
              'print(restore_allocator_thresholds())')
    env = {k: v for k, v in os.environ.items() if not k.startswith('MALLOC_')}
    plain = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, check=True)
    pinned = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True,
                            env={**env, 'MALLOC_TRIM_THRESHOLD_': '65536'})
    chosen = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True,
                            env={**env, 'MALLOC_TRIM_THRESHOLD_': '65536', 'MALLOC_MMAP_THRESHOLD_': '131072'})
    assert plain.stdout.strip() == 'False' and chosen.stdout.strip() == 'False'  # a user's own choice is kept
    assert pinned.stdout.strip() == ('True' if sys.platform == 'linux' else 'False')


def test_inputs_are_hashed_once_while_they_live(monkeypatch):
    from lazyphi.backend import NUMPY
    hashed = []
    original = NUMPY.content_hash
    monkeypatch.setattr(NUMPY, 'content_hash', lambda native: hashed.append(1) or original(native))
    data = math.random_normal(batch(example=8), spatial(x=4))
    keys = {dask.base.tokenize(plan(Model(data), [Model.plus])) for _ in range(3)}
    assert len(keys) == 1 and len(hashed) == 1
    assert dask.base.tokenize(plan(Model(data + 0), [Model.plus])) in keys  # equal data, another tensor: equal key
    assert len(hashed) == 2


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_every_reduction_splits_under_mixed(name):
    """Each reduction of the table splits into per-block partials combined on the host, finite_mean included."""
    values = np.random.default_rng(3).normal(size=(23, 4))
    values[2, 1] = values[17, 0] = np.nan
    data = math.wrap(values > 0 if name in ('any', 'all') else values, 'example:b,x')

    @dataclass(frozen=True)
    class Reduced:
        data: Tensor

        @parallel_property(requires=MIXED)
        def value(self) -> Tensor:
            return REDUCTIONS[name](self.data, ('example',))

    r = Reduced(data)
    p = plan(r, [Reduced.value], block_size=5)
    assert p.properties['value'].mode == 'mixed' and [n for _, n in p.properties['value'].partials] == [name]
    parallel_compute(r, [Reduced.value], scheduler='sync', block_size=5, progress=False)
    math.assert_close(r.value, REDUCTIONS[name](data, ('example',)), rel_tolerance=1e-5, abs_tolerance=1e-6)


@dataclass(frozen=True)
class FiniteMoments:
    data: Tensor

    @parallel_property(requires=MIXED)
    def mean(self) -> Tensor:
        return math.finite_mean(self.data, 'example,x')

    @parallel_property(requires=MIXED)
    def spread(self) -> Tensor:
        return math.finite_std(self.data, 'example')

    @parallel_property(requires=MIXED)
    def extremes(self) -> Tensor:
        return math.finite_max(self.data, batch, default=-1) - math.finite_min(self.data, batch, default=1)


def test_mixed_splits_the_finite_reductions_with_their_counts():
    values = np.random.default_rng(1).normal(size=(23, 5, 3))
    values[values > 1.2] = np.nan
    values[:, 0, 0] = np.inf  # no finite value at all there: the defaults
    data = math.wrap(values, 'example:b,x:s,y:s')
    m = FiniteMoments(data)
    props = [FiniteMoments.mean, FiniteMoments.spread, FiniteMoments.extremes]
    p = plan(m, props, block_size=5)
    assert all(p.properties[n].mode == 'mixed' for n in ('mean', 'spread', 'extremes')) and not p.fallbacks
    assert sorted(op for _, op in p.properties['mean'].partials) == ['finite_mean']
    parallel_compute(m, props, scheduler='sync', block_size=5, progress=False)
    math.assert_close(m.mean, math.finite_mean(data, 'example,x'), rel_tolerance=1e-5)
    math.assert_close(m.spread, math.finite_std(data, 'example'), rel_tolerance=1e-4, abs_tolerance=1e-5)
    math.assert_close(m.extremes, math.finite_max(data, batch, default=-1) - math.finite_min(data, batch, default=1))
    assert float(m.extremes.x[0].y[0]) == -2
