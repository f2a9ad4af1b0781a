"""Time `import lazyphi` in fresh interpreters, against `import numpy` alone (the floor: lazyphi needs NumPy).

Prints the median wall time over N fresh interpreters (default 10) of `python -c "import numpy"`, of
`python -c "import lazyphi"` and of a bare `python -c "pass"`, and the difference lazyphi - numpy, which is
lazyphi's own share; also the median CPU time (user + system) of each, which a busy machine disturbs less. The
three are run in turn so that a change in the machine's load hits all alike.
Target (issue #34): `import lazyphi` at most 200 ms. With --top K, also prints the K modules that took the
longest in one `python -X importtime -c "import lazyphi"` (cumulative, self), for finding what to defer.

Usage: python benchmarks/bench_import.py [--runs N] [--top K]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# as after `pip install`, which compiles the modules: with PYTHONDONTWRITEBYTECODE set every run would compile
# lazyphi's sources again (about 100 ms, measured here)
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != 'PYTHONDONTWRITEBYTECODE'}


def run_time(code: str) -> tuple[float, float]:
    """Seconds of wall and of CPU time one fresh interpreter takes to run `code` (start-up included), this checkout
    first on the path."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, '-c', code], check=True, cwd=ROOT, env=ENVIRONMENT)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime


def top_importers(count: int) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) of the `count` slowest imports of `import lazyphi`, slowest first."""
    result = subprocess.run([sys.executable, '-X', 'importtime', '-c', 'import lazyphi'], check=True, cwd=ROOT,
                            env=ENVIRONMENT, capture_output=True, text=True)
    rows = []
    for line in result.stderr.splitlines():
        parts = line.removeprefix('import time:').split('|')
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=10, help='fresh interpreters per measurement (default 10)')
    parser.add_argument('--top', type=int, default=0, help='also list the K slowest imports (default none)')
    args = parser.parse_args()
    if args.runs < 1:
        raise ValueError(f'--runs must be at least 1, got {args.runs}')
    if args.top < 0:
        raise ValueError(f'--top must be 0 or more, got {args.top}')
    run_time('import lazyphi')  # writes the .pyc files of the modules it imports
    codes = {'python -c pass': 'pass', 'python -c "import numpy"': 'import numpy',
             'python -c "import lazyphi"': 'import lazyphi'}
    times = {label: [] for label in codes}
    for _ in range(args.runs):
        for label, code in codes.items():
            times[label].append(run_time(code))
    wall = {label: statistics.median(w for w, _ in values) * 1e3 for label, values in times.items()}
    cpu = {label: statistics.median(c for _, c in values) * 1e3 for label, values in times.items()}
    print(f'median of {args.runs} fresh interpreters (start-up included):')
    print(f'  {"":<28}{"wall":>10}{"CPU":>11}')
    for label in codes:
        target = '   (target: wall 200 ms)' if 'lazyphi' in label else ''
        print(f'  {label:<28}{wall[label]:7.1f} ms{cpu[label]:8.1f} ms{target}')
    numpy_label, lazyphi_label = list(codes)[1:]
    print(f'  {"lazyphi - numpy":<28}{wall[lazyphi_label] - wall[numpy_label]:7.1f} ms'
          f'{cpu[lazyphi_label] - cpu[numpy_label]:8.1f} ms')
    if args.top:
        print('slowest imports of one `import lazyphi` (-X importtime, which adds its own overhead):')
        for cumulative, own, module in top_importers(args.top):
            print(f'  {cumulative / 1e3:7.1f} ms cumulative {own / 1e3:6.1f} ms self  {module.strip()}')


if __name__ == '__main__':
    main()
