"""parallel_compute on several SLURM nodes, and what it does when a node dies, jobs reach their walltime or the client
dies. Each result is checked exactly against a direct computation.

Runs on the simulated nodes of `scripts/slurm-up.sh` (3 by default: each a network, UTS, PID and mount namespace
with its own slurmd); skipped, saying why, where SLURM or those nodes are missing. A test that kills a node starts it
again before it ends.
"""

import contextlib
import glob
import importlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import dask
import numpy as np
import pytest
import slurm_cluster

from lazyphi.parallel import NoWorkers, parallel_compute

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
NODES = 3


@pytest.fixture(autouse=True)
def _needs_nodes():
    why = slurm_cluster.why_not_nodes(NODES)
    if why is not None:
        pytest.skip(why)
    pytest.importorskip('dask_jobqueue')


MODULE = 'lazyphi_slurm_nodes_sim'  # written into tmp_path: importable here and, through PYTHONPATH, by the jobs
SOURCE = textwrap.dedent('''
    import os
    import socket
    import time
    from dataclasses import dataclass

    import numpy as np

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial


    @dataclass(frozen=True)
    class Field:
        data: Tensor
        marks: str = ''  # a folder where each block computed leaves a mark: its first element, node and job
        seconds: float = 0.0  # how long each block takes on top

        @cached_property
        def energy(self) -> Tensor:
            if self.marks and self.data.available:  # a block on real data (not the planner's trace)
                first = int(self.data.sample[0].x[0])
                job = os.environ.get('SLURM_JOB_ID', 'none')
                open(os.path.join(self.marks, f'{first}-{socket.gethostname()}-{job}'), 'w').close()
                time.sleep(self.seconds)
            u = self.data * 3 + 1
            return math.sum(u * u, spatial)


    def values(n: int):  # integers: every result below is exact in float64; element i starts with i
        return np.arange(n, dtype=np.float64)[:, None] + 1000 * np.arange(16, dtype=np.float64)


    def make(n: int, marks: str = '', seconds: float = 0.0) -> Field:
        return Field(math.tensor(values(n), batch('sample'), spatial('x')), marks, seconds)


    def expected(n: int):
        u = values(n) * 3 + 1
        return (u * u).sum(axis=1)
''')


@pytest.fixture
def sim(tmp_path, monkeypatch):
    (tmp_path / f'{MODULE}.py').write_text(SOURCE)
    (tmp_path / 'marks').mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield importlib.import_module(MODULE)
    sys.modules.pop(MODULE, None)


def _marks(tmp_path) -> list[tuple[int, str, str]]:
    """(first element, node, job) of each block that started computing, oldest first."""
    paths = sorted((tmp_path / 'marks').iterdir(), key=lambda p: p.stat().st_mtime_ns)
    return [(int(first), node, job) for first, node, job in (p.name.split('-') for p in paths)]


def _clear_marks(tmp_path) -> None:
    for path in (tmp_path / 'marks').iterdir():
        path.unlink()


def _records(cache_dir) -> set[int]:
    """The chunks of `energy` complete on disk (each has its completion record)."""
    return {int(os.path.basename(p).split('.')[0]) for p in glob.glob(f'{cache_dir}/*/energy.done/*')}


def _wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {seconds} s for {what}')
        time.sleep(0.05)
    return found


def _jobs(name: str) -> set[str]:
    """The ids of the jobs named `name` that squeue shows (pending, running or completing)."""
    return set(slurm_cluster.slurm('squeue', '-h', '-n', name, '-o', '%i').split())


def _compute(instance, sim, cache_dir, client, **kwargs):
    return parallel_compute(instance, [sim.Field.energy], 'sample', cache_dir=str(cache_dir), scheduler=client,
                            progress=False, **kwargs)


