"""Disk-backed tensors: what they read (only the chunks touched), what they never read, and what they equal.

The stores here are written by `_write_result` straight from the on-disk format (a Zarr v3 group named by
the key, the manifest `lazyphi.json`, `<array>.done/` completion records tagged as `_results.chunk_tag` says),
independently of lazyphi's writer.
"""

import dataclasses
import functools
import itertools
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.storage import LocalStore

from lazyphi import math
from lazyphi.backend import NUMPY
from lazyphi.math import batch, channel, spatial
from lazyphi.storage import (
    ChunkDamaged,
    ChunkMissing,
    DiskTensor,
    _chunks,
    _disk,
    _memory,
    _results,
    clear_memory_cache,
    current_load_backend,
    disk_tensor,
    get_cache_files,
    load_cache_as,
    set_cache_ttl,
    worker_load_backend,
)

DATA = np.arange(8 * 6 * 4, dtype=np.float32).reshape(8, 6, 4) / 7
SHAPE = batch(time=8) & spatial(x=6, y=4)
CHUNK = 2  # along time: the array has the chunk grid (4, 1, 1)


def _write_result(cache_dir, key: str, arrays: dict, done=None, compressors=None, backend: str = 'numpy') -> str:
    """Write a result as lazyphi's format specifies; `arrays` maps names to (values, Shape, chunk along dim 0).

    `done`: grid indices of the chunks to record as complete per array name (default: all).
    """
    group = os.path.join(cache_dir, key)
    root = zarr.open_group(LocalStore(group), mode='w', zarr_format=3)
    entries = {}
    for name, (values, shape, chunk) in arrays.items():
        chunks = (chunk, *shape.sizes[1:])
        array = root.create_array(name, shape=values.shape, chunks=chunks, dtype=values.dtype,
                                  compressors=compressors, fill_value=0)
        array[...] = values
        records = os.path.join(group, name + '.done')
        os.makedirs(records)
        grid = [range(-(-s // c)) for s, c in zip(values.shape, chunks, strict=True)]
        meta = _chunks.read_metadata(os.path.join(group, name))
        summed = _chunks.codec_names(meta)[-1:] == ['crc32c']
        for index in (done or {}).get(name, itertools.product(*grid)):
            file = _chunks.chunk_file(os.path.join(group, name), meta, index)
            tag = _results.chunk_tag(key, name, index, _results.stored_checksum(file) if summed else None)
            open(os.path.join(records, '.'.join((*map(str, index), tag))), 'wb').close()
        entries[name] = {'dims': list(shape.names), 'types': list(shape.types),
                         'labels': [None if lab is None else list(lab) for lab in shape.labels],
                         'sizes': list(shape.sizes), 'dtype': str(np.dtype(values.dtype)), 'backend': backend,
                         'chunks': list(chunks), 'block_dim': shape.names[0]}
    manifest = {'format': _results.FORMAT, 'key': key, 'class': 'tests.test_storage_disk:Result',
                'created': '2025-01-01T00:00:00+00:00', 'arrays': entries}
    with open(os.path.join(group, 'lazyphi.json.tmp'), 'w') as f:
        json.dump(manifest, f)
    os.replace(os.path.join(group, 'lazyphi.json.tmp'), os.path.join(group, 'lazyphi.json'))
    return group


@pytest.fixture(autouse=True)
def fresh_memory():
    clear_memory_cache()
    set_cache_ttl(60)
    yield
    clear_memory_cache()
    set_cache_ttl(_memory.DEFAULT_TTL)


@pytest.fixture
def group(tmp_path):
    labels = np.arange(8 * 3, dtype=np.int64).reshape(8, 3)
    return _write_result(tmp_path, 'a1b2', {'values': (DATA, SHAPE, CHUNK),
                                            'labelled': (labels, batch(time=8) & channel(vector='a,b,c'), 4)})


@pytest.fixture
def values(group) -> DiskTensor:
    return disk_tensor(group, 'values')


@pytest.fixture
def dense():
    return math.tensor(DATA, SHAPE)


@pytest.fixture
def reads(monkeypatch) -> list:
    """Files read from stores while the test runs (metadata and chunks), by lazyphi's own chunk-file reader
    (uncompressed arrays) and through Zarr's LocalStore (arrays with codecs) alike: '<array>/c/1/0/0'."""
    keys = []
    original = LocalStore.get

    async def counting_get(self, key, prototype=None, byte_range=None):
        keys.append(key)
        return await original(self, key, prototype, byte_range)

    def seen(path) -> None:  # '.../values/c/1/0/0' or '.../values/c.1.0.0' -> 'values/c/1/0/0'
        parts = os.fspath(path).split(os.sep)
        if parts[-1].startswith('c.'):
            parts = [*parts[:-1], *parts[-1].split('.')]
        keys.append('/'.join(parts[parts.index('c') - 1:] if 'c' in parts else parts[-2:]))

    def counting_open(path, *args, **kwargs):
        seen(path)
        return open(path, *args, **kwargs)

    original_chunk = _chunks._open_chunk
    monkeypatch.setattr(LocalStore, 'get', counting_get)
    monkeypatch.setattr(_chunks, 'open', counting_open, raising=False)
    monkeypatch.setattr(_chunks, '_open_chunk', lambda path: seen(path) or original_chunk(path))
    _disk._open_chunks.cache_clear()  # so that opening an array's metadata is seen too
    return keys


def _chunk_keys(keys) -> set:
    """The chunk keys among store keys ('values/c/1/0/0' -> ('values', (1, 0, 0)))."""
    found = set()
    for key in keys:
        array, _, rest = key.partition('/c/')
        if rest:
            found.add((array, tuple(int(i) for i in rest.split('/'))))
    return found


@pytest.fixture
def loads():
    """Tensors loaded into memory while the test runs, as seen by an `on_load_into_memory` callback."""
    loaded = []

    def record(tensor):
        loaded.append(tensor)

    _memory.on_load_into_memory(record)
    yield loaded
    with _memory._callbacks_lock:
        _memory._callbacks.remove(record)


# --- what slicing reads ----------------------------------------------------------------------------------

def test_one_element_along_the_block_dim_reads_its_chunk_only(values, reads, loads):
    one = values.time[3]
    assert type(one) is DiskTensor and one.shape == spatial(x=6, y=4)
    assert not _chunk_keys(reads) and not loads
    np.testing.assert_array_equal(one.numpy('x,y'), DATA[3])
    assert _chunk_keys(reads) == {('values', (1, 0, 0))}
    assert loads == [one]
    assert loads[0].source == loads[0].path == os.path.join(values.store, 'values')  # phiml's name: where it lies


@pytest.mark.parametrize(('select', 'expected', 'chunks'), [
    (lambda t: t.time[1:6], DATA[1:6], {0, 1, 2}),
    (lambda t: t.time[(7, 0, 7)], DATA[[7, 0, 7]], {0, 3}),
    (lambda t: t.time[::-3], DATA[::-3], {3, 2, 0}),
    (lambda t: t.time[2:8].time[1:3].x[4], DATA[3:5, 4], {1, 2}),
    (lambda t: t[{'time': slice(6, None), 'y': (3, 1)}], DATA[6:][:, :, [3, 1]], {3}),
])
def test_selections_read_exactly_the_chunks_they_touch(values, reads, select, expected, chunks):
    view = select(values)
    assert not _chunk_keys(reads)
    np.testing.assert_array_equal(view.numpy(view.shape.names), expected)
    assert _chunk_keys(reads) == {('values', (c, 0, 0)) for c in chunks}


def test_selections_compose_on_the_full_array(group, values):
    view = values.time[2:8].time[1:3].x[4]
    assert view.selection == {'time': slice(3, 5), 'x': 4}
    assert view.shape == batch(time=2) & spatial(y=4)
    direct = disk_tensor(group, 'values', {'time': slice(3, 5), 'x': 4})
    assert direct.selection == view.selection and direct.shape == view.shape
    assert values.time[::-1].selection == {'time': slice(7, None, -1)}
    np.testing.assert_array_equal(values.time[::-1].time[:2].numpy('time,x,y'), DATA[[7, 6]])


def test_empty_selection_reads_nothing(values, reads):
    assert values.time[3:3].numpy('time,x,y').shape == (0, 6, 4)
    assert not _chunk_keys(reads)


def test_labels_select_on_disk(group):
    labelled = disk_tensor(group, 'labelled')
    picked = labelled.vector['c,a']
    assert type(picked) is DiskTensor and picked.shape.get_item_names('vector') == ('c', 'a')
    expected = np.arange(24).reshape(8, 3)[:, [2, 0]]
    np.testing.assert_array_equal(picked.numpy('time,vector'), expected)
    np.testing.assert_array_equal(labelled['b'].numpy(), np.arange(24).reshape(8, 3)[:, 1])


def test_rename_stays_on_disk(values, loads):
    renamed = math.rename_dims(values, 'x', 'u')
    assert type(renamed) is DiskTensor and renamed.shape.names == ('time', 'u', 'y') and not loads
    assert renamed.u[2].selection == {'x': 2}
    np.testing.assert_array_equal(renamed.u[2].numpy('time,y'), DATA[:, 2])
    retyped = math.rename_dims(values.time[0], 'y', channel('c'))
    assert retyped.shape == spatial(x=6) & channel(c=4)


# --- printing, pickling, tokenizing load nothing ---------------------------------------------------------------

def test_printing_and_pickling_load_nothing(values, reads, loads):
    view = values.time[2:5]
    text = repr(view)
    assert 'float32' in text and view.path in text and 'time=2:5' in text and '(timeᵇ=3' in text
    pickled = pickle.dumps(view)
    assert len(pickled) < 1024, len(pickled)
    assert b'zarr' not in pickled
    restored = pickle.loads(pickled)
    assert type(restored) is DiskTensor and restored.shape == view.shape and restored.selection == view.selection
    assert repr(restored) == text
    assert reads == [] and loads == []  # not even metadata: unpickling opens nothing
    np.testing.assert_array_equal(restored.numpy('time,x,y'), DATA[2:5])
    assert len(loads) == 1


def test_dask_token_is_deterministic_and_reads_nothing(values, reads, loads):
    from dask.base import tokenize
    assert tokenize(values.time[1]) == tokenize(values.time[1:3].time[0])
    assert tokenize(values.time[1]) != tokenize(values.time[2])
    assert tokenize(values) != tokenize(math.rename_dims(values, 'x', 'u'))
    assert reads == [] and loads == []


def test_available_only_while_in_memory(values, loads):
    assert not values.available
    assert 'DiskTensor' in repr(values)
    values.numpy()
    assert values.available and not values.time[1].available
    clear_memory_cache()
    assert not values.available


# --- missing and damaged chunks ---------------------------------------------------------------------------

def test_missing_chunk_is_an_error_naming_store_array_and_chunk(tmp_path, reads):
    done = {'values': [(0, 0, 0), (1, 0, 0)]}
    group = _write_result(tmp_path, 'k', {'values': (DATA, SHAPE, CHUNK)}, done=done)
    values = disk_tensor(group, 'values')
    np.testing.assert_array_equal(values.time[:4].numpy('time,x,y'), DATA[:4])  # complete chunks read fine
    reads.clear()
    with pytest.raises(ChunkMissing) as info:
        math.sum(values.time[5])
    message = str(info.value)
    assert group in message and "'values'" in message and '2.0.0' in message and 'same cache_dir' in message
    assert isinstance(info.value, OSError)
    assert (info.value.store, info.value.array, info.value.chunk) == (group, 'values', (2, 0, 0))
    assert not _chunk_keys(reads)  # the records are checked before any data is read
    with pytest.raises(ChunkMissing, match='1 more'):
        values.numpy()


def test_truncated_chunk_is_damaged(group, values):
    with open(os.path.join(group, 'values', 'c', '1', '0', '0'), 'r+b') as f:
        f.truncate(10)
    with pytest.raises(ChunkDamaged) as info:
        values.time[2:4].numpy()
    assert isinstance(info.value, OSError)
    assert '1.0.0' in str(info.value) and group in str(info.value) and info.value.chunk == (1, 0, 0)
    np.testing.assert_array_equal(values.time[4:].numpy('time,x,y'), DATA[4:])


def test_corrupted_chunk_with_checksum_is_damaged(tmp_path):
    group = _write_result(tmp_path, 'crc', {'values': (DATA, SHAPE, CHUNK)}, compressors=[Crc32cCodec()])
    path = os.path.join(group, 'values', 'c', '3', '0', '0')
    with open(path, 'r+b') as f:
        f.seek(5)
        byte = f.read(1)
        f.seek(5)
        f.write(bytes([byte[0] ^ 0xFF]))
    values = disk_tensor(group, 'values')
    with pytest.raises(ChunkDamaged, match=r'3\.0\.0.*checksum'):
        math.mean(values)
    np.testing.assert_array_equal(values.time[:6].numpy('time,x,y'), DATA[:6])


def test_missing_array_and_result_are_clear_errors(group, tmp_path):
    with pytest.raises(ValueError, match=r"no array 'nope'.*'labelled', 'values'"):
        disk_tensor(group, 'nope')
    with pytest.raises(FileNotFoundError):
        disk_tensor(tmp_path / 'absent', 'values')
    with pytest.raises(KeyError, match='lacks'):
        disk_tensor(group, 'values', {'z': 1})


# --- the memory cache -----------------------------------------------------------------------------------------

def test_second_use_within_ttl_does_not_reload(values, loads):
    set_cache_ttl(60)
    first = math.sum(values, 'x')
    second = math.sum(values, 'x')
    math.assert_close(first, second)
    assert len(loads) == 1


def test_use_after_expiry_reloads(values, loads):
    set_cache_ttl(0.25)
    values.numpy()
    values.numpy()
    assert len(loads) == 1
    time.sleep(0.5)
    assert not values.available
    values.numpy()
    assert len(loads) == 2


def test_expired_data_is_freed_without_further_use(values):
    set_cache_ttl(0.05)
    values.numpy()
    deadline = time.monotonic() + 5
    while len(_memory.MEMORY) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_memory.MEMORY) == 0


def test_no_ttl_loads_on_every_use(values, loads):
    values.numpy()
    set_cache_ttl(None)
    assert not values.available
    values.numpy()
    values.numpy()
    assert len(loads) == 3 and not values.available
    with pytest.raises(ValueError, match='seconds'):
        set_cache_ttl(-1)


def test_threads_loading_the_same_data_load_it_once(values, loads, monkeypatch):
    original = _disk.read_selection

    def slow_read(info, selection):
        time.sleep(0.05)
        return original(info, selection)

    monkeypatch.setattr(_disk, 'read_selection', slow_read)
    views = [values, values.time[1], values.time[1:3], values]
    barrier = threading.Barrier(16)

    def use(i: int):
        barrier.wait()
        view = views[i % len(views)]
        return view.numpy(view.shape.names)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(use, range(16)))
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result, [DATA, DATA[1], DATA[1:3], DATA][i % 4])
    assert len(loads) == 3  # one per distinct selection


