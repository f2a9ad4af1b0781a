"""The disk-cache format apart from the array data: manifests, completion records and temporary files.

A result is a directory `<cache_dir>/<key>/` holding a Zarr group, the manifest `lazyphi.json`, one
Zarr array per output and, beside each array `<name>`, a directory `<name>.done/` with one empty file
per complete chunk, named by the chunk's grid index and its tag, joined with '.' (`3.0.0.<16 hex digits>`).
The tag (`chunk_tag`) binds the checksum the chunk's file ends with to the result's key, the array and
the grid position, so a chunk file moved, copied or linked to another place does not match the record
there. Nothing here imports Zarr: listing, checking completion and deleting results cost a few
file-system calls.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math as pymath
import operator
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import google_crc32c

from .._errors import ManifestDamaged
from ..backend import DType
from ..math import Shape
from ..math.kinds import DIM_TYPES

FORMAT = 2  # 2: completion records carry the chunk's tag (`chunk_tag`); format-1 results are not read
MANIFEST = 'lazyphi.json'
RECORDS_SUFFIX = '.done'
COMPRESSORS = (None, 'zstd')
STORABLE_KINDS = (bool, int, float, complex)
# A temporary file or directory older than this is left over from a killed writer: a live writer keeps
# touching its file, and Zarr renames a chunk's temporary file as soon as its bytes are written.
STALE_AFTER_SECONDS = 60.0
# Zarr's LocalStore writes `<chunk>.<uuid hex>.partial` and renames it; lazyphi's own temporaries end alike.
_TEMPORARY = re.compile(r'\.([0-9a-f]{32})\.partial$')
# an old save moved away by `save(overwrite=True)` while the new one is renamed into place
REPLACED_SUFFIX = '.replaced'
_REPLACED = re.compile(r'\.(.+)\.[0-9a-f]{32}' + re.escape(REPLACED_SUFFIX))
_RESERVED = ('zarr.json', MANIFEST)
TAG_DIGITS = 16  # hex digits of a chunk's tag
_TAG = re.compile(f'[0-9a-f]{{{TAG_DIGITS}}}')
NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)  # opening a symbolic link fails: a store never holds one
CHECKSUM_BYTES = 4  # the CRC-32C Zarr's `crc32c` codec appends to each chunk's file


@dataclass(frozen=True)
class ArraySpec:
    """One Zarr array of a result: shape with dim names, types, sizes and labels, dtype and chunking.

    Args:
        shape: the full shape; every size an int.
        dtype: the element type (bool, int, float or complex).
        backend: name of the backend the values come from ('numpy', 'torch', 'jax', 'tensorflow').
        block_dim: the dim the array is written along in blocks.
        chunk: chunk length along `block_dim`; every other dim is one chunk.
        compressor: None (uncompressed, the default) or 'zstd'. Kept in Zarr's metadata only.
    """

    shape: Shape
    dtype: DType
    backend: str
    block_dim: str
    chunk: int
    compressor: str | None = None

    def __post_init__(self):
        if not isinstance(self.shape, Shape):
            raise TypeError(f'ArraySpec.shape must be a lazyphi Shape, got {self.shape!r}')
        bad = [f'{n}={s!r}' for n, s in zip(self.shape.names, self.shape.sizes, strict=True)
               if type(s) is not int or s < 0]
        if bad:
            raise ValueError(f'ArraySpec.shape must have int sizes; {self.shape} has {", ".join(bad)}')
        object.__setattr__(self, 'dtype', DType.as_dtype(self.dtype))
        if self.dtype is None or self.dtype.kind not in STORABLE_KINDS:
            raise ValueError(f'The disk cache stores bool, int, float and complex values, not {self.dtype}')
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError(f"ArraySpec.backend must be a backend name like 'numpy', got {self.backend!r}")
        if self.block_dim not in self.shape.names:
            raise ValueError(f'ArraySpec.block_dim {self.block_dim!r} is not a dim of {self.shape}')
        if type(self.chunk) is not int or self.chunk < 1:
            raise ValueError(f'ArraySpec.chunk must be a positive int (elements along {self.block_dim!r}), '
                             f'got {self.chunk!r}')
        if self.compressor not in COMPRESSORS:
            raise ValueError(f'ArraySpec.compressor must be one of {COMPRESSORS}, got {self.compressor!r}')

    @property
    def axis(self) -> int:
        """Position of `block_dim` among the array's axes."""
        return self.shape.names.index(self.block_dim)

    @property
    def chunks(self) -> tuple[int, ...]:
        """The Zarr chunk shape: `chunk` along `block_dim`, every other dim whole (at least 1)."""
        return tuple(self.chunk if n == self.block_dim else max(s, 1)
                     for n, s in zip(self.shape.names, self.shape.sizes, strict=True))

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(pymath.ceil(s / c) for s, c in zip(self.shape.sizes, self.chunks, strict=True))

    def manifest_entry(self) -> dict:
        """This array as its entry in the manifest's `arrays`."""
        return {'dims': list(self.shape.names), 'types': list(self.shape.types),
                'labels': [None if lab is None else list(lab) for lab in self.shape.labels],
                'sizes': list(self.shape.sizes), 'dtype': str(self.dtype), 'backend': self.backend,
                'chunks': list(self.chunks), 'block_dim': self.block_dim}

    @classmethod
    def from_manifest(cls, entry: Mapping) -> ArraySpec:
        """The spec of a validated manifest entry (the compressor is not recorded there: None)."""
        labels = tuple(None if lab is None else tuple(lab) for lab in entry['labels'])
        shape = Shape(tuple(entry['sizes']), tuple(entry['dims']), tuple(entry['types']), labels)
        chunk = entry['chunks'][entry['dims'].index(entry['block_dim'])]
        return cls(shape, DType.as_dtype(entry['dtype']), entry['backend'], entry['block_dim'], chunk)


