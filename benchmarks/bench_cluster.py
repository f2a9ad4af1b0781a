"""Time `parallel_compute` per block on a cluster at 10^3 to 10^5 blocks, beside the same work in `dask.array`.

Issue #31 (B). The cluster: where a SLURM answers (the test cluster of `scripts/slurm-up.sh`, found as
tests/slurm_cluster.py finds it, or any SLURM `sinfo` reaches), a scheduler in a process of its own, listening
where the nodes reach it, and 2 single-threaded workers, each a 1-CPU job (`sbatch`; on the test cluster's 1-CPU
nodes, a node each); `--scheduler ADDRESS` uses a running scheduler; otherwise a `distributed.LocalCluster` of 2
single-threaded worker processes, or with `--own-scheduler` the same started as processes of their own (`dask
scheduler`, `dask worker`). A `LocalCluster` runs its scheduler in this process, so this process's memory holds the
scheduler's state of every task too (as would a `dask_jobqueue.SLURMCluster`'s); elsewhere it is the client's
alone. The first line says which.

1. 16 FFTs of 256x256 (`bench_parallel.py`'s case (a)) on the cluster against the round trip of as many no-op
   tasks as the plan has blocks plus the same call on local threads, all measured here (target: at most that
   sum); beside them the same FFTs written by hand for distributed (`client.scatter` of the same slices,
   `client.map`, `client.gather`): what moving this data through the cluster costs any program.
2. Per block at each size (block_size=1, a property `self.data + 1` over N elements), each figure printed as it is
   measured, in this order: the default call (`parallel_compute(instance, props, scheduler=client,
   block_size=1)`, no `progress=` argument); the client's peak RSS growth per block during one such call, in a
   client process started for it (target: at most 2 KiB per block; `/proc/self/clear_refs` resets the peak),
   beside the same for N no-op tasks by `client.map` and as one dict graph (what distributed itself holds per
   task) and for the `dask.array` graph below; the time until the graph was sent (planning, compiling, and
   `client.get` returning: target at most 20 % of the call); the floor: the round trip of N tasks that do nothing
   (`client.map`, and a plain dict graph through `client.get`), what any graph of N tasks waits for on this
   cluster; `dask.array`'s `from_array(chunks=1) + 1` computed on the same client (target: lazyphi at most 0.5x
   per block); and the call with `progress=False`. A `dask.array` call during which a worker stays paused (its
   memory over distributed's pause threshold) for `PAUSED_FOR` seconds is stopped, reported as not finished,
   and the workers restarted. At the end, from each size to the next: the client's growth per block
   added, in which what a call costs at any size drops out.

Figures are medians over the repeats (the machine is shared: their spread is printed). Prints; asserts nothing.

Usage: python benchmarks/bench_cluster.py [--sizes 1000 10000 100000] [--repeats 3] [--scheduler ADDRESS]
                                          [--own-scheduler]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math as math_
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_parallel import Spectra, Trivial, fft_data, med, ms, spread, times, trivial_tasks, verdict

from lazyphi import math
from lazyphi.math import batch, spatial
from lazyphi.parallel import parallel_compute, plan

KIB = 1024


def slurm_settings() -> dict | None:
    """The test cluster's settings (`scripts/slurm-up.sh`, tests/slurm_cluster.py) where a SLURM answers, else None."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests'))
    import slurm_cluster

    return None if slurm_cluster.why_no_slurm() else slurm_cluster.settings()


