"""Time resuming a `parallel_compute` job killed part way, against a full run (issue #19: at most 60 % at 50 %).

A job computes 64 filtered 256x256 fields (`seconds` of work each, slept so that the figures measure
the blocks, not the load of a shared machine) into a disk cache on 2 workers: a process pool, and a
`distributed.LocalCluster` of 2 single-threaded worker processes. Per scheduler it prints:

* a full run (`Plan.elapsed`, the run's own time, without starting Python or the cluster) and a run
  whose blocks are all on disk already (the fixed cost every resumed run pays);
* runs SIGKILLed with all their processes (as a preempted job or a node failure; `lazyphi run` turns
  SLURM's SIGTERM into the same stop) a quarter and half way through a full run's time, each then run
  again: the resumed run's time against the full run's, and the blocks it reused.

First with the default blocks (one per storage chunk where a stage writes to disk), then, labelled, with
`block_size=16`: two blocks per worker, the default before. Prints figures; asserts nothing.

Usage: python benchmarks/bench_resume.py [--quick]   (--quick: process pool only, 0.02 s per field)
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute

FIELDS = 64


@dataclass(frozen=True)
class Fields:
    data: Tensor
    seconds: float  # of work per element, slept

    @cached_property
    def smooth(self) -> Tensor:
        if self.data.available:  # not while planning traces it
            time.sleep(self.seconds * self.data.shape.get_size('example'))
        return math.real(math.ifft(math.fft(self.data) * 0.99))


def job(scheduler: str, cache_dir: str, block_size: int, seconds: float) -> None:
    """One run, in a process of its own; prints 'started' when it begins computing, then its figures."""
    client = None
    if scheduler == 'cluster':
        from distributed import Client, LocalCluster
        scheduler = client = Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=':0',
                                                 silence_logs=logging.ERROR))
    values = np.random.default_rng(0).standard_normal((FIELDS, 256, 256))
    fields = Fields(math.tensor(values, batch('example'), spatial('x', 'y')), seconds)
    print('started', flush=True)
    done = parallel_compute(fields, [Fields.smooth], 'example', scheduler=scheduler, max_workers=2,
                            cache_dir=cache_dir, block_size=block_size or None, progress=False)
    print('elapsed', done.elapsed, done.reused, len(done.stages[0].blocks), flush=True)
    if client is not None:
        client.cluster.close()
        client.close()


def run_job(scheduler: str, cache_dir: str, block_size: int, seconds: float,
            kill_after: float | None = None) -> tuple | None:
    """Run `job` in a new process; with `kill_after`, SIGKILL it and its processes that long after it started computing.

    Returns:
        (seconds the run took, blocks reused, blocks) of a run that finished; None for a killed one.
    """
    argv = [sys.executable, __file__, '--job', scheduler, cache_dir, str(block_size), str(seconds)]
    with tempfile.TemporaryFile('w+') as errors:  # shown only when a run fails: a killed cluster's logs are no news
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True)
        try:
            for line in proc.stdout:
                if line.startswith('started') and kill_after is not None:
                    time.sleep(kill_after)
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(60)
                    return None
                if line.startswith('elapsed'):
                    _, elapsed, reused, blocks = line.split()
                    proc.wait(60)
                    return float(elapsed), int(reused), int(blocks)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
        errors.seek(0)
        raise RuntimeError(f'the job ended without finishing (exit status {proc.returncode}):\n{errors.read()}')


def case(scheduler: str, label: str, block_size: int, seconds: float, tmp: str) -> None:
    full_dir = os.path.join(tmp, f'full-{scheduler}-{block_size}')
    full, _, blocks = run_job(scheduler, full_dir, block_size, seconds)
    fixed, _, _ = run_job(scheduler, full_dir, block_size, seconds)
    print(f'  {scheduler:<9} {label}: {blocks} blocks; full run {full:.2f} s; again with every block on disk '
          f'{fixed:.2f} s (the fixed cost)')
    for fraction in (0.25, 0.5):
        cache_dir = os.path.join(tmp, f'killed-{scheduler}-{block_size}-{fraction}')
        run_job(scheduler, cache_dir, block_size, seconds, kill_after=full * fraction)
        resumed, reused, _ = run_job(scheduler, cache_dir, block_size, seconds)
        ratio = resumed / full
        target = f'   target <= 60 %: {"met" if ratio <= 0.6 else "NOT met"}' if fraction == 0.5 else ''
        print(f'    killed at {fraction:.0%} ({full * fraction:.2f} s): resumed in {resumed:.2f} s = {ratio:.0%} of '
              f'the full run, {reused} of {blocks} blocks reused{target}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='process pool only, 0.02 s per field (a smoke run)')
    parser.add_argument('--job', nargs=4, metavar=('SCHEDULER', 'CACHE_DIR', 'BLOCK_SIZE', 'SECONDS'),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        scheduler, cache_dir, block_size, seconds = args.job
        job(scheduler, cache_dir, int(block_size), float(seconds))
        return
    seconds = 0.02 if args.quick else 0.3
    print(f'resuming killed runs: {FIELDS} fields of 256x256 filtered, {seconds} s of work each (slept), to a disk '
          f'cache, 2 workers; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; times are the runs\' '
          f'own (Plan.elapsed)')
    with tempfile.TemporaryDirectory() as tmp:
        for scheduler in ('processes',) if args.quick else ('processes', 'cluster'):
            for label, block_size in (('default blocks', 0), ('block_size=16, two per worker (the old default)', 16)):
                case(scheduler, label, block_size, seconds, tmp)
    print(f'load average {os.getloadavg()[0]:.2f} after the run')


if __name__ == '__main__':
    main()
