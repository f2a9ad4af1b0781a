"""Disk-backed tensors: named-dim views of a selection of one Zarr array of a disk-cached result.

A `DiskTensor` holds where its array lies, what the manifest says about it (dims, dtype, chunk
shape, source backend) and a selection per stored axis. Slicing and renaming compose into a new
view and read nothing; every other operation loads the values it needs through `_dense()`, which
reads only the chunks the selection touches, after checking their completion records, and keeps the
loaded values in the time-to-live memory cache of `_memory.py`; a reduction of a selection too large to
load at once reads it piece by piece instead (`_out_of_core.py`). Pickling a `DiskTensor` gives these
fields only (a few hundred bytes), never a Zarr object, so it travels to workers and later runs
without loading anything.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import json
import math
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._errors import ChunkDamaged, ChunkMissing, DimNotFound, ManifestDamaged, ReplacedOnDisk
from ..backend import NUMPY, Backend, DType, backend_by_name, convert
from ..math import Shape
from ..math.kinds import (
    CONCAT,
    GATHER,
    REDUCE,
    RENAME,
    Dense,
    Expanded,
    Op,
    Stacked,
    Tensor,
    read_only_native,
    tensor_html,
)
from ._chunks import (
    Checksums,
    aligned_empty,
    chunk_file,
    chunk_reader,
    metadata_differences,
    range_slice,
    read_metadata,
)
from ._memory import MEMORY, current_load_backend, notify_loaded
from ._out_of_core import reduce_in_pieces
from ._results import (
    MANIFEST,
    ArraySpec,
    chunk_file_name,
    chunk_tag,
    read_manifest,
    read_records,
    record_name,
    record_names,
    recorded_positions,
    records_dir,
    stored_checksum,
)

Selection = int | range | tuple  # of one stored axis: an index, a range of indices, or a tuple of indices
REFERENCE_BYTES = 1024  # what a DiskTensor holds in memory, for memory accounting (Dask's sizeof)
_RECORD_STATS_UP_TO = 16  # chunks checked by one stat each; more are checked against one directory listing


class DiskArray(NamedTuple):
    """One stored array as the manifest describes it; everything a DiskTensor holds besides its view."""

    store: str  # directory of the result's Zarr group
    array: str  # name of the array in the group
    key: str  # the result's key, from the manifest
    created: str  # when the result was created (ISO-8601), from the manifest
    shape: Shape  # the full stored shape: dims in axis order, types, labels, sizes
    dtype: str  # str(DType)
    backend: str  # name of the backend the values were computed with
    chunks: tuple  # the Zarr chunk shape
    format: int  # version of the disk format
    # Each chunk's record carries its tag (`chunk_tag` of `key`, the array, its position and checksum): results,
    # and saves from format 3 on. False: records are grid indices alone and say nothing of the files.
    bound: bool = False
    save: bool = False  # a `lazyphi.save`, not a result of the disk cache (for messages)

    @property
    def path(self) -> str:
        return os.path.join(self.store, self.array)

    @property
    def grid(self) -> tuple:
        """The number of chunks along each axis."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.shape.sizes, self.chunks, strict=True))

    @property
    def where(self) -> str:
        """The store as messages name it: the disk cache's result or the save."""
        return f'the save {self.store!r}' if self.save else f'the disk cache {self.store!r}'