class OwnProcesses:
    """A scheduler and 2 single-threaded workers started as processes of their own (Dask's command lines).

    With `slurm` (the test cluster's settings), the scheduler listens where the nodes reach it and each worker is a
    1-CPU SLURM job of its own (`sbatch`), so on a node of its own where the nodes have 1 CPU each.
    """

    def __init__(self, slurm: dict | None = None):
        self.directory = tempfile.mkdtemp()
        self.file = os.path.join(self.directory, 'scheduler.json')
        self.jobs = []
        # this process's path: the workers unpickle the benchmark's classes from bench_parallel by name
        path = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
        quiet = {'stdout': subprocess.DEVNULL, 'stderr': subprocess.DEVNULL, 'env': {**os.environ, 'PYTHONPATH': path}}
        address = (slurm or {}).get('LAZYPHI_SLURM_SCHEDULER_HOST')  # the bridge of the test cluster's nodes
        host = ['--host', address] if address else []
        self.processes = [subprocess.Popen([sys.executable, '-m', 'distributed.cli.dask_scheduler', '--port', '0',
                                            '--no-dashboard', '--scheduler-file', self.file, *host], **quiet)]
        worker = [sys.executable, '-m', 'distributed.cli.dask_worker', '--nthreads', '1', '--no-dashboard',
                  '--scheduler-file', self.file]
        if slurm is None:
            self.processes.append(subprocess.Popen([*worker, '--nworkers', '2'], **quiet))
            return
        for i in range(2):
            command = ' '.join(shlex.quote(part) for part in ['env', f'PYTHONPATH={path}', *worker])
            self.jobs.append(subprocess.run(
                ['sbatch', '--parsable', '--nodes=1', '--ntasks=1', '--cpus-per-task=1', '--job-name=bench-cluster',
                 f'--output={self.directory}/worker-{i}.log', f'--chdir={self.directory}', f'--wrap={command}'],
                capture_output=True, text=True, check=True).stdout.strip().split(';')[0])

    def wait_for_file(self) -> None:
        for _ in range(600):
            if os.path.exists(self.file):
                return
            time.sleep(0.1)

    def close(self) -> None:
        if self.jobs:
            subprocess.run(['scancel', *self.jobs], capture_output=True)
        for process in self.processes:
            process.terminate()
            process.wait(30)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_cluster(address: str | None, own: bool):
    """(client, cluster or None, what it is)."""
    from distributed import Client, LocalCluster
    from distributed.comm import get_address_host

    if address:
        client = Client(address)
        return client, None, f'the scheduler at {address} ({len(client.nthreads())} worker threads)'
    slurm = None if own else slurm_settings()
    if own or slurm is not None:
        cluster = OwnProcesses(slurm)
        cluster.wait_for_file()
        client = Client(scheduler_file=cluster.file)
        client.wait_for_workers(2, timeout=300)
        if slurm is None:
            return client, cluster, ('a scheduler and 2 single-threaded workers in processes of their own (dask '
                                     'scheduler, dask worker)')
        hosts = sorted(get_address_host(w) for w in client.scheduler_info(n_workers=-1)['workers'])
        return client, cluster, (f'SLURM: a scheduler at {client.scheduler.address} in a process of its own, 2 '
                                 f'single-threaded workers as 1-CPU jobs (sbatch) on the nodes at {", ".join(hosts)}')
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=':0', silence_logs=logging.ERROR)
    return Client(cluster), cluster, 'distributed.LocalCluster(n_workers=2, threads_per_worker=1): no SLURM found'


def rss() -> tuple[int, int]:
    """(current, peak) resident bytes of this process (peak since the last `reset_peak`)."""
    fields = {}
    with open('/proc/self/status') as f:
        for line in f:
            key, _, value = line.partition(':')
            if key in ('VmRSS', 'VmHWM'):
                fields[key] = int(value.split()[0]) * KIB
    return fields['VmRSS'], fields['VmHWM']


def reset_peak() -> None:
    """Reset the kernel's peak RSS of this process to its current RSS (Linux 4.0 and later)."""
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')


def _noop(*_):
    return None


def floor(client, n: int, repeats: int) -> dict:
    """Seconds of a round trip of `n` no-op tasks: by `client.map`, and as one plain dict graph."""
    graph_times = []
    for _ in range(repeats):
        graph = {('noop', i): (_noop, i) for i in range(n)}
        start = time.perf_counter()
        client.get(graph, list(graph))
        graph_times.append(time.perf_counter() - start)
    return {'map': trivial_tasks(client, n, repeats), 'graph': med(graph_times)}


CLIENT_CALLS = ('lazyphi', 'client.map', 'dict graph', 'dask.array')


