"""Writing results to the disk cache: create a result's group once, write blocks of whole chunks, record them.

Several processes may prepare the same result at once and many tasks write its blocks at once; blocks
are disjoint ranges of whole chunks, so no chunk has two writers. A chunk counts as written only when
its completion record exists, and the record is made after the chunk's data is in the store.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Mapping

from .._errors import CacheDirNotShared, ManifestDamaged
from ..math import Tensor
from ._chunks import chunk_writer, create_array, create_group, metadata_differences, read_metadata
from ._results import (
    ArraySpec,
    array_spec,
    check_name,
    check_range,
    chunk_tag,
    grid_index,
    manifest_differences,
    new_manifest,
    read_manifest,
    record_name,
    records_dir,
    remove_stale_temporaries,
    sees_sentinel,
    temporary_dir,
    write_manifest,
)
from ._xarray_view import config_attributes, describe_for_xarray

# the empty file in each records directory whose hard links the records are (`write_records`)
RECORD_TEMPLATE = '.record'


def prepare_result(cache_dir: str, key: str, cls: type, arrays: Mapping[str, ArraySpec],
                   config: Mapping[str, object] | None = None) -> str:
    """Create the group of result `key` in `cache_dir` unless it exists; return its absolute path.

    `config` (the instance's config values) goes into the manifest, for `lazyphi cache ls`, and into the
    group's attributes, for xarray (see `_xarray_view.py`).

    Safe when several processes call it at once: the group is built in a temporary directory and
    renamed into place, and only one rename succeeds. An existing group is never overwritten: its
    manifest must describe the same class and arrays. Temporary files of killed writers are removed.

    Raises:
        ValueError: the existing group disagrees with `cls` / `arrays` (the message lists how), or a name
            cannot be a file name.
        ManifestDamaged: the existing group's manifest is missing or invalid.
    """
    check_name(key, 'The result key')
    if not isinstance(cls, type):
        raise TypeError(f'prepare_result needs the class whose result is stored, got {cls!r}')
    for name, spec in arrays.items():
        check_name(name, 'The array name')
        if not isinstance(spec, ArraySpec):
            raise TypeError(f'arrays must map names to ArraySpec, got {spec!r} for {name!r}')
    cache_dir = os.path.abspath(cache_dir)
    group = os.path.join(cache_dir, key)
    wanted = new_manifest(key, cls, arrays, config)
    if not os.path.lexists(group):
        os.makedirs(cache_dir, exist_ok=True)
        _create_group(cache_dir, group, wanted, arrays, config_attributes(cls, config or {}))
    check_no_links(group, arrays)
    differences = manifest_differences(read_manifest(group), wanted)
    if differences:
        raise ValueError(f'The disk cache already holds a different result under key {key!r} at {group!r}: '
                         f'{"; ".join(differences)}. It is left as it is; use another cache_dir, or delete it '
                         f'with lazyphi.cache.delete_result({cache_dir!r}, {key!r})')
    for name in arrays:  # deleted records (of all chunks) are made again by the blocks that write them
        with contextlib.suppress(FileExistsError):
            os.mkdir(records_dir(group, name))
    remove_stale_temporaries(group)
    return group


def check_no_links(group: str, names) -> None:
    """Raise OSError where the result's directory, or the directory of an array `names` or of its records, is a
    symbolic link: lazyphi never writes through a link, which may lead out of the cache directory or into
    another result."""
    for path in (group, *(p for n in names for p in (os.path.join(group, n), records_dir(group, n)))):
        if os.path.islink(path):
            remover = 'lazyphi cache rm' if path == group else 'lazyphi cache rm of the result'
            raise OSError(f'{path!r} in the disk cache is a symbolic link (to {os.readlink(path)!r}); lazyphi never '
                          f'writes through links. Delete the result ({remover} removes links, not what they point '
                          f'to) and compute it again, or use another cache_dir')


def _create_group(cache_dir: str, group: str, manifest: dict, arrays: Mapping[str, ArraySpec],
                  attributes: dict) -> None:
    """Build the group in a temporary directory and rename it into place, unless another process was first."""
    building = temporary_dir(cache_dir, os.path.basename(group))
    try:
        create_group(building)
        for name, spec in arrays.items():
            create_array(building, name, spec.shape.sizes, spec.chunks, spec.dtype, spec.shape.names, spec.compressor)
            os.mkdir(records_dir(building, name))
        dims = {n: (s.shape.names, s.shape.labels) for n, s in arrays.items()}
        describe_for_xarray(building, {'': (dims, attributes)})  # what xr.open_zarr shows
        write_manifest(building, manifest)
        try:
            os.rename(building, group)
        except OSError:
            if not os.path.isdir(group):  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def write_block(group: str, name: str, value: Tensor, block_dim: str, start: int, stop: int) -> None:
    """Write `value` into `start:stop` along `block_dim` of array `name`, then record its chunks as complete.

    The range must cover whole chunks: `start` on a chunk boundary, `stop` on one or at the array's end.
    `value` needs the array's dims (in any order) and sizes, with `block_dim` of size `stop - start`,
    and the array's dtype; it may live on any backend.

    Raises:
        ValueError: a misaligned or out-of-range block, or a value of another shape or dtype.
        ManifestDamaged: the manifest disagrees with the array's Zarr metadata.
    """
    spec = array_spec(group, name)
    check_no_links(group, (name,))
    path = os.path.join(group, name)
    meta = read_metadata(path)
    differences = metadata_differences(meta, spec.shape.sizes, spec.chunks, spec.dtype, spec.shape.names)
    if differences:
        raise ManifestDamaged(f'The manifest of {group!r} disagrees with the Zarr metadata of its array {name!r}: '
                              f'{"; ".join(differences)}. Delete the result and compute it again')
    start, stop = check_range(spec, name, block_dim, start, stop)
    size = spec.shape.get_size(block_dim)
    if start % spec.chunk or (stop % spec.chunk and stop != size):
        raise ValueError(f'Block {start}:{stop} along {block_dim!r} of array {name!r} is not a whole number of '
                         f'chunks of {spec.chunk}: start must be a multiple of {spec.chunk}, stop one too or '
                         f'the array end {size}')
    _check_value(value, spec, name, start, stop)
    data = value.backend.numpy(value.native(spec.shape.names))  # as stored: numpy() may raise the precision
    write = chunk_writer(path, meta)
    key = read_manifest(group)['key']
    records = []
    for first in range(start, stop, spec.chunk):
        last = min(first + spec.chunk, stop)
        index = grid_index(spec, first)
        checksum = write(index, data[_along(spec, first - start, last - start)])
        records.append(record_name(index, chunk_tag(key, name, index, checksum)))
    write_records(records_dir(group, name), records)


def _along(spec: ArraySpec, start: int, stop: int) -> tuple[slice, ...]:
    """The selection `start:stop` along the block dim, everything along the others."""
    return tuple(slice(start, stop) if i == spec.axis else slice(None) for i in range(spec.shape.rank))


def _check_value(value: Tensor, spec: ArraySpec, name: str, start: int, stop: int) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f'write_block writes lazyphi Tensors; got {type(value).__name__} for array {name!r}')
    got, problems = value.shape, []
    if set(got.names) != set(spec.shape.names):
        problems.append(f'dims {sorted(got.names)} instead of {sorted(spec.shape.names)}')
    else:
        for dim, size, dim_type in zip(spec.shape.names, spec.shape.sizes, spec.shape.types, strict=True):
            expected = stop - start if dim == spec.block_dim else size
            if got.get_size(dim) != expected:
                problems.append(f'{dim!r} of size {got.get_size(dim)} instead of {expected}')
            if got.get_type(dim) != dim_type:
                problems.append(f'{dim!r} of type {got.get_type(dim)} instead of {dim_type}')
    if value.dtype != spec.dtype:
        problems.append(f'dtype {value.dtype} instead of {spec.dtype}')
    if problems:
        raise ValueError(f'Cannot write a value of shape {got} into {start}:{stop} along {spec.block_dim!r} of '
                         f'array {name!r} (shape {spec.shape}, {spec.dtype}): {"; ".join(problems)}')


def write_records(records: str, names: list[str]) -> None:
    """Mark chunks complete: an empty file of each name in directory `records` (creating one again is harmless).

    The files are hard links of one empty file there, `.record` (made by the first call), where the file system
    allows: a link took 14 us where creating a file took 210 us (measured; ext4 on a busy machine), 3.5 ms per
    256 MiB of 16 MiB chunks, a tenth of `np.save`. Elsewhere, and past the file system's limit of links per
    file, each record is a file of its own.
    """
    template = os.path.join(records, RECORD_TEMPLATE)
    linking = True
    for name in names:
        path = os.path.join(records, name)
        if linking:
            try:
                _link(template, path)
                continue
            except OSError:  # no hard links on this file system, too many links, or no directory (raised below)
                linking = False
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _link(template: str, path: str) -> None:
    """Make `path` a hard link of the empty file `template`, creating that first if it is missing."""
    try:
        os.link(template, path)
    except FileExistsError:
        return
    except FileNotFoundError:
        os.close(os.open(template, os.O_CREAT | os.O_WRONLY, 0o644))
        try:
            os.link(template, path)
        except FileExistsError:
            return


def check_cache_dir_visible(cache_dir: str, client) -> None:
    """Check that every worker of a `distributed.Client` sees `cache_dir` as the host does.

    Writes a sentinel file into `cache_dir` (created if absent), asks every worker whether it can read
    it, and deletes it.

    Raises:
        CacheDirNotShared: some workers do not see the file; the message names them.
    """
    cache_dir = os.path.abspath(cache_dir)
    os.makedirs(cache_dir, exist_ok=True)
    token = uuid.uuid4().hex
    sentinel = os.path.join(cache_dir, f'.lazyphi-sentinel-{token}')
    with open(sentinel, 'w', encoding='utf-8') as f:
        f.write(token)
    try:
        answers = client.run(sees_sentinel, sentinel, token, on_error='return')
    finally:
        os.remove(sentinel)
    blind = sorted(worker for worker, seen in answers.items() if seen is not True)
    if blind:
        raise CacheDirNotShared(
            f'{len(blind)} of {len(answers)} Dask workers cannot see cache_dir {cache_dir!r} (a file the host wrote '
            f'there is missing for them): {", ".join(map(str, blind))}. cache_dir must be on a file system shared by '
            f'the host and all workers, under the same path on every machine (for example a network or cluster '
            f'file system, not /tmp or a local disk)')
