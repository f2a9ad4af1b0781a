"""Chunk files of uncompressed Zarr v3 arrays, read and written by lazyphi itself.

An array whose codecs are `bytes` (little-endian), optionally followed by `crc32c`, stores each chunk as
one file holding the chunk's values in C order, padded to the full chunk shape at the array's edges, then
(with `crc32c`) the CRC-32C of those bytes, 4 bytes little-endian. lazyphi creates every array with the
checksum. For such arrays lazyphi skips Zarr's codec pipeline and event loop: a chunk is written to a
temporary file (its disk blocks reserved first, as `np.save` does) and renamed into place; a read fetches
the rows of a chunk (along its first axis) that a selection touches, straight into their place in the
result where they form one run there, else into a scratch buffer that the selection is copied from.

The checksum is computed by crc32c-rs where it is installed (`crc32c_function`). A read that covers a whole
chunk checks its checksum; a read of some rows only reads the whole chunk and checks it the first time this
process reads that file (same device, inode, size and modification times), and only the rows afterwards.
Writing, and reading one chunk alone, checksum 512 KiB at a time (`_PIECE`) as the bytes pass, while they
are in the CPU's cache. Reading a selection reads its chunks back to back, 4 MiB at a time (`_READ_AHEAD`),
while a helper thread checksums what was read (`Checksums`); the selection is returned, or the first
damaged chunk raised, once all are checked. A missing file, a file of the wrong size or a wrong checksum
raises. Reads return the checksum each chunk's file ends with, and writes the one they wrote, so that the
disk cache can tell whether a chunk belongs where it lies (`_results.chunk_tag`). The files and metadata
stay Zarr's, so any Zarr reader opens the arrays (and checks the checksums). Arrays with any other codec
(`zstd`) are read and written through Zarr (`chunk_reader`, `chunk_writer`), which checks the checksum of
each chunk; lazyphi checks first that the chunk's file exists (Zarr reads a missing chunk as the fill value).

Measured (`benchmarks/bench_cache.py`, AMD EPYC, Linux 6.18): the kernel copies file data into memory
at a third of its usual speed where the destination lies 1 to 31 bytes past the source modulo a page,
which NumPy's own arrays (16 bytes into a page) hit for every chunk file read at offset 0, so results
and scratch buffers are allocated at the file offset's place in a page (`aligned_empty`). Writing a
new file without reserving its blocks took 1.4x as long as `np.save` of the same bytes, and a
directory per chunk index (Zarr's default keys `c/3/0/0`) another 15 %, hence keys `c.3.0.0`.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import errno
import functools
import json
import math
import os
import queue
import sys
from collections.abc import Callable
from typing import NamedTuple

import google_crc32c
import numpy as np

from ..backend import to_numpy_dtype
from ._results import CHECKSUM_BYTES, NOFOLLOW, stored_checksum, temporary_suffix

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
KEY_ENCODING = {'name': 'default', 'configuration': {'separator': '.'}}
ZSTD_LEVEL = 1
# Bytes checksummed at a time while writing or reading: a piece is checksummed while it is in the CPU's cache,
# just before it is written or just after it is read (measured on 256 MiB, AMD EPYC with 1 MiB L2: 512 KiB
# pieces cost least; 128 KiB ones 10 % more in all, from the calls).
_PIECE = 512 * 1024
# Bytes read at a time where `Checksums` checks them on a helper thread (which each piece wakes).
_READ_AHEAD = 4 * 2**20
# Files this process read whole and found intact, by (device, inode, size, mtime, ctime): a later read of some
# rows of the same file reads only those rows. Cleared when it grows past `_VERIFIED_MAX`.
_VERIFIED: set[tuple] = set()
_VERIFIED_MAX = 1 << 16
# the codecs of arrays lazyphi writes (and wrote before chunks had checksums)
_LAYOUTS = (['bytes', 'crc32c'], ['bytes', 'zstd', 'crc32c'], ['bytes'], ['bytes', 'zstd'])


class ChunkFiles(NamedTuple):
    """An uncompressed Zarr v3 array as files: where they lie, how they are named, and their layout."""

    path: str  # directory of the array (holding zarr.json)
    shape: tuple  # the array's shape
    chunks: tuple  # the chunk shape
    dtype: np.dtype  # little-endian
    separator: str  # of the chunk key: '/' (Zarr's default) or '.'
    checksum: bool = False  # each file ends with the CRC-32C of the chunk's bytes (Zarr's `crc32c` codec)

    @property
    def chunk_bytes(self) -> int:
        """Bytes of one chunk's values (its file holds the checksum besides)."""
        return math.prod(self.chunks) * self.dtype.itemsize

    def file(self, index: tuple) -> str:
        """Path of the file of the chunk at grid position `index`."""
        names = tuple(map(str, index))
        if self.separator == '/':
            return os.path.join(self.path, 'c', *names)
        return os.path.join(self.path, '.'.join(('c', *names)))

    def read_into(self, index: tuple, inner: tuple, out: np.ndarray, outer: tuple,
                  checks: Checksums | None = None) -> int | None:
        """Copy the elements `inner` of chunk `index` into `out[outer]` (a range or int array per axis each).

        Reads only the chunk's rows (along its first axis) that hold them, straight into `out` where
        they fill a contiguous part of it, else into a scratch buffer first. With a checksum, the whole
        chunk is read and checked unless this process has checked the same file before: here, or by
        `checks` on its helper thread, where given (then `out` is not to be used before `checks.damaged()`).

        Returns:
            The checksum the chunk's file ends with (None: the array has none), for the caller to check
            that the chunk belongs where it lies (`_results.chunk_tag`).

        Raises:
            FileNotFoundError: the chunk has no file.
            OSError: the chunk's file is a symbolic link.
            ValueError: the file has the wrong size for the chunk, or its checksum disagrees with its bytes.
        """
        total_rows = self.chunks[0] if self.chunks else 1
        rows = _bounds(inner[0]) if self.chunks else range(1)
        row_bytes = self.chunk_bytes // max(total_rows, 1)
        fd = _open_chunk(self.file(index))
        try:
            stat = os.fstat(fd)
            size = self.chunk_bytes + (CHECKSUM_BYTES if self.checksum else 0)
            if stat.st_size != size:
                raise ValueError(f'its file holds {stat.st_size} bytes; a chunk of shape {self.chunks} and dtype '
                                 f'{self.dtype}{" with its checksum" if self.checksum else ""} takes {size}')
            identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            check = self.checksum and (len(rows) == total_rows or identity not in _VERIFIED)
            if check:
                rows = range(total_rows)
            offset = rows.start * row_bytes
            target = self._contiguous_target(inner, out, outer, row_bytes)
            scratch = None
            if target is None or len(target) != len(rows) * row_bytes or _slow_copy(target, offset):
                scratch = aligned_empty((len(rows), *self.chunks[1:]) if self.chunks else (), self.dtype, offset)
                target = memoryview(scratch).cast('B')
            stored = _stored_sum(fd, self.chunk_bytes) if self.checksum else None
            if not check:
                _fill(fd, target, offset)
            elif checks is None:
                _compare_sum(_read_summed(fd, target, offset), stored, identity)
            else:
                for start in range(0, len(target), _READ_AHEAD):
                    _fill(fd, target[start:start + _READ_AHEAD], offset + start)
                    checks.add(np.frombuffer(target[start:start + _READ_AHEAD], np.uint8))
                checks.end(index, stored, identity)
        finally:
            os.close(fd)
        if scratch is not None:
            shifted = (_shift(inner[0], -rows.start), *inner[1:]) if self.chunks else inner
            out[orthogonal(outer)] = scratch[orthogonal(shifted)]
        return stored

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

    def write(self, index: tuple, values: np.ndarray) -> int | None:
        """Write the part of the array in chunk `index` (`values`, clipped at the array's edge) as its file.

        Padding up to the full chunk shape is zero, Zarr's fill value here; the checksum, if the array has
        one, follows. The file appears complete or not at all: it is written under a temporary name
        (`*.<hex>.partial`, naming its writer: `_results.temporary_suffix`) and renamed.

        Returns:
            The checksum written at the end of the file (None: the array has none).
        """
        if values.shape != self.chunks:
            padded = np.zeros(self.chunks, self.dtype)
            padded[tuple(slice(0, s) for s in values.shape)] = values
            values = padded
        values = np.ascontiguousarray(values, self.dtype)
        path = self.file(index)
        if self.separator == '/':  # a directory per index; keys `c.3.0.0` lie in the array's own directory
            os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = path + temporary_suffix()
        crc = None
        try:
            with open(temporary, 'xb', buffering=0) as f:
                _reserve(f.fileno(), values.nbytes + (CHECKSUM_BYTES if self.checksum else 0))
                if self.checksum:
                    crc = _write_summed(f.fileno(), values.reshape(-1).view(np.uint8))
                    _write_all(f.fileno(), memoryview(crc.to_bytes(CHECKSUM_BYTES, 'little')))
                else:
                    _write_all(f.fileno(), memoryview(values).cast('B'))
            os.replace(temporary, path)
        except BaseException as err:
            if os.path.exists(temporary):
                os.remove(temporary)
            if isinstance(err, OSError):
                raise named(err, path) from err
            raise
        return crc