def check_name(name: str, what: str) -> None:
    """Raise ValueError unless `name` can be a file name inside a cache directory or group."""
    if (not isinstance(name, str) or not name or name.startswith('.') or '/' in name or '\\' in name
            or name in _RESERVED or name.endswith(RECORDS_SUFFIX) or _TEMPORARY.search(name)):
        raise ValueError(f"{what} {name!r} cannot name a file in the disk cache: use a non-empty name without "
                         f"'/', not starting with '.', not ending in {RECORDS_SUFFIX!r} and not one of {_RESERVED}")


def class_path(cls: type) -> str:
    """`module:QualName` of a class, as the manifest records it."""
    return f'{cls.__module__}:{cls.__qualname__}'


def new_manifest(key: str, cls: type, arrays: Mapping[str, ArraySpec], config: Mapping | None = None) -> dict:
    """The manifest of a result computed now; `config` values are recorded by their repr (to be shown)."""
    return {'format': FORMAT, 'key': key, 'class': class_path(cls),
            'created': datetime.now(UTC).isoformat(timespec='microseconds'),
            'arrays': {name: spec.manifest_entry() for name, spec in sorted(arrays.items())},
            'config': {name: repr(value) for name, value in (config or {}).items()}}


def write_manifest(group: str, manifest: dict) -> None:
    """Write `lazyphi.json` atomically (a temporary file, then `os.replace`), with its checksum added."""
    temporary = os.path.join(group, f'lazyphi.{uuid.uuid4().hex}.partial')
    with open(temporary, 'w', encoding='utf-8') as f:
        json.dump({**manifest, 'checksum': manifest_checksum(manifest)}, f, indent=1)
    os.replace(temporary, os.path.join(group, MANIFEST))


def manifest_checksum(manifest: dict) -> str:
    """'crc32c:<8 hex digits>' of the manifest's entries other than 'checksum', as canonical JSON."""
    content = {k: v for k, v in manifest.items() if k != 'checksum'}
    text = json.dumps(content, sort_keys=True, separators=(',', ':'), allow_nan=False)
    return f'crc32c:{google_crc32c.value(text.encode()):08x}'


def checksum_problem(manifest: dict) -> str | None:
    """Why the manifest's 'checksum' disagrees with its content, or None (also when it has none: older files)."""
    if 'checksum' not in manifest:
        return None
    try:
        expected = manifest_checksum(manifest)
    except (TypeError, ValueError) as err:  # not canonical JSON: a crafted file
        return f'its content cannot be checksummed ({err})'
    if manifest['checksum'] != expected:
        return (f"its checksum {manifest['checksum']!r:.100} disagrees with its content ({expected}): the file was "
                f'changed after it was written')
    return None


def read_manifest(group: str) -> dict:
    """The validated manifest of the result in directory `group` (shared with later reads: do not modify it).

    Raises:
        FileNotFoundError: `group` does not exist.
        ManifestDamaged: the manifest is missing, not JSON, of another format or inconsistent.
    """
    return _parsed(group)[0]


