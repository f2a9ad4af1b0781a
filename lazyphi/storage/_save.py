"""Saving and loading whole trees of tensors and dataclasses: one Zarr group per node, one manifest per save.

`save` writes a directory holding a Zarr v3 group per container node (dataclass, dict, list, tuple), one
uncompressed Zarr array per tensor in the layout of the disk cache (`_results.py`: chunks along the
first dim, a `<array>.done/` directory with one completion record per chunk, tagged with the chunk's
checksum, place and the save's `id`: `_results.chunk_tag`), and one manifest
`lazyphi.json` at the root describing the whole tree: for each node its kind, for dataclasses the class
path and the config fields in tagged JSON, for tensors the array entry of the disk-cache manifest plus
the array's path. The save is built in a temporary directory beside its target and renamed into place,
so an interrupted save never looks complete.

`load` reads the manifest only and rebuilds the tree with `DiskTensor`s over the arrays, which read
through the disk cache's reader (`_disk.read_selection`): records checked, only touched chunks read.
Nothing is unpickled and no `__init__` or `__post_init__` runs; classes are found by import path, or
among the classes saved or loaded in this process.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np

from .._errors import ManifestDamaged
from ..backend import DType, NoBackendFound, backend_by_name, choose_backend, convert
from ..math import Shape, ShapeDtype, Tensor, channel, data_fields, non_data_fields, spatial, tensor, wrap
from ..math.kinds import Dense, Expanded, cached_property_names, element_bytes
from ._chunks import chunk_writer, create_array, create_group, libc_function
from ._disk import DiskArray, DiskTensor, read_selection
from ._memory import current_load_backend, notify_loaded
from ._results import (
    MANIFEST,
    REPLACED_SUFFIX,
    STALE_AFTER_SECONDS,
    STORABLE_KINDS,
    ArraySpec,
    _entry_problem,
    check_name,
    checksum_problem,
    chunk_tag,
    class_path,
    grid_index,
    record_name,
    records_dir,
    remove_entry,
    shape_problem,
    temporary_dir,
    touched_since,
    write_manifest,
    writer_gone,
)
from ._tagged import _CLASSES, MAX_DEPTH, allowed_modules, decode, encode, enter, find_class, unknown_class
from ._write import write_records
from ._xarray_view import describe_save

SAVE_FORMAT = 3  # 2: nodes of kind 'expanded'; 3: completion records carry each chunk's tag (`chunk_tag`)
READ_FORMATS = (1, 2, 3)
BOUND_FROM = 3  # saves of this format on tag their chunks' records
SAVE_TYPE = 'lazyphi.save'  # tells a save's manifest from a cache result's
CHUNK_BYTES = 8 * 2 ** 20  # target size of one chunk: reading part of a saved tensor reads whole chunks
WRITE_THREADS = 8  # chunks written at once (measured: 1.4x faster than one at a time on a local disk)
KINDS = ('tensor', 'expanded', 'native', 'dataclass', 'dict', 'list', 'tuple', 'value')
_SHAPE_FIELDS = ('dims', 'types', 'labels', 'sizes')
_ENTRY_FIELDS = ('dims', 'types', 'labels', 'sizes', 'dtype', 'backend', 'chunks', 'block_dim')


# --- saving --------------------------------------------------------------------------------------------------

def save(obj, path: str | os.PathLike, overwrite: bool = False, include_cache: bool = False, *, values: bool = True,
         metadata: dict | None = None) -> None:
    """Write a tree of tensors, numbers, strings, None, dicts, lists, tuples and dataclasses to a directory.

    Args:
        obj: the tree. Tensors of any backend; dict keys must be str; dataclasses nest in any way, their data
            fields saved as nodes, their config fields as tagged JSON. NumPy arrays of at most one axis are saved
            as the tensors `math.tensor` makes of them (1-D: a channel dim `vector`) and load as tensors; other
            arrays of NumPy, PyTorch, JAX and TensorFlow (in fields such as jax_dataclasses' `jnp.ndarray`) load as
            arrays of their library, read whole. A tensor
            expanded lazily (`math.expand`, `math.zeros`, ...) to more than 8 MiB is saved as the values it holds
            and loads expanded again; Zarr readers such as xarray see those values.
        path: the directory to create. Written into a temporary directory beside it and renamed into
            place at the end, so an interrupted save leaves no `path`.
        overwrite: replace an existing save at `path`. Atomically where the system can swap two directories
            (Linux `renameat2`): `path` holds the old save or the new one at every moment. Elsewhere the old
            one is renamed away and the new one renamed in; if the process dies in between, the next `load`
            or `save` of `path` puts the old one back.
        include_cache: also save the Tensor values dataclass instances hold for their cached properties.
        values: False: create every tensor's array at its full shape (expanded ones too) without writing
            any chunk, a preallocated save whose chunks are written later (`Dataclass.memmap_like`); until
            then each chunk is missing and reading it raises `ChunkMissing`.
        metadata: a dict of values `_tagged.encode` can write, kept in the manifest (`save_metadata` reads it).

    Temporary directories that killed saves of `path` left beside it are removed (once untouched for
    `STALE_AFTER_SECONDS`).

    Raises:
        FileExistsError: `path` exists and `overwrite` is False, or it is not a lazyphi save.
        TypeError: some value cannot be saved; the message names where it lies in the tree.
        ValueError: the tree contains itself or is nested more than `MAX_DEPTH` levels deep.
    """
    path = _target_path(path, 'save')
    _check_flags('save', overwrite=overwrite, include_cache=include_cache, values=values)
    parent, name = os.path.split(path)
    _recover(path)
    _check_target(path, overwrite)
    os.makedirs(parent, exist_ok=True)
    _remove_leftovers(path)
    building = temporary_dir(parent, name)
    identity = uuid.uuid4().hex  # what the records of its chunks bind them to
    try:
        create_group(building)
        with ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix='lazyphi-save') as pool:
            root = _Writer(building, identity, include_cache, pool, values).node(obj, '', 'obj')
        describe_save(building, obj, root)  # label coordinates, config attributes: what xr.open_zarr shows
        manifest = {'format': SAVE_FORMAT, 'type': SAVE_TYPE, 'id': identity,
                    'created': datetime.now(UTC).isoformat(), 'root': root}
        if metadata is not None:
            manifest['metadata'] = encode(metadata, 'metadata')
        write_manifest(building, manifest)
        _move_into_place(building, path, overwrite)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _target_path(path, function: str) -> str:
    """The absolute path of `save`'s or `load`'s `path` argument; TypeError/ValueError for none or an empty one."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise TypeError(f'{function}() takes a directory path (str or os.PathLike), got {path!r:.100}')
    path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{function}() needs a directory path, got {path!r}; say '.' for the working directory")
    return os.path.abspath(path)


def _check_flags(function: str, **flags) -> None:
    """TypeError for a flag argument that is not a bool (a string 'no' would count as True)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f'{function}({name}=...) takes True or False, got {value!r:.100}')


def _check_target(path: str, overwrite: bool) -> None:
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise FileExistsError(f'{path!r} already exists; pass overwrite=True to replace it, or save elsewhere')
    if not (os.path.isdir(path) and (not os.listdir(path) or os.path.exists(os.path.join(path, MANIFEST)))):
        raise FileExistsError(f'{path!r} exists and is not a lazyphi save (it has no {MANIFEST}); save(..., '
                              f'overwrite=True) replaces only saves and empty directories. Delete it yourself first')


def _move_into_place(building: str, path: str, overwrite: bool) -> None:
    """Rename the finished save to `path`; with `overwrite`, swap it with the old one, then delete that."""
    if not overwrite or not os.path.lexists(path):
        if os.path.lexists(path):  # appeared while writing: os.rename would replace an empty directory
            raise FileExistsError(f'{path!r} appeared while saving; pass overwrite=True to replace it')
        os.rename(building, path)
        return
    _check_target(path, overwrite)
    if _exchange(building, path):  # `path` holds the new save, `building` the old one (a link: the link)
        remove_entry(building, ignore_errors=True)
        return
    parent, name = os.path.split(path)
    old = os.path.join(parent, f'.{name}.{uuid.uuid4().hex}{REPLACED_SUFFIX}')  # `_recover` finds it if we die now
    os.rename(path, old)
    try:
        os.rename(building, path)
    except OSError:
        os.rename(old, path)
        raise
    remove_entry(old, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_EXCHANGE = (libc_function('renameat2', (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                         ctypes.c_uint)) if sys.platform.startswith('linux') else None)


def _exchange(a: str, b: str) -> bool:
    """Swap the directories `a` and `b` atomically; False where the system or file system cannot."""
    if _EXCHANGE is None:
        return False
    if _EXCHANGE(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


def _moved_away(path: str) -> list[str]:
    """Old saves of `path` that a `save(overwrite=True)` moved away, newest first.

    Only directories: a symbolic link of such a name is none of lazyphi's, and is neither followed nor moved.
    """
    parent, name = os.path.split(path)
    prefix = f'.{name}.'
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix) and n.endswith(REPLACED_SUFFIX)
                 and _HEX.fullmatch(n[len(prefix):-len(REPLACED_SUFFIX)])]
    except OSError:
        return []
    found = [p for p in (os.path.join(parent, n) for n in names) if os.path.isdir(p) and not os.path.islink(p)]
    return sorted(found, key=lambda p: os.lstat(p).st_mtime, reverse=True)


_HEX = re.compile('[0-9a-f]{32}')


def _recover(path: str) -> str:
    """Where the save at `path` is: `path`, or an old save a killed overwrite moved away (put back if it can be)."""
    if os.path.lexists(path):
        return path
    for old in _moved_away(path):
        try:
            os.rename(old, path)
            return path
        except OSError:  # read-only, or another process was first
            if os.path.lexists(path):
                return path
            return old
    return path


def _remove_leftovers(path: str) -> None:
    """Delete what killed saves of `path` left beside it: temporary directories untouched for a while."""
    parent, name = os.path.split(path)
    prefix = f'.{name}.'
    now = time.time()
    leftovers = [os.path.join(parent, n) for n in os.listdir(parent)
                 if n.startswith(prefix) and n.endswith('.partial') and _HEX.fullmatch(n[len(prefix):-8])]
    if os.path.lexists(path):
        leftovers += _moved_away(path)
    for leftover in leftovers:
        if writer_gone(os.path.basename(leftover)) or not touched_since(leftover, now - STALE_AFTER_SECONDS):
            remove_entry(leftover)


class _Writer:
    """Writes the nodes of one save into the group at `store` and returns their manifest entries."""

    def __init__(self, store: str, identity: str, include_cache: bool, pool: ThreadPoolExecutor, values: bool = True):
        self.store = store
        self.identity = identity  # the save's id, which each chunk's record is tagged with
        self.values = values  # False: create the arrays only, every chunk missing
        self.pool = pool
        self.include_cache = include_cache
        self.enclosing: set[int] = set()  # ids of the containers and instances around the node being written

    def node(self, value, location: str, where: str, depth: int = 0) -> dict:
        """The manifest node of `value`, after writing its arrays; `location` is its path in the store.

        Raises:
            ValueError: `value` contains itself, or the tree is nested more than `MAX_DEPTH` levels deep.
        """
        if isinstance(value, np.ndarray) and value.ndim <= 1:
            value = array_tensor(value, where)
        elif not isinstance(value, Tensor) and _is_native(value):
            return {'kind': 'native', 'value': self.tensor(_axes_tensor(value, where), location or 'array', where)}
        if isinstance(value, Tensor):
            return self.tensor(value, location or 'tensor', where)  # the root is a group: a lone tensor lies in it
        if not (type(value) in (dict, list, tuple) or _is_instance(value)):
            return {'kind': 'value', 'value': encode(value, where)}
        enter(value, where, depth, self.enclosing)
        try:
            if location:
                create_group(self.store, location)
            if _is_instance(value):
                return self.dataclass(value, location, where, depth)
            if type(value) is dict:
                bad = [k for k in value if not isinstance(k, str)]
                if bad:
                    raise TypeError(f'save() needs str dict keys; the dict at {where} has key {bad[0]!r} of type '
                                    f'{type(bad[0]).__name__}')
                names = _child_names(value)
                items = {k: self.node(v, _join(location, n), f'{where}[{k!r}]', depth + 1)
                         for (k, v), n in zip(value.items(), names, strict=True)}
                return {'kind': 'dict', 'group': location, 'items': items}
            items = [self.node(v, _join(location, str(i)), f'{where}[{i}]', depth + 1) for i, v in enumerate(value)]
            return {'kind': type(value).__name__, 'group': location, 'items': items}
        finally:
            self.enclosing.discard(id(value))

    def dataclass(self, obj, location: str, where: str, depth: int) -> dict:
        cls = type(obj)
        path = class_path(cls)
        _CLASSES[path] = cls
        fields = {f.name: self.node(getattr(obj, f.name), _join(location, f.name), f'{where}.{f.name}', depth + 1)
                  for f in data_fields(cls) if hasattr(obj, f.name)}
        config = {f.name: encode(getattr(obj, f.name), f'{where}.{f.name}', 0, self.enclosing)
                  for f in non_data_fields(cls) if hasattr(obj, f.name)}
        cache = {}
        if self.include_cache:
            for name, value in getattr(obj, '__dict__', {}).items():
                if isinstance(value, Tensor) and name not in fields and name in cached_property_names(cls):
                    cache[name] = self.tensor(value, _join(location, name), f'{where}.{name}')
        return {'kind': 'dataclass', 'class': path, 'group': location, 'fields': fields, 'config': config,
                'cache': cache}

    def tensor(self, t: Tensor, location: str, where: str) -> dict:
        if type(t) is Expanded and element_bytes(t.shape, t.dtype) > CHUNK_BYTES and self.values:
            # the values it holds and the dims they are constant along, not materialised; smaller ones are written
            # whole, for readers of the Zarr arrays such as xarray
            inner = self.tensor(t._inner, location, where)
            return {'kind': 'expanded', **_shape_entry(t.shape), 'value': inner}
        shape = t.shape
        if not all(type(s) is int for s in shape.sizes):
            raise TypeError(f'save() stores tensors of known, uniform sizes; the tensor at {where} has shape {shape}')
        backend = t.source_backend if isinstance(t, DiskTensor) else t.backend.name
        dtype = DType.as_dtype(t.dtype)
        if dtype.kind not in STORABLE_KINDS:
            raise TypeError(f'save() stores bool, int, float and complex tensors; the tensor at {where} is {dtype}')
        if shape.rank == 0:
            entry = {'dims': [], 'types': [], 'labels': [], 'sizes': [], 'dtype': str(dtype), 'backend': backend,
                     'chunks': [], 'block_dim': None}
            create_array(self.store, location, (), (), dtype, None)
            os.mkdir(records_dir(self.store, location))
            if not self.values:  # no record yet: the chunk is missing
                return {'kind': 'tensor', 'array': location, **entry}
            checksum = chunk_writer(os.path.join(self.store, location))((), _values(t, ()))
            write_records(records_dir(self.store, location), [self.record(location, (), checksum)])
            return {'kind': 'tensor', 'array': location, **entry}
        spec = ArraySpec(shape, dtype, backend, shape.names[0], _chunk_length(t))
        create_array(self.store, location, shape.sizes, spec.chunks, dtype, shape.names)
        os.mkdir(records_dir(self.store, location))
        if not self.values:
            return {'kind': 'tensor', 'array': location, **spec.manifest_entry()}
        size = shape.sizes[0]
        data = None if isinstance(t, DiskTensor) else t.backend.numpy(t.native(shape.names))  # bits as stored
        write_chunk = chunk_writer(os.path.join(self.store, location))

        def write(first: int) -> str:
            # A DiskTensor is copied a chunk at a time, never loaded whole.
            last = min(first + spec.chunk, size)
            index = grid_index(spec, first)
            values = _values(t, (first, last)) if data is None else data[first:last]
            return self.record(location, index, write_chunk(index, values))

        write_records(records_dir(self.store, location), list(self.pool.map(write, range(0, size, spec.chunk))))
        return {'kind': 'tensor', 'array': location, **spec.manifest_entry()}

    def record(self, location: str, index: tuple, checksum: int | None) -> str:
        """The name of the completion record of chunk `index` of the array at `location`, holding its tag."""
        return record_name(index, chunk_tag(self.identity, location, index, checksum))

def _shape_entry(shape: Shape) -> dict:
    return {'dims': list(shape.names), 'types': list(shape.types),
            'labels': [None if lab is None else list(lab) for lab in shape.labels], 'sizes': list(shape.sizes)}


def array_tensor(array: np.ndarray, where: str) -> Tensor:
    """A NumPy array of at most one axis in a saved tree as the tensor `math.tensor` makes of it: 0-d a scalar,
    1-D a channel dim `vector` (as for a list)."""
    if array.dtype.kind not in 'biufc':
        raise TypeError(f'save() stores NumPy arrays of bool, int, float or complex; the array at {where} has dtype '
                        f'{array.dtype}')
    return tensor(array) if array.ndim == 0 else tensor(array, channel('vector'))


def _is_native(value) -> bool:
    """Whether `value` is an array of NumPy, PyTorch, JAX or TensorFlow (a native a backend holds)."""
    if isinstance(value, (str, bytes, bool, int, float, complex, np.generic, type(None))) or \
            not hasattr(value, 'shape'):  # NumPy scalars are values, saved in tagged JSON
        return False
    try:
        return not choose_backend(value).catch_all
    except NoBackendFound:
        return False


def _axes_tensor(native, where: str) -> Tensor:
    """A native array as a tensor whose dims are its axes, named by position from the last (`_0` the last), which
    `load` turns back into a native array of that library."""
    sizes = tuple(choose_backend(native).staticshape(native))
    if not all(isinstance(n, int) for n in sizes):
        raise TypeError(f'save() stores arrays of known shape; the array at {where} has shape {sizes}')
    return wrap(native, spatial(**{f'_{len(sizes) - 1 - i}': n for i, n in enumerate(sizes)}))


def _is_instance(value) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _join(location: str, name: str) -> str:
    return f'{location}/{name}' if location else name


def _child_names(d: dict) -> list[str]:
    """A file name in the store per key: the key itself where it can be one, else `_<index>`, all distinct."""
    names, used = [], set()
    for i, key in enumerate(d):
        try:
            check_name(key, 'key')
            name = key
        except ValueError:
            name = f'_{i}'
        while name in used:
            name = f'_{name}'
        used.add(name)
        names.append(name)
    return names


def _chunk_length(t: Tensor) -> int:
    """Chunk length along the first dim: a DiskTensor keeps its stored chunking there; else about CHUNK_BYTES."""
    if isinstance(t, DiskTensor):
        axis = t._view_axes()[0]
        sel = t._selection[axis]
        if isinstance(sel, range) and sel.step == 1:
            return t.chunks[axis]
    shape = t.shape
    per_item = element_bytes(shape, t.dtype) // max(shape.sizes[0], 1)
    return max(1, min(shape.sizes[0], CHUNK_BYTES // max(per_item, 1)))


def _values(t: Tensor, block: tuple) -> np.ndarray:
    """The values of `t` (of `first:last` along its first dim if `block` holds them) as NumPy, dims in order.

    A DiskTensor reads only that block from its store, outside the memory cache.
    """
    if not isinstance(t, DiskTensor):
        return t.backend.numpy(t.native(t.shape.names))  # as stored: numpy() may raise the precision
    selection = list(t._selection)
    if block:
        axis = t._view_axes()[0]
        selection[axis] = selection[axis][block[0]:block[1]]
    return read_selection(t._info, tuple(selection))


# --- loading ------------------------------------------------------------------------------------------------

def load(path: str | os.PathLike, lazy: bool = True, data: bool = True, item: str | None = None,
         allow_modules: str | Iterable[str] | None = None):
    """Read a tree written by `save`; reads only the manifest unless `lazy=False`.

    Loading runs no code the file names: no module is imported unless `allow_modules` lists it, nothing is
    unpickled, and instances are made without `__init__` / `__post_init__`.

    Args:
        path: the directory `save` wrote.
        lazy: tensors become `DiskTensor`s that read their chunks when used. False: all values are read now.
        data: False: tensors become `shape * dtype` placeholders (`ShapeDtype`) and no data is touched.
        item: a dotted path (`'a.b.0'`) through fields, dict keys and list indices: load that sub-tree only.
        allow_modules: modules (or packages, allowing their submodules) that may be imported to find the
            classes of dataclasses and enums in the save, e.g. `['mypackage.models']`. Classes of modules
            already imported, and classes saved or loaded in this process, are found without it. A class
            found nowhere comes back as plain data with an `UnknownClassWarning`: a dataclass as a dict of its
            fields (and saved cached values), an enum member as its name.

    Returns:
        The tree, with the backends tensors were saved from (`load_cache_as` picks another).

    Raises:
        FileNotFoundError: nothing at `path`.
        ManifestDamaged: `path` holds no valid save manifest.
        TypeError: a class found is not a dataclass (or enum) or lacks fields the save has; `allow_modules`
            is not module names.
        KeyError: `item` names nothing in the tree.
    """
    allow = allowed_modules(allow_modules)
    _check_flags('load', lazy=lazy, data=data)
    if item is not None and (isinstance(item, bool) or not isinstance(item, str | int) or item == ''):
        raise TypeError(f"load(item=...) takes a dotted path like 'a.b.0' (or a list index), got {item!r:.100}")
    store = _recover(_target_path(path, 'load'))
    manifest = read_save_manifest(store)
    node, where = manifest['root'], 'obj'
    if item:
        node, where = _find(node, str(item))
    return _Reader(store, manifest, lazy, data, allow).build(node, where)


def read_save_manifest(store: str) -> dict:
    """The validated manifest of the save in directory `store`."""
    if not os.path.exists(store):
        raise FileNotFoundError(f'No lazyphi save at {store!r}: it does not exist')
    file = os.path.join(store, MANIFEST)
    try:
        with open(file, 'rb') as f:
            manifest = json.loads(f.read())
    except (FileNotFoundError, NotADirectoryError):
        raise ManifestDamaged(f'{store!r} is not a lazyphi save: it has no {MANIFEST}') from None
    except (OSError, ValueError) as err:
        raise ManifestDamaged(f'The manifest {file!r} cannot be read: {err}') from err
    except RecursionError:
        raise ManifestDamaged(f'The manifest {file!r} is nested too deeply to read; a save nests at most '
                              f'{MAX_DEPTH} levels') from None
    problem = _manifest_problem(manifest) or checksum_problem(manifest)
    if problem:
        raise ManifestDamaged(f'The manifest {file!r} is invalid: {problem}')
    return manifest


def _manifest_problem(manifest) -> str | None:
    if not isinstance(manifest, dict):
        return f'expected a JSON object, found {type(manifest).__name__}'
    if manifest.get('type') != SAVE_TYPE:
        return ('it is not a save (a disk-cache result? open its arrays with lazyphi.storage.disk_tensor)'
                if 'arrays' in manifest else f"'type' must be {SAVE_TYPE!r}")
    missing = {'format', 'id', 'created', 'root'} - set(manifest)
    if missing:
        return f'missing entries {sorted(missing)}'
    if manifest['format'] not in READ_FORMATS:
        return f'it has format {manifest["format"]!r}; this lazyphi reads formats {READ_FORMATS}'
    if not isinstance(manifest['id'], str) or not isinstance(manifest['created'], str):
        return "'id' and 'created' must be strings"
    return _node_problem(manifest['root'], 'obj', 0)


def _node_problem(node, where: str, depth: int) -> str | None:
    """What is wrong with a manifest node (`depth` levels below the root) and its children, or None."""
    if depth > MAX_DEPTH:
        return f'{where}: the tree is nested more than {MAX_DEPTH} levels deep'
    if not isinstance(node, dict) or node.get('kind') not in KINDS:
        return f'{where}: expected a node object with a kind among {KINDS}, found {node!r:.200}'
    kind = node['kind']
    needed = {'tensor': ('array', *_ENTRY_FIELDS), 'expanded': (*_SHAPE_FIELDS, 'value'), 'native': ('value',),
              'dataclass': ('class', 'group', 'fields', 'config', 'cache'),
              'dict': ('group', 'items'), 'list': ('group', 'items'), 'tuple': ('group', 'items'),
              'value': ('value',)}[kind]
    missing = [k for k in needed if k not in node]
    if missing:
        return f'{where}: a {kind} node lacks {missing}'
    if kind == 'tensor':
        return _tensor_problem(node, where)
    if kind == 'native':
        inner = node['value']
        if not isinstance(inner, dict) or inner.get('kind') != 'tensor':
            return f'{where}: a native node holds a tensor node'
        return _tensor_problem(inner, where)
    if kind == 'expanded':
        return _expanded_problem(node, where, depth)
    if kind == 'value':
        return None
    if not isinstance(node['group'], str):
        return f'{where}: group must be a str'
    if kind == 'dataclass':
        if not isinstance(node['class'], str) or ':' not in node['class']:
            return f"{where}: class must be 'module:QualName', found {node['class']!r}"
        if not all(isinstance(node[k], dict) for k in ('fields', 'config', 'cache')):
            return f'{where}: fields, config and cache must be objects'
        children = [(node['fields'], '.{}'), (node['cache'], '.{}')]
    elif kind == 'dict':
        children = [(node['items'], '[{!r}]')] if isinstance(node['items'], dict) else None
    else:
        children = [(dict(enumerate(node['items'])), '[{}]')] if isinstance(node['items'], list) else None
    if children is None:
        return f'{where}: items must be a {"JSON object" if kind == "dict" else "list"}'
    for mapping, pattern in children:
        for key, child in mapping.items():
            problem = _node_problem(child, where + pattern.format(key), depth + 1)
            if problem:
                return problem
    return None


def _tensor_problem(node: dict, where: str) -> str | None:
    array = node['array']
    if (not isinstance(array, str) or not array or array.startswith('/')
            or any(p in ('', '.', '..') for p in array.split('/'))):
        return f'{where}: array must be a relative path inside the save, found {array!r}'
    entry = {k: node[k] for k in _ENTRY_FIELDS}
    if entry['dims'] or entry['block_dim'] is not None:
        problem = _entry_problem(entry)
        return f'{where}: {problem}' if problem else None
    if any(entry[k] != [] for k in ('dims', 'types', 'labels', 'sizes', 'chunks')):
        return f'{where}: a tensor without dims must have empty dims, types, labels, sizes and chunks'
    if not isinstance(entry['dtype'], str):
        return f"{where}: dtype must be a name like 'float32', found {entry['dtype']!r:.100}"
    try:
        dtype = DType.as_dtype(entry['dtype'])
    except (TypeError, ValueError) as err:
        return f'{where}: {err}'
    if dtype.kind not in STORABLE_KINDS or not isinstance(entry['backend'], str):
        return f'{where}: dtype {entry["dtype"]!r} or backend {entry["backend"]!r} is invalid'
    return None


def _expanded_problem(node: dict, where: str, depth: int) -> str | None:
    problem = shape_problem(node)
    if problem:
        return f'{where}: {problem}'
    inner = node['value']
    if not isinstance(inner, dict) or inner.get('kind') != 'tensor':
        return f'{where}: the value of an expanded node must be a tensor node, found {inner!r:.200}'
    problem = _node_problem(inner, where, depth + 1)
    if problem:
        return problem
    sizes = dict(zip(node['dims'], node['sizes'], strict=True))
    if any(sizes.get(d) != s for d, s in zip(inner['dims'], inner['sizes'], strict=True)):
        return f'{where}: the stored values of shape {inner["dims"]} {inner["sizes"]} do not lie within the ' \
               f'expanded shape {node["dims"]} {node["sizes"]}'
    return None


def _find(node: dict, item: str) -> tuple[dict, str]:
    """The node at dotted path `item`, and its location for messages."""
    where = 'obj'
    for part in item.split('.'):
        kind = node['kind']
        child = None
        if kind == 'dataclass':
            if part in node['config']:
                child = {'kind': 'value', 'value': node['config'][part]}
            else:
                child = node['fields'].get(part, node['cache'].get(part))
            where += f'.{part}'
        elif kind == 'dict':
            child = node['items'].get(part)
            where += f'[{part!r}]'
        elif kind in ('list', 'tuple') and part.lstrip('-').isdigit() and -len(node['items']) <= int(part) < len(
                node['items']):
            child = node['items'][int(part)]
            where += f'[{part}]'
        if child is None:
            raise KeyError(f'load(item={item!r}): {where} has no item {part!r} (it is a {kind} node)')
        node = child
    return node, where


class _Reader:
    """Rebuilds nodes of one save's manifest."""

    def __init__(self, store: str, manifest: dict, lazy: bool, data: bool, allow: tuple):
        self.store = store
        self.manifest = manifest
        self.lazy = lazy
        self.data = data
        self.allow = allow  # modules that may be imported to find classes

    def build(self, node: dict, where: str):
        kind = node['kind']
        if kind == 'tensor':
            return self.tensor(node)
        if kind == 'expanded':
            inner = self.tensor(node['value'])
            shape = _shape(node)
            return ShapeDtype(shape, inner.dtype) if not self.data else Expanded(inner, shape)
        if kind == 'native':  # an array of the library it was saved from, read now (an array cannot be lazy)
            values = self.tensor(node['value'])
            return values if not self.data else values._dense().native(values.shape.names)
        if kind == 'value':
            return decode(node['value'], where, 0, self.allow)
        if kind == 'dict':
            return {k: self.build(v, f'{where}[{k!r}]') for k, v in node['items'].items()}
        if kind in ('list', 'tuple'):
            items = [self.build(v, f'{where}[{i}]') for i, v in enumerate(node['items'])]
            return items if kind == 'list' else tuple(items)
        return self.dataclass(node, where)

    def dataclass(self, node: dict, where: str):
        cls = find_class(node['class'], self.allow)
        if cls is None:
            unknown_class(node['class'], where, 'a dict of its fields')
            parts = {**node['fields'], **node['cache']}
            values = {name: self.build(child, f'{where}.{name}') for name, child in parts.items()}
            values.update({name: decode(v, f'{where}.{name}', 0, self.allow) for name, v in node['config'].items()})
            return values
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f'Cannot load {where}: {node["class"]!r} is not a dataclass')
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted((set(node['fields']) | set(node['config'])) - names)
        if unknown:
            raise TypeError(f'Cannot load {where}: the save has fields {unknown} which class {node["class"]!r} lacks '
                            f'(was the class changed since saving?)')
        obj = object.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.name in node['fields']:
                value = self.build(node['fields'][f.name], f'{where}.{f.name}')
            elif f.name in node['config']:
                value = decode(node['config'][f.name], f'{where}.{f.name}', 0, self.allow)
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                continue  # the instance saved had no value for it either
            object.__setattr__(obj, f.name, value)
        state = getattr(obj, '__dict__', None)
        if state is not None:
            for name, child in node['cache'].items():
                state[name] = self.build(child, f'{where}.{name}')
        return obj

    def tensor(self, node: dict) -> Tensor | ShapeDtype:
        shape = _shape(node)
        if not self.data:
            return ShapeDtype(shape, DType.as_dtype(node['dtype']))
        info = DiskArray(self.store, node['array'], self.manifest['id'], self.manifest['created'], shape,
                         node['dtype'], node['backend'], tuple(node['chunks']), self.manifest['format'],
                         bound=self.manifest['format'] >= BOUND_FROM, save=True)
        disk = DiskTensor(info, tuple(range(size) for size in shape.sizes), shape)
        if self.lazy:
            return disk
        backend = current_load_backend() or backend_by_name(node['backend'])
        values = read_selection(info, disk._selection)
        notify_loaded(disk)
        return Dense(convert(values, backend), shape, backend)


def _shape(node: dict) -> Shape:
    """The Shape of a manifest node's `dims`, `types`, `labels` and `sizes`."""
    labels = tuple(None if lab is None else tuple(lab) for lab in node['labels'])
    return Shape(tuple(node['sizes']), tuple(node['dims']), tuple(node['types']), labels)