def create_group(store: str, path: str = '') -> None:
    """Create a Zarr group at `path` within the group at directory `store` (`''`: the root itself).

    Writes its `zarr.json` as Zarr does (and that of any parent directory lacking one, as Zarr does).

    Raises:
        FileExistsError: the node exists already.
    """
    _write_node(store, path, {'attributes': {}, 'zarr_format': 3, 'node_type': 'group'})


def create_array(store: str, name: str, sizes: tuple, chunks: tuple, dtype, names: tuple | None,
                 compressor: str | None = None) -> None:
    """Create the (empty) Zarr array `name` in the group at directory `store`, laid out as lazyphi writes arrays.

    Every chunk carries a CRC-32C checksum (Zarr's `crc32c` codec, after `zstd` where it is compressed).
    The `zarr.json` is the one `zarr.create_array` writes for these arguments (a test compares them),
    written directly: Zarr's API took 3 ms of Python per array, a tenth of `np.save` of 256 MiB.

    Args:
        dtype: a lazyphi DType.
        names: dim names, or None for a 0-d array.
        compressor: None (chunks lazyphi reads and writes as files) or 'zstd'.

    Raises:
        FileExistsError: the node exists already.
    """
    np_dtype = to_numpy_dtype(dtype)
    if np_dtype.name not in _DATA_TYPES:
        raise TypeError(f'lazyphi stores arrays of bool, int, uint, float and complex values, not {np_dtype}')
    ordered = {'name': 'bytes'} if np_dtype.itemsize == 1 else {'name': 'bytes', 'configuration': {'endian': 'little'}}
    codecs = [ordered, *([{'name': 'zstd', 'configuration': {'level': ZSTD_LEVEL, 'checksum': False}}]
                         if compressor else []), {'name': 'crc32c'}]
    fill = {'b': False, 'i': 0, 'u': 0, 'f': 0.0, 'c': [0.0, 0.0]}[np_dtype.kind]
    meta = {'shape': list(sizes), 'data_type': np_dtype.name,
            'chunk_grid': {'name': 'regular', 'configuration': {'chunk_shape': list(chunks)}},
            'chunk_key_encoding': KEY_ENCODING, 'fill_value': fill, 'codecs': codecs, 'attributes': {},
            **({} if names is None else {'dimension_names': list(names)}),
            'zarr_format': 3, 'node_type': 'array', 'storage_transformers': []}
    _write_node(store, name, meta)