# group -> (the manifest file's bytes, the manifest parsed and validated, {array name: ArraySpec} made so far)
_PARSED: dict[str, tuple[bytes, dict, dict]] = {}
_PARSED_MAX = 256


def _parsed(group: str) -> tuple[dict, dict]:
    """(manifest, specs made of it) of `group`: parsed and validated again only when the file's bytes changed.

    A run reads each result's manifest once per block and array; the file is read every time (a few
    microseconds), its parsing and checks (tens) only when its bytes differ from the last read.
    """
    if not os.path.exists(group):
        raise FileNotFoundError(f'No lazyphi result at {group!r}: the directory does not exist')
    if not os.path.isdir(group):
        raise ManifestDamaged(f'{group!r} is not a lazyphi result: it is a file, not a directory')
    path = os.path.join(group, MANIFEST)
    try:
        with open(path, 'rb') as f:
            raw = f.read()
    except FileNotFoundError:
        raise ManifestDamaged(f'{group!r} is not a lazyphi result: it has no {MANIFEST}') from None
    except OSError as err:
        raise _unreadable(path, err) from err
    known = _PARSED.get(group)
    if known is not None and known[0] == raw:
        return known[1], known[2]
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise _unreadable(path, err) from err
    problem = (_manifest_problem(manifest, os.path.basename(os.path.normpath(group)))
               or checksum_problem(manifest))
    if problem:
        raise ManifestDamaged(f'The manifest {path!r} is invalid: {problem}. Delete the result '
                              f'(lazyphi.cache.delete_result) and compute it again')
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[group] = (raw, manifest, {})
    return manifest, _PARSED[group][2]


def _unreadable(path: str, err: Exception) -> ManifestDamaged:
    return ManifestDamaged(f'The manifest {path!r} cannot be read: {err}. Delete the result '
                           f'(lazyphi.cache.delete_result) and compute it again')


def _manifest_problem(manifest, key: str) -> str | None:
    """What is wrong with a parsed manifest, or None."""
    if not isinstance(manifest, dict):
        return f'expected a JSON object, found {type(manifest).__name__}'
    missing = {'format', 'key', 'class', 'created', 'arrays'} - set(manifest)
    if missing:
        return f'missing entries {sorted(missing)}'
    if manifest['format'] != FORMAT:
        return f'it has format {manifest["format"]!r}; this lazyphi reads format {FORMAT}'
    if manifest['key'] != key:
        return f'it names key {manifest["key"]!r} but lies in directory {key!r}'
    if not isinstance(manifest['class'], str) or ':' not in manifest['class']:
        return f"'class' must be 'module:QualName', found {manifest['class']!r}"
    try:
        created = datetime.fromisoformat(manifest['created'])
    except (TypeError, ValueError):
        return f"'created' must be an ISO-8601 time, found {manifest['created']!r}"
    if created.tzinfo is None:
        return f"'created' must carry its time zone (UTC), found {manifest['created']!r}"
    if not isinstance(manifest['arrays'], dict):
        return "'arrays' must be a JSON object"
    for name, entry in manifest['arrays'].items():
        problem = _entry_problem(entry)
        if problem:
            return f'array {name!r}: {problem}'
    return None


def _entry_problem(entry) -> str | None:
    fields = ('dims', 'types', 'labels', 'sizes', 'dtype', 'backend', 'chunks', 'block_dim')
    if not isinstance(entry, dict) or set(entry) != set(fields):
        return f'expected an object with exactly {list(fields)}'
    problem = shape_problem(entry)
    if problem:
        return problem
    if not isinstance(entry['chunks'], list) or len(entry['chunks']) != len(entry['dims']):
        return 'dims, types, labels, sizes and chunks must be lists of equal length'
    if not isinstance(entry['dtype'], str):
        return f"dtype must be a name like 'float32', found {entry['dtype']!r:.100}"
    if entry['block_dim'] not in entry['dims']:
        return f'block_dim {entry["block_dim"]!r} is not among dims {entry["dims"]}'
    try:
        spec = ArraySpec.from_manifest(entry)
    except (TypeError, ValueError) as err:
        return str(err)
    if list(spec.chunks) != entry['chunks']:
        return (f'chunks {entry["chunks"]} must be whole along every dim but {entry["block_dim"]!r} '
                f'(expected {list(spec.chunks)})')
    if str(spec.dtype) != entry['dtype']:
        return f'dtype {entry["dtype"]!r} is not written the way lazyphi writes it ({spec.dtype})'
    return None