def client_memory(address: str, n: int) -> dict:
    """Each of `CLIENT_CALLS` at `n` tasks -> the peak RSS growth per task of a client process of its own, started
    for that one call (`client_memory_child`) on the cluster at `address`.

    Measured in this process, a call's growth depends on what earlier calls left: memory they freed is used again
    without growing the RSS (the same 10,000 blocks measured 0.5 KiB per block here after the other cases ran, 1.8
    in a new process).
    """
    path = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    growth = {}
    for what in CLIENT_CALLS:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), '--client-memory', what, str(n),
                               '--scheduler', address], capture_output=True, text=True, timeout=7200,
                              env={**os.environ, 'PYTHONPATH': path})
        lines = done.stdout.split()
        growth[what] = float(lines[-1]) if done.returncode == 0 and lines else float('nan')
    return growth


def kib(bytes_per_task: float) -> str:
    return 'did not finish' if math_.isnan(bytes_per_task) else f'{bytes_per_task / KIB:.2f} KiB'


def client_memory_child(address: str, what: str, n: int) -> None:
    """In a new client process: warm up, run `what` once over `n` elements, print its peak RSS growth per task."""
    import dask.array as da
    from distributed import Client

    client = Client(address)
    for _ in range(2):  # imports and connections, as a client has them before its first large run
        parallel_compute(Trivial(math.tensor(np.zeros(8), batch('b'))), [Trivial.plus], scheduler=client,
                         block_size=1, progress=False)
        client.gather(client.map(_noop, range(8), pure=False))
        client.compute(da.from_array(np.zeros(8), chunks=1) + 1).result()
    values = np.random.default_rng(0).standard_normal(n)
    calls = {
        'lazyphi': lambda: parallel_compute(Trivial(math.tensor(values, batch('b'))), [Trivial.plus],
                                            scheduler=client, block_size=1, progress=False),
        'client.map': lambda: client.gather(client.map(_noop, range(n), pure=False)),
        'dict graph': lambda: client.get({('noop', i): (_noop, i) for i in range(n)}, [('noop', i) for i in range(n)]),
        'dask.array': lambda: result_unless_stalled(client, client.compute(da.from_array(values, chunks=1) + 1)),
    }
    current, _ = rss()
    reset_peak()
    try:
        calls[what]()
    except Stalled as stalled:
        print(stalled, file=sys.stderr)
        print('nan')
    else:
        print((rss()[1] - current) / n)
    client.close()


class Stalled(Exception):
    """A worker stayed paused for `PAUSED_FOR` seconds during a call: its memory over the pause threshold
    (`distributed.worker.memory.pause`), it runs nothing and fetches nothing, and stays so until restarted (a
    `dask.array` graph of 100,000 chunks stopped so on the test cluster: one worker paused before it could fetch
    the other's half of the results for the final concatenation, the other idle)."""


PAUSED_FOR = 30.0


def result_unless_stalled(client, future):
    """`future`'s result, or `Stalled` where a worker stays paused for `PAUSED_FOR` seconds while it waits (the
    call cancelled and the workers restarted first, so that the cases after it can run)."""
    paused_since = None
    while True:
        try:
            return future.result(timeout=5)
        except TimeoutError:
            workers = client.scheduler_info(n_workers=-1)['workers'].values()
            if not any(w.get('status') == 'paused' for w in workers):
                paused_since = None
                continue
            paused_since = paused_since or time.perf_counter()
            if time.perf_counter() - paused_since < PAUSED_FOR:
                continue
            held = ', '.join(f"{w['metrics']['memory'] / 2 ** 20:.0f} of {w['memory_limit'] / 2 ** 20:.0f} MiB "
                             f"({w['metrics']['managed_bytes'] / 2 ** 20:.1f} MiB of it results)" for w in workers)
            client.cancel(future)
            client.restart()
            raise Stalled(f'a worker paused for {PAUSED_FOR:.0f} s; workers\' memory {held}; restarted') from None


