"""lazyphi demo: a batch of noisy 2-D signals analysed by dependent properties, computed on a local Dask cluster.

Run it with `bash scripts/demo.sh` (sets everything up) or, in an environment with lazyphi installed,
`python examples/demo.py`. It starts a `distributed.LocalCluster` itself, prints the dashboard link,
shows progress, prints the plan, and ends with a summary of what ran where and how long it took. The
cluster, and with it the dashboard, closes when the demo ends; `--keep-open` keeps both until you press
Enter or Ctrl-C, to look around the dashboard after the run. `--help` lists the other options.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass

from dask.utils import key_split
from distributed import Client, LocalCluster, get_task_stream

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute, parallel_property


@dataclass(frozen=True)
class SignalAnalysis:
    """Noisy 2-D signals, one per sample of the `sample` batch dim."""

    signals: Tensor
    cutoff: float = 0.25  # low-pass cutoff as a fraction of the Nyquist frequency

    @parallel_property(requires=spatial)
    def spectrum(self) -> Tensor:
        """The 2-D Fourier transform of each signal."""
        return math.fft(self.signals)

    @cached_property
    def power(self) -> Tensor:
        return math.abs(self.spectrum) ** 2

    @cached_property
    def filtered(self) -> Tensor:
        """The signals with frequencies above the cutoff removed."""
        k = math.meshgrid(spatial(x=self.signals.shape.get_size('x'), y=self.signals.shape.get_size('y')))
        size = self.signals.shape.get_size('x')
        freq = math.minimum(k, size - k) / (size / 2)
        keep = math.sum(freq ** 2, 'vector') <= self.cutoff ** 2
        return math.real(math.ifft(math.where(keep, self.spectrum, 0)))

    @cached_property
    def noise_level(self) -> float:
        """A per-sample summary handed to plain Python: lazyphi evaluates it sample by sample."""
        return float(math.std(self.signals - self.filtered))

    @parallel_property(requires=batch)
    def mean_power(self) -> Tensor:
        """The power spectrum averaged over all samples: needs the whole batch, so it runs on the host."""
        return math.mean(self.power, batch)

    @cached_property
    def relative_power(self) -> Tensor:
        return self.power / (self.mean_power + 1e-12)


def make_signals(samples: int, size: int) -> Tensor:
    x = math.linspace(0, 2 * math.PI, spatial(x=size))
    y = math.linspace(0, 2 * math.PI, spatial(y=size))
    phase = math.random_uniform(batch(sample=samples), high=2 * math.PI)
    clean = math.sin(3 * x + phase) * math.cos(2 * y)
    return clean + 0.3 * math.random_normal(batch(sample=samples), spatial(x=size, y=size))


def summarise(task_stream: list, elapsed: float) -> None:
    by_kind = defaultdict(lambda: [0, 0.0, set()])
    for record in task_stream:
        kind = key_split(record['key'])  # the task's group, as the dashboard names it
        duration = sum(s['stop'] - s['start'] for s in record['startstops'] if s['action'] == 'compute')
        entry = by_kind[kind]
        entry[0] += 1
        entry[1] += duration
        entry[2].add(record['worker'])
    print(f'\nWhat ran where ({elapsed:.2f} s in all):')
    width = max(map(len, by_kind), default=0)
    for kind, (count, seconds, workers) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f'  {kind:<{width}}  {_count(count, "task"):>9}  {seconds:6.2f} s compute  on '
              f'{_count(len(workers), "worker")}')


def _count(n: int, noun: str) -> str:
    return f'{n} {noun}{"" if n == 1 else "s"}'


def main(samples: int = 32, size: int = 256, keep_open: bool = False) -> None:
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
    client = Client(cluster)
    try:
        analysis = SignalAnalysis(make_signals(samples, size))
        started = time.perf_counter()
        with get_task_stream(client) as stream:
            plan = parallel_compute(analysis, [SignalAnalysis.relative_power, SignalAnalysis.noise_level],
                                    scheduler=client)
        elapsed = time.perf_counter() - started
        print(plan)
        summarise(stream.data, elapsed)
        overall = float(math.mean(analysis.relative_power, lambda s: s))
        print(f'\nrelative power: {analysis.relative_power.shape}, mean over everything {overall:.3f}')
        print(f'noise level per sample: {analysis.noise_level.numpy("sample").round(3)[:8]} ...')
        if keep_open:
            _wait_for_enter(client.dashboard_link)
        else:
            print('\nThe cluster and its dashboard close now; run the demo with --keep-open to keep them open.')
    finally:
        client.close()
        cluster.close()


def _wait_for_enter(dashboard: str) -> None:
    print(f'\nThe cluster stays open: its dashboard is at {dashboard}. Press Enter or Ctrl-C to close it.',
          flush=True)
    with contextlib.suppress(EOFError, KeyboardInterrupt):  # no terminal, or Ctrl-C: close as asked
        input()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--samples', type=int, default=32, help='signals in the batch (default 32)')
    parser.add_argument('--size', type=int, default=256, help='pixels along x and y of each signal (default 256)')
    parser.add_argument('--keep-open', action='store_true',
                        help='keep the cluster and its dashboard open after the run, until Enter or Ctrl-C')
    args = parser.parse_args()
    main(args.samples, args.size, args.keep_open)