def shape_problem(entry: dict) -> str | None:
    """What is wrong with the shape of a manifest entry (its lists `dims`, `types`, `labels`, `sizes`), or None."""
    lists = [entry[f] for f in ('dims', 'types', 'labels', 'sizes')]
    if not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
        return 'dims, types, labels and sizes must be lists of equal length'
    if not all(isinstance(d, str) and d for d in entry['dims']) or len(set(entry['dims'])) != len(entry['dims']):
        return f'dims must be distinct names, found {entry["dims"]}'
    if not all(t in DIM_TYPES for t in entry['types']):
        return f'types must be among {DIM_TYPES}, found {entry["types"]}'
    if not all(type(s) is int and s >= 0 for s in entry['sizes']):
        return f'sizes must be ints >= 0, found {entry["sizes"]}'
    for lab, size in zip(entry['labels'], entry['sizes'], strict=True):
        if lab is not None and (not isinstance(lab, list) or len(lab) != size
                                or not all(isinstance(s, str) for s in lab)):
            return f'labels must be null or one str per item, found {entry["labels"]}'
    return None


def manifest_differences(existing: dict, wanted: dict) -> list[str]:
    """How an existing manifest disagrees with the one a computation would write (its time aside)."""
    found = []
    for entry in ('format', 'key', 'class'):
        if existing[entry] != wanted[entry]:
            found.append(f'{entry} is {existing[entry]!r} on disk, {wanted[entry]!r} now')
    old, new = existing['arrays'], wanted['arrays']
    if set(old) != set(new):
        found.append(f'arrays are {sorted(old)} on disk, {sorted(new)} now')
    for name in sorted(set(old) & set(new)):
        for entry in new[name]:
            if old[name][entry] != new[name][entry]:
                found.append(f'array {name!r}: {entry} is {old[name][entry]!r} on disk, {new[name][entry]!r} now')
    return found


def array_specs(manifest: dict) -> dict[str, ArraySpec]:
    """The arrays of a validated manifest as specs."""
    return {name: ArraySpec.from_manifest(entry) for name, entry in manifest['arrays'].items()}


def array_spec(group: str, name: str) -> ArraySpec:
    """The spec of array `name` of the result in `group`; ValueError naming the arrays there if absent."""
    manifest, specs = _parsed(group)
    if name not in specs:
        arrays = manifest['arrays']
        if name not in arrays:
            raise ValueError(f'The result {group!r} has no array {name!r}; its arrays are {sorted(arrays)}')
        specs[name] = ArraySpec.from_manifest(arrays[name])
    return specs[name]


# --- completion records ---------------------------------------------------------------------------

def records_dir(group: str, name: str) -> str:
    """The directory holding the completion records of array `name`."""
    return os.path.join(group, name + RECORDS_SUFFIX)


def record_name(index: tuple[int, ...], tag: str | None = None) -> str:
    """File name of the record of the chunk at grid position `index`: `3.0.0.<tag>` (`3.0.0` in saves of formats
    1 and 2, which have no tags; `<tag>` alone for the one chunk of a 0-d array)."""
    return '.'.join((*map(str, index), *(() if tag is None else (tag,))))


# a read of a chunk read before finds its tag here (0.2 us instead of 1.5); 16384 entries hold about 4 MB
@functools.lru_cache(maxsize=1 << 14)
def chunk_tag(identity: str, array: str, index: tuple[int, ...], checksum: int | None) -> str:
    """The tag of a chunk in its completion record: 16 hex digits of a hash of where the chunk belongs and of
    the checksum its file ends with.

    Args:
        identity: the result's key, or the save's id.
        array: the array's path within the result or save.
        index: the chunk's grid position.
        checksum: the CRC-32C at the end of the chunk's file (`stored_checksum`); None: the file has none.
    """
    text = f'{identity}\0{array}\0{".".join(map(str, index))}\0{checksum}'  # str: NumPy ints write as ints
    return hashlib.blake2b(text.encode(), digest_size=TAG_DIGITS // 2).hexdigest()


def chunk_file_name(index: tuple[int, ...]) -> str:
    """The file name lazyphi gives the chunk at grid position `index` in its array's directory (`c.3.0.0`)."""
    return '.'.join(('c', *map(str, index)))


def stored_checksum(file: str) -> int | None:
    """The CRC-32C a chunk's file ends with; None where it is missing, a symbolic link or shorter than that.

    Whether it matches the file's bytes is for the reader to check; this is what the file claims to hold.
    """
    try:
        fd = os.open(file, os.O_RDONLY | NOFOLLOW)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, CHECKSUM_BYTES, size - CHECKSUM_BYTES) if size >= CHECKSUM_BYTES else b''
    finally:
        os.close(fd)
    return int.from_bytes(tail, 'little') if len(tail) == CHECKSUM_BYTES else None


