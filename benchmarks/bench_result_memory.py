"""Peak memory of a `parallel_compute` run with `cache_dir`, and of reading a result of many blocks (issue #35.4).

A property makes `--mib` MiB of float32 (256 examples of a 2-D field) in blocks of one `--chunk-mib` chunk
each (128 blocks by default: more than `Joined.PART_LIMIT`). Each case runs in a fresh interpreter, which
prints its peak RSS (`ru_maxrss`) above its RSS before the run:

* `cache_dir` without `memory_limit` (the result comes back in memory, as a `Joined` of the blocks) and with
  `memory_limit=1` (it comes back disk-backed);
* reading 16 examples one at a time from the in-memory result (`value.example[i].numpy()`): the time and
  the RSS they add (each read copied the whole result when slicing a `Joined` of over 64 parts
  materialised it).

Prints figures; asserts nothing.

Usage: python benchmarks/bench_result_memory.py [--mib 512] [--chunk-mib 4]
"""

from __future__ import annotations

import argparse
import json
import resource
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

EXAMPLES = 256


@dataclass(frozen=True)
class Fields:
    seed: Tensor  # one number per example
    size: int  # values per example

    @cached_property
    def value(self) -> Tensor:
        return math.expand(self.seed, spatial(x=self.size)) * math.range(spatial(x=self.size))


def _rss_mib() -> float:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _case(mode: str, mib: int, chunk_mib: float) -> dict:
    fields = Fields(math.tensor(np.arange(EXAMPLES, dtype=np.float32), batch('example')),
                    mib * 2 ** 20 // 4 // EXAMPLES)
    before = _rss_mib()
    with tempfile.TemporaryDirectory() as cache:
        limit = 1 if mode == 'disk' else None
        plan = parallel_compute(fields, [Fields.value], cache_dir=cache, memory_limit=limit, progress=False,
                                chunk_bytes=int(chunk_mib * 2 ** 20), scheduler='threads')
        result = {'blocks': len(plan.stages[0].blocks), 'kind': type(fields.value).__name__,
                  'run_peak_mib': _peak_mib() - before, 'after_run_mib': _rss_mib() - before}
        if mode == 'memory':
            start_rss, start = _rss_mib(), time.perf_counter()
            for i in range(16):
                fields.value.example[i * 7].numpy()
            result['16_reads_s'] = time.perf_counter() - start
            result['16_reads_add_mib'] = _rss_mib() - start_rss
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--mib', type=int, default=512)
    parser.add_argument('--chunk-mib', type=float, default=4)
    parser.add_argument('--case', choices=['memory', 'disk'], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_case(args.case, args.mib, args.chunk_mib)))
        return
    print(f'result of {args.mib} MiB float32 in chunks of {args.chunk_mib} MiB')
    for case, label in (('memory', 'cache_dir, no memory_limit'), ('disk', 'cache_dir, memory_limit=1')):
        out = subprocess.run([sys.executable, __file__, '--case', case, '--mib', str(args.mib), '--chunk-mib',
                              str(args.chunk_mib)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        line = (f'{label:28s} {r["blocks"]} blocks, result {r["kind"]}: peak +{r["run_peak_mib"]:.0f} MiB, '
                f'after the run +{r["after_run_mib"]:.0f} MiB')
        if case == 'memory':
            line += f'; 16 reads of an example: {r["16_reads_s"] * 1e3:.1f} ms, +{r["16_reads_add_mib"]:.0f} MiB'
        print(line)


if __name__ == '__main__':
    main()
