"""Time one training step (`nn.update_weights` with Adam) through lazyphi.nn against phiml.nn, per library.

Two cases, each built alike on both sides and timed in the same run, steps of the two alternating so that
changes in the machine's load hit both alike:

- u_net: `u_net(1, 1)` with phiml's defaults (4 levels, 16 filters, batch norm), a batch of 10 fields of
  64x64, the loss `l2_loss(native_call(net, x))`;
- mlp: `mlp(2, 3, [64, 64])`, a batch of 1000 points of 2 features, the same loss.

Prints per library and case the median seconds per step of lazyphi and of phiml after warm-up steps, and their
ratio (target: at most 1.1). A library that is not installed, or whose lazyphi.nn module cannot be loaded (a
package it needs is missing), is skipped, with a line saying why. JAX steps are waited for inside the timed call
on both sides.

PyTorch spreads a step over threads; on a busy machine its timings then vary several-fold from step to step.
`--one-thread` runs every library on one thread, which measures the overhead of the wrappers reliably.

Usage: python benchmarks/bench_nn.py [--quick] [--one-thread] [torch] [jax] [tensorflow]
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

LIBRARIES = ('torch', 'jax', 'tensorflow')


def _one_thread() -> None:
    """One thread for every library; set before any of them is imported."""
    for variable in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'TF_NUM_INTRAOP_THREADS', 'TF_NUM_INTEROP_THREADS'):
        os.environ[variable] = '1'
    os.environ['XLA_FLAGS'] = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'


def _step(math, nn, library: str, case: str) -> Callable[[], object]:
    """A training step of `case` built with one implementation (`math`, `nn` of lazyphi or of phiml)."""
    nn.use(library)
    math.seed(0)
    if case == 'u_net':
        net = nn.u_net(1, 1)
        x = math.random_normal(math.batch(batch=10), math.spatial(x=64, y=64))
    else:
        net = nn.mlp(2, 3, [64, 64])
        x = math.random_normal(math.batch(batch=1000), math.channel(vector=2))
    optimizer = nn.adam(net, 1e-3)

    def loss_function(data):
        return math.l2_loss(math.native_call(net, data))
    if library == 'jax':
        import jax

        def step():
            return jax.block_until_ready(nn.update_weights(net, optimizer, loss_function, x).native())
        return step
    return lambda: nn.update_weights(net, optimizer, loss_function, x)


def _median_seconds(steps: list[Callable], warmup: int, repeats: int) -> list[float]:
    """Median seconds per call of each step, the steps called in turn, after `warmup` calls of each."""
    for _ in range(warmup):
        for step in steps:
            step()
    times = [[] for _ in steps]
    for _ in range(repeats):
        for step, recorded in zip(steps, times, strict=True):
            started = time.perf_counter()
            step()
            recorded.append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def main(argv: list[str]) -> None:
    quick, one_thread = '--quick' in argv, '--one-thread' in argv
    chosen = [a for a in argv if not a.startswith('--')] or list(LIBRARIES)
    unknown = sorted(set(chosen) - set(LIBRARIES))
    if unknown:
        raise SystemExit(f'unknown libraries {unknown}; choose among {LIBRARIES}')
    if one_thread:
        _one_thread()
    warnings.filterwarnings('ignore')
    from phiml import math as phiml_math
    from phiml import nn as phiml_nn

    from lazyphi import math, nn
    if one_thread and importlib.util.find_spec('torch'):
        import torch
        torch.set_num_threads(1)
    warmup, repeats = (3, 10) if quick else (5, 40)
    print(f'{"library":<11} {"case":<6} {"lazyphi s":>10} {"phiml s":>10} {"ratio":>6}')
    for library in chosen:
        if importlib.util.find_spec(library) is None:
            print(f'{library:<11} skipped: {library} is not installed')
            continue
        try:
            importlib.import_module(f'lazyphi.nn._{library}')
        except ImportError as err:
            print(f'{library:<11} skipped: lazyphi.nn cannot load its {library} module ({err})')
            continue
        for case in ('u_net', 'mlp'):
            ours, theirs = _step(math, nn, library, case), _step(phiml_math, phiml_nn, library, case)
            lazy, phiml = _median_seconds([ours, theirs], warmup, repeats)
            print(f'{library:<11} {case:<6} {lazy:>10.5f} {phiml:>10.5f} {lazy / phiml:>6.2f}', flush=True)


if __name__ == '__main__':
    main(sys.argv[1:])