class DiskTensor(Tensor):
    """A tensor whose values lie in a Zarr array written by lazyphi, loaded only when an operation needs them.

    Create one with `disk_tensor(group, name, selection)`. Slicing (`t.x[3]`, `t[{'b': slice(2, 5)}]`) and
    renaming give new DiskTensors without reading; concatenating consecutive slices of one array along a
    dim gives one DiskTensor over their union. Every other use loads the selected values (only the chunks
    they lie in), converted to the backend of `load_cache_as` or else the one they were computed with, and
    keeps them in memory for `set_cache_ttl` seconds. A reduction (`sum`, `mean`, `max`, ...) of a
    selection over 256 MiB that is not in memory reads and reduces it piece by piece instead, holding one
    piece (of whole chunks, at most 256 MiB where the chunks allow) at a time.
    """

    __slots__ = ('_dtype', '_info', '_selection', '_shape')
    _kind_priority = 5

    def __init__(self, info: DiskArray, selection: tuple, shape: Shape):
        self._info = info
        self._selection = selection  # one entry per stored axis: int (axis dropped), range or tuple of ints
        self._shape = shape  # the view's shape: the axes not selected by an int, in order, possibly renamed
        self._dtype = DType.as_dtype(info.dtype)

    # --- the kind protocol ---------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def backend(self) -> Backend:
        """The backend loaded values are converted to: that of `load_cache_as`, else the source backend."""
        return current_load_backend() or _source_backend(self._info)

    @property
    def available(self) -> bool:
        """Whether the values are in the memory cache now (they are loaded on use otherwise)."""
        return MEMORY.holds(self._memory_key(self.backend))

    def _memory_bytes(self) -> int:
        """Its reference: the fields it pickles (a few hundred bytes), counted as 1 KiB; the values are on disk."""
        return REFERENCE_BYTES

    def _dense(self) -> Dense:
        backend = self.backend
        native, loaded = MEMORY.get_or_load(self._memory_key(backend), lambda: self._load(backend))
        if loaded:
            notify_loaded(self)
        return Dense(native, self._shape, backend)

    def _memory_key(self, backend: Backend) -> tuple:
        info = self._info
        return info.store, info.array, info.created, self._selection, backend.name

    def _load(self, backend: Backend):
        values = read_selection(self._info, self._selection)
        return read_only_native(values) if backend is NUMPY else convert(values, backend)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        category = op.category
        if category == GATHER and type(tensors[0]) is DiskTensor:
            return tensors[0]._select(params[0])
        if category == RENAME and type(tensors[0]) is DiskTensor:
            old, new = params
            t = tensors[0]
            return DiskTensor(t._info, t._selection, t._shape.replace(old, new))
        if category == CONCAT:
            return _concat(tensors, *params)
        if category == REDUCE and type(tensors[0]) is DiskTensor:
            return tensors[0]._reduce(op, params[0])
        return NotImplemented

    def _reduce(self, op: Op, dims: tuple):
        """A reduction of a selection too large to load at once, chunk by chunk (`reduce_in_pieces`)."""
        backend = self.backend

        def load(piece: DiskTensor) -> Dense:
            values = Dense(piece._load(backend), piece._shape, backend)
            notify_loaded(piece)
            return values

        def chunks() -> list:
            return [_runs(self._selection[axis], self._info.chunks[axis]) for axis in self._view_axes()]
        return reduce_in_pieces(op, self, dims, chunks, load)

    # --- what it refers to -------------------------------------------------------------------------
    @property
    def store(self) -> str:
        """Directory of the result's Zarr group."""
        return self._info.store

    @property
    def array_name(self) -> str:
        """Name of the array within the group."""
        return self._info.array

    @property
    def path(self) -> str:
        """Directory of the Zarr array."""
        return self._info.path

    @property
    def source(self) -> str:
        """Where the values lie, under phiml's name for it (phiml: the cache file): the directory of the Zarr array."""
        return self._info.path

    @property
    def array_shape(self) -> Shape:
        """The full stored shape, before the selection."""
        return self._info.shape

    @property
    def chunks(self) -> tuple:
        """The Zarr chunk shape of the array."""
        return self._info.chunks

    @property
    def source_backend(self) -> str:
        """Name of the backend the values were computed with."""
        return self._info.backend

    @property
    def format_version(self) -> int:
        return self._info.format

    @property
    def selection(self) -> dict:
        """{stored dim: int | slice | tuple of ints} applied to the full array; unselected dims are left out."""
        full = self._info.shape
        return {name: _public(sel) for name, sel, size in zip(full.names, self._selection, full.sizes, strict=True)
                if sel != range(size)}

    def _select(self, selection: dict) -> DiskTensor:
        axes = self._view_axes()
        composed = list(self._selection)
        for dim, sel in selection.items():
            axis = axes[self._shape.index(dim)]
            current = composed[axis]
            composed[axis] = tuple(current[i] for i in sel) if isinstance(sel, tuple) else current[sel]
        return DiskTensor(self._info, tuple(composed), self._shape.after_gather(selection))

    def _view_axes(self) -> tuple:
        """The stored axis of each dim of the view."""
        return tuple(i for i, sel in enumerate(self._selection) if not isinstance(sel, int))

    # --- printing, pickling, tokenizing ------------------------------------------------------------
    def __repr__(self) -> str:
        selected = ', '.join(f'{name}={_selection_text(sel)}' for name, sel in self.selection.items())
        return f"DiskTensor{self._shape} {self._dtype} at {self.path}{f'[{selected}]' if selected else ''}"

    def _repr_html_(self) -> str:
        selected = ', '.join(f'{name}={_selection_text(sel)}' for name, sel in self.selection.items())
        return tensor_html(self, [('stored in', self.path), ('chunks', str(self.chunks))] +
                           ([('selection', selected)] if selected else []))

    def __reduce__(self):
        return DiskTensor, (self._info, self._selection, self._shape)

    def __dask_tokenize__(self):
        """Where the values lie, the selection, and which chunks it touches are complete; nothing is read."""
        info, shape = self._info, self._shape
        return ('DiskTensor', info.store, info.array, info.key, info.created, _selection_token(self._selection),
                shape.names, shape.types, shape.labels, _complete_chunks_touched(info, self._selection))

    # --- out-of-core access ------------------------------------------------------------------------
    def to_dask(self):
        """The values as a lazy `dask.array.Array` in the view's dim order, chunked as stored.

        Computing it reads each chunk on its own and checks its completion record first.
        """
        da = _optional('dask.array', 'DiskTensor.to_dask()', 'dask[array]')
        from dask.base import tokenize

        info = self._info
        full = da.from_array(_ChunkReader(info), chunks=info.chunks, lock=False, asarray=False,
                             name='lazyphi-disk-' + tokenize(info.store, info.array, info.key, info.created),
                             meta=np.empty((0,) * len(info.chunks), np.dtype(info.dtype)))
        index, lists = [], []
        for sel in self._selection:
            if isinstance(sel, tuple):
                lists.append((sum(not isinstance(i, int) for i in index), list(sel)))
                index.append(slice(None))
            else:
                index.append(sel if isinstance(sel, int) else _public(sel))
        result = full[tuple(index)]
        for axis, indices in lists:  # Dask takes one list of indices at a time
            result = result[(slice(None),) * axis + (indices,)]
        return result

    def to_xarray(self):
        """The values as a lazy `xarray.DataArray` over `to_dask()`, with the view's dim names and labels as coords.

        A labelled dim selected down to one item (`t.vector['x']`) stays as a scalar coordinate, as in xarray.
        """
        xr = _optional('xarray', 'DiskTensor.to_xarray()', 'xarray')
        shape, full = self._shape, self._info.shape
        coords = {name: list(labels) for name, labels in zip(shape.names, shape.labels, strict=True)
                  if labels is not None}
        coords.update({name: labels[sel] for name, sel, labels in zip(full.names, self._selection, full.labels,
                                                                       strict=True)
                       if isinstance(sel, int) and labels is not None and name not in shape.names})
        return xr.DataArray(self.to_dask(), dims=shape.names, coords=coords, name=self._info.array)


