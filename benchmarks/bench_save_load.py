"""Save and load 1 GiB in 8 tensors with `lazyphi.save` / `lazyphi.load`, against `np.save` / `np.load`.

Prints: the save time against `np.save` (target <= 1.5x), the time `load` takes to open a save with Zarr
already imported (target < 50 ms) and in a fresh process, and the time to read 1 MiB from each tensor of
a store not yet opened; the same for tensordict's memmap format where `tensordict` is installed (the
peer). `--quick` runs 8 MiB in all, as a smoke test.

    python benchmarks/bench_save_load.py [--quick] [--dir DIR]
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import lazyphi
from lazyphi import math
from lazyphi.math import batch, spatial

TENSORS = 8


def _best(fn, repeat: int) -> float:
    """The shortest of `repeat` runs of `fn`, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _cold(code: str) -> float:
    """Seconds `code` takes in a fresh interpreter (it prints them itself)."""
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def _compare_tensordict(arrays: list, tree: dict, root: str, timed, t_lz: float) -> None:
    """The peer: tensordict's `TensorDict.memmap` / `load_memmap` on the same bytes (as torch tensors)."""
    if importlib.util.find_spec('tensordict') is None:
        print('tensordict: not installed (pip install tensordict), no peer figures')
        return
    import torch
    from tensordict import TensorDict

    td = TensorDict({n: torch.from_numpy(a) for n, a in zip(tree, arrays, strict=True)}, batch_size=[len(arrays[0])])
    td.memmap(os.path.join(root, 'tensordict-warm'))
    t_td = timed(td.memmap, 'tensordict')
    path = os.path.join(root, 'tensordict')
    t_open = _best(lambda: TensorDict.load_memmap(path), 10)
    mib_rows = 2 ** 20 // (4 * 1024)
    read = ('import time; s = time.perf_counter(); from tensordict import TensorDict\n'
            f'd = TensorDict.load_memmap({path!r})\n'
            f'for n in {list(tree)!r}: d[n][:{mib_rows}].clone()\nprint(time.perf_counter() - s)')
    full = _best(lambda: [t.clone() for t in TensorDict.load_memmap(path).values()], 2)
    print(f'tensordict (the peer): memmap {t_td:.3f} s (lazyphi.save / it: {t_lz / t_td:.2f}x); load_memmap '
          f'{t_open * 1e3:.2f} ms; read 1 MiB from each, fresh process {_cold(read) * 1e3:.0f} ms; load all '
          f'{full:.3f} s')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='8 MiB in all instead of 1 GiB')
    parser.add_argument('--dir', default=None, help='directory to write into (default: a temporary one)')
    args = parser.parse_args()
    total = 8 * 2 ** 20 if args.quick else 2 ** 30
    rows = total // TENSORS // 4 // 1024  # float32, 1024 per row
    root = tempfile.mkdtemp(dir=args.dir, prefix='lazyphi-bench-')
    repeat = 3 if args.quick else 2
    try:
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal((rows, 1024), dtype=np.float32) for _ in range(TENSORS)]
        tree = {f't{i}': math.tensor(a, batch(b=rows) & spatial(x=1024)) for i, a in enumerate(arrays)}
        print(f'{TENSORS} float32 tensors of ({rows}, 1024): {total / 2 ** 20:.0f} MiB in all, written to {root}')

        def np_save(folder):
            os.mkdir(folder)
            for name, a in zip(tree, arrays, strict=True):
                np.save(os.path.join(folder, name + '.npy'), a)

        def timed(save, name: str) -> float:
            """Best time of `save` into a fresh directory; deleting the previous one is not timed."""
            times = []
            for _ in range(repeat):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                start = time.perf_counter()
                save(os.path.join(root, name))
                times.append(time.perf_counter() - start)
            return min(times)

        lazyphi.save(tree, os.path.join(root, 'lazyphi'))  # imports Zarr and warms up
        t_np = timed(np_save, 'npy')
        t_lz = timed(lambda p: lazyphi.save(tree, p), 'lazyphi')
        print(f'save: np.save {t_np:.3f} s, lazyphi.save {t_lz:.3f} s: {t_lz / t_np:.2f}x (target <= 1.5x)')
        _compare_tensordict(arrays, tree, root, timed, t_lz)

        path = os.path.join(root, 'lazyphi')
        t_open = _best(lambda: lazyphi.load(path), 10)
        t_np_open = _best(lambda: [np.load(os.path.join(root, 'npy', n + '.npy'), mmap_mode='r') for n in tree], 10)
        print(f'open, Zarr imported: lazyphi.load {t_open * 1e3:.2f} ms (target < 50 ms), '
              f'np.load(mmap_mode="r") of all {TENSORS}: {t_np_open * 1e3:.2f} ms')
        timer = 'import time; s = time.perf_counter(); '
        t_cold = _cold(f'{timer}import lazyphi; lazyphi.load({path!r}); print(time.perf_counter() - s)')
        t_cold_np = _cold(f'{timer}import numpy as np, os\n'
                          f"for n in {list(tree)!r}: np.load(os.path.join({root!r}, 'npy', n + '.npy'), "
                          f"mmap_mode='r')\n"
                          f'print(time.perf_counter() - s)')
        print(f'open, fresh process (imports included): lazyphi {t_cold * 1e3:.0f} ms, numpy {t_cold_np * 1e3:.0f} ms')

        mib_rows = 2 ** 20 // (4 * 1024)
        read = (f'{timer}import lazyphi\nd = lazyphi.load({path!r})\n'
                f'for t in d.values(): t.b[:{mib_rows}].numpy("b,x")\nprint(time.perf_counter() - s)')
        read_np = (f'{timer}import numpy as np, os\n'
                   f'for n in {list(tree)!r}: np.array(np.load(os.path.join({root!r}, "npy", n + ".npy"), '
                   f'mmap_mode="r")[:{mib_rows}])\nprint(time.perf_counter() - s)')
        print(f'read 1 MiB from each tensor, fresh process (imports included): lazyphi {_cold(read) * 1e3:.0f} ms, '
              f'numpy mmap {_cold(read_np) * 1e3:.0f} ms')
        full = _best(lambda: [t.numpy('b,x') for t in lazyphi.load(path, lazy=False).values()], repeat)
        full_np = _best(lambda: [np.load(os.path.join(root, 'npy', n + '.npy')) for n in tree], repeat)
        print(f'load all: lazyphi.load(lazy=False) {full:.3f} s, np.load {full_np:.3f} s: {full / full_np:.2f}x')
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