def test_one_worker_per_node_computes_1000_elements(tmp_path, sim):
    from distributed import Client
    from distributed.comm import get_address_host

    cache_dir = tmp_path / 'cache'
    cluster = slurm_cluster.cluster(tmp_path, 'lazyphi-test-nodes')
    try:
        cluster.scale(jobs=NODES)
        with Client(cluster) as client:
            client.wait_for_workers(NODES, timeout=120)
            workers = client.scheduler_info(n_workers=-1)['workers']
            assert sorted(get_address_host(w) for w in workers) == slurm_cluster.node_addresses()
            assert sorted(client.run(lambda: os.uname().nodename).values()) == slurm_cluster.node_names()
            instance = sim.make(1000, str(tmp_path / 'marks'), seconds=0.2)
            done = _compute(instance, sim, cache_dir, client)
    finally:
        cluster.close()
    np.testing.assert_array_equal(instance.energy.numpy('sample'), sim.expected(1000))
    assert done.reused == 0 and done.resumable == len(_records(cache_dir)) >= 16, done
    nodes = {node for _, node, _ in _marks(tmp_path)}
    assert nodes == set(slurm_cluster.node_names())  # every node computed blocks and wrote them to the shared cache


def test_a_node_dies_mid_run(tmp_path, sim):
    """SIGKILL every process of one node at once while it computes a block: the run goes on on the other nodes."""
    from distributed import Client, KilledWorker

    cache_dir = tmp_path / 'cache'
    killed = {}
    cluster = slurm_cluster.cluster(tmp_path, 'lazyphi-test-node-dies')
    try:
        cluster.scale(jobs=NODES)
        with Client(cluster) as client:
            client.wait_for_workers(NODES, timeout=120)

            def kill_a_node():  # once the first round of blocks is done, the node running the newest block
                try:
                    first, node, _ = _wait_for(lambda: len(_marks(tmp_path)) > NODES and _marks(tmp_path)[-1], 120,
                                           'a second round of blocks')
                    number = slurm_cluster.node_names().index(node) + 1
                    killed.update(node=number, block=first, records=_records(cache_dir))
                    slurm_cluster.node('kill', number)
                    slurm_cluster.slurm('scontrol', 'update', f'nodename={node}', 'state=down', 'reason=test-kill')
                except BaseException as err:  # reported by the test's thread
                    killed['error'] = err

            killer = threading.Thread(target=kill_a_node)
            killer.start()
            instance = sim.make(96, str(tmp_path / 'marks'), seconds=1.0)
            try:
                done = _compute(instance, sim, cache_dir, client)
                failed = None
            except Exception as err:  # allowed, if it names what was lost (checked below)
                failed = err
            killer.join(timeout=150)
            assert 'error' not in killed, killed
            assert len(client.scheduler_info(n_workers=-1)['workers']) == NODES - 1
    finally:
        cluster.close()
        if 'node' in killed:  # later tests get all nodes again
            slurm_cluster.node('start', killed['node'])
            _wait_for(lambda: slurm_cluster.slurm('sinfo', '-h', '-n', slurm_cluster.node_names()[killed['node'] - 1],
                                                  '-o', '%T').strip() == 'idle', 60, 'the node to be idle again')
    assert killed['records'] <= _records(cache_dir)  # blocks written before the kill stay complete
    lost = slurm_cluster.node_names()[killed['node'] - 1]
    recomputed = {node for first, node, _ in _marks(tmp_path) if first == killed['block']} - {lost}
    again = sim.make(96, str(tmp_path / 'marks'), seconds=1.0)
    on_disk = _records(cache_dir)
    _clear_marks(tmp_path)
    rerun = _compute(again, sim, cache_dir, 'threads')
    np.testing.assert_array_equal(again.energy.numpy('sample'), sim.expected(96))
    assert rerun.reused == len(on_disk) and rerun.resumable == 16, rerun  # 96 elements: 16 chunks of 6
    assert len(_marks(tmp_path)) == rerun.resumable - rerun.reused  # only the blocks not on disk ran
    if failed is None:
        np.testing.assert_array_equal(instance.energy.numpy('sample'), sim.expected(96))
        assert done.reused == 0 and rerun.reused == 16, done
        assert recomputed, _marks(tmp_path)  # the block the node was computing ran again on another node
    else:  # Dask gave up on a block whose workers kept dying (naming it), or lazyphi on a cluster left with none
        assert isinstance(failed, KilledWorker | NoWorkers), failed