def _write_node(store: str, path: str, meta: dict) -> None:
    """Write `meta` as the `zarr.json` of the new node `path` in directory `store`; parents lacking one: groups."""
    parts = [p for p in path.split('/') if p]
    for depth in range(len(parts)):
        parent = os.path.join(store, *parts[:depth])
        if not os.path.exists(os.path.join(parent, 'zarr.json')):
            _write_node(parent, '', {'attributes': {}, 'zarr_format': 3, 'node_type': 'group'})
    directory = os.path.join(store, *parts)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, 'zarr.json'), 'x', encoding='utf-8') as f:
        f.write(json.dumps(meta, indent=2))


def chunk_reader(path: str, meta: dict | None = None) -> Callable[..., int | None]:
    """`read_into(index, inner, out, outer, checks=None) -> stored checksum` of the array at directory `path`:
    see `ChunkFiles.read_into`.

    The array's own files where `chunk_files` can read them, else Zarr's decoding of the whole chunk, after
    checking that the chunk's file exists (Zarr would read a missing one as the fill value; it checks each
    chunk's checksum itself, so `checks` is not used) and reading the checksum it ends with.

    Args:
        meta: the array's `zarr.json`, parsed (`read_metadata`); read from `path` if None.
    """
    meta = read_metadata(path) if meta is None else meta
    files = chunk_files(path, meta)
    if files is not None:
        return files.read_into
    read_block = _zarr_array(path, 'r').get_block_selection
    summed = codec_names(meta)[-1:] == ['crc32c']

    def read_into(index: tuple, inner: tuple, out: np.ndarray, outer: tuple,
                  checks: Checksums | None = None) -> int | None:
        file = chunk_file(path, meta, index)
        if not os.path.isfile(file) or os.path.islink(file):
            raise FileNotFoundError(f'its file {file!r} is missing')
        stored = stored_checksum(file) if summed else None
        out[orthogonal(outer)] = read_block(index)[orthogonal(inner)]
        return stored
    return read_into


