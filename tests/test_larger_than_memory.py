"""A result four times the workers' memory: computed to disk within every worker's limit, reduced piece by piece.

Issue #31 (A). The cluster here is a `distributed.LocalCluster` of 3 worker processes of 256 MiB each, and the
result 3 GiB (192 elements of 16 MiB along the parallel dim): the issue's 3 x 512 MiB and 6 GiB scaled down by
half, keeping the ratio of 4, since the test took 197 s with 6 GiB on this 2-core machine shared with other work
(3 GiB: 40 s at a load average of 3, 218 s at 11). `check_larger_than_memory` reads the limits from the workers
and sizes the result from them, so it runs on any `distributed.Client` whose workers have one (3 x 512 MiB gives
the 6 GiB). The client part runs in a process of its own, so that its peak RSS (`ru_maxrss`) is its own; the
workers' peaks (VmHWM, started over before the run) are read from each worker after it (the same processes: a
worker restarted by its nanny would have started its count again, so their ids are compared too). It writes the
result (3 GiB) to a temporary directory and removes it again.
"""

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import lazyphi

distributed = pytest.importorskip('distributed')

MIB = 2 ** 20
ELEMENT_BYTES = 4096 * 1024 * 4  # one element of the result: x=4096 by y=1024 float32, 16 MiB, one chunk
TIMES_MEMORY = 4  # the result is at least this many times the workers' memory limits together

CLIENT = textwrap.dedent('''
    import json, resource, sys
    from dataclasses import dataclass

    import numpy as np
    from distributed import Client

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial
    from lazyphi.parallel import parallel_compute
    from lazyphi.storage import DiskTensor
    from lazyphi.storage._out_of_core import OUT_OF_CORE_BYTES


    @dataclass(frozen=True)
    class Waves:
        phase: Tensor  # batch b
        x: Tensor  # spatial x
        y: Tensor  # spatial y

        @cached_property
        def field(self) -> Tensor:
            return math.sin(self.phase + self.x * self.y)


    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


    if __name__ == '__main__':
        address, cache_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
        client = Client(address)
        phase = math.tensor(np.linspace(0, 7, n, dtype=np.float32), batch('b'))
        x = math.tensor(np.linspace(0, 3, 4096, dtype=np.float32), spatial('x'))
        y = math.tensor(np.linspace(-2, 2, 1024, dtype=np.float32), spatial('y'))
        waves = Waves(phase, x, y)
        before = peak()
        p = parallel_compute(waves, [Waves.field], cache_dir=cache_dir, memory_limit=1, scheduler=client,
                             progress=False)
        computed = peak()
        field = waves.field
        assert isinstance(field, DiskTensor) and not field.available, type(field)
        mean = math.mean(field, 'b')
        reduced = peak()
        assert not field.available  # the mean kept nothing of it in memory
        for i in (0, 1, n // 2, n - 1):  # the values on disk are those computed directly
            np.testing.assert_array_equal(field.b[i].numpy('x,y'), math.sin(phase.b[i] + x * y).numpy('x,y'))
        for j in (0, 1000, 4095):
            direct = math.mean(math.sin(phase + x.x[j] * y), 'b')
            np.testing.assert_allclose(mean.x[j].numpy('y'), direct.numpy('y'), rtol=1e-5, atol=1e-6)
        print(json.dumps({'before': before, 'computed': computed, 'reduced': reduced, 'blocks': p.resumable,
                          'nbytes': field.shape.volume * 4, 'piece': OUT_OF_CORE_BYTES,
                          'mean_bytes': mean.shape.volume * 4}))
''')


def _reset_peak_rss() -> None:
    """Start this process's peak RSS (VmHWM) over from its current RSS (Linux 4.0+).

    A worker process forked from a large one (distributed's forkserver, started by a test process already holding
    gigabytes) inherits that process's peak: `ru_maxrss` said 2990 MiB for a worker of 256 MiB in CI.
    """
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')


def _peak_rss() -> int:
    """This process's peak RSS since it started or since `_reset_peak_rss` (VmHWM)."""
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmHWM:')) * 1024


def check_larger_than_memory(client, directory) -> dict:
    """Run the client part against `client`'s scheduler with a result `TIMES_MEMORY` times its workers' limits.

    Returns:
        The client's figures (bytes) and, per worker, its limit and peak RSS.
    """
    limits = client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
    if not limits or not all(limits.values()):
        pytest.skip(f'the workers need a memory limit to size the result against; got {limits}')
    elements = -(-TIMES_MEMORY * sum(limits.values()) // ELEMENT_BYTES)
    pids = client.run(os.getpid)
    client.run(_reset_peak_rss)
    script = os.path.join(directory, 'client.py')
    with open(script, 'w') as f:
        f.write(CLIENT)
    cache_dir = os.path.join(directory, 'cache')
    os.mkdir(cache_dir)
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([os.path.dirname(os.path.dirname(lazyphi.__file__)),
                                                        os.environ.get('PYTHONPATH', '')])}
    try:
        run = subprocess.run([sys.executable, script, client.scheduler.address, cache_dir, str(elements)],
                             capture_output=True, text=True, env=env, timeout=600)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    assert run.returncode == 0, run.stderr
    assert client.run(os.getpid) == pids, 'a worker was restarted (its nanny ends it at 95 % of its limit)'
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    figures['workers'] = {w: (limits[w], peak) for w, peak in client.run(_peak_rss).items()}
    return figures


@pytest.mark.slow
def test_a_result_four_times_the_workers_memory_is_computed_to_disk_and_reduced_piece_by_piece(tmp_path):
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, memory_limit='256MiB', processes=True,
                                  dashboard_address=':0', silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        figures = check_larger_than_memory(client, tmp_path)
    total_limit = sum(limit for limit, _ in figures['workers'].values())
    assert figures['nbytes'] >= TIMES_MEMORY * total_limit
    assert figures['blocks'] == figures['nbytes'] // ELEMENT_BYTES  # one block per 16 MiB chunk
    for worker, (limit, peak) in figures['workers'].items():
        assert peak < limit, f'{worker} peaked at {peak / MIB:.0f} MiB, past its limit of {limit / MIB:.0f} MiB'
    # the client: what the run fetched is references to the chunks; the mean holds one piece read from disk and
    # the partial results (a sum and a mean of the size of the result, as the partial of one piece and of those
    # merged), never the whole 3 GiB
    assert figures['computed'] - figures['before'] < 64 * MIB
    assert figures['reduced'] - figures['before'] < figures['piece'] + 4 * figures['mean_bytes'] + 64 * MIB
