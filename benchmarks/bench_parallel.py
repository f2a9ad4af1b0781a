"""Time `lazyphi.parallel.parallel_compute` against the host, phiml and itself, from one run.

Cases (targets from the issues "Parallel computation" and #17). Every case times the default call first
(`parallel_compute(instance, props, max_workers=2, scheduler=...)`, no `progress=` argument), then the
tuned one (`progress=False`), labelled:

* (a) 16 FFTs of 256x256 float32 in a `@parallel_property(requires=spatial)`: lazyphi on threads with
  2 workers against `math.fft` directly on the host (target: at most 0.6x the host time) and against
  `phiml.parallel.parallel_compute` (processes, 2 workers) on the same data (target: at most 0.3x),
  when phiml is importable;
* (b) a Julia set as a `@cached_property`: 16 values of c (a batch dim) x 512 x 512 points, 30 steps of
  `z = z*z + c` with `math.iterate`, on threads with 2 workers against 1 worker (target: 1.7x faster);
* (c) the fixed cost of one call computing a trivial property (`self.data + 1`) of tiny data (target:
  at most 5 ms), the cost per element at 10^4, 10^5 and 10^6 elements along the batch dim with
  automatic blocks (target: at most 5 µs per element), and per-element evaluation of a property calling
  `float()` at 10^4 elements (target: at most 5 µs per element);
* (t) phiml's tutorial `ParallelComputation` (`expensive_to_compute(float(self.data))`, here sleeping 0.3 s)
  over 4 elements with 2 workers, on threads and on processes (target: at most 0.7 s each);
* (d) building the graph (`plan` and `__dask_graph__()`) for 100,000 elements with `block_size=1`
  (target: under 1 s);
* (e) (a) and (b) on a `distributed.LocalCluster` of 2 single-threaded worker processes, per block of
  the plan, against the threaded figures per block (target for (a): at most 2x threads per block), and
  (a) beside its peer on the same cluster, `dask.array`'s own `fft2` over as many chunks: the share of the
  per-block cost that any Dask computation pays there for moving the data; beside the round trip of as many
  tasks that do nothing (the cluster's floor for any graph of that size); and split, from the cluster's task
  stream, into the time until the first block starts, while blocks compute, and from the last block's end
  until the values are here.

Every lazyphi call builds a new instance, so that each one plans and computes; one untimed call comes
first. Figures are medians over the repeats (ratios of the minimums follow in parentheses: on a machine
shared with other work they show what the code can do). Prints figures, ratios and targets; asserts nothing.

Usage: python benchmarks/bench_parallel.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute, parallel_property, plan

try:
    import phiml.math as phi_math
    from phiml.parallel import parallel_compute as phi_parallel_compute
    from phiml.parallel import parallel_property as phi_parallel_property
except ImportError:
    phi_math = phi_parallel_compute = phi_parallel_property = None

N_FFT, FFT_SIZE = 16, 256
JULIA_STEPS = 30
TUTORIAL_SLEEP = 0.3


# --- the workloads -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Spectra:
    """(a): one FFT per batch element."""

    data: Tensor

    @parallel_property(requires=spatial)
    def spectrum(self) -> Tensor:
        return math.fft(self.data)


@dataclass(frozen=True)
class Julia:
    """(b): escape counts of the Julia sets of every c over the grid z0, iterated `steps` times."""

    z0: Tensor  # complex, spatial x, y
    c: Tensor  # complex, batch
    steps: int = JULIA_STEPS

    @cached_property
    def escape(self) -> Tensor:
        def step(z, count):
            inside = math.real(z) ** 2 + math.imag(z) ** 2 <= 4  # points that escaped stay put: no overflow
            return math.where(inside, z * z + self.c, z), count + math.to_float(inside)
        _, count = math.iterate(step, self.steps, self.z0, math.zeros_like(math.real(self.z0)))
        return count


@dataclass(frozen=True)
class Trivial:
    """(c), (d): one addition."""

    data: Tensor

    @cached_property
    def plus(self) -> Tensor:
        return self.data + 1


@dataclass(frozen=True)
class PerElement:
    """(c): a property that needs each element's value as a Python number."""

    data: Tensor

    @parallel_property
    def result(self) -> float:
        return float(self.data) * 2


def expensive_to_compute(x: float) -> float:
    time.sleep(TUTORIAL_SLEEP)  # Simulate an expensive computation
    return 2 * x


@dataclass(frozen=True)
class ParallelComputation:
    """(t): phiml's tutorial class, as written there."""

    data: Tensor

    @parallel_property
    def result(self) -> Tensor | float:
        return expensive_to_compute(float(self.data))


