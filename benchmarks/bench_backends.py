"""Time tensor operations through lazyphi against the raw library, for every installed backend.

For each backend (NumPy, PyTorch, JAX, TensorFlow) and for 10 and 10^6 elements, prints the time per call
of common operations on a `lazyphi.math` Tensor holding that library's natives, the time of the same work
done with the library directly, and their ratio. Target: within 1.2x at 10^6 elements. Asynchronous
libraries (JAX, CUDA tensors) are waited for inside every timed call, on both sides.

PyTorch splits large operations over threads; on a machine that is busy with other work this makes its
timings vary several-fold from call to call. `--one-thread` runs PyTorch on one thread, which measures
lazyphi's overhead reliably.

Usage: python benchmarks/bench_backends.py [--quick] [--one-thread] [backend ...]
"""

from __future__ import annotations

import importlib.util
import sys
import timeit
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from lazyphi import math
from lazyphi.backend import Backend, backend_by_name
from lazyphi.math import batch, spatial

LIBRARIES = {'numpy': 'numpy', 'torch': 'torch', 'jax': 'jax', 'tensorflow': 'tensorflow'}


def _library(name: str, one_thread: bool) -> SimpleNamespace:
    """The raw functions of one library that the operations below need, and how to wait for a result."""
    if name == 'numpy':
        return SimpleNamespace(sqrt=np.sqrt, abs=np.abs, exp=np.exp, sum=lambda a, axis: a.sum(axis), where=np.where,
                               wait=lambda x: x)
    if name == 'torch':
        import torch
        if one_thread:
            torch.set_num_threads(1)
        wait = (lambda x: torch.cuda.synchronize() or x) if torch.cuda.is_available() else (lambda x: x)
        return SimpleNamespace(sqrt=torch.sqrt, abs=torch.abs, exp=torch.exp, sum=lambda a, axis: a.sum(axis),
                               where=torch.where, wait=wait)
    if name == 'jax':
        import jax
        import jax.numpy as jnp
        return SimpleNamespace(sqrt=jnp.sqrt, abs=jnp.abs, exp=jnp.exp, sum=lambda a, axis: a.sum(axis),
                               where=jnp.where, wait=jax.block_until_ready)
    import tensorflow as tf
    return SimpleNamespace(sqrt=tf.sqrt, abs=tf.abs, exp=tf.exp, sum=lambda a, axis: tf.reduce_sum(a, axis),
                           where=tf.where, wait=lambda x: x)


def compare(lazy: Callable, raw: Callable, budget: float, rounds: int = 7) -> tuple[float, float]:
    """Best seconds per call of `lazy` and of `raw`, measured in alternation so that load changes hit both alike."""
    timers = [timeit.Timer(lazy), timeit.Timer(raw)]
    numbers = [max(1, int(timer.autorange()[0] * budget / 0.2 / rounds)) for timer in timers]
    best = [float('inf'), float('inf')]
    for _ in range(rounds):
        for i, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[i] = min(best[i], timer.timeit(number) / number)
    return best[0], best[1]


def cases(backend: Backend, lib: SimpleNamespace, n: int) -> list[tuple[str, Callable, Callable]]:
    """(name, lazyphi fn, raw fn) for float32 arrays of n elements laid out as (b=n/100 or 1, x)."""
    b = 1 if n < 100 else 100
    rng = np.random.default_rng(0)
    a_raw, c_raw = (backend.as_tensor(rng.normal(size=(b, n // b)).astype(np.float32)) for _ in range(2))
    a, c = (math.wrap(native, batch('b'), spatial('x')) for native in (a_raw, c_raw))
    wait = lib.wait

    def lazy(f: Callable) -> Callable:
        return lambda: wait(f()._dense()._native)

    def raw(f: Callable) -> Callable:
        return lambda: wait(f())
    return [
        ('a + c', lazy(lambda: a + c), raw(lambda: a_raw + c_raw)),
        ('a * 2', lazy(lambda: a * 2), raw(lambda: a_raw * 2)),
        ('sqrt(abs(a))', lazy(lambda: math.sqrt(math.abs(a))), raw(lambda: lib.sqrt(lib.abs(a_raw)))),
        ('exp(a)', lazy(lambda: math.exp(a)), raw(lambda: lib.exp(a_raw))),
        ('sum(a, x)', lazy(lambda: math.sum(a, 'x')), raw(lambda: lib.sum(a_raw, 1))),
        ('where(a > 0, a, c)', lazy(lambda: math.where(a > 0, a, c)), raw(lambda: lib.where(a_raw > 0, a_raw, c_raw))),
        ('a.x[1:-1]', lazy(lambda: a.x[1:-1]), raw(lambda: a_raw[:, 1:-1])),
    ]


def available_backends(names: list[str]) -> list[Backend]:
    backends = []
    for name in names:
        if importlib.util.find_spec(LIBRARIES[name]) is None:
            print(f'{name}: not installed, skipped')
            continue
        try:
            backends.append(backend_by_name(name))
        except ValueError as err:
            print(f'{name}: backend not available ({err}), skipped')
    return backends


def main() -> None:
    quick = '--quick' in sys.argv
    names = [arg for arg in sys.argv[1:] if arg in LIBRARIES] or list(LIBRARIES)
    budget = 0.05 if quick else 0.3
    print(f'{"backend":<11} {"op":<20} {"n":>8} {"lazyphi":>11} {"raw":>11} {"ratio":>6}')
    for backend in available_backends(names):
        lib = _library(backend.name, '--one-thread' in sys.argv)
        for n in (10, 1_000_000):
            for name, lazy, raw in cases(backend, lib, n):
                t_lazy, t_raw = compare(lazy, raw, budget)
                print(f'{backend.name:<11} {name:<20} {n:>8} {t_lazy * 1e6:>9.2f}us {t_raw * 1e6:>9.2f}us '
                      f'{t_lazy / t_raw:>6.2f}')


if __name__ == '__main__':
    main()
