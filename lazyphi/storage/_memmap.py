"""Trees of tensors as saves that stay open: tensordict's memmap family on lazyphi's Zarr saves.

`memmap` is `save` followed by a lazy `load`: the tree comes back with `DiskTensor`s over the save.
`memmap_like` makes a preallocated save (`save(values=False)`): every array at its full shape and no
chunk written, so reading one raises `ChunkMissing` until `assign` writes it. `assign` writes values into
a selection of a DiskTensor's array in place, chunk by chunk:

- a chunk the write covers whole is written as a new file and recorded complete;
- a chunk already complete is read, changed where written, and written again (read-modify-write);
- part of a chunk not yet complete goes to a staging file beside its records (`.staging.<chunk>`,
  rows written in place) with a mark per run of rows written (`.rows.<chunk>/<start>-<stop>`); once every
  row of the chunk is marked, the staged chunk is written as the chunk's file and recorded. Such writes must
  cover whole rows (everything along the dims after the array's first).

The rule: one writer per chunk at a time. Writers of different chunks (disjoint ranges of whole chunks
along the array's first dim: `DiskTensor.chunks[0]` rows each) may run at once, in threads or processes;
two writers of one chunk may lose one's rows. Values written are dropped from the memory cache of loaded
values, so later reads in this process see them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile

import numpy as np

from ..math import Shape, Tensor, expand, wrap
from ..math.kinds import Dense
from ._chunks import chunk_writer, range_slice
from ._disk import DiskTensor, _pieces, get_cache_files, read_selection
from ._memory import MEMORY
from ._results import chunk_tag, class_path, record_name, record_names, recorded_positions, records_dir, write_manifest
from ._save import load, read_save_manifest, save
from ._tagged import _CLASSES, decode, encode
from ._write import write_records

_STAGING = '.staging.'  # prefix of a staged chunk's file in the records directory
_ROWS = '.rows.'  # prefix of the directory of a staged chunk's row marks


def memmap(obj, prefix=None, *, copy_existing: bool = False, existsok: bool = True, values: bool = True,
           metadata: dict | None = None) -> tuple:
    """Save `obj` under `prefix` (`values=False`: preallocate only) and load it back lazily; (tree, path).

    Args:
        prefix: the save's directory; None: a new temporary directory (not deleted).
        copy_existing: False: a tensor already on disk elsewhere is an error (tensordict's rule); True: copied.
        existsok: replace a save at `prefix`; False: an existing `prefix` is an error.
        metadata: kept in the manifest (`save_metadata`).

    Raises:
        FileExistsError: `prefix` exists and `existsok` is False, or it is not a lazyphi save.
        ValueError: a tensor lies on disk outside `prefix` and `copy_existing` is False.
    """
    if prefix is None:
        path = os.path.join(tempfile.mkdtemp(prefix='lazyphi-memmap-'), 'save')
    else:
        path = os.path.abspath(os.fspath(prefix))
    if not copy_existing:
        elsewhere = sorted(f for f in get_cache_files(obj) if os.path.commonpath([f, path]) != path)
        if elsewhere:
            raise ValueError(f'memmap({path!r}): tensors of this object lie on disk elsewhere ({elsewhere[0]!r}'
                             f'{f" and {len(elsewhere) - 1} more" if len(elsewhere) > 1 else ""}); pass '
                             f'copy_existing=True to copy them there')
    if not existsok and os.path.lexists(path):
        raise FileExistsError(f'memmap({path!r}): it exists already; pass existsok=True to replace a save there')
    save(obj, path, overwrite=existsok, values=values, metadata=metadata)
    return load(path), path


def load_memmap(prefix, cls: type | None = None) -> tuple:
    """The tree saved under `prefix`, lazily, with its metadata and absolute path: (tree, metadata, path).

    `cls`, the class the caller expects at the root, is found even where its module path cannot be imported.
    """
    path = os.path.abspath(os.fspath(prefix))
    if cls is not None:
        _CLASSES[class_path(cls)] = cls
    return load(path), save_metadata(path), path


def save_metadata(path) -> dict:
    """The metadata `save(..., metadata=...)` kept in the manifest of the save at `path` ({} if none)."""
    manifest = read_save_manifest(os.path.abspath(os.fspath(path)))
    return decode(manifest.get('metadata', {}), 'metadata')


def share_value(path, name: str, value) -> None:
    """Store `value` as the non-tensor field `name` of the dataclass at the root of the save at `path`.

    Later loads of the save (in any process) see it. The manifest is rewritten whole, under a lock on the
    save's directory, so concurrent writers of different fields lose nothing.

    Raises:
        TypeError: the field holds a tensor or a nested object there, or the value cannot be written as JSON.
        KeyError: the root has no such field.
    """
    store = os.path.abspath(os.fspath(path))
    fd = os.open(store, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        manifest = read_save_manifest(store)
        root = manifest['root']
        if root['kind'] != 'dataclass':
            raise TypeError(f'The save at {store!r} holds a {root["kind"]}, not a dataclass; no field to share')
        encoded = encode(value, f'obj.{name}')
        if name in root['config']:
            root['config'][name] = encoded
        elif root['fields'].get(name, {}).get('kind') == 'value':
            root['fields'][name] = {'kind': 'value', 'value': encoded}
        elif name in root['fields']:
            raise TypeError(f'Field {name!r} of the save at {store!r} holds a {root["fields"][name]["kind"]} '
                            f'there, not a non-tensor value')
        else:
            raise KeyError(f'The save at {store!r} has no field {name!r}')
        write_manifest(store, manifest)
    finally:
        os.close(fd)


def assign(target: Tensor, selection: dict, value: Tensor) -> Tensor:
    """`target` with `value` in `selection` ({dim: int or slice}): written into the array of a DiskTensor
    (which is returned), else a new tensor on `target`'s backend.

    `value` needs the dims (or fewer: it is expanded) and sizes of `target[selection]`; it is cast to
    `target`'s dtype.

    Raises:
        ValueError: `value` has dims or sizes `target[selection]` lacks, or (on disk) it would write part of
            the rows of a chunk not yet complete.
    """
    view = target[selection]
    value = _fitted(value, view.shape)
    if isinstance(target, DiskTensor):
        data = value.backend.numpy(value.native(view.shape.names))
        _write(target, view, np.asarray(data, np.dtype(target._info.dtype)))
        return target
    names = target.shape.names
    native = np.array(target.backend.numpy(target.native(names)))
    kept = [n for n in names if not isinstance(selection.get(n), int)]
    native[tuple(selection.get(n, slice(None)) for n in names)] = value.backend.numpy(value.native(kept))
    return wrap(target.backend.as_tensor(native), target.shape)


def _fitted(value, shape: Shape) -> Tensor:
    if not isinstance(value, Tensor):
        value = wrap(value)
    extra = [n for n in value.shape.names if n not in shape]
    wrong = [n for n in value.shape.names if n in shape and value.shape.get_size(n) != shape.get_size(n)]
    if extra or wrong:
        problem = f'it has dims {extra} that are not there' if extra else f'the sizes of {wrong} differ'
        raise ValueError(f'Cannot write a value of shape {value.shape} into a selection of shape {shape}: {problem}')
    return expand(value, shape)


def _write(target: DiskTensor, view: DiskTensor, data: np.ndarray) -> None:
    """Write `data` (the view's values, dims in stored order) into the chunks of `view`'s selection."""
    info = target._info
    selection = view._selection
    data = data.reshape([1 if isinstance(s, int) else len(s) for s in selection])  # every stored axis
    write = chunk_writer(info.path)
    records = records_dir(info.store, info.array)
    if not selection:  # a 0-d array: one chunk
        checksum = write((), data.reshape(()))
        os.makedirs(records, exist_ok=True)
        write_records(records, [_record(info, (), checksum)])
        _forget(info)
        return
    sizes, chunk = info.shape.sizes, info.chunks[0]
    whole_rows = all(isinstance(s, range) and s == range(size) for s, size in zip(selection[1:], sizes[1:],
                                                                               strict=True))
    try:
        for c, inner, positions in _pieces(selection[0], chunk):
            first, count = c * chunk, min(chunk, sizes[0] - c * chunk)
            index = (c,) + (0,) * (len(sizes) - 1)
            part = data[range_slice(positions) if isinstance(positions, range) else positions]
            if whole_rows and _covered(count, [_runs(inner)]):
                values = np.empty((count, *sizes[1:]), data.dtype)
                values[range_slice(inner) if isinstance(inner, range) else inner] = part
                write_records(records, [_record(info, index, write(index, values))])
                shutil.rmtree(os.path.join(records, _ROWS + record_name(index)), ignore_errors=True)
                _remove(os.path.join(records, _STAGING + record_name(index)))
            elif record_name(index) in recorded_positions(record_names(records), info.bound):  # complete: rewrite
                values = read_selection(info, (range(first, first + count), *(range(size) for size in sizes[1:])))
                others = [np.asarray([s] if isinstance(s, int) else s, dtype=np.intp) for s in selection[1:]]
                values[np.ix_(np.asarray(inner, dtype=np.intp), *others)] = part
                write_records(records, [_record(info, index, write(index, values))])
            elif whole_rows:
                _stage(info, records, index, count, inner, part, write)
            else:
                raise ValueError(f'Cannot write part of the rows of chunk {record_name(index)} of array '
                                 f'{info.array!r} in {info.store!r}: it is not complete yet, and rows of a chunk '
                                 f'not yet complete are written whole (everything along '
                                 f'{list(info.shape.names[1:])}). Write whole rows along {info.shape.names[0]!r} '
                                 f'first')
    finally:
        _forget(info)


def _record(info, index: tuple, checksum: int | None) -> str:
    """The completion record of a chunk just written: tagged with where it belongs and its checksum (saves from
    format 3 on, see `chunk_tag`), else its grid position alone."""
    return record_name(index, chunk_tag(info.key, info.array, index, checksum) if info.bound else None)


def _runs(rows) -> list[tuple[int, int]]:
    """The rows (a range or an int array of positions in a chunk) as (start, stop) runs of consecutive rows."""
    if isinstance(rows, range) and rows.step == 1:
        return [(rows.start, rows.stop)] if len(rows) else []
    ordered = np.unique(np.asarray(rows, dtype=np.intp))
    breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
    return [(int(run[0]), int(run[-1]) + 1) for run in np.split(ordered, breaks) if len(run)]


def _covered(count: int, runs: list) -> bool:
    """Whether the (start, stop) runs (lists of them) cover the rows 0..count-1 of a chunk."""
    mask = np.zeros(count, bool)
    for group in runs:
        for start, stop in group:
            mask[start:stop] = True
    return bool(mask.all())


def _stage(info, records: str, index: tuple, count: int, inner, part: np.ndarray, write) -> None:
    """Write rows `inner` of a chunk not yet complete into its staging file; the chunk itself once all are there.

    Rows are written in place; a mark file `<start>-<stop>` per run of rows written says which rows the file holds.
    """
    row_shape = info.chunks[1:]
    dtype = part.dtype.newbyteorder('<')
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    staging = os.path.join(records, _STAGING + record_name(index))
    marks = os.path.join(records, _ROWS + record_name(index))
    os.makedirs(marks, exist_ok=True)
    part = np.ascontiguousarray(part, dtype)
    fd = os.open(staging, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != count * row_bytes:
            os.ftruncate(fd, count * row_bytes)
        if isinstance(inner, range) and inner.step == 1:
            os.pwrite(fd, part.tobytes(), inner.start * row_bytes)
        else:
            for row, values in zip(np.asarray(inner).tolist(), part, strict=True):
                os.pwrite(fd, values.tobytes(), row * row_bytes)
    finally:
        os.close(fd)
    for start, stop in _runs(inner):
        os.close(os.open(os.path.join(marks, f'{start}-{stop}'), os.O_CREAT | os.O_WRONLY, 0o644))
    written = [tuple(map(int, name.split('-'))) for name in os.listdir(marks)
               if re.fullmatch(r'[0-9]+-[0-9]+', name)]
    if not _covered(count, [written]):
        return
    values = np.fromfile(staging, dtype).reshape((count, *row_shape))
    write_records(records, [_record(info, index, write(index, values))])
    shutil.rmtree(marks, ignore_errors=True)
    _remove(staging)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _forget(info) -> None:
    """Drop the loaded values of the array from the memory cache: they may be stale now."""
    MEMORY.discard(lambda key: key[:2] == (info.store, info.array))


def consolidated(t: Tensor) -> Tensor:
    """`t`'s values in memory as one dense native array of its own (loaded, if on disk)."""
    backend = t.backend
    return Dense(backend.as_tensor(np.array(backend.numpy(t.native(t.shape.names)))), t.shape, backend)