def chunk_writer(path: str, meta: dict | None = None) -> Callable[[tuple, np.ndarray], int | None]:
    """`write(index, values) -> stored checksum`: store the part of the array at directory `path` in chunk `index`.

    `values` is that part, clipped at the array's edges. Chunk files where `chunk_files` can write
    them, else Zarr's encoding; either way a chunk's file is replaced whole. Returns the checksum the
    chunk's file ends with (None: the array has none).

    Args:
        meta: the array's `zarr.json`, parsed; read from `path` if None.
    """
    meta = read_metadata(path) if meta is None else meta
    files = chunk_files(path, meta)
    if files is not None:
        return files.write
    write_block = _zarr_array(path, 'r+').set_block_selection
    summed = codec_names(meta)[-1:] == ['crc32c']

    def write(index: tuple, values: np.ndarray) -> int | None:
        file = chunk_file(path, meta, index)
        try:
            write_block(index, values)
        except OSError as err:
            raise named(err, file) from err
        return stored_checksum(file) if summed else None
    return write


def named(err: OSError, file: str) -> OSError:
    """`err`, or where it names no file (a full disk: ENOSPC), the same error naming `file`."""
    if err.filename is not None or err.errno is None:
        return err
    return type(err)(err.errno, err.strerror, file)


def _zarr_array(path: str, mode: str):
    import zarr
    from zarr.storage import LocalStore

    array = zarr.open_array(LocalStore(path, read_only=mode == 'r'), mode=mode, zarr_format=3)
    return array.with_config(ZARR_CONFIG)


def read_metadata(path: str) -> dict:
    """The parsed `zarr.json` of the array at directory `path`.

    Raises:
        OSError: `zarr.json` cannot be read.
        ValueError: `zarr.json` is not a JSON object.
    """
    with open(os.path.join(path, 'zarr.json'), 'rb') as f:
        meta = json.loads(f.read())
    if not isinstance(meta, dict):
        raise ValueError(f'{os.path.join(path, "zarr.json")!r} holds no JSON object')
    return meta


