"""Time reading a disk-cached result of 100 chunks: whole, and one chunk at a time (issue #35, item 1).

Every chunk read checks that the chunk's file ends with the checksum its completion record is tagged with
(`lazyphi.storage._results.chunk_tag`). This prints what reading costs with that check, on small chunks
(1 KiB, where the cost per chunk shows most) and larger ones (256 KiB), uncompressed and with zstd. To
compare with another version, run it with that version first on `PYTHONPATH`, alternating. Figures are the
CPU time of this process (the helper threads included), medians and fastest of `--repeats` runs; the memory
cache is off. Prints figures; asserts nothing.

    python benchmarks/bench_chunk_reads.py --repeats 201
"""

import argparse
import statistics
import tempfile
import time

import numpy as np

from lazyphi import math
from lazyphi.backend import DType
from lazyphi.math import batch, spatial
from lazyphi.storage import disk_tensor, set_cache_ttl
from lazyphi.storage._disk import read_selection
from lazyphi.storage._results import ArraySpec
from lazyphi.storage._write import prepare_result, write_block

CHUNKS = 100


class Result:
    """Stands for the class whose property the result holds."""


def case(directory: str, compressor, rows: int, repeats: int) -> str:
    shape = batch(example=CHUNKS * rows) & spatial(x=64)
    values = np.random.default_rng(0).standard_normal((CHUNKS * rows, 64)).astype(np.float32)
    spec = ArraySpec(shape, DType(float, 32), 'numpy', 'example', rows, compressor)
    group = prepare_result(directory, f'{compressor}-{rows}', Result, {'v': spec})
    write_block(group, 'v', math.tensor(values, shape), 'example', 0, CHUNKS * rows)
    tensor = disk_tensor(group, 'v')
    info, whole = tensor._info, tensor._selection
    wholes, singles = [], []
    for _ in range(repeats):
        start = time.process_time()
        read_selection(info, whole)
        wholes.append(time.process_time() - start)
        start = time.process_time()
        for c in range(0, CHUNKS, 10):
            read_selection(info, (range(c * rows, (c + 1) * rows), whole[1]))
        singles.append((time.process_time() - start) / 10)
    return (f'{compressor or "none":5} {rows * 64 * 4 // 1024:4d} KiB chunks: all {CHUNKS} '
            f'{statistics.median(wholes) * 1e3:7.3f} ms (fastest {min(wholes) * 1e3:.3f}), one '
            f'{statistics.median(singles) * 1e6:7.1f} us (fastest {min(singles) * 1e6:.1f})')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=51)
    parser.add_argument('--dir', default=None, help='where to write the results (default: a temporary directory)')
    args = parser.parse_args()
    set_cache_ttl(None)
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for compressor in (None, 'zstd'):
            for rows in (4, 1024):
                print(case(directory, compressor, rows, args.repeats), flush=True)


if __name__ == '__main__':
    main()