def test_a_failed_load_fails_every_waiting_thread(tmp_path):
    group = _write_result(tmp_path, 'k', {'values': (DATA, SHAPE, CHUNK)}, done={'values': []})
    values = disk_tensor(group, 'values')
    barrier = threading.Barrier(4)

    def use(_):
        barrier.wait()
        with pytest.raises(ChunkMissing):
            values.numpy()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(use, range(4)))
    assert len(_memory.MEMORY) == 0


# --- backends ----------------------------------------------------------------------------------------------

def test_load_cache_as_context_and_getters():
    assert current_load_backend() is None and worker_load_backend() is None
    with load_cache_as('numpy', worker_backend=NUMPY):
        assert current_load_backend() is NUMPY and worker_load_backend() is NUMPY
        with load_cache_as(NUMPY):
            assert worker_load_backend() is NUMPY  # an inner block without a worker backend keeps the outer one
    assert current_load_backend() is None and worker_load_backend() is None
    with pytest.raises(ValueError, match='nosuchlib'), load_cache_as('nosuchlib'):
        pass


def test_load_cache_as_torch_gives_torch_natives(values):
    torch = pytest.importorskip('torch', reason='torch is not installed')
    with load_cache_as('torch'):
        assert values.backend.name == 'torch'
        native = values.time[1].native('x,y')
        assert isinstance(native, torch.Tensor) and native.dtype == torch.float32
        np.testing.assert_array_equal(native.numpy(), DATA[1])
    assert isinstance(values.time[1].native(), np.ndarray)


