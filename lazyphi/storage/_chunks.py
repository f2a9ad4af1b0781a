"""Chunk files of uncompressed Zarr v3 arrays, read and written by lazyphi itself.

An array whose only codec is `bytes` (little-endian) stores each chunk as one file holding the chunk's
values in C order, padded to the full chunk shape at the array's edges. For such arrays lazyphi skips
Zarr's codec pipeline and event loop: a chunk is written to a temporary file (its disk blocks reserved
first, as `np.save` does) and renamed into place; a read fetches only the rows of a chunk (along its
first axis) that a selection touches, straight into their place in the result where they form one run
there, else into a scratch buffer that the selection is copied from. The files and metadata stay
Zarr's, so any Zarr reader opens the arrays. Arrays with any other codec (`zstd`, a checksum) are read
and written through Zarr (`chunk_reader`, `chunk_writer`).

Measured (`benchmarks/bench_cache.py`, AMD EPYC, Linux 6.18): the kernel copies file data into memory
at a third of its usual speed where the destination lies 1 to 31 bytes past the source modulo a page,
which NumPy's own arrays (16 bytes into a page) hit for every chunk file read at offset 0, so results
and scratch buffers are allocated at the file offset's place in a page (`aligned_empty`). Writing a
new file without reserving its blocks took 1.4x as long as `np.save` of the same bytes, and a
directory per chunk index (Zarr's default keys `c/3/0/0`) another 15 %, hence keys `c.3.0.0`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import os
import sys
import uuid
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..backend import to_numpy_dtype

# Zarr v3 data types whose little-endian bytes are NumPy's dtype of the same name.
_DATA_TYPES = frozenset({'bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
                         'float16', 'float32', 'float64', 'complex64', 'complex128'})
_FALLOC_FL_KEEP_SIZE = 1
_PAGE = 4096
# The kernel copies file data into user memory (and back) slowly where the destination lies 1 to 31 bytes
# past the source modulo a page (measured; AMD EPYC, Linux 6.18); 64 leaves a margin.
_SLOW_DISTANCE = 64
# Zarr skips writing a chunk equal to the fill value unless told otherwise; writing it keeps every complete
# chunk a file on disk and saves comparing each chunk with the fill value.
ZARR_CONFIG = {'write_empty_chunks': True}
# chunk files side by side (`c.3.0.0`), not in a directory per index (`c/3/0/0`)
KEY_ENCODING = {'name': 'default', 'separator': '.'}
ZSTD_LEVEL = 1


class ChunkFiles(NamedTuple):
    """An uncompressed Zarr v3 array as files: where they lie, how they are named, and their layout."""

    path: str  # directory of the array (holding zarr.json)
    shape: tuple  # the array's shape
    chunks: tuple  # the chunk shape
    dtype: np.dtype  # little-endian
    separator: str  # of the chunk key: '/' (Zarr's default) or '.'

    @property
    def chunk_bytes(self) -> int:
        return math.prod(self.chunks) * self.dtype.itemsize

    def file(self, index: tuple) -> str:
        """Path of the file of the chunk at grid position `index`."""
        names = tuple(map(str, index))
        if self.separator == '/':
            return os.path.join(self.path, 'c', *names)
        return os.path.join(self.path, '.'.join(('c', *names)))

    def read_into(self, index: tuple, inner: tuple, out: np.ndarray, outer: tuple) -> None:
        """Copy the elements `inner` of chunk `index` into `out[outer]` (a range or int array per axis each).

        Reads only the chunk's rows (along its first axis) that hold them, straight into `out` where
        they fill a contiguous part of it, else into a scratch buffer first.

        Raises:
            FileNotFoundError: the chunk has no file.
            ValueError: the file has the wrong size for the chunk.
        """
        rows = _bounds(inner[0]) if self.chunks else range(1)
        row_bytes = self.chunk_bytes // max(self.chunks[0], 1) if self.chunks else self.chunk_bytes
        offset = rows.start * row_bytes
        with open(self.file(index), 'rb', buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if size != self.chunk_bytes:
                raise ValueError(f'its file holds {size} bytes; a chunk of shape {self.chunks} and dtype '
                                 f'{self.dtype} takes {self.chunk_bytes}')
            target = self._contiguous_target(inner, out, outer, row_bytes)
            if target is not None and not _slow_copy(target, offset):
                _read_exactly(f.fileno(), target, offset)
                return
            scratch = aligned_empty((len(rows), *self.chunks[1:]) if self.chunks else (), self.dtype, offset)
            _read_exactly(f.fileno(), memoryview(scratch).cast('B'), offset)
        shifted = (_shift(inner[0], -rows.start), *inner[1:]) if self.chunks else inner
        out[orthogonal(outer)] = scratch[orthogonal(shifted)]

    def _contiguous_target(self, inner: tuple, out: np.ndarray, outer: tuple, row_bytes: int) -> memoryview | None:
        """The bytes of `out[outer]` if they are one run that the chunk's rows `inner[0]` fill in file order."""
        runs = (inner[0], outer[0]) if self.chunks else ()
        if not runs or not all(isinstance(i, range) and (i.step == 1 or len(i) == 1) for i in runs):
            return None
        for k in range(1, len(self.chunks)):
            whole = range(self.chunks[k])
            if not (isinstance(inner[k], range) and isinstance(outer[k], range) and inner[k] == outer[k] == whole
                    and out.shape[k] == self.chunks[k]):
                return None
        start = outer[0].start * row_bytes
        return memoryview(out).cast('B')[start:start + len(outer[0]) * row_bytes]

    def write(self, index: tuple, values: np.ndarray) -> None:
        """Write the part of the array in chunk `index` (`values`, clipped at the array's edge) as its file.

        Padding up to the full chunk shape is zero, Zarr's fill value here. The file appears complete or
        not at all: it is written under a temporary name (`*.<hex>.partial`) and renamed.
        """
        if values.shape != self.chunks:
            padded = np.zeros(self.chunks, self.dtype)
            padded[tuple(slice(0, s) for s in values.shape)] = values
            values = padded
        values = np.ascontiguousarray(values, self.dtype)
        path = self.file(index)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f'{path}.{uuid.uuid4().hex}.partial'
        try:
            with open(temporary, 'xb') as f:
                _reserve(f.fileno(), values.nbytes)
                f.write(memoryview(values).cast('B'))
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise


def create_group(store: str, path: str = '') -> None:
    """Create a Zarr group at `path` within the group at directory `store` (`''`: the root itself)."""
    import zarr

    zarr.create_group(store, path=path or None)


def create_array(store: str, name: str, sizes: tuple, chunks: tuple, dtype, names: tuple | None,
                 compressor: str | None = None) -> None:
    """Create the (empty) Zarr array `name` in the group at directory `store`, laid out as lazyphi writes arrays.

    Args:
        dtype: a lazyphi DType.
        names: dim names, or None for a 0-d array.
        compressor: None (chunks lazyphi reads and writes as files) or 'zstd'.
    """
    import zarr
    from zarr.codecs import ZstdCodec

    zarr.create_array(store, name=name, shape=sizes, chunks=chunks, dtype=to_numpy_dtype(dtype),
                      compressors=ZstdCodec(level=ZSTD_LEVEL) if compressor else None,
                      fill_value=False if dtype.kind is bool else 0, dimension_names=names,
                      chunk_key_encoding=KEY_ENCODING, config=ZARR_CONFIG)


def chunk_reader(path: str) -> Callable[[tuple, tuple, np.ndarray, tuple], None]:
    """`read_into(index, inner, out, outer)` of the array at directory `path`: see `ChunkFiles.read_into`.

    The array's own files where `chunk_files` can read them, else Zarr's decoding of the whole chunk.
    """
    files = chunk_files(path)
    if files is not None:
        return files.read_into
    read_block = _zarr_array(path, 'r').get_block_selection

    def read_into(index: tuple, inner: tuple, out: np.ndarray, outer: tuple) -> None:
        out[orthogonal(outer)] = read_block(index)[orthogonal(inner)]
    return read_into


def chunk_writer(path: str) -> Callable[[tuple, np.ndarray], None]:
    """`write(index, values)`: store the part of the array at directory `path` in chunk `index`.

    `values` is that part, clipped at the array's edges. Chunk files where `chunk_files` can write
    them, else Zarr's encoding; either way a chunk's file is replaced whole.
    """
    files = chunk_files(path)
    return _zarr_array(path, 'r+').set_block_selection if files is None else files.write


def _zarr_array(path: str, mode: str):
    import zarr
    from zarr.storage import LocalStore

    array = zarr.open_array(LocalStore(path, read_only=mode == 'r'), mode=mode, zarr_format=3)
    return array.with_config(ZARR_CONFIG)


