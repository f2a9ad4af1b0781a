"""The disk cache: results in Zarr v3 groups, disk-backed tensors over them, and the memory they load into.

The only layer importing Zarr, and only where it is needed: to create groups and arrays, and to
decode or encode chunks of arrays with codecs; lazyphi reads and writes the chunk files of
uncompressed arrays itself (`_chunks.py`). The writer, save/load and DiskTensor load on first use
(PEP 562); the format helpers, the memory cache and `lazyphi.cache` need none of them. `import
lazyphi` does not import this package. Dask and xarray are imported only by `DiskTensor.to_dask()` /
`to_xarray()`.
"""

from .._errors import (
    CacheDirNotShared,
    ChunkDamaged,
    ChunkMissing,
    ManifestDamaged,
    ReplacedOnDisk,
    UnknownClassWarning,
)
from .._lazy import lazy_names as _lazy_names
from ._arguments import check_cache_dir, parse_bytes
from ._memory import (  # MEMORY: the time-to-live cache of loaded values, shared with parallel's dask-backed kind
    MEMORY,
    clear_memory_cache,
    current_load_backend,
    load_cache_as,
    on_load_into_memory,
    set_cache_ttl,
    worker_load_backend,
)
from ._out_of_core import reduce_in_pieces
from ._results import (
    COMPRESSORS,
    FORMAT,
    ArraySpec,
    array_spec,
    block_chunks,
    block_complete,
    complete_chunks,
    completion,
    delete_group,
    leftovers,
    read_manifest,
    remove_entry,
    result_groups,
)

# names loaded on first use -> their modules
_LAZY = {'DiskTensor': '._disk', 'disk_tensor': '._disk', 'get_cache_files': '._disk',
         'prepare_result': '._write', 'write_block': '._write', 'check_cache_dir_visible': '._write',
         'save': '._save', 'load': '._save', 'memmap': '._memmap',
         'load_memmap': '._memmap', 'save_metadata': '._memmap', 'share_value': '._memmap', 'assign': '._memmap',
         'consolidated': '._memmap'}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)


__all__ = [
    'COMPRESSORS', 'FORMAT', 'MEMORY', 'ArraySpec', 'CacheDirNotShared', 'ChunkDamaged', 'ChunkMissing', 'DiskTensor',
    'ManifestDamaged', 'ReplacedOnDisk', 'UnknownClassWarning', 'array_spec', 'assign', 'block_chunks',
    'block_complete', 'check_cache_dir', 'check_cache_dir_visible', 'clear_memory_cache', 'complete_chunks',
    'completion', 'consolidated', 'current_load_backend', 'delete_group', 'disk_tensor', 'get_cache_files', 'leftovers',
    'load', 'load_cache_as', 'load_memmap', 'memmap', 'on_load_into_memory', 'parse_bytes', 'prepare_result',
    'read_manifest', 'reduce_in_pieces', 'remove_entry', 'result_groups', 'save', 'save_metadata', 'set_cache_ttl',
    'share_value', 'worker_load_backend', 'write_block',
]