def test_values_load_as_their_source_backend(tmp_path):
    torch = pytest.importorskip('torch', reason='torch is not installed')
    group = _write_result(tmp_path, 'k', {'values': (DATA, SHAPE, CHUNK)}, backend='torch')
    values = disk_tensor(group, 'values')
    assert isinstance(values.native(), torch.Tensor)
    with load_cache_as('numpy'):
        assert isinstance(values.native(), np.ndarray)


def test_unknown_source_backend_says_how_to_load_anyway(tmp_path):
    group = _write_result(tmp_path, 'k', {'values': (DATA, SHAPE, CHUNK)}, backend='nosuchlib')
    values = disk_tensor(group, 'values')
    with pytest.raises(ValueError, match='load_cache_as'):
        values.numpy()
    with load_cache_as('numpy'):
        np.testing.assert_array_equal(values.numpy('time,x,y'), DATA)


# --- operations equal those on the loaded values ------------------------------------------------------------

@pytest.mark.parametrize('operation', [
    lambda t, d: math.sum(t, 'x'),
    lambda t, d: math.mean(t),
    lambda t, d: math.max(t, 'time'),
    lambda t, d: math.std(t.time[2:7], 'y'),
    lambda t, d: math.fft(t),
    lambda t, d: t * d + 1,
    lambda t, d: d.time[3] - t.time[3],
    lambda t, d: math.sqrt(abs(-t)),
    lambda t, d: math.where(t > 10, t, d * 2),
    lambda t, d: math.stack([t.time[0], t.time[5]], batch('pair')),
    lambda t, d: math.concat([t.time[6:], d.time[:2]], 'time'),
    lambda t, d: t.x[1:4] ** 2 / 3,
])
def test_operations_equal_those_on_dense_values(values, dense, operation):
    math.assert_close(operation(values, dense), operation(dense, dense), rel_tolerance=1e-6)