def chunk_files(path: str) -> ChunkFiles | None:
    """The array at directory `path` as chunk files, or None when Zarr has to decode its chunks.

    None for any codec besides `bytes`, a big-endian layout or machine, storage transformers, a data
    type other than bool / int / uint / float / complex, or a chunk grid or key encoding lazyphi does
    not write.

    Raises:
        OSError: `zarr.json` cannot be read.
        ValueError: `zarr.json` is not JSON.
    """
    with open(os.path.join(path, 'zarr.json'), 'rb') as f:
        meta = json.loads(f.read())
    codecs = meta.get('codecs')
    data_type = meta.get('data_type')
    grid = meta.get('chunk_grid', {})
    keys = meta.get('chunk_key_encoding', {})
    if (sys.byteorder != 'little' or meta.get('node_type') != 'array' or meta.get('storage_transformers')
            or not isinstance(data_type, str) or data_type not in _DATA_TYPES
            or not isinstance(codecs, list) or len(codecs) != 1 or codecs[0].get('name') != 'bytes'
            or codecs[0].get('configuration', {}).get('endian', 'little') != 'little'
            or grid.get('name') != 'regular' or keys.get('name') != 'default'):
        return None
    separator = keys.get('configuration', {}).get('separator', '/')
    if separator not in ('/', '.'):
        return None
    return ChunkFiles(path, tuple(meta['shape']), tuple(grid['configuration']['chunk_shape']),
                      np.dtype(data_type).newbyteorder('<'), separator)


def orthogonal(index: tuple) -> tuple:
    """`index` (a range or int array per axis) as a NumPy index selecting along each axis on its own."""
    if sum(not isinstance(i, range) for i in index) <= 1:
        return tuple(range_slice(i) if isinstance(i, range) else i for i in index)
    return np.ix_(*(np.asarray(i, dtype=np.intp) for i in index))


def range_slice(r: range) -> slice:
    """The slice selecting the indices of `r` (all >= 0)."""
    if r.step > 0:
        return slice(r.start, r.stop, None if r.step == 1 else r.step)
    return slice(r.start, r.stop if r.stop >= 0 else None, r.step)


def aligned_empty(shape: tuple, dtype: np.dtype, phase: int = 0) -> np.ndarray:
    """A new C-ordered array whose data starts `phase` bytes (mod 4096) past a page boundary.

    Reading file bytes at offset `phase` (mod 4096) into it runs at full speed on CPUs where the kernel's
    copy slows down for some relative placements (see the module's notes).
    """
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + _PAGE, np.uint8)
    start = (phase - raw.ctypes.data) % _PAGE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _bounds(sel) -> range:
    """The indices from the smallest to the largest of a range or int array, as a range with step 1."""
    if isinstance(sel, range):
        return range(min(sel[0], sel[-1]), max(sel[0], sel[-1]) + 1)
    return range(int(sel.min()), int(sel.max()) + 1)


def _shift(sel, by: int):
    if isinstance(sel, range):
        return range(sel.start + by, sel.stop + by, sel.step)
    return sel + by


def _slow_copy(target: memoryview, offset: int) -> bool:
    """Whether the kernel copies file bytes at `offset` into `target` at a fraction of its usual speed."""
    address = np.frombuffer(target, np.uint8).ctypes.data if len(target) else 0
    return 0 < (address - offset) % _PAGE < _SLOW_DISTANCE


def _read_exactly(fd: int, target: memoryview, offset: int) -> None:
    done = 0
    while done < len(target):
        count = os.preadv(fd, [target[done:]], offset + done)
        if not count:
            raise ValueError(f'its file ended after {offset + done} bytes')
        done += count


def _load_fallocate():
    """libc's `fallocate`, or None where there is none (not Linux)."""
    try:
        function = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _load_fallocate() if sys.platform.startswith('linux') else None


def _reserve(fd: int, nbytes: int) -> None:
    """Reserve `nbytes` of disk blocks for a new file before writing it, where the file system can.

    `fallocate` keeping the size: a file system that cannot reserve says so and nothing is written
    (unlike `posix_fallocate`, which falls back to writing zeros).
    """
    if _FALLOCATE is not None and nbytes:
        _FALLOCATE(fd, _FALLOC_FL_KEEP_SIZE, 0, nbytes)