def test_jobs_shorter_than_the_run(tmp_path, sim):
    """Jobs of a 1-minute walltime whose workers retire after 25 s +- 10 s; adapt() replaces them as they end."""
    from distributed import Client

    cache_dir, name = tmp_path / 'cache', 'lazyphi-test-walltime'
    # a job whose worker left is replaced once the cluster forgets it: after 15 s by default, 2 s here
    with dask.config.set({'distributed.deploy.lost-worker-timeout': '2s'}):
        cluster = slurm_cluster.cluster(tmp_path, name, walltime='00:01:00',
                                        worker_extra_args=['--lifetime', '25s', '--lifetime-stagger', '10s'])
        try:
            cluster.adapt(minimum_jobs=NODES, maximum_jobs=NODES)
            with Client(cluster) as client:
                client.wait_for_workers(1, timeout=120)
                # 72 blocks of 8 elements, 2.5 s each: 3 workers at once need 60 s, a job's walltime, and more
                instance = sim.make(576, str(tmp_path / 'marks'), seconds=2.5)
                done = _compute(instance, sim, cache_dir, client, chunk_bytes=64)
                running = _jobs(name)
        finally:
            cluster.close()
    np.testing.assert_array_equal(instance.energy.numpy('sample'), sim.expected(576))
    assert done.reused == 0 and done.resumable == len(_records(cache_dir)) == 72, done
    marks = _marks(tmp_path)
    ran = {job for _, _, job in marks}
    first = {job for _, _, job in marks[:NODES]}
    assert len(ran) > NODES and not first & running, (marks, running)  # the jobs that began the run ended in it
    _wait_for(lambda: not _jobs(name), 60, f'the jobs named {name} to leave the queue')


CLIENT = textwrap.dedent(f'''
    import sys

    from distributed import Client

    import slurm_cluster
    from lazyphi.parallel import NoWorkers, parallel_compute
    from {MODULE} import Field, make

    if __name__ == '__main__':
        folder, name = sys.argv[1], sys.argv[2]
        cluster = slurm_cluster.cluster(folder, name)
        cluster.scale(jobs={NODES})
        with Client(cluster) as client:
            client.wait_for_workers({NODES}, timeout=120)
            done = parallel_compute(make(96, folder + '/marks', 1.0), [Field.energy], 'sample',
                                    cache_dir=folder + '/cache', scheduler=client, progress=False)
            print('reused', done.reused, 'of', done.resumable, flush=True)
        cluster.close()
''')


def _end_session(process: subprocess.Popen) -> None:
    """SIGKILL what is left of the session the test started for `process` (nothing, where all went well)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def test_the_client_dies(tmp_path, sim):
    """The batch script running parallel_compute (and, in it, the Dask scheduler) is SIGKILLed mid-run."""
    (tmp_path / 'client.py').write_text(CLIENT)
    cache_dir, name = tmp_path / 'cache', 'lazyphi-test-client'
    path = os.pathsep.join([str(Path(__file__).parent), str(tmp_path), os.environ.get('PYTHONPATH', '')])

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, 'client.py', str(tmp_path), name], cwd=tmp_path, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                env={**os.environ, 'PYTHONPATH': path})

    client = start()
    try:
        _wait_for(lambda: len(_records(cache_dir)) >= NODES or client.poll() is not None, 180, 'blocks on disk')
        os.kill(client.pid, signal.SIGKILL)
        _, err = client.communicate(timeout=30)
    finally:
        _end_session(client)
    assert client.returncode == -signal.SIGKILL, err[-3000:]  # killed, not ended on its own
    # its workers lose their scheduler and exit, which ends their jobs
    _wait_for(lambda: not _jobs(name), 60, 'the killed run\'s jobs to end')
    on_disk = _records(cache_dir)
    assert 0 < len(on_disk) < 16
    _clear_marks(tmp_path)

    client = start()
    try:
        out, err = client.communicate(timeout=240)
    finally:
        _end_session(client)
    assert client.returncode == 0, err[-3000:]
    assert f'reused {len(on_disk)} of 16' in out, out  # 96 elements: 16 chunks of 6, those on disk not computed
    assert sorted(first for first, _, _ in _marks(tmp_path)) == [6 * c for c in range(16) if c not in on_disk]
    _wait_for(lambda: not _jobs(name), 30, 'the jobs to leave the queue')  # completing ones take a moment
    again = sim.make(96, str(tmp_path / 'marks'), 1.0)
    rerun = _compute(again, sim, cache_dir, 'sync')
    assert rerun.reused == 16, rerun
    np.testing.assert_array_equal(again.energy.numpy('sample'), sim.expected(96))