# --- concatenation ----------------------------------------------------------------------------------------

def test_concat_of_consecutive_slices_stays_on_disk(values, reads, loads):
    joined = math.concat([values.time[0:3], values.time[3:5], values.time[5:]], 'time')
    assert type(joined) is DiskTensor and joined.selection == {} and joined.shape == values.shape
    middle = math.concat([values.time[5:7].x[2], values.time[7:8].x[2]], 'time')
    assert type(middle) is DiskTensor and middle.selection == {'time': slice(5, 8), 'x': 2}
    assert reads == [] and loads == []
    np.testing.assert_array_equal(joined.numpy('time,x,y'), DATA)


def test_concat_of_other_pieces_of_one_array_stays_on_disk(values, loads):
    joined = math.concat([values.time[6:], values.time[:2]], 'time')
    assert type(joined) is DiskTensor and joined.selection == {'time': (6, 7, 0, 1)} and not loads
    np.testing.assert_array_equal(joined.numpy('time,x,y'), DATA[[6, 7, 0, 1]])


def test_concat_with_other_tensors_loads(group, values, dense, loads):
    labelled = disk_tensor(group, 'labelled')
    assert type(math.concat([values.time[:2], dense.time[2:]], 'time')) is not DiskTensor
    assert type(math.concat([values.time[:2], values.time[2:].y[:4]], 'time')) is DiskTensor
    mixed = math.concat([values.time[:2].x[0].y[0], labelled.time[2:].vector[0]], 'time')
    assert type(mixed) is not DiskTensor and len(loads) == 3