def codec_names(meta: dict) -> list:
    """The names of the codecs of an array's metadata, in order; [] where they are malformed."""
    codecs = meta.get('codecs')
    if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
        return []
    return [c.get('name') for c in codecs]


def _little_endian(meta: dict) -> bool:
    """Whether the first codec (`bytes`, by `codec_names`) stores little-endian values."""
    configuration = meta['codecs'][0].get('configuration', {})
    return isinstance(configuration, dict) and configuration.get('endian', 'little') == 'little'


def metadata_differences(meta: dict, sizes: tuple, chunks: tuple, dtype, names: tuple) -> list[str]:
    """How an array's `zarr.json` (`meta`) disagrees with what a lazyphi manifest says of it.

    Args:
        sizes, chunks: the array's shape and chunk shape.
        dtype: a lazyphi DType.
        names: the dim names.

    Returns:
        One line per disagreement, naming the manifest's value and Zarr's.
    """
    found = []
    grid = meta.get('chunk_grid')
    zarr_chunks = grid.get('configuration', {}).get('chunk_shape') if isinstance(grid, dict) else None
    expected = to_numpy_dtype(dtype)
    data_type = meta.get('data_type')
    try:
        same_type = isinstance(data_type, str) and np.dtype(data_type) == expected
    except TypeError:
        same_type = False
    if not same_type:
        found.append(f'dtype {expected.name} in the manifest, {data_type!r} in zarr.json')
    if meta.get('shape') != list(sizes):
        found.append(f'sizes {list(sizes)} in the manifest, shape {meta.get("shape")!r} in zarr.json')
    if zarr_chunks != list(chunks):
        found.append(f'chunks {list(chunks)} in the manifest, chunk shape {zarr_chunks!r} in zarr.json')
    dims = meta.get('dimension_names')  # optional in Zarr: an array without them agrees with any
    if dims is not None and dims != list(names):
        found.append(f'dims {list(names)} in the manifest, dimension names {dims!r} in zarr.json')
    if (codec_names(meta) not in _LAYOUTS or not _little_endian(meta) or meta.get('storage_transformers')
            or meta.get('node_type') != 'array'):
        found.append(f'codecs {meta.get("codecs")!r:.200} (storage transformers '
                     f'{meta.get("storage_transformers")!r:.100}, node type {meta.get("node_type")!r:.50}) in '
                     f'zarr.json, which lazyphi never writes: it writes arrays of little-endian bytes, optionally '
                     f'zstd, then crc32c')
    return found


def chunk_file(path: str, meta: dict, index: tuple) -> str:
    """Path of the file of chunk `index` of the array at directory `path` with metadata `meta`."""
    keys = meta.get('chunk_key_encoding', {})
    separator = keys.get('configuration', {}).get('separator', '/' if keys.get('name') == 'default' else '.')
    names = tuple(map(str, index))
    if keys.get('name') == 'v2':
        return os.path.join(path, separator.join(names) if names else '0')
    return os.path.join(path, separator.join(('c', *names)))


def chunk_files(path: str, meta: dict | None = None) -> ChunkFiles | None:
    """The array at directory `path` as chunk files, or None when Zarr has to decode its chunks.

    None for codecs other than `bytes` (optionally followed by `crc32c`), a big-endian layout or
    machine, storage transformers, a data type other than bool / int / uint / float / complex, or a
    chunk grid or key encoding lazyphi does not write.

    Args:
        meta: the array's `zarr.json`, parsed; read from `path` if None.

    Raises:
        OSError: `zarr.json` cannot be read.
        ValueError: `zarr.json` is not JSON.
    """
    meta = read_metadata(path) if meta is None else meta
    names = codec_names(meta)
    data_type = meta.get('data_type')
    grid = meta.get('chunk_grid', {})
    keys = meta.get('chunk_key_encoding', {})
    if (sys.byteorder != 'little' or meta.get('node_type') != 'array' or meta.get('storage_transformers')
            or not isinstance(data_type, str) or data_type not in _DATA_TYPES
            or names not in (['bytes'], ['bytes', 'crc32c']) or not _little_endian(meta)
            or grid.get('name') != 'regular' or keys.get('name') != 'default'):
        return None
    separator = keys.get('configuration', {}).get('separator', '/')
    if separator not in ('/', '.'):
        return None
    return ChunkFiles(path, tuple(meta['shape']), tuple(grid['configuration']['chunk_shape']),
                      np.dtype(data_type).newbyteorder('<'), separator, len(names) == 2)


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