def parse_record(name: str, rank: int, tagged: bool = True) -> tuple[tuple[int, ...], str | None] | None:
    """(grid index, tag) of a record's file name in an array of `rank` axes; None for any other name.

    Args:
        tagged: records carry tags (results, and saves from format 3 on); False: names are grid indices alone.
    """
    parts = name.split('.')
    if tagged:
        if len(parts) != rank + 1 or not _TAG.fullmatch(parts[-1]):
            return None
        tag, parts = parts[-1], parts[:-1]
    else:
        if len(parts) != rank:
            return None
        tag = None
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return tuple(map(int, parts)), tag


def record_names(records: str) -> set[str]:
    """The names in the records directory `records` (none where it is missing)."""
    try:
        return set(os.listdir(records))
    except FileNotFoundError:
        return set()


def recorded_positions(names: set[str], tagged: bool = True) -> set[str]:
    """The grid positions (`3.0.0`, as `record_name` writes them) that the record names `names` stand for.

    Cheaper than parsing each name (`read_records`): a stray name may add a position, so a reader still
    compares each chunk's record name with tag (`record_name(index, tag) in names`).
    """
    return {name.rpartition('.')[0] for name in names} if tagged else names


def read_records(records: str, grid: tuple[int, ...], tagged: bool = True) -> dict[tuple[int, ...], set]:
    """Grid index -> tags of the records in directory `records` of chunks inside `grid` (one listing).

    A missing directory holds no records. Without tags each recorded index maps to {None}.
    """
    try:
        entries = os.listdir(records)
    except FileNotFoundError:
        return {}
    found: dict[tuple[int, ...], set] = {}
    for entry in entries:
        parsed = parse_record(entry, len(grid), tagged)
        if parsed is not None and all(i < g for i, g in zip(parsed[0], grid, strict=True)):
            found.setdefault(parsed[0], set()).add(parsed[1])
    return found


def bound_record(group: str, name: str, identity: str, index: tuple[int, ...]) -> bool:
    """Whether chunk `index` of array `name` in `group` has a file whose checksum its record is tagged with."""
    checksum = stored_checksum(os.path.join(group, name, chunk_file_name(index)))
    if checksum is None:
        return False
    tag = chunk_tag(identity, name, index, checksum)
    return os.path.exists(os.path.join(records_dir(group, name), record_name(index, tag)))


def check_range(spec: ArraySpec, name: str, block_dim: str, start, stop) -> tuple[int, int]:
    """`start, stop` as ints; ValueError unless they lie within the array along its block dim."""
    if block_dim != spec.block_dim:
        raise ValueError(f'Array {name!r} is written in blocks along {spec.block_dim!r}, not {block_dim!r}')
    size = spec.shape.get_size(block_dim)
    try:
        start, stop = operator.index(start), operator.index(stop)
    except TypeError:
        raise TypeError(f'A block range needs int bounds, got {start!r}:{stop!r} along {block_dim!r}') from None
    if not 0 <= start <= stop <= size:
        raise ValueError(f'Range {start}:{stop} along {block_dim!r} is outside array {name!r} of size {size}')
    return start, stop