def disk_tensor(group: str, name: str, selection: dict | None = None) -> DiskTensor:
    """A DiskTensor over array `name` of the result in directory `group`; reads the manifest only.

    Args:
        group: directory of the result (`<cache_dir>/<key>`).
        name: the array (property output) within it.
        selection: {stored dim: int | slice | label | tuple of those} applied to the full array.

    Raises:
        FileNotFoundError: `group` does not exist.
        ManifestDamaged: `group` holds no valid lazyphi manifest.
        ValueError: the result has no array `name`.
        DimNotFound: `selection` names a dim the array lacks.
    """
    store = os.path.abspath(os.fspath(group))
    manifest = read_manifest(store)
    arrays = manifest['arrays']
    if name not in arrays:
        raise ValueError(f'The result {store!r} has no array {name!r}; its arrays are {sorted(arrays)}')
    entry = arrays[name]
    spec = ArraySpec.from_manifest(entry)
    info = DiskArray(store, name, manifest['key'], manifest['created'], spec.shape, str(spec.dtype), spec.backend,
                     tuple(entry['chunks']), manifest['format'], bound=True)
    tensor = DiskTensor(info, tuple(range(size) for size in spec.shape.sizes), spec.shape)
    if selection:
        unknown = [d for d in selection if (d.name if isinstance(d, Shape) else d) not in spec.shape.names]
        if unknown:
            raise DimNotFound(f'disk_tensor(): selection names {unknown}, which array {name!r} of shape '
                              f'{spec.shape} lacks')
        tensor = tensor[selection]
    return tensor