def _read_summed(fd: int, target: memoryview, offset: int) -> int:
    """Fill `target` with the file's bytes from `offset` and return their CRC-32C.

    Each `_PIECE` bytes are checksummed just after they are read, while they are in the CPU's cache.

    Raises:
        ValueError: the file ends before `target` is full.
    """
    values = np.frombuffer(target, np.uint8)
    extend = crc32c_function()
    crc = 0
    for start in range(0, len(target), _PIECE):
        _fill(fd, target[start:start + _PIECE], offset + start)
        crc = extend(values[start:start + _PIECE], crc)
    return crc


def _fill(fd: int, target: memoryview, offset: int) -> None:
    """Fill `target` with the file's bytes from `offset`; ValueError where the file ends before it is full."""
    done = 0
    while done < len(target):
        count = os.preadv(fd, [target[done:]], offset + done)
        if not count:
            raise ValueError(f'its file ended after {offset + done} bytes')
        done += count


class Checksums:
    """The checks of the chunks read whole for one selection, done on a helper thread while the reader reads on.

    Pass it to `ChunkFiles.read_into` for every chunk of the selection, then call `damaged()`. The reading
    thread never waits for a checksum, except for the last chunk's in `damaged()`, and wakes the helper
    once per `_READ_AHEAD` bytes.
    """

    def __init__(self):
        self._items: queue.SimpleQueue | None = None
        self._checked: concurrent.futures.Future | None = None

    def add(self, values: np.ndarray) -> None:
        """The next bytes (1-d uint8, left unchanged until `damaged()` returns) of the chunk being read."""
        self._put(values)

    def end(self, index: tuple, stored: int | None, identity: tuple) -> None:
        """The chunk being read, at `index`, ended; its file holds the checksum `stored` (None: none)."""
        self._put((index, stored, identity))

    def damaged(self) -> list[tuple[tuple, ValueError]]:
        """(index, error) of each chunk whose checksum disagrees with its bytes, once all are checked."""
        if self._items is None:
            return []
        self._items.put(None)
        return self._checked.result()

    def _put(self, item) -> None:
        if self._items is None:
            self._items = queue.SimpleQueue()
            self._checked = _helper_pool().submit(_check_chunks, self._items)
        self._items.put(item)


def _check_chunks(items: queue.SimpleQueue) -> list[tuple[tuple, ValueError]]:
    """Check the chunks described by `items` (see `Checksums`) up to None; (index, error) of the damaged ones."""
    extend = crc32c_function()
    crc, damaged = 0, []
    while (item := items.get()) is not None:
        if isinstance(item, np.ndarray):
            crc = extend(item, crc)
            continue
        index, stored, identity = item
        try:
            _compare_sum(crc, stored, identity)
        except ValueError as err:
            damaged.append((index, err))
        crc = 0
    return damaged