def grid_index(spec: ArraySpec, start: int) -> tuple[int, ...]:
    """Grid index of the chunk starting at `start` along the block dim (every other dim is one chunk)."""
    return tuple(start // spec.chunk if i == spec.axis else 0 for i in range(spec.shape.rank))


def chunk_indices(spec: ArraySpec, start: int, stop: int) -> list[tuple[int, ...]]:
    """Grid indices of every chunk that holds part of `start:stop` along the block dim."""
    first, end = start // spec.chunk, pymath.ceil(stop / spec.chunk)
    ranges = [range(first, end) if i == spec.axis else range(g) for i, g in enumerate(spec.grid)]
    return list(itertools.product(*ranges))


def complete_chunks(group: str, name: str) -> set[tuple[int, ...]]:
    """Grid indices of the chunks of array `name` whose data is complete (their record exists)."""
    return _recorded(group, name, array_spec(group, name))


def _recorded(group: str, name: str, spec: ArraySpec) -> set[tuple[int, ...]]:
    return set(read_records(records_dir(group, name), spec.grid))


def block_chunks(spec: ArraySpec, name: str, block_dim: str, start: int, stop: int) -> list[tuple[int, ...]]:
    """Grid indices of the chunks of array `name` (`spec`) holding part of `start:stop` along `block_dim`.

    Raises:
        ValueError: `block_dim` is not the array's block dim, or the range lies outside the array.
    """
    return chunk_indices(spec, *check_range(spec, name, block_dim, start, stop))


def block_complete(group: str, name: str, block_dim: str, start: int, stop: int) -> bool:
    """Whether every chunk holding part of `start:stop` along `block_dim` of array `name` is complete.

    For a few chunks, complete means that the file's checksum is the one its record is tagged with (a file
    from elsewhere makes the block incomplete, so it is computed again); for more, that a record exists (a
    read checks the tags).
    """
    spec = array_spec(group, name)
    needed = block_chunks(spec, name, block_dim, start, stop)
    if len(needed) <= 8:  # a few files and stat calls beat listing a directory of many records
        key = _parsed(group)[0]['key']
        return all(bound_record(group, name, key, i) for i in needed)
    return set(needed) <= _recorded(group, name, spec)


def completion(group: str, manifest: dict) -> dict[str, float]:
    """Fraction of complete chunks per array (1.0 for an array without chunks)."""
    fractions = {}
    for name, spec in array_specs(manifest).items():
        total = pymath.prod(spec.grid)
        fractions[name] = len(_recorded(group, name, spec)) / total if total else 1.0
    return fractions


# --- temporary files, groups, sentinels ---------------------------------------------------------------

def temporary_suffix() -> str:
    """`.<32 hex digits>.partial`, the end of a fresh temporary name; the digits name the writing process.

    8 digits for this machine (a hash of its host name and boot), 8 for the process id, 16 random: a
    temporary file whose writer is gone (`writer_gone`) is removed at once instead of after
    `STALE_AFTER_SECONDS`.
    """
    return f'.{_machine()}{os.getpid() & 0xFFFFFFFF:08x}{uuid.uuid4().hex[:16]}.partial'


@functools.cache
def _machine() -> str:
    """8 hex digits naming this machine as it runs now (host name and boot), as `temporary_suffix` writes them."""
    try:
        with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as f:
            boot = f.read().strip()
    except OSError:
        boot = ''
    return f'{google_crc32c.value(f"{socket.gethostname()}/{boot}".encode()):08x}'


os.register_at_fork(after_in_child=_machine.cache_clear)


def writer_gone(name: str) -> bool:
    """Whether the temporary entry `name` (`temporary_suffix`) was written by a process of this machine that
    has ended; False where that cannot be known (another machine, Zarr's own temporary files, a live process
    or one this user may not signal)."""
    found = _TEMPORARY.search(name)
    if os.name != 'posix' or not found or found.group(1)[:8] != _machine():  # os.kill ends processes elsewhere
        return False
    pid = int(found.group(1)[8:16], 16)
    if pid in (0, os.getpid()):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def temporary_dir(cache_dir: str, key: str) -> str:
    """A fresh name for building or deleting the group of `key` beside its final place."""
    return os.path.join(cache_dir, f'.{key}{temporary_suffix()}')


def remove_stale_temporaries(group: str) -> list[str]:
    """Delete temporary files left by killed writers in `group`, and stale temporary copies of it beside it.

    Only entries whose writer is gone (`writer_gone`) or that are untouched for `STALE_AFTER_SECONDS` go:
    a live writer's temporary file stays. Returns the paths removed.
    """
    now = time.time()
    removed = []
    cache_dir, key = os.path.split(os.path.normpath(group))
    prefix = f'.{key}.'
    with os.scandir(cache_dir) as entries:
        for entry in entries:
            if entry.name.startswith(prefix) and _TEMPORARY.search(entry.name) and (
                    writer_gone(entry.name) or not touched_since(entry.path, now - STALE_AFTER_SECONDS)):
                remove_entry(entry.path)
                removed.append(entry.path)
    for root, _, files in os.walk(group):
        for name in files:
            path = os.path.join(root, name)
            if _TEMPORARY.search(name) and (writer_gone(name) or _stale(path, now)):
                try:
                    os.remove(path)
                except FileNotFoundError:  # its writer finished or another cleaner was first
                    continue
                removed.append(path)
    return removed


def remove_entry(path: str, ignore_errors: bool = False) -> None:
    """Delete a directory tree, or a file or symbolic link (never what a link points to); gone already is fine.

    Args:
        ignore_errors: delete what can be deleted and raise nothing.
    """
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=ignore_errors)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError:
        if not ignore_errors:
            raise