# --- selections ----------------------------------------------------------------------------------------

def _public(sel: Selection):
    """A stored selection as the user writes it: int, slice or tuple of ints."""
    return range_slice(sel) if isinstance(sel, range) else sel


def _selection_text(sel) -> str:
    if isinstance(sel, slice):
        text = f"{'' if sel.start is None else sel.start}:{'' if sel.stop is None else sel.stop}"
        return text if sel.step is None else f'{text}:{sel.step}'
    return str(sel)


def _selection_token(selection: tuple) -> tuple:
    return tuple(('range', s.start, s.stop, s.step) if isinstance(s, range) else s for s in selection)


def _join(a: range | tuple, b: range | tuple) -> range | tuple:
    """The indices of `a` followed by those of `b`: a range where they continue one another, else a tuple."""
    if not a:
        return b
    if not b:
        return a
    if isinstance(a, range) and isinstance(b, range):
        step = a.step if len(a) > 1 else b.step if len(b) > 1 else b[0] - a[-1]
        if step and (len(a) == 1 or a.step == step) and (len(b) == 1 or b.step == step) and b[0] == a[-1] + step:
            return range(a[0], b[-1] + (1 if step > 0 else -1), step)
    return tuple(a) + tuple(b)


def _concat(tensors: Sequence[Tensor], dim: str, result: Shape):
    """One DiskTensor for `tensors` joined along `dim`, if all are views of one array differing only along it."""
    first = tensors[0]
    if not all(type(t) is DiskTensor for t in tensors) or set(result.names) != set(first._shape.names):
        return NotImplemented
    position = first._shape.index(dim)
    axis = first._view_axes()[position]
    rest = first._shape.without(dim)
    joined = first._selection[axis]
    for t in tensors[1:]:
        if (t._info != first._info or dim not in t._shape or t._shape.index(dim) != position
                or t._shape.without(dim) != rest or t._shape.get_type(dim) != first._shape.get_type(dim)
                or any(s != f for i, (s, f) in enumerate(zip(t._selection, first._selection, strict=True))
                       if i != axis)):
            return NotImplemented
        joined = _join(joined, t._selection[axis])
    selection = (*first._selection[:axis], joined, *first._selection[axis + 1:])
    return DiskTensor(first._info, selection, first._shape.replace(dim, result[dim]))


# --- reading -------------------------------------------------------------------------------------------