# --- out-of-core access ---------------------------------------------------------------------------------------

def test_to_dask_is_lazy_and_chunked_as_stored(values, reads, loads):
    pytest.importorskip('dask.array', reason='dask is not installed')
    view = values.time[1:7].x[2]
    array = view.to_dask()
    assert array.shape == (6, 4) and array.dtype == np.float32
    assert array.chunks == ((1, 2, 2, 1), (4,))
    assert array.name == view.to_dask().name  # deterministic
    assert any('lazyphi-disk' in str(key) for key in array.__dask_graph__())
    assert not _chunk_keys(reads) and not loads
    np.testing.assert_array_equal(array.compute(scheduler='sync'), DATA[1:7, 2])
    assert _chunk_keys(reads) == {('values', (c, 0, 0)) for c in range(4)}
    odd = values.time[(5, 0, 5)].y[::-1]
    np.testing.assert_array_equal(odd.to_dask().compute(scheduler='sync'), DATA[[5, 0, 5]][:, :, ::-1])


def test_to_dask_checks_completion_records(tmp_path):
    pytest.importorskip('dask.array', reason='dask is not installed')
    group = _write_result(tmp_path, 'k', {'values': (DATA, SHAPE, CHUNK)}, done={'values': [(0, 0, 0)]})
    array = disk_tensor(group, 'values').to_dask()
    np.testing.assert_array_equal(array[:2].compute(scheduler='sync'), DATA[:2])
    with pytest.raises(ChunkMissing, match='is missing'):
        array.compute(scheduler='sync')