def touched_since(folder: str, moment: float) -> bool:
    """Whether anything in `folder` (itself included) was modified after `moment`: a live writer's folder."""
    for root, _, files in os.walk(folder):
        for entry in (root, *(os.path.join(root, n) for n in files)):
            try:
                if os.lstat(entry).st_mtime > moment:
                    return True
            except FileNotFoundError:
                continue
    return False


def leftovers(cache_dir: str) -> dict[str, bool]:
    """Hidden entries of `cache_dir` that writers leave while they work, and killed ones leave for good ->
    whether it is safe to delete it now.

    They are temporary directories of results and saves being built, or results being deleted
    (`.<name>.<hex>.partial`: safe once their writer is gone or they are untouched for
    `STALE_AFTER_SECONDS`), and old saves that a killed `save(overwrite=True)` moved away
    (`.<name>.<hex>.replaced`: safe only where the save `<name>` is back in place, else `load` puts
    this one back).
    """
    found = {}
    moment = time.time() - STALE_AFTER_SECONDS
    with os.scandir(cache_dir) as entries:
        for entry in entries:
            name = entry.name
            if not name.startswith('.'):
                continue
            if _TEMPORARY.search(name):
                found[entry.path] = writer_gone(name) or not touched_since(entry.path, moment)
            elif (replaced := _REPLACED.fullmatch(name)) is not None:
                found[entry.path] = (os.path.isdir(os.path.join(cache_dir, replaced.group(1)))
                                     and not touched_since(entry.path, moment))
    return found


def _stale(path: str, now: float) -> bool:
    try:
        return now - os.stat(path).st_mtime > STALE_AFTER_SECONDS
    except FileNotFoundError:
        return False


def result_groups(cache_dir: str) -> dict[str, str]:
    """Key -> path of every lazyphi result in `cache_dir` (directories holding a manifest that is not a save's).

    Saves (`lazyphi.save`) lying in `cache_dir` are no results: they are neither listed nor deleted.

    Raises:
        FileNotFoundError: `cache_dir` does not exist.
        NotADirectoryError: `cache_dir` is a file.
    """
    if not os.path.exists(cache_dir):
        raise FileNotFoundError(f'The cache directory {cache_dir!r} does not exist')
    if not os.path.isdir(cache_dir):
        raise NotADirectoryError(f'The cache directory {cache_dir!r} is a file, not a directory')
    groups = {}
    with os.scandir(cache_dir) as entries:
        for entry in entries:
            if (not entry.name.startswith('.') and entry.is_dir()
                    and os.path.exists(os.path.join(entry.path, MANIFEST)) and not _is_save(entry.path)):
                groups[entry.name] = entry.path
    return dict(sorted(groups.items()))


def _is_save(group: str) -> bool:
    """Whether the manifest in `group` is that of a `lazyphi.save` (type 'lazyphi.save')."""
    try:
        with open(os.path.join(group, MANIFEST), 'rb') as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and manifest.get('type') == 'lazyphi.save'


def delete_group(group: str) -> None:
    """Remove a result: first renamed out of sight (atomically), then deleted file by file.

    A symbolic link in place of the result's directory is removed itself; what it points to stays.
    """
    if os.path.islink(group):
        os.unlink(group)
        return
    cache_dir, key = os.path.split(os.path.normpath(group))
    hidden = temporary_dir(cache_dir, key)
    os.rename(group, hidden)
    shutil.rmtree(hidden)


def sees_sentinel(path: str, token: str) -> bool:
    """Whether the file at `path` exists here and holds `token` (run on each Dask worker)."""
    try:
        with open(path, encoding='utf-8') as f:
            return f.read() == token
    except OSError:
        return False