def read_selection(info: DiskArray, selection: tuple) -> np.ndarray:
    """The values of `selection` (one int, range or tuple per stored axis) as a new NumPy array.

    Reads only the chunks the selection touches, after checking that each has its completion record,
    and copies each chunk's selected part straight into its place in the result. The records are checked
    before anything else, in time proportional to the records that exist, so a crafted array of
    billions of chunks fails at once. Where records carry tags (`DiskArray.bound`), each chunk's file must
    end with the checksum its record is tagged with, so a file moved, copied or linked from another chunk,
    array, result or save is found.

    Raises:
        ChunkMissing: a touched chunk has no completion record.
        ChunkDamaged: a touched chunk's data cannot be read or decoded, its file belongs elsewhere, or the
            array cannot be opened.
        ManifestDamaged: the manifest and the array's Zarr metadata disagree.
        ReplacedOnDisk: the save or result was replaced in its place after `info` was read from its manifest.
    """
    sizes = tuple(len(sel) for sel in selection if not isinstance(sel, int))
    read_into = _chunk_source(info)  # checks the manifest against Zarr's metadata, even for an empty selection
    if not all(isinstance(sel, int) or len(sel) for sel in selection):  # an empty selection along some axis
        return np.empty(sizes, np.dtype(info.dtype))
    tags = _check_records(info, [_chunk_ids(sel, chunk) for sel, chunk in zip(selection, info.chunks, strict=True)])
    pieces = [_pieces(sel, chunk) for sel, chunk in zip(selection, info.chunks, strict=True)]
    out = aligned_empty(tuple(1 if isinstance(sel, int) else len(sel) for sel in selection), np.dtype(info.dtype))
    checks = Checksums()
    try:
        for combination in itertools.product(*pieces):
            index = tuple(piece[0] for piece in combination)
            inner, outer = tuple(piece[1] for piece in combination), tuple(piece[2] for piece in combination)
            try:
                checksum = read_into(index, inner, out, outer, checks)
            except Exception as err:
                _raise_damaged(info, index, err)
            if tags is not None and record_name(index, chunk_tag(info.key, info.array, index, checksum)) not in tags:
                _raise_misplaced(info, index, checksum)
    finally:
        damaged = checks.damaged()  # also where a read failed: no check is left running on `out`
    if damaged:
        _raise_damaged(info, *damaged[0])
    if not info.save:  # a result computed again has the key and records of the old one, only other checksums
        _raise_if_replaced(info)
    return out.reshape(sizes)


