"""Time the matrices of linear functions and their direct solves against phiml, from one run.

Cases, on square grids of n x n cells (`--sizes`, default 64 and 128), each timed as a user calls it:

* (matrix) `math.matrix_from_function` of a 5-point Laplace operator (`math.laplace`, zero boundaries), with
  lazyphi's default (a few coloured probes, checked) beside phiml's linear tracer, and of a function that reads
  every cell (`x + mean(x)`, grids up to 64 x 64: its matrix has n^4 entries), where lazyphi applies the function
  to every basis vector in batches (n^2 probes); and the Laplace matrix times a grid (`matrix @ x`);
* (solve) `solve_linear(jit_compile_linear(laplace), y, Solve('direct'))` beside phiml's `spsolve`: 'first', a
  new function each call, which builds the sparse matrix and factors it on the host; then again with one function,
  which keeps its matrix (as phiml's does) and lazyphi also the matrix's factors, with zero boundaries and with
  zero-gradient boundaries (a singular matrix, whose null vector lazyphi projects out); and `Solve('CG')`, first and
  again, which steps with the function's matrix on NumPy in both libraries.

Figures are medians over the repeats; ratios lazyphi / phiml of the medians. Where phiml is not importable its
columns are left out. Prints figures and ratios; asserts nothing (no issue sets a target here).

Usage: python benchmarks/bench_linear.py [--quick] [--sizes 64 128]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np

from lazyphi import math as lazy_math

try:
    from phiml import math as phi_math
except ImportError:
    phi_math = None


def median_seconds(call: Callable, repeats: int) -> float:
    call()  # warm-up: imports, tracing, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(label: str, lazy: float, phi: float | None, note: str = '') -> None:
    text = f'    {label:<46} lazyphi {lazy * 1e3:9.2f} ms'
    if phi is not None:
        text += f'   phiml {phi * 1e3:9.2f} ms   lazyphi / phiml {lazy / phi:6.2f}x'
    print(text + (f'   {note}' if note else ''))


def functions(m) -> dict:
    """The operators, written the same way for lazyphi and phiml (`m` is either's math module)."""
    return {
        'laplace': lambda x: m.laplace(x, padding=0),
        'laplace, zero gradient': lambda x: m.laplace(x, padding=m.extrapolation.ZERO_GRADIENT),
        'x + mean(x)': lambda x: x + m.mean(x, 'x,y'),
    }


def case(n: int, repeats: int) -> None:
    print(f'grid {n} x {n} ({n * n:,} unknowns)')
    rng = np.random.default_rng(0)
    values = rng.standard_normal((n, n)).astype(np.float32)
    libraries = {'lazy': lazy_math} if phi_math is None else {'lazy': lazy_math, 'phi': phi_math}
    grids = {k: m.tensor(values, m.spatial('x,y')) for k, m in libraries.items()}
    for name in ('laplace', 'x + mean(x)') if n <= 64 else ('laplace',):  # a dense pattern: n^4 entries
        found, failures = {}, ''
        for k, m in libraries.items():
            try:
                found[k] = median_seconds(lambda k=k, m=m, name=name: m.matrix_from_function(functions(m)[name],
                                                                                            grids[k]),
                                          1 if name == 'x + mean(x)' else repeats)
            except Exception as err:  # phiml's tracer refuses some functions: said, not timed
                if k == 'lazy':
                    raise
                failures = f'; phiml failed: {type(err).__name__}: {str(err)[:80]}'
        matrix = lazy_math.matrix_from_function(functions(lazy_math)[name], grids['lazy'])[0]
        row(f'matrix_from_function({name})', found['lazy'], found.get('phi'),
            f'{lazy_math.stored_values(matrix).shape.volume:,} entries{failures}')
    laplace = {k: m.matrix_from_function(functions(m)['laplace'], grids[k])[0] for k, m in libraries.items()}
    products = {k: median_seconds(lambda k=k: laplace[k] @ grids[k], repeats * 10) for k in libraries}
    row('laplace matrix @ x', products['lazy'], products.get('phi'), 'the sparse matrix times a grid')
    for name, method, first in (('laplace', 'direct', True), ('laplace', 'direct', False),
                                ('laplace, zero gradient', 'direct', False), ('laplace', 'CG', True),
                                ('laplace', 'CG', False)):
        found, residuals = {}, {}
        for k, m in libraries.items():
            y = m.jit_compile_linear(functions(m)[name])(grids[k])
            kept = m.jit_compile_linear(functions(m)[name])

            def solve(m=m, y=y, k=k, method=method, residuals=residuals, kept=kept, name=name, first=first):
                operator = m.jit_compile_linear(functions(m)[name]) if first else kept  # first: nothing kept yet
                with warnings.catch_warnings():
                    warnings.simplefilter('ignore')  # phiml's spsolve warns about the format it is given
                    x = m.solve_linear(operator, y, m.Solve(method, 1e-5, 1e-5, x0=0 * y))
                residuals[k] = float(m.max(abs(operator(x) - y)))
            found[k] = median_seconds(solve, repeats)
        row(f"solve_linear({name}, '{method}'){', first' if first else ''}", found['lazy'], found.get('phi'),
            f"max |f(x) - y| {residuals['lazy']:.1e}" + (f" (phiml {residuals['phi']:.1e})" if 'phi' in residuals
                                                           else ''))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='a smoke run: one small grid, one repeat')
    parser.add_argument('--sizes', type=int, nargs='+', default=[64, 128], help='grid sizes n (n x n cells)')
    args = parser.parse_args()
    print(f'lazyphi linear-function benchmark{"" if phi_math else " (phiml not importable: lazyphi only)"}')
    for n in ([16] if args.quick else args.sizes):
        case(n, 1 if args.quick else 3)


if __name__ == '__main__':
    main()
