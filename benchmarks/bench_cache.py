"""Time the Zarr disk cache against `np.save` / `np.load` of the same bytes.

Cases:

* (write) a 256 MiB float32 result (`example=64 x (x=1024, y=1024)`) written through `prepare_result` and
  one `write_block` per 32 MiB block, against `np.save` of the whole array into one file (target: at most
  1.2x, issue #17); plain Zarr writing the same chunks is printed beside them;
* (read) the same result read back whole through a `DiskTensor` with the memory cache off, against
  `np.load` (target: at most 1.2x); plain Zarr (`zarr.open_array(...)[:]`) and `read()` of each chunk file
  into its place in one NumPy array are printed beside them (the latter shows how much slower the kernel
  copies into a buffer 16 bytes past a page boundary on some CPUs: see `lazyphi/storage/_chunks.py`);
* (parallel) the default call `parallel_compute(instance, [prop], cache_dir=...)` writing a 256 MiB result
  (a property returning its 256 MiB input field, so that only the engine, hashing and writing are
  timed; `memory_limit=1`, so the result comes back disk-backed), against `np.save` of the same bytes
  (target: at most 1.2x); then reading it back in a new instance (the run resumes from the cache and
  computes nothing) and touching every value (`math.sum`), against `np.load` and a NumPy sum (target: at
  most 1.2x);
* (codec) the write and read of (write)/(read) with the arrays compressed by zstd (level
  `lazyphi.storage._chunks.ZSTD_LEVEL`) against uncompressed, with the bytes on disk: the figures behind
  storing uncompressed by default.

Arrays are written as lazyphi writes them: every chunk with its CRC-32C (Zarr's `crc32c` codec), computed on
writing and checked on reading (the header names the implementation: crc32c-rs or google-crc32c); the plain
Zarr runs write no checksum.

Files go to a fresh directory under `--dir` (default: the system's temporary directory); nothing is synced
to the disk, by either side, so writes mostly measure the page cache and reads are warm. Each timed run
writes into a new directory (Zarr) or file (NumPy) and the two sides alternate, so drifting load hits
both alike. Figures are medians; ratios are given of the medians and of the fastest runs (the latter
least disturbed by other work on a busy machine). Prints figures, ratios and targets; asserts nothing.

Usage: python benchmarks/bench_cache.py [--quick] [--io] [--repeats N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import zarr

from lazyphi import math
from lazyphi.backend import DType
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute
from lazyphi.storage import disk_tensor, set_cache_ttl
from lazyphi.storage._chunks import ZSTD_LEVEL, _google_extend, chunk_files, crc32c_function
from lazyphi.storage._results import ArraySpec
from lazyphi.storage._write import prepare_result, write_block

BLOCK_BYTES = 32 * 2 ** 20
# Chunk sizes compared: 32 MiB (one chunk per block, the plan's rule today) and 16 MiB. Zarr reads each chunk into
# a new bytes object; at 32 MiB that is above glibc's largest mmap threshold, so every read maps fresh pages.
CHUNK_MIB = (32, 16)
TARGET_RATIO = 1.2


class Result:
    """The class whose property the benchmark result stands for."""


@dataclass(frozen=True)
class Stored:
    """(parallel): a property whose value is its input, so that writing it is all the work there is."""

    values: Tensor

    @cached_property
    def result(self) -> Tensor:
        return self.values


# --- helpers -----------------------------------------------------------------------------------------

def interleaved(fns: dict[str, tuple[Callable[[], object], Callable[[object], object]]], repeats: int) -> dict:
    """Seconds of `repeats` calls of each `run(setup())`, alternating, after one untimed call; `setup` is not timed."""
    for setup, run in fns.values():
        run(setup())
    found = {k: [] for k in fns}
    for _ in range(repeats):
        for k, (setup, run) in fns.items():
            argument = setup()
            gc.collect()
            start = time.perf_counter()
            run(argument)
            found[k].append(time.perf_counter() - start)
    return found


def med(values: list) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f'{seconds * 1e3:8.1f} ms'


def spread(values: list) -> str:
    return f'(min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f} ms, n={len(values)})'


def verdict(ratio: float, target: float = TARGET_RATIO) -> str:
    return f'{ratio:.2f}x (target <= {target}x: {"met" if ratio <= target else "NOT met"})'


def tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def nodes_under(path: str) -> int:
    """Files and directories below `path` (hard links of one file count once)."""
    inodes = set()
    for root, dirs, files in os.walk(path):
        inodes.update(os.stat(os.path.join(root, name)).st_ino for name in dirs + files)
    return len(inodes)


def creation_seconds(root: str) -> float:
    """Median seconds to create one empty file in a new directory under `root`, which costs the writes here."""
    folder = tempfile.mkdtemp(dir=root)
    found = []
    for i in range(32):
        start = time.perf_counter()
        os.close(os.open(os.path.join(folder, str(i)), os.O_CREAT | os.O_WRONLY, 0o644))
        found.append(time.perf_counter() - start)
    shutil.rmtree(folder)
    return med(found)


def codecs(array_path: str) -> str:
    with open(os.path.join(array_path, 'zarr.json')) as f:
        return ' + '.join(c['name'] + (f'(level {c["configuration"]["level"]})' if c['name'] == 'zstd' else '')
                          for c in json.load(f)['codecs'])


class Workload:
    """The benchmark array, its 32 MiB blocks as lazyphi tensors, and where runs write."""

    def __init__(self, examples: int, side: int, root: str):
        self.values = np.random.default_rng(0).normal(size=(examples, side, side)).astype(np.float32)
        self.shape = batch(example=examples) & spatial(x=side, y=side)
        self.per_block = max(1, BLOCK_BYTES // self.values[0].nbytes)
        self.blocks = [(start, min(start + self.per_block, examples)) for start in range(0, examples, self.per_block)]
        self.tensors = [math.tensor(self.values[a:b], batch(example=b - a), spatial(x=side, y=side))
                        for a, b in self.blocks]
        self.root = root

    @property
    def mib(self) -> float:
        return self.values.nbytes / 2 ** 20

    def chunk_length(self, chunk_mib: int) -> int:
        """Examples per chunk of `chunk_mib` MiB (a whole number of chunks per block)."""
        return max(1, min(self.per_block, chunk_mib * 2 ** 20 // self.values[0].nbytes))

    def write_zarr(self, cache_dir: str, chunk_mib: int, compressor: str | None = None) -> str:
        """Write the whole result as `parallel_compute` would, block by block; return the array's path."""
        spec = ArraySpec(self.shape, DType(float, 32), 'numpy', 'example', self.chunk_length(chunk_mib), compressor)
        group = prepare_result(cache_dir, 'benchmark', Result, {'values': spec})
        for (start, stop), tensor in zip(self.blocks, self.tensors, strict=True):
            write_block(group, 'values', tensor, 'example', start, stop)
        return os.path.join(group, 'values')

    def fresh(self, name: str) -> str:
        """An empty path for one run (the previous run's files are removed first)."""
        path = os.path.join(self.root, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        return path


def report(label: str, found: dict, mib: float, mine: str, reference: str, target: float = TARGET_RATIO) -> None:
    """One line per way of doing it, then the ratio of the medians of `mine` and `reference` (and of their minimums)."""
    for name, values in found.items():
        print(f'    {name:<28} {ms(med(values))} {spread(values)}  {mib / med(values):7.0f} MiB/s')
    print(f'    {label} ratio {mine} / {reference}: {verdict(med(found[mine]) / med(found[reference]), target)}; '
          f'fastest runs {min(found[mine]) / min(found[reference]):.2f}x')


def write_zarr_plainly(w: Workload, path: str, chunk: int) -> None:
    """The same array written by Zarr itself, one chunk per assignment, uncompressed."""
    array = zarr.create_array(path, shape=w.values.shape, chunks=(chunk, *w.values.shape[1:]), dtype=w.values.dtype,
                              compressors=None, fill_value=0, config={'write_empty_chunks': True})
    for start in range(0, len(w.values), chunk):
        array[start:start + chunk] = w.values[start:start + chunk]


def read_into(w: Workload, path: str) -> np.ndarray:
    """Each chunk file `read()` into its place in one new NumPy array (what an mmap-free reader would do)."""
    files = chunk_files(path)
    out = np.empty_like(w.values)
    for index in range(-(-len(w.values) // files.chunks[0])):
        start = index * files.chunks[0]
        with open(files.file((index, 0, 0)), 'rb', buffering=0) as f:
            f.readinto(memoryview(out[start:start + files.chunks[0]]).cast('B'))
    return out


# --- cases -------------------------------------------------------------------------------------------------

def case_write(w: Workload, chunk_mib: int, repeats: int) -> None:
    chunk = w.chunk_length(chunk_mib)
    print(f'(write) {w.mib:.0f} MiB float32 in {len(w.blocks)} write_blocks of {w.per_block} examples (32 MiB), '
          f'chunks of {chunk} ({chunk * w.values[0].nbytes / 2 ** 20:.0f} MiB), vs one np.save')
    found = interleaved({
        'lazyphi write_block': (lambda: w.fresh('zarr-write'), lambda path: w.write_zarr(path, chunk_mib)),
        'np.save': (lambda: w.fresh('numpy-write.npy'), lambda path: np.save(path, w.values)),
        'zarr, chunk by chunk': (lambda: w.fresh('plain-write'), lambda path: write_zarr_plainly(w, path, chunk)),
    }, repeats)
    report('write', found, w.mib, 'lazyphi write_block', 'np.save')
    print(f'    codecs: {codecs(os.path.join(w.root, "zarr-write", "benchmark", "values"))}; files and directories '
          f'created: {nodes_under(os.path.join(w.root, "zarr-write"))} (np.save: 1), each taking '
          f'{creation_seconds(w.root) * 1e6:.0f} us here (the median of creating 32 empty files)')


def case_read(w: Workload, chunk_mib: int, repeats: int) -> None:
    print(f'(read) that result whole through a DiskTensor (memory cache off), chunks of {chunk_mib} MiB, vs np.load '
          f'(warm page cache)')
    array_path = w.write_zarr(w.fresh('zarr-read'), chunk_mib)
    npy = w.fresh('numpy-read.npy')
    np.save(npy, w.values)
    tensor = disk_tensor(os.path.dirname(array_path), 'values')
    set_cache_ttl(0)
    order = tensor.shape.names
    if not (np.array_equal(tensor.numpy(order), w.values) and np.array_equal(np.load(npy), w.values)
            and np.array_equal(zarr.open_array(array_path, mode='r')[:], w.values)):
        print('    READ BACK DIFFERENT VALUES')
    found = interleaved({
        'lazyphi DiskTensor': (lambda: None, lambda _: tensor.numpy(order)),
        'np.load': (lambda: None, lambda _: np.load(npy)),
        'zarr [:]': (lambda: None, lambda _: zarr.open_array(array_path, mode='r')[:]),
        'chunk files, read() into': (lambda: None, lambda _: read_into(w, array_path)),
    }, repeats)
    report('read', found, w.mib, 'lazyphi DiskTensor', 'np.load')


def case_parallel(w: Workload, repeats: int) -> None:
    print(f'(parallel) parallel_compute(..., cache_dir=...) writing a {w.mib:.0f} MiB result (default call, threads, '
          f'memory_limit=1), then reading it back touching every value, vs np.save / np.load + sum')
    data = math.tensor(w.values, w.shape)
    names = w.shape.names

    def write(path):
        parallel_compute(Stored(data), [Stored.result], cache_dir=path, memory_limit=1, scheduler='threads')
    found = interleaved({
        'lazyphi parallel_compute': (lambda: w.fresh('parallel-write'), write),
        'np.save': (lambda: w.fresh('numpy-write.npy'), lambda path: np.save(path, w.values)),
    }, repeats)
    report('write', found, w.mib, 'lazyphi parallel_compute', 'np.save', 1.2)
    npy = w.fresh('numpy-read.npy')
    np.save(npy, w.values)
    set_cache_ttl(0)

    def read(_):
        again = Stored(data)
        parallel_compute(again, [Stored.result], cache_dir=os.path.join(w.root, 'parallel-write'), memory_limit=1,
                         scheduler='threads')
        return float(math.sum(again.result, names))
    if not np.isclose(read(None), float(w.values.sum(dtype=np.float64)), rtol=1e-3):
        print('    READ BACK DIFFERENT VALUES')
    found = interleaved({
        'lazyphi resume + sum': (lambda: None, read),
        'np.load + sum': (lambda: None, lambda _: float(np.load(npy).sum())),
    }, repeats)
    report('read', found, w.mib, 'lazyphi resume + sum', 'np.load + sum', 1.2)


def case_codec(w: Workload, chunk_mib: int, repeats: int) -> None:
    print(f'(codec) zstd level {ZSTD_LEVEL} vs uncompressed, chunks of {chunk_mib} MiB: write and read of the same '
          f'result (normal random float32, little to compress)')
    paths = {}

    def write(codec):
        return (lambda: w.fresh(f'codec-{codec}'),
                lambda path: paths.update({codec: w.write_zarr(path, chunk_mib, None if codec == 'none' else codec)}))

    def read(codec):
        return lambda: None, lambda _: zarr.open_array(paths[codec], mode='r')[:]
    writes = interleaved({codec: write(codec) for codec in ('none', 'zstd')}, repeats)
    reads = interleaved({codec: read(codec) for codec in ('none', 'zstd')}, repeats)
    for codec in ('none', 'zstd'):
        size = tree_bytes(paths[codec]) / 2 ** 20
        print(f'    {codec:<5} write {ms(med(writes[codec]))}  read {ms(med(reads[codec]))}  on disk {size:7.1f} MiB'
              f'  ({codecs(paths[codec])})')
    print(f'    zstd / none: write {med(writes["zstd"]) / med(writes["none"]):.2f}x, '
          f'read {med(reads["zstd"]) / med(reads["none"]):.2f}x, '
          f'size {tree_bytes(paths["zstd"]) / tree_bytes(paths["none"]):.2f}x')


PARALLEL_SCRIPT = '''
import pickle, resource, sys, time
from dataclasses import dataclass
from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute

@dataclass(frozen=True)
class Big:
    seed: Tensor
    side: int

    @cached_property
    def field(self) -> Tensor:
        x = math.linspace(0, 1, spatial(x=self.side))
        y = math.linspace(0, 1, spatial(y=self.side))
        return math.sin(self.seed * x) * math.cos(self.seed * y)

examples, side, cache_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
big = Big(math.linspace(1, 2, batch(example=examples)), side)
started = time.perf_counter()
parallel_compute(big, [Big.field], scheduler='threads', max_workers=2, memory_limit=256 * 2 ** 20,
                 cache_dir=cache_dir, progress=False)
elapsed = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(elapsed, peak, len(pickle.dumps(big.field)), type(big.field).__name__)
'''


PHIML_SCRIPT = '''import os, pickle, resource, sys, time, warnings
SIDE = int(os.environ.get("SIDE", "1024"))
warnings.filterwarnings('ignore')
from dataclasses import dataclass
from functools import cached_property
from phiml import math
from phiml.math import Tensor, batch, spatial
from phiml.parallel import parallel_compute

@dataclass(frozen=True)
class Big:
    seed: Tensor


    @cached_property
    def field(self) -> Tensor:
        x = math.linspace(0, 1, spatial(x=SIDE))
        y = math.linspace(0, 1, spatial(y=SIDE))
        return math.sin(self.seed * x) * math.cos(self.seed * y)

if __name__ == '__main__':
    examples, side, cache_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    big = Big(math.linspace(1, 2, batch(example=examples)))
    started = time.perf_counter()
    parallel_compute(big, [Big.field], max_workers=2, memory_limit=256 * 2 ** 20, cache_dir=cache_dir)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(elapsed, peak, len(pickle.dumps(big.field)), type(big.field).__name__)
'''  # the same work for phiml; its workers do not receive config fields, so the side is global


def case_parallel_memory_limit(root: str, result_gib: float) -> None:
    """parallel_compute producing `result_gib` GiB with memory_limit=256 MiB: peak host memory and pickled size."""
    side = 1024
    examples = max(2, int(result_gib * 2 ** 30 / (side * side * 4)))
    cache_dir = os.path.join(root, 'parallel')
    out = subprocess.run([sys.executable, '-c', PARALLEL_SCRIPT, str(examples), str(side), cache_dir],
                         capture_output=True, text=True, check=True)
    elapsed, peak, pickled, kind = out.stdout.split()
    print(f'  parallel_compute on threads, memory_limit=256 MiB, {examples * side * side * 4 / 2 ** 30:.2f} GiB of '
          f'results: {float(elapsed):.1f} s; host peak resident memory {int(peak) / 2 ** 30:.2f} GiB (target < 1 GiB:'
          f' {"met" if int(peak) < 2 ** 30 else "NOT met"}); result is a {kind}, pickled {pickled} bytes '
          f'(target < 1024: {"met" if int(pickled) < 1024 else "NOT met"})')
    shutil.rmtree(cache_dir, ignore_errors=True)
    if importlib.util.find_spec('phiml') is None:
        print('  phiml is not importable: no reference figure')
        return
    phi = subprocess.run([sys.executable, '-c', PHIML_SCRIPT, str(examples), str(side), cache_dir],
                         capture_output=True, text=True, env={**os.environ, 'SIDE': str(side)})
    if phi.returncode:
        print(f'  phiml disk cache on the same work failed: {phi.stderr.strip().splitlines()[-1]}')
        return
    phi_elapsed, phi_peak, phi_pickled, phi_kind = phi.stdout.split()
    print(f'  phiml, same work: {float(phi_elapsed):.1f} s ({float(elapsed) / float(phi_elapsed):.2f}x of phiml\'s '
          f'time); host peak {int(phi_peak) / 2 ** 30:.2f} GiB; result is a {phi_kind}, pickled {phi_pickled} bytes')
    shutil.rmtree(cache_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='a fast smoke run: 32 MiB instead of 256 MiB, fewer '
                        'repeats (figures then do not measure the targets)')
    parser.add_argument('--io', action='store_true', help='only the chunk I/O cases (write, read, codec), not the '
                        'parallel_compute ones')
    parser.add_argument('--repeats', type=int, default=None, help='timed runs per way (default 7; --quick: 2)')
    parser.add_argument('--dir', default=None, help='where to write (default: the system temporary directory)')
    args = parser.parse_args()
    examples, side, repeats = (8, 1024, 2) if args.quick else (64, 1024, 7)
    repeats = args.repeats or repeats
    root = tempfile.mkdtemp(prefix='lazyphi-bench-cache-', dir=args.dir)
    print(f'lazyphi disk cache benchmark{" (--quick: smoke run)" if args.quick else ""}; writing under {root}; '
          f'zarr {zarr.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs, '
          f'load average {os.getloadavg()[0]:.2f}; chunk checksums by '
          f'{"google-crc32c" if crc32c_function() is _google_extend else "crc32c-rs"}')
    started = time.perf_counter()
    try:
        w = Workload(examples, side, root)
        for chunk_mib in CHUNK_MIB:
            case_write(w, chunk_mib, repeats)
            case_read(w, chunk_mib, repeats)
        if not args.io:
            case_parallel(w, repeats)
        case_codec(w, CHUNK_MIB[-1], max(1, repeats // 2))
        del w
        if not args.io:
            case_parallel_memory_limit(root, 0.25 if args.quick else 4)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f'total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f}')


if __name__ == '__main__':
    main()