def _chunk_ids(sel: Selection, chunk: int) -> range | tuple:
    """The positions of the chunks along one axis that `sel` touches (a range where they are consecutive)."""
    if isinstance(sel, int):
        return range(sel // chunk, sel // chunk + 1)
    if isinstance(sel, range) and (abs(sel.step) <= chunk or chunk == 1):
        if chunk == 1:
            return sel if sel.step > 0 else sel[::-1]
        return range(min(sel[0], sel[-1]) // chunk, max(sel[0], sel[-1]) // chunk + 1)
    return tuple(sorted({i // chunk for i in sel}))


def _runs(sel: range | tuple, chunk: int) -> list[int]:
    """The lengths of the runs of consecutive positions of the view along one axis whose indices share a chunk."""
    if isinstance(sel, range) and abs(sel.step) <= chunk:
        runs = [len(positions) for _, _, positions in _pieces(sel, chunk)]
        return runs if sel.step > 0 else runs[::-1]
    ids = np.asarray(sel, dtype=np.intp) // chunk
    if not len(ids):
        return []
    return np.diff(np.flatnonzero(np.diff(ids, prepend=ids[0] - 1, append=ids[-1] + 1))).tolist()


def _pieces(sel: Selection, chunk: int) -> list[tuple]:
    """Per chunk along one axis that `sel` touches: (chunk position, indices within it, positions in the result).

    Indices and positions are ranges where the selection is a range, else int arrays; an int selection
    keeps a result axis of length 1.
    """
    if isinstance(sel, int):
        first = sel % chunk
        return [(sel // chunk, range(first, first + 1), range(1))]
    if not sel:
        return []
    if isinstance(sel, range) and abs(sel.step) <= chunk:
        pieces = []
        for c in range(min(sel[0], sel[-1]) // chunk, max(sel[0], sel[-1]) // chunk + 1):
            low, high = c * chunk, (c + 1) * chunk
            if sel.step > 0:
                begin, end = -(-(low - sel.start) // sel.step), -(-(high - sel.start) // sel.step)
            else:
                begin, end = (sel.start - high) // -sel.step + 1, (sel.start - low) // -sel.step + 1
            begin, end = max(begin, 0), min(end, len(sel))
            part = sel[begin:end]
            pieces.append((c, range(part.start - low, part.stop - low, part.step), range(begin, end)))
        return pieces
    indices = np.asarray(sel, dtype=np.intp)
    order = np.argsort(indices // chunk, kind='stable')
    ids, starts = np.unique(indices[order] // chunk, return_index=True)
    ends = (*starts[1:], len(order))
    return [(int(c), indices[order[a:b]] - int(c) * chunk, order[a:b])
            for c, a, b in zip(ids, starts, ends, strict=True)]


def _complete_chunks_touched(info: DiskArray, selection: tuple) -> tuple:
    """Grid positions of the chunks `selection` touches that have their completion record."""
    ids = [[piece[0] for piece in _pieces(sel, chunk)] for sel, chunk in zip(selection, info.chunks, strict=True)]
    present = recorded_positions(record_names(records_dir(info.store, info.array)), info.bound)
    return tuple(i for i in itertools.product(*ids) if record_name(i) in present)


def _check_records(info: DiskArray, chunk_ids: list) -> set | None:
    """Raise ChunkMissing unless every chunk in the grid `chunk_ids` (positions per axis) has its record.

    Takes time proportional to the records present, not to the chunks asked for.

    Returns:
        Where records carry tags: names of records, among them the one with tag of every chunk asked for whose
        record is intact; else None.
    """
    records = records_dir(info.store, info.array)
    count = math.prod(len(ids) for ids in chunk_ids)
    if count <= _RECORD_STATS_UP_TO:
        found = _stat_records(info, list(_grid(chunk_ids)))
        if found is not None:
            return found if info.bound else None
    # a listing: at most len(present) + 1 steps, as a chunk that is not present comes up by then
    names = record_names(records)
    present = recorded_positions(names, info.bound)
    first = next((i for i in _grid(chunk_ids) if record_name(i) not in present), None)
    if first is not None:
        missed = count - _recorded_among(read_records(records, info.grid, info.bound), chunk_ids)
        several = f' (and {missed - 1} more of the {count} chunks this read needs)' if missed > 1 else ''
        again = ('The save was not completed: save it again' if info.save else
                 'Running the computation again with the same cache_dir completes it.')
        _raise_if_replaced(info)
        error = ChunkMissing(
            f'Chunk {record_name(first)}{several} of array {info.array!r} in {info.where} is missing: it has no '
            f'completion record in {records!r}, so {"the save" if info.save else "the computation"} writing it '
            f'did not finish. {again}')
        error.store, error.array, error.chunk = info.store, info.array, first
        raise error
    return names if info.bound else None


def _stat_records(info: DiskArray, needed: list) -> set | None:
    """Names of the records of the chunks `needed` where each has its record, by one stat each (with tags: after
    reading the checksum the chunk's file ends with); None where some record is not found so."""
    records = records_dir(info.store, info.array)
    if not info.bound:
        present = all(os.path.exists(os.path.join(records, record_name(i))) for i in needed)
        return set() if present else None
    found = set()
    for index in needed:
        checksum = stored_checksum(os.path.join(info.path, chunk_file_name(index)))
        name = record_name(index, chunk_tag(info.key, info.array, index, checksum))
        if not os.path.exists(os.path.join(records, name)):
            return None
        found.add(name)
    return found


def _grid(chunk_ids: list):
    """The grid positions of `chunk_ids` (positions per axis) in C order, made one at a time.

    Unlike `itertools.product`, it does not first copy every axis's positions into a tuple.
    """
    if not chunk_ids:
        yield ()
        return
    for i in chunk_ids[0]:
        for rest in _grid(chunk_ids[1:]):
            yield (i, *rest)


def _recorded_among(present: dict, chunk_ids: list) -> int:
    """How many of the recorded positions `present` lie in the grid `chunk_ids`."""
    axes = [ids if isinstance(ids, range) else set(ids) for ids in chunk_ids]
    return sum(all(i in ids for i, ids in zip(index, axes, strict=True)) for index in present)


def _raise_damaged(info: DiskArray, index: tuple, err: Exception):
    """Raise ChunkDamaged naming the chunk at grid position `index`, which could not be read (`err`)."""
    _raise_chunk(info, index, f'cannot be read ({type(err).__name__}: {err})', err)


def _raise_misplaced(info: DiskArray, index: tuple, checksum: int | None):
    """Raise ChunkDamaged: the file of the chunk at `index` ends with `checksum`, which its record does not tag."""
    stored = 'no checksum' if checksum is None else f'checksum {checksum:08x}'
    _raise_chunk(info, index, f'ends with {stored}, which is not the one recorded for this chunk: the file was '
                              f'moved, copied or linked here from another chunk, array, result or save, or changed')


def _raise_chunk(info: DiskArray, index: tuple, problem: str, cause: Exception | None = None):
    """Raise ChunkDamaged: the file of the chunk at `index` has the `problem` (a phrase following 'its file')."""
    records = records_dir(info.store, info.array)
    names = sorted(record_name(index, tag) for tag in read_records(records, info.grid, info.bound).get(index, ()))
    record = ', '.join(repr(os.path.join(records, n)) for n in names) or 'none'
    again = ('Save the values again: the save cannot be repaired.' if info.save else
             f'Delete its completion record ({record}) and run the computation again with the same cache_dir to '
             f'rewrite it.')
    _raise_if_replaced(info)
    error = ChunkDamaged(f'Chunk {record_name(index)} of array {info.array!r} in {info.where} is damaged: its file '
                         f'{_chunk_path(info, index)!r} {problem}. {again}')
    error.store, error.array, error.chunk = info.store, info.array, index
    raise error from cause


def _raise_if_replaced(info: DiskArray) -> None:
    """Raise ReplacedOnDisk where the save or result that `info` was read from has been replaced in its place since
    (saved, or computed and written, again there), rather than calling its chunks damaged or missing.

    The chunks of the new one never pass for the old ones: their records carry the new save's identity, or the new
    values' checksums. Returns where the manifest there is the one of `info`, or cannot be read.
    """
    try:
        with open(os.path.join(info.store, MANIFEST), 'rb') as f:
            manifest = json.loads(f.read())
        now = (manifest['id'] if info.save else manifest['key'], manifest['created'])
    except (OSError, ValueError, TypeError, KeyError):
        return
    if now == (info.key, info.created):
        return
    verb, again = (('saved', 'Load the save again to read its new values') if info.save else
                   ('computed', 'Run the computation again with the same cache_dir to read the new result'))
    raise ReplacedOnDisk(f'{info.where[0].upper()}{info.where[1:]} was {verb} again (at {now[1]}) after this tensor '
                         f'was loaded from it (then {verb} at {info.created}): the values it refers to are gone. '
                         f'{again}.')


def _chunk_path(info: DiskArray, index: tuple) -> str:
    """The file of the chunk at grid position `index`, as its array's metadata names it."""
    try:
        return chunk_file(info.path, read_metadata(info.path), index)
    except (OSError, ValueError):
        return os.path.join(info.path, chunk_file_name(index))


def _chunk_source(info: DiskArray):
    """A function reading the chunk at a grid position of the array; ChunkDamaged if it cannot be opened.

    Raises:
        ManifestDamaged: the manifest and the array's Zarr metadata disagree.
        ChunkDamaged: the array cannot be opened, or its directory lies outside the store.
    """
    try:
        return _open_chunks(info)
    except (ManifestDamaged, ReplacedOnDisk):
        raise
    except Exception as err:
        again = 'the save is damaged. Save the values again' if info.save else \
            'the result is damaged. Delete it and compute it again'
        _raise_if_replaced(info)
        error = ChunkDamaged(f'Array {info.array!r} of {info.where} cannot be opened ({type(err).__name__}: {err}); '
                             f'{again}.')
        error.store, error.array, error.chunk = info.store, info.array, None
        raise error from err


@functools.lru_cache(maxsize=64)
def _open_chunks(info: DiskArray):
    """`chunk_reader` of the array, after checking that its Zarr metadata agrees with the manifest (`info`).

    Cached per `info`, whose creation time tells a result computed again at the same place from the old one.
    """
    path = info.path
    check_inside(info.store, path)
    meta = read_metadata(path)
    differences = metadata_differences(meta, info.shape.sizes, info.chunks, DType.as_dtype(info.dtype),
                                       info.shape.names)
    if differences:
        _raise_if_replaced(info)
        again = 'The save is damaged: save the values again' if info.save else \
            'The result is damaged: delete it and compute it again'
        raise ManifestDamaged(f'The manifest of {info.where} disagrees with the Zarr metadata of its array '
                              f'{info.array!r}: {"; ".join(differences)}. {again}')
    return chunk_reader(path, meta)


def check_inside(store: str, path: str) -> None:
    """Raise OSError unless `path`, with symbolic links resolved, lies inside the directory `store`."""
    root = os.path.realpath(store)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise OSError(f'{path!r} leads outside {store!r} (to {os.path.realpath(path)!r}) through a symbolic link; '
                      f'lazyphi reads only files inside a store')


def _source_backend(info: DiskArray) -> Backend:
    try:
        return backend_by_name(info.backend)
    except ValueError as err:
        raise ValueError(f'Array {info.array!r} in {info.store!r} was computed with backend {info.backend!r}, '
                         f"which cannot be loaded here ({err}). Load it as another backend: "
                         f"`with load_cache_as('numpy'): ...`") from err


class _ChunkReader:
    """A whole stored array as an array-like for `dask.array.from_array`; every read checks its records."""

    __slots__ = ('_info', 'dtype', 'ndim', 'shape')

    def __init__(self, info: DiskArray):
        self._info = info
        self.shape = info.shape.sizes
        self.ndim = len(self.shape)
        self.dtype = np.dtype(info.dtype)

    def __getitem__(self, index) -> np.ndarray:
        index = index if isinstance(index, tuple) else (index,)
        index = index + (slice(None),) * (self.ndim - len(index))
        return read_selection(self._info, tuple(range(size)[i] for i, size in zip(index, self.shape, strict=True)))

    def __reduce__(self):
        return _ChunkReader, (self._info,)


def _optional(module: str, what: str, requirement: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f'{what} needs {module.split(".")[0]}, which is not installed: pip install '
                          f'"{requirement}"') from err


# --- files in trees ----------------------------------------------------------------------------------------

def get_cache_files(obj) -> set[str]:
    """The directories of every Zarr array referenced by disk-backed tensors in `obj`.

    Args:
        obj: a Tensor, or a tuple, list, set, dict or dataclass instance holding them (nested in any way);
            for dataclass instances both the fields and the values cached in `__dict__` are searched.

    Returns:
        Paths `<cache_dir>/<key>/<array>`, one per array referenced.
    """
    files: set[str] = set()
    _collect(obj, files, set())
    return files


def _collect(obj, files: set, seen: set) -> None:
    if isinstance(obj, DiskTensor):
        files.add(obj.path)
    elif isinstance(obj, Stacked):
        for part in obj.parts:
            _collect(part, files, seen)
    elif isinstance(obj, Expanded):
        _collect(obj._inner, files, seen)
    elif isinstance(obj, (Tensor, str, bytes, int, float, complex)) or obj is None or id(obj) in seen:
        return
    elif isinstance(obj, (tuple, list, set, frozenset, dict)):
        seen.add(id(obj))
        for item in obj.values() if isinstance(obj, dict) else obj:
            _collect(item, files, seen)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        seen.add(id(obj))
        for field in dataclasses.fields(obj):
            _collect(getattr(obj, field.name, None), files, seen)
        for value in getattr(obj, '__dict__', {}).values():  # cached property values, and fields again
            _collect(value, files, seen)