def test_to_xarray_has_dim_names_and_labels_and_reads_lazily(group, reads):
    array = disk_tensor(group, 'labelled').time[2:5].to_xarray()
    assert array.dims == ('time', 'vector') and list(array.coords['vector'].values) == ['a', 'b', 'c']
    assert array.name == 'labelled' and not _chunk_keys(reads)  # nothing read yet: dask-backed
    np.testing.assert_array_equal(array.sel(vector='b').values, np.arange(24).reshape(8, 3)[2:5, 1])
    assert _chunk_keys(reads) == {('labelled', (0, 0)), ('labelled', (1, 0))}  # chunks of 4 along time


def test_to_xarray_without_xarray_says_how_to_install_it(group, monkeypatch):
    monkeypatch.setitem(sys.modules, 'xarray', None)  # import xarray now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "xarray"'):
        disk_tensor(group, 'labelled').to_xarray()


# --- files referenced by trees ----------------------------------------------------------------------------------

@dataclasses.dataclass
class _Holder:
    data: math.Tensor
    more: list

    @functools.cached_property
    def cached(self):
        return self.more[1]['labels'].time[0]


def test_get_cache_files_of_a_dataclass(group, values, dense):
    labelled = disk_tensor(group, 'labelled')
    holder = _Holder(values.time[1], [dense, {'labels': math.rename_dims(labelled, 'vector', 'v')}])
    assert get_cache_files(holder) == {values.path, labelled.path}
    only_cached = _Holder(dense, [dense, {'labels': labelled}])
    only_cached.cached  # noqa: B018 - fills the cache
    only_cached.more = [dense]
    assert get_cache_files(only_cached) == {labelled.path}
    assert get_cache_files((values, [values], {'a': 1.0})) == {os.path.join(group, 'values')}
    assert get_cache_files(math.expand(values.time[0], batch(b=2))) == {values.path}


def _top_modules_after(code: str) -> set:
    code = f'import json, sys\n{code}\nprint(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))'
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_zarr_is_imported_only_to_decode_compressed_chunks_and_dask_never(group, tmp_path):
    assert not {'zarr', 'dask', 'xarray'} & _top_modules_after('import lazyphi.storage')
    read = 'from lazyphi.storage import disk_tensor\ndisk_tensor({!r}, "values").time[1:5].numpy()'
    assert not {'zarr', 'dask', 'xarray'} & _top_modules_after(read.format(group))  # chunk files, read directly
    compressed = _write_result(tmp_path, 'zstd', {'values': (DATA, SHAPE, CHUNK)}, compressors=[ZstdCodec()])
    used = _top_modules_after(read.format(compressed))
    assert 'zarr' in used and not {'dask', 'xarray'} & used


def test_reads_what_lazyphis_writer_wrote(tmp_path):
    write = pytest.importorskip('lazyphi.storage._write', reason='the writer is not there yet')
    from lazyphi.storage._results import ArraySpec

    spec = ArraySpec(SHAPE, NUMPY.dtype(DATA), 'numpy', 'time', CHUNK)
    group = write.prepare_result(str(tmp_path), 'cafe', _Holder, {'values': spec})
    write.write_block(group, 'values', math.tensor(DATA[:4], SHAPE.with_dim_size('time', 4)), 'time', 0, 4)
    values = disk_tensor(group, 'values')
    np.testing.assert_array_equal(values.time[1:4].numpy('time,x,y'), DATA[1:4])
    with pytest.raises(ChunkMissing, match=r'2\.0\.0'):
        values.time[4].numpy()