@functools.cache
def _helper_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that check the chunks of `Checksums` (a fork's child makes its own)."""
    return concurrent.futures.ThreadPoolExecutor(max(os.cpu_count() or 1, 2), thread_name_prefix='lazyphi-crc')


os.register_at_fork(after_in_child=_helper_pool.cache_clear)


def _open_chunk(path: str) -> int:
    """A read-only descriptor of a chunk's file; OSError for a symbolic link, which a store never holds."""
    return os.open(path, os.O_RDONLY | NOFOLLOW)


def _stored_sum(fd: int, nbytes: int) -> int | None:
    """The checksum a chunk's file of `nbytes` data bytes ends with; None where the file ends before it."""
    stored = os.pread(fd, CHECKSUM_BYTES, nbytes)
    return int.from_bytes(stored, 'little') if len(stored) == CHECKSUM_BYTES else None


def _compare_sum(crc: int, stored: int | None, identity: tuple) -> None:
    """ValueError unless `crc`, computed of a chunk's bytes, is the checksum `stored` in its file; remember it if so."""
    if stored != crc:
        raise ValueError(f'its checksum does not match its bytes (CRC-32C {crc:08x} computed, '
                         f'{"none" if stored is None else f"{stored:08x}"} stored): the file was changed or damaged')
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.clear()
    _VERIFIED.add(identity)


def _write_all(fd: int, data: memoryview) -> None:
    done = 0
    while done < len(data):
        done += os.write(fd, data[done:])


def _write_summed(fd: int, values: np.ndarray) -> int:
    """Write the bytes of the 1-d uint8 array `values` a piece at a time; return their CRC-32C.

    Each piece is checksummed first: that brings it into the CPU's cache, where the kernel then copies it from.
    """
    crc = 0
    extend = crc32c_function()
    view = memoryview(values)
    for start in range(0, len(values), _PIECE):
        crc = extend(values[start:start + _PIECE], crc)
        _write_all(fd, view[start:start + _PIECE])
    return crc


@functools.cache
def crc32c_function() -> Callable[[np.ndarray, int], int]:
    """`extend(data, crc)`: the CRC-32C of the bytes that gave `crc` (0: none) followed by those of `data`.

    `data` is a contiguous NumPy array. crc32c-rs where it is installed and agrees with google-crc32c (Zarr's
    own) on a few inputs of awkward lengths and offsets, else google-crc32c. crc32c-rs folds with carry-less
    multiplications (AVX-512 VPCLMULQDQ where the CPU has them): 80 GiB/s on data in the cache against
    google-crc32c's 31 GiB/s (measured; AMD EPYC, Zen 5): checksumming on the reading thread added 15 % to
    reading 256 MiB instead of 45 % (10 % now that `Checksums` does it on a helper), and 3 % to writing it
    instead of 30 %.
    """
    try:
        import crc32c_rs
    except ImportError:
        return _google_extend
    sample = np.random.default_rng(0).integers(0, 256, 3 * _PIECE + 37, dtype=np.uint8)
    for start, stop in ((0, 0), (0, 1), (3, 66), (1, 4099), (5, _PIECE + 9), (0, len(sample))):
        part = sample[start:stop]
        middle = (start + stop) // 2
        if (crc32c_rs.crc32c(part, 0) != _google_extend(part, 0)
                or crc32c_rs.crc32c(sample[middle:stop], crc32c_rs.crc32c(sample[start:middle], 0))
                != _google_extend(part, 0)):
            return _google_extend
    return crc32c_rs.crc32c


def _google_extend(data: np.ndarray, crc: int) -> int:
    return google_crc32c.extend(crc, data)


def libc_function(name: str, argtypes: tuple):
    """The C library's function `name` returning int (errno kept), or None where there is none."""
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


_FALLOCATE = (libc_function('fallocate', (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64))
              if sys.platform.startswith('linux') else None)


def _reserve(fd: int, nbytes: int) -> None:
    """Reserve `nbytes` of disk blocks for a new file before writing it, where the file system can.

    `fallocate` keeping the size: a file system that cannot reserve says so and nothing is written
    (unlike `posix_fallocate`, which falls back to writing zeros).
    """
    if _FALLOCATE is not None and nbytes and _FALLOCATE(fd, _FALLOC_FL_KEEP_SIZE, 0, nbytes) != 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSPC, errno.EDQUOT):  # the write would fail too: fail before writing
            raise OSError(code, os.strerror(code))