class SubmitClock:
    """Records when `client.get` (which lazyphi calls once per run to send its graph) last returned."""

    def __init__(self, client):
        self.client = client
        self.sent = None
        self._get = client.get

    def __enter__(self):
        def get(*args, **kwargs):
            result = self._get(*args, **kwargs)
            self.sent = time.perf_counter()
            return result
        self.client.get = get
        return self

    def __exit__(self, *exc):
        del self.client.get  # the instance attribute; the method shows again


def lazyphi_call(client, data, **tuning) -> dict:
    """One call: its seconds, and the share until the graph was sent."""
    instance = Trivial(data)
    with SubmitClock(client) as clock:
        start = time.perf_counter()
        parallel_compute(instance, [Trivial.plus], scheduler=client, block_size=1, **tuning)
        end = time.perf_counter()
    assert instance.plus.shape == data.shape
    return {'time': end - start, 'sent': clock.sent - start}


def dask_array_call(client, values: np.ndarray) -> float:
    import dask.array as da

    start = time.perf_counter()
    array = da.from_array(values, chunks=1) + 1
    result = result_unless_stalled(client, client.compute(array))
    elapsed = time.perf_counter() - start
    assert result.shape == values.shape
    return elapsed


def case_blocks(client, n: int, repeats: int) -> float:
    """Each figure printed as soon as it is measured (a case of 100,000 blocks takes most of an hour on a loaded
    machine): lazyphi's default call first, in a process that has not yet run this size. Returns the client's peak
    RSS growth per block."""
    print(f'{n:,} blocks (block_size=1, self.data + 1)', flush=True)
    values = np.random.default_rng(0).standard_normal(n)
    data = math.tensor(values, batch('b'))
    p = plan(Trivial(data), [Trivial.plus], block_size=1, scheduler=client)
    blocks = sum(len(s.blocks) for s in p.stages)
    default = [lazyphi_call(client, data) for _ in range(repeats)]
    t = med([c['time'] for c in default])
    print(f'    lazyphi default             {ms(t)} {spread([c["time"] for c in default])} -> '
          f'{t / blocks * 1e3:.2f} ms per block ({blocks:,} blocks)', flush=True)
    growth = client_memory(client.scheduler.address, n)
    print(f'    client RSS per block        {growth["lazyphi"] / KIB:.2f} KiB, each call in a new client process   '
          f'target <= 2 KiB: {verdict(growth["lazyphi"] <= 2 * KIB)}; the same per task: '
          + ', '.join(f'{what} {kib(growth[what])}' for what in CLIENT_CALLS[1:]), flush=True)
    sent = med([c['sent'] / c['time'] for c in default])
    print(f'    plan, compile and submit    {ms(med([c["sent"] for c in default]))} = {sent:.0%} of the call   '
          f'target <= 20 %: {verdict(sent <= 0.2)}', flush=True)
    noop = floor(client, n, repeats)
    print(f'    floor: {n:,} no-op tasks      client.map {ms(noop["map"])} ({noop["map"] / n * 1e3:.2f} ms/task), '
          f'one dict graph {ms(noop["graph"])} ({noop["graph"] / n * 1e3:.2f} ms/task); lazyphi / floor (dict '
          f'graph) {t / noop["graph"]:.2f}x', flush=True)
    try:
        peer = [dask_array_call(client, values) for _ in range(repeats)]
    except Stalled as stalled:
        print(f'    dask.array x + 1, chunks=1  did not finish: {stalled}', flush=True)
        peer = None
    if peer:
        print_peer(t, peer, default, n)
    t_tuned = med([lazyphi_call(client, data, progress=False)['time'] for _ in range(repeats)])
    print(f'      tuned (progress=False)    {ms(t_tuned)} -> {t_tuned / blocks * 1e3:.2f} ms per block', flush=True)
    return growth['lazyphi']


def print_peer(t: float, peer: list, default: list, n: int) -> None:
    t_peer = med(peer)
    print(f'    dask.array x + 1, chunks=1  {ms(t_peer)} {spread(peer)} -> {t_peer / n * 1e3:.2f} ms per chunk')
    print(f'    lazyphi / dask.array        {t / t_peer:8.2f}x   target <= 0.5x: {verdict(t / t_peer <= 0.5)} '
          f'(of the minimums: {min(c["time"] for c in default) / min(peer):.2f}x)', flush=True)