if phi_math is not None:
    @dataclass(frozen=True)
    class PhiSpectra:
        """(a) in phiml, declared as in lazyphi (phiml traces the property to infer its output)."""

        data: phi_math.Tensor

        @phi_parallel_property(requires=phi_math.spatial)
        def spectrum(self):
            return phi_math.fft(self.data)

    @dataclass(frozen=True)
    class PhiSpectraDeclared:
        """(a) in phiml with the output shape declared, which skips phiml's trace.

        phiml 1.16 takes only a bare Shape here: `shape * complex` placeholders fail when the class is
        defined (AttributeError in phiml's create_tracer).
        """

        data: phi_math.Tensor

        @phi_parallel_property(requires=phi_math.spatial,
                               out=phi_math.batch(b=N_FFT) & phi_math.spatial(x=FFT_SIZE, y=FFT_SIZE))
        def spectrum(self):
            return phi_math.fft(self.data)


# --- helpers -----------------------------------------------------------------------------------

def times(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list:
    """Seconds of each of `repeats` calls of `fn`, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    result = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        result.append(time.perf_counter() - start)
    return result


def interleaved(fns: dict, repeats: int) -> dict:
    """Like `times` for several functions, alternating them so that drifting load hits all alike."""
    for fn in fns.values():
        fn()
    result = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            result[k].append(time.perf_counter() - start)
    return result


def med(values: list) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f'{seconds * 1e3:8.1f} ms'


def verdict(ok: bool) -> str:
    return 'met' if ok else 'NOT met'


def spread(values: list) -> str:
    return f'(min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f} ms, n={len(values)})'


def block_count(p) -> int:
    """Tasks that compute: one per block of each split stage, one per host stage."""
    return sum(1 if s.host else len(s.blocks) for s in p.stages)


def max_difference(a: Tensor, b: Tensor) -> float:
    names = b.shape.names
    return float(np.max(np.abs(np.asarray(a.numpy(names)) - np.asarray(b.numpy(names)))))


def fft_data(rng) -> np.ndarray:
    return rng.standard_normal((N_FFT, FFT_SIZE, FFT_SIZE), dtype=np.float32)


def julia_inputs(size: int, n_c: int) -> tuple:
    xs = np.linspace(-1.5, 1.5, size, dtype=np.float32)
    z0 = (xs[:, None] + 1j * xs[None, :]).astype(np.complex64)
    c = (0.7885 * np.exp(1j * np.linspace(0, 2 * np.pi, n_c, endpoint=False))).astype(np.complex64)
    return math.tensor(z0, spatial('x', 'y')), math.tensor(c, batch('c'))


# --- the cases ---------------------------------------------------------------------------------

def case_fft(arr: np.ndarray, repeats: int) -> dict:
    print(f'(a) {N_FFT} FFTs of {FFT_SIZE}x{FFT_SIZE} float32')
    data = math.tensor(arr, batch('b'), spatial('x', 'y'))
    expected = math.fft(data)
    phi = run_phiml_fft(arr, repeats)  # before lazyphi starts any threads: phiml forks its worker processes

    def lazy(**tuning):
        def run():
            instance = Spectra(data)
            run.plan = parallel_compute(instance, [Spectra.spectrum], scheduler='threads', max_workers=2, **tuning)
            run.instance = instance
        return run
    default, tuned = lazy(), lazy(progress=False)
    found = interleaved({'host': lambda: math.fft(data), 'lazyphi': default, 'tuned': tuned}, repeats)
    host, threads = med(found['host']), med(found['lazyphi'])
    lazy_times = found['lazyphi']
    print(f'    host math.fft               {ms(host)} {spread(found["host"])}')
    print(f'    lazyphi threads x2          {ms(threads)} {spread(found["lazyphi"])}, '
          f'{block_count(default.plan)} blocks; max |difference| to host '
          f'{max_difference(default.instance.spectrum, expected):.2g}')
    print(f'      tuned (progress=False)    {ms(med(found["tuned"]))} {spread(found["tuned"])}')
    ratio = threads / host
    print(f'    lazyphi / host              {ratio:8.2f}x   target <= 0.6x: {verdict(ratio <= 0.6)} '
          f'(of the minimums: {min(found["lazyphi"]) / min(found["host"]):.2f}x; tuned '
          f'{med(found["tuned"]) / host:.2f}x)')
    for label, outcome in phi.items():
        if isinstance(outcome, str):
            print(f'    phiml ({label}) failed: {outcome}')
            continue
        phi_times, difference = outcome
        ratio = threads / med(phi_times)
        least = min(lazy_times) / min(phi_times)
        print(f'    phiml processes x2          {ms(med(phi_times))} {spread(phi_times)} ({label}); max |difference| '
              f'to phiml\'s host fft {difference:.2g}')
        print(f'    lazyphi / phiml             {ratio:8.2f}x   target <= 0.3x: {verdict(ratio <= 0.3)} '
              f'(of the minimums: {least:.2f}x)')
    return {'threads': threads, 'blocks': block_count(default.plan), 'data': data, 'expected': expected}


def run_phiml_fft(arr: np.ndarray, repeats: int) -> dict:
    """phiml's parallel_compute (processes, 2 workers) on the same data.

    Returns:
        {variant: (seconds of each call, max difference to phiml's fft) or why the variant failed}.
    """
    if phi_math is None:
        print('    phiml is not importable: no comparison with phiml')
        return {}
    data = phi_math.tensor(arr, phi_math.batch('b'), phi_math.spatial('x', 'y'))
    expected = phi_math.fft(data)
    result = {}
    for label, cls in (('as declared', PhiSpectra), ('with out= given', PhiSpectraDeclared)):
        def run(cls=cls):
            instance = cls(data)
            phi_parallel_compute(instance, [cls.spectrum], max_workers=2)
            run.instance = instance
        try:
            found = times(run, repeats)
        except Exception as err:  # phiml's failure is a result here, not a reason to stop
            message = str(err).strip().splitlines()
            result[label] = f'{type(err).__name__}: {message[0] if message else ""}'
            continue
        difference = float(np.max(np.abs(run.instance.spectrum.numpy('b,x,y') - expected.numpy('b,x,y'))))
        result[label] = (found, difference)
        break  # the variant with out= given is only run when the plain one fails
    return result


def case_julia(size: int, n_c: int, repeats: int) -> dict:
    print(f'(b) Julia set: {n_c} values of c x {size} x {size} points, {JULIA_STEPS} steps, cached_property on threads')
    z0, c = julia_inputs(size, n_c)
    expected = Julia(z0, c).escape
    runs = {}

    def run(workers):
        def go():
            instance = Julia(z0, c)
            runs[workers] = (parallel_compute(instance, [Julia.escape], scheduler='threads', max_workers=workers,
                                              progress=False), instance)
        return go
    found = interleaved({'host': lambda: Julia(z0, c).escape, 1: run(1), 2: run(2)}, repeats)
    one, two = med(found[1]), med(found[2])
    print(f'    direct on the host          {ms(med(found["host"]))} {spread(found["host"])}')
    for w, t in ((1, one), (2, two)):
        p, instance = runs[w]
        print(f'    lazyphi max_workers={w}       {ms(t)} {spread(found[w])}, {block_count(p)} blocks; '
              f'max |difference| to host {max_difference(instance.escape, expected):.2g}')
    speedup = one / two
    print(f'    speedup 2 vs 1 worker       {speedup:8.2f}x   target >= 1.7x: {verdict(speedup >= 1.7)} '
          f'(of the minimums: {min(found[1]) / min(found[2]):.2f}x)')
    return {'threads': two, 'blocks': block_count(runs[2][0]), 'z0': z0, 'c': c, 'expected': expected}


def case_overhead(sizes: tuple, repeats: int) -> None:
    print('(c) overhead of a trivial property (self.data + 1) on threads, 2 workers')
    tiny = math.random_normal(batch(b=4))

    def call(data, **tuning):
        return lambda: parallel_compute(Trivial(data), [Trivial.plus], scheduler='threads', max_workers=2, **tuning)
    found = interleaved({'default': call(tiny), 'tuned': call(tiny, progress=False),
                         'plan': lambda: plan(Trivial(tiny), [Trivial.plus], max_workers=2)}, repeats * 10)
    fixed = med(found['default'])
    print(f'    fixed cost per call (b=4)   {ms(fixed)} {spread(found["default"])}   target <= 5 ms: '
          f'{verdict(fixed <= 0.005)}')
    print(f'      tuned (progress=False)    {ms(med(found["tuned"]))} {spread(found["tuned"])}')
    print(f'      of which plan() alone     {ms(med(found["plan"]))}')
    for n in sizes:
        data = math.random_normal(batch(b=n))
        found = times(call(data), repeats)
        p = plan(Trivial(data), [Trivial.plus], max_workers=2)
        per = med(found) / n
        print(f'    {n:>9,} elements          {ms(med(found))} {spread(found)}, {block_count(p)} blocks -> '
              f'{per * 1e6:.3f} µs per element   target <= 5 µs: {verdict(per <= 5e-6)}')
    n = 10 ** 4
    data = math.random_normal(batch(b=n))
    found = interleaved({
        'default': lambda: parallel_compute(PerElement(data), [PerElement.result], scheduler='threads', max_workers=2),
        'tuned': lambda: parallel_compute(PerElement(data), [PerElement.result], scheduler='threads', max_workers=2,
                                          progress=False)}, repeats)
    p = plan(PerElement(data), [PerElement.result], max_workers=2)
    per = med(found['default']) / n
    print(f'    per element, float() at {n:,}: {ms(med(found["default"]))} {spread(found["default"])}, mode '
          f'{p.properties["result"].mode} -> {per * 1e6:.2f} µs per element   target <= 5 µs: {verdict(per <= 5e-6)}')
    print(f'      tuned (progress=False)    {med(found["tuned"]) / n * 1e6:.2f} µs per element')


def case_tutorial(repeats: int) -> None:
    print(f'(t) phiml\'s tutorial ParallelComputation: 4 elements x {TUTORIAL_SLEEP} s sleeps, 2 workers')
    data = math.tensor([1.0, 2.0, 3.0, 4.0], batch('data'))
    for scheduler in ('threads', 'processes'):
        def call(scheduler=scheduler, **tuning):
            return lambda: parallel_compute(ParallelComputation(data), [ParallelComputation.result], max_workers=2,
                                            scheduler=scheduler, **tuning)
        found = interleaved({'default': call(), 'tuned': call(progress=False)}, repeats)
        t = med(found['default'])
        blocks = block_count(plan(ParallelComputation(data), [ParallelComputation.result], max_workers=2))
        print(f'    {scheduler:<10} default      {ms(t)} {spread(found["default"])}, {blocks} blocks   '
              f'target <= 0.7 s: {verdict(t <= 0.7)}; serial would be {4 * TUTORIAL_SLEEP:.1f} s')
        print(f'      tuned (progress=False)    {ms(med(found["tuned"]))} {spread(found["tuned"])}')


def case_graph(n: int, repeats: int) -> None:
    print(f'(d) building the graph for {n:,} elements with block_size=1')
    data = math.random_normal(batch(b=n))
    total, planning, compiling = [], [], []
    p = graph = None
    for i in range(repeats + 1):
        p = graph = None
        gc.collect()
        start = time.perf_counter()
        p = plan(Trivial(data), [Trivial.plus], max_workers=2, block_size=1)
        middle = time.perf_counter()
        graph = p.__dask_graph__()
        end = time.perf_counter()
        if i:  # the first one is a warm-up
            planning.append(middle - start)
            compiling.append(end - middle)
            total.append(end - start)
    print(f'    plan + __dask_graph__()     {ms(med(total))} {spread(total)}   target < 1 s: '
          f'{verdict(med(total) < 1)}')
    print(f'      plan {ms(med(planning))}, __dask_graph__() {ms(med(compiling))}; {block_count(p):,} blocks, '
          f'{len(graph):,} graph nodes')


def case_distributed(fft: dict, julia: dict, repeats: int) -> None:
    print('(e) the same work on distributed.LocalCluster(n_workers=2, threads_per_worker=1): time per block')
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print('    distributed is not importable: skipped')
        return
    start = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    trim = set(client.run(lambda: os.environ.get('MALLOC_TRIM_THRESHOLD_')).values())
    print(f'    cluster start (not counted) {ms(time.perf_counter() - start)}; MALLOC_TRIM_THRESHOLD_ on the workers: '
          f'{", ".join(map(str, trim))} (set by distributed\'s nanny; it makes large NumPy temporaries slower)')
    try:
        workloads = (
            ('(a) FFTs', fft, lambda: Spectra(fft['data']), Spectra.spectrum, 'spectrum'),
            ('(b) Julia', julia, lambda: Julia(julia['z0'], julia['c']), Julia.escape, 'escape'),
        )
        for label, info, make, prop, name in workloads:
            state = {}

            def go(make=make, prop=prop, state=state, **tuning):
                instance = make()
                state['plan'] = parallel_compute(instance, [prop], scheduler=client, max_workers=2, **tuning)
                state['instance'] = instance
            found = interleaved({'default': go, 'tuned': lambda go=go: go(progress=False)}, repeats)
            blocks = block_count(state['plan'])
            t = med(found['default'])
            difference = max_difference(getattr(state['instance'], name), info['expected'])
            per_thread_block = info['threads'] / info['blocks']
            ratio = t / blocks / per_thread_block
            print(f'    {label:<27} {ms(t)} {spread(found["default"])}, {blocks} blocks -> {ms(t / blocks)} per block '
                  f'(threads x2: {ms(per_thread_block).strip()} per block, {ratio:.2f}x); max |difference| to host '
                  f'{difference:.2g}' + (f'   target <= 2x: {verdict(ratio <= 2)}' if label.startswith('(a)') else ''))
            print(f'      tuned (progress=False)    {ms(med(found["tuned"]))} {spread(found["tuned"])} -> '
                  f'{ms(med(found["tuned"]) / blocks)} per block')
            if label.startswith('(a)'):
                peer = dask_array_fft(client, info['data'].numpy('b,x,y'), blocks, repeats)
                print(f'      peer: dask.array fft2, {blocks} chunks  {ms(peer)} -> {ms(peer / blocks)} per chunk; '
                      f'lazyphi / dask.array {t / peer:.2f}x (what moving the data to the workers and back costs '
                      f'on this cluster)')
                floor = trivial_tasks(client, blocks, repeats)
                print(f'      floor: {blocks} tasks doing nothing   {ms(floor)} ({floor / info["threads"]:.2f}x the '
                      f'whole threaded call: what any graph of {blocks} tasks waits for on this cluster)')
                phases = timeline(client, go, repeats)
                print(f'      where a call goes (medians of {repeats} more calls, read from the task stream): '
                      f'{ms(phases[0]).strip()} until the first block starts, {ms(phases[1]).strip()} while blocks '
                      f'compute, {ms(phases[2]).strip()} from the last block\'s end to the values here')
        print('    (per block = median call time / blocks of the plan)')
    finally:
        client.close()
        cluster.close()


def dask_array_fft(client, data: np.ndarray, chunks: int, repeats: int) -> float:
    """Median seconds of the same FFTs as a `dask.array` computation on `client`, data split into `chunks`."""
    import dask.array as da

    def go():
        x = da.from_array(data, chunks=(-(-data.shape[0] // chunks), *data.shape[1:]))
        client.compute(da.fft.fft2(x)).result()
    return med(times(go, repeats))


def _nothing(i: int) -> int:
    return i


def trivial_tasks(client, count: int, repeats: int) -> float:
    """Median seconds of a round trip of `count` tasks that do nothing, on `client`.

    Each call's futures are released after the next call's graph went out, as lazyphi releases a run's keys
    (a release sent just before a graph holds the graph back for the rest of the client's 10 ms batching).
    """
    held = []

    def go():
        futures = client.map(_nothing, range(count), pure=False)
        held.clear()
        client.gather(futures)
        held.extend(futures)
    return med(times(go, repeats))


def timeline(client, call: Callable[[], object], repeats: int) -> tuple:
    """Medians of three phases of `call` on `client`: until its first task starts computing, from then until its
    last task stops, and from that stop until `call` returns.

    A worker reports its times shifted by its estimate of its clock's offset to the scheduler's
    (`Worker.scheduler_delay`, from heartbeat round trips). On one machine the clocks agree and the estimate is
    noise (tens of ms on a loaded VM), so it is taken off again: all times here are this machine's clock.
    """
    from distributed import get_task_stream

    phases = []
    for _ in range(repeats):
        with get_task_stream(client) as stream:
            start = time.time()
            call()
            end = time.time()
        delays = client.run(lambda dask_worker: dask_worker.scheduler_delay)
        spans = [{key: s[key] - delays.get(task['worker'], 0.) for key in ('start', 'stop')}
                 for task in stream.data for s in task['startstops'] if s['action'] == 'compute']
        first, last = min(s['start'] for s in spans), max(s['stop'] for s in spans)
        phases.append((first - start, last - first, end - last))
    return tuple(med([p[i] for p in phases]) for i in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='a fast smoke run: fewer repeats, smaller problems '
                        '(figures then do not measure the targets)')
    args = parser.parse_args()
    quick = args.quick
    print(f'lazyphi parallel benchmark{" (--quick: smoke run, figures not comparable to targets)" if quick else ""}; '
          f'{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the run')
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    fft = case_fft(fft_data(rng), 2 if quick else 9)
    julia = case_julia(128 if quick else 512, 16, 1 if quick else 4)
    case_overhead((10 ** 4, 10 ** 5) if quick else (10 ** 4, 10 ** 5, 10 ** 6), 2 if quick else 5)
    case_tutorial(1 if quick else 3)
    case_graph(10_000 if quick else 100_000, 1 if quick else 3)
    case_distributed(fft, julia, 1 if quick else 4)
    print(f'total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} after the run')


if __name__ == '__main__':
    main()
