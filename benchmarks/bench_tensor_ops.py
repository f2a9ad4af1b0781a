"""Time common tensor operations through lazyphi against raw NumPy (and phiml when importable).

Prints, for 10, 10^3 and 10^6 elements, the time per call of each operation and the ratio to
raw NumPy doing the same work on arrays already laid out alike. Targets (issue: Foundation):
within 1.2x of NumPy at 10^6 elements; an element-wise op at 10 elements at most 5 us and
below phiml's. Issue #15 adds indexing by an index tensor (`a.x[idx]`, NumPy's `take`): within
1.2x of NumPy at 10^6 elements, at most 5 us at 10, faster than phiml at both sizes. Also prints the
time of `python -c "import lazyphi"` (target below 0.3 s).

Usage: python benchmarks/bench_tensor_ops.py [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import timeit

import numpy as np

from lazyphi import math
from lazyphi.math import batch, instance, spatial

try:
    import phiml.math as phi_math
except ImportError:
    phi_math = None


def per_call(fn, budget: float) -> float:
    """Best-of-5 seconds per call, with the repeat count chosen to fill `budget` seconds."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * budget / 0.2 / 5))
    return min(timer.repeat(5, number)) / number


def cases(n: int):
    """(name, lazyphi fn, numpy fn, phiml fn or None) for arrays of n elements as (b=n/100 or 1, x)."""
    b = 1 if n < 100 else 100
    x = n // b
    rng = np.random.default_rng(0)
    a_np = rng.normal(size=(b, x)).astype(np.float32)
    c_np = rng.normal(size=(b, x)).astype(np.float32)
    row_np = rng.normal(size=(x,)).astype(np.float32)
    idx_np = rng.integers(0, x, size=x)
    a = math.wrap(a_np, batch('b'), spatial('x'))
    idx = math.wrap(idx_np, instance('i'))
    c = math.wrap(c_np, batch('b'), spatial('x'))
    row = math.wrap(row_np, spatial('x'))
    out = [
        ('a + c', lambda: a + c, lambda: a_np + c_np),
        ('a * 2', lambda: a * 2, lambda: a_np * np.float32(2)),
        ('a + row (broadcast)', lambda: a + row, lambda: a_np + row_np),
        ('sqrt(abs(a))', lambda: math.sqrt(math.abs(a)), lambda: np.sqrt(np.abs(a_np))),
        ('sum(a, x)', lambda: math.sum(a, 'x'), lambda: a_np.sum(axis=1)),
        ('mean(a)', lambda: math.mean(a, 'b,x'), lambda: a_np.mean()),
        ('a.x[1:-1]', lambda: a.x[1:-1], lambda: a_np[:, 1:-1]),
        ('where(a > 0, a, c)', lambda: math.where(a > 0, a, c), lambda: np.where(a_np > 0, a_np, c_np)),
        ('numpy("x,b")', lambda: a.numpy('x,b'), lambda: a_np.T),
        ('a.x[idx] (index tensor)', lambda: a.x[idx], lambda: np.take(a_np, idx_np, axis=1)),
    ]
    result = []
    for name, lazy, raw in out:
        phi = None
        if phi_math is not None:
            pa = phi_math.wrap(a_np, phi_math.batch('b'), phi_math.spatial('x'))
            pc = phi_math.wrap(c_np, phi_math.batch('b'), phi_math.spatial('x'))
            prow = phi_math.wrap(row_np, phi_math.spatial('x'))
            pidx = phi_math.wrap(idx_np, phi_math.instance('i'))
            phi = {
                'a + c': lambda pa=pa, pc=pc: pa + pc,
                'a * 2': lambda pa=pa: pa * 2,
                'a + row (broadcast)': lambda pa=pa, prow=prow: pa + prow,
                'sqrt(abs(a))': lambda pa=pa: phi_math.sqrt(abs(pa)),
                'sum(a, x)': lambda pa=pa: phi_math.sum(pa, 'x'),
                'mean(a)': lambda pa=pa: phi_math.mean(pa, 'b,x'),
                'a.x[1:-1]': lambda pa=pa: pa.x[1:-1],
                'where(a > 0, a, c)': lambda pa=pa, pc=pc: phi_math.where(pa > 0, pa, pc),
                'numpy("x,b")': lambda pa=pa: pa.numpy('x,b'),
                'a.x[idx] (index tensor)': lambda pa=pa, pidx=pidx: pa.x[pidx],
            }[name]
        result.append((name, lazy, raw, phi))
    return result


def import_time(code: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, '-c', code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    quick = '--quick' in sys.argv
    budget = 0.05 if quick else 0.3
    header = f'{"op":<24} {"n":>8} {"lazyphi":>10} {"numpy":>10} {"ratio":>6}'
    if phi_math is not None:
        header += f' {"phiml":>10} {"vs phiml":>8}'
    print(header)
    for n in (10, 1_000, 1_000_000):
        for name, lazy, raw, phi in cases(n):
            t_lazy, t_raw = per_call(lazy, budget), per_call(raw, budget)
            line = f'{name:<24} {n:>8} {t_lazy * 1e6:>8.2f}us {t_raw * 1e6:>8.2f}us {t_lazy / t_raw:>6.2f}'
            if phi is not None:
                t_phi = per_call(phi, budget)
                line += f' {t_phi * 1e6:>8.2f}us {t_lazy / t_phi:>8.2f}'
            print(line)
    repeats = 3 if quick else 7
    print(f'python -c "import lazyphi": {import_time("import lazyphi", repeats) * 1e3:.0f} ms, of which the bare '
          f'interpreter takes {import_time("pass", repeats) * 1e3:.0f} ms (target < 300 ms)')


if __name__ == '__main__':
    main()