def print_growth_between(growth: dict) -> None:
    """The client's peak RSS growth per block added from one size to the next (`growth`: blocks -> bytes per block
    at that size): what a call needs whatever its size (imports aside, a part of the graph while it is sent, the
    futures of a batch of results) is in each size's own figure, and drops out here."""
    sizes = sorted(growth)
    for small, large in itertools.pairwise(sizes):
        added = (growth[large] * large - growth[small] * small) / (large - small)
        print(f'client RSS from {small:,} to {large:,} blocks: {added / KIB:.2f} KiB per block added   '
              f'target <= 2 KiB: {verdict(added <= 2 * KIB)}')


def case_fft(client, repeats: int) -> None:
    from bench_parallel import FFT_SIZE, N_FFT

    print(f'{N_FFT} FFTs of {FFT_SIZE}x{FFT_SIZE} float32: the cluster against threads plus the no-op round trip')
    data = math.tensor(fft_data(np.random.default_rng(0)), batch('b'), spatial('x', 'y'))
    blocks = sum(len(s.blocks) for s in plan(Spectra(data), [Spectra.spectrum], scheduler=client).stages)
    threads = times(lambda: parallel_compute(Spectra(data), [Spectra.spectrum], scheduler='threads', max_workers=2),
                    repeats * 3)
    cluster = times(lambda: parallel_compute(Spectra(data), [Spectra.spectrum], scheduler=client), repeats * 3)
    noop = [trivial_tasks(client, blocks, 1) for _ in range(repeats * 3)]
    pieces = np.array_split(data.native('b,x,y'), blocks)
    by_hand = times(lambda: client.gather(client.map(_spectrum, client.scatter(pieces))), repeats * 3)
    bound = med(threads) + med(noop)
    print(f'    threads x2                  {ms(med(threads))} {spread(threads)}')
    print(f'    {blocks} no-op tasks round trip   {ms(med(noop))} {spread(noop)}')
    print(f'    by hand in distributed      {ms(med(by_hand))} {spread(by_hand)}: the floor of moving this data, '
          f'scatter + map + gather of the same {blocks} slices')
    print(f'    on the cluster              {ms(med(cluster))} {spread(cluster)}, {blocks} blocks   target <= '
          f'{ms(bound).strip()} (the sum): {verdict(med(cluster) <= bound)}; '
          f'{med(cluster) / med(by_hand):.2f}x the hand-written floor')


def _spectrum(x: np.ndarray) -> np.ndarray:
    """What `Spectra.spectrum` computes on one block, written directly for distributed."""
    return np.fft.fftn(x, axes=(1, 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[1000, 10_000, 100_000])
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--scheduler', help='the address of a running Dask scheduler to use')
    parser.add_argument('--own-scheduler', action='store_true', help='no SLURM: start the scheduler and workers as '
                        'processes of their own instead of a LocalCluster, whose scheduler runs in this process')
    parser.add_argument('--client-memory', nargs=2, metavar=('CALL', 'N'), help='internal: measure one of '
                        f'{", ".join(CLIENT_CALLS)} at N tasks in this process, a client of --scheduler')
    args = parser.parse_args()
    if args.client_memory:
        client_memory_child(args.scheduler, args.client_memory[0], int(args.client_memory[1]))
        return
    started = time.perf_counter()
    client, cluster, what = start_cluster(args.scheduler, args.own_scheduler)
    print(f'lazyphi cluster benchmark on {what}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}')
    try:
        for _ in range(args.repeats):  # warm up: imports and connections on the workers
            parallel_compute(Trivial(math.tensor(np.zeros(8), batch('b'))), [Trivial.plus], scheduler=client,
                             block_size=1, progress=False)
        case_fft(client, args.repeats)
        growth = {n: case_blocks(client, n, args.repeats if n <= 10_000 else 1) for n in args.sizes}
        print_growth_between(growth)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f'total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} after the run')


if __name__ == '__main__':
    main()
