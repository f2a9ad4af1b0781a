"""Writing results to the disk cache: groups created once, blocks of whole chunks, completion records after data."""

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from lazyphi import math
from lazyphi._errors import CacheDirNotShared, ManifestDamaged
from lazyphi.backend import DType
from lazyphi.math import batch, channel, spatial
from lazyphi.storage import _chunks, _results, _write
from lazyphi.storage._results import (
    FORMAT,
    STALE_AFTER_SECONDS,
    ArraySpec,
    array_specs,
    block_complete,
    complete_chunks,
    read_manifest,
    write_manifest,
)
from lazyphi.storage._write import check_cache_dir_visible, prepare_result, write_block

KEY = '3f2a9c'
SHAPE = batch(example=10) & spatial(x=3) & channel(vector='a,b')  # chunks of 4: the last one holds 2


class Result:
    """Stands for the class whose properties a result holds."""


class Other:
    pass


FLOAT32 = DType(float, 32)


def spec(shape=SHAPE, dtype=FLOAT32, chunk=4, **kwargs) -> ArraySpec:
    return ArraySpec(shape, dtype, 'numpy', 'example', chunk, **kwargs)


def block(start: int, stop: int, seed: int = 0) -> math.Tensor:
    values = np.random.default_rng(seed + start).normal(size=(stop - start, 3, 2)).astype(np.float32)
    return math.tensor(values, batch(example=stop - start), spatial(x=3), channel(vector='a,b'))


def files_under(root) -> dict:
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, 'rb') as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


# --- preparing a result ------------------------------------------------------------------------------

def test_prepare_creates_group_manifest_arrays_and_record_dirs(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(), 'mask': spec(dtype=DType(bool))})
    assert group == os.path.join(str(tmp_path), KEY)
    assert sorted(os.listdir(group)) == ['field', 'field.done', 'lazyphi.json', 'mask', 'mask.done',
                                         'vector', 'zarr.json']  # vector: the labels, a coordinate for xarray
    manifest = read_manifest(group)
    assert manifest['format'] == FORMAT and manifest['key'] == KEY
    assert manifest['class'] == f'{__name__}:Result'
    assert manifest['arrays']['field'] == {
        'dims': ['example', 'x', 'vector'], 'types': ['batch', 'spatial', 'channel'],
        'labels': [None, None, ['a', 'b']], 'sizes': [10, 3, 2], 'dtype': 'float32', 'backend': 'numpy',
        'chunks': [4, 3, 2], 'block_dim': 'example'}
    assert manifest['arrays']['mask']['dtype'] == 'bool'
    array = zarr.open_array(os.path.join(group, 'field'), mode='r')
    assert array.shape == (10, 3, 2) and array.chunks == (4, 3, 2) and array.dtype == np.float32
    assert array.metadata.dimension_names == ('example', 'x', 'vector')
    assert array_specs(manifest) == {'field': spec(), 'mask': spec(dtype=DType(bool))}


def test_a_manifest_changed_in_place_right_after_a_read_is_read_again(tmp_path):
    """Reads reuse the parsed manifest only while the file's bytes are the same: same size, same moment, same inode."""
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    path = os.path.join(group, 'lazyphi.json')
    assert read_manifest(group) is read_manifest(group)  # parsed once
    with open(path, 'rb') as f:
        text = f.read()
    assert b'"float32"' in text
    with open(path, 'r+b') as f:  # the same length: float32 -> float16, in place
        f.write(text.replace(b'"float32"', b'"float16"'))
    with pytest.raises(ManifestDamaged, match='checksum'):
        read_manifest(group)
    with open(path, 'wb') as f:
        f.write(text)
    assert read_manifest(group)['arrays']['field']['dtype'] == 'float32'


def test_an_unlabelled_result_has_the_consolidated_metadata_zarr_writes(tmp_path):
    """Without label coordinates the group's `zarr.json` is written directly: as `zarr.consolidate_metadata` does."""
    import shutil
    import warnings

    xr = pytest.importorskip('xarray')
    plain = batch(example=10) & spatial(x=3)
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(plain), 'mask': spec(plain, dtype=DType(bool))},
                           {'speed': 2.5, 'name': 'run'})
    by_zarr = shutil.copytree(group, str(tmp_path / 'by_zarr'))
    with open(os.path.join(group, 'zarr.json')) as f:
        ours = json.load(f)
    with open(os.path.join(by_zarr, 'zarr.json'), 'w') as f:
        json.dump({k: v for k, v in ours.items() if k != 'consolidated_metadata'}, f)
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', r'Object at .* is not recognized as a component of a Zarr hierarchy')
        warnings.filterwarnings('ignore', r'Consolidated metadata is currently not part in the Zarr format 3')
        zarr.consolidate_metadata(by_zarr, zarr_format=3)
    with open(os.path.join(by_zarr, 'zarr.json')) as f:
        assert json.load(f) == ours
    assert ours['attributes'] == {'lazyphi_class': f'{__name__}:Result', 'speed': 2.5, 'name': 'run'}
    ds = xr.open_zarr(group)  # warnings are errors: it warns about nothing
    assert set(ds.data_vars) == {'field', 'mask'} and ds['field'].dims == ('example', 'x')


def test_prepare_twice_is_idempotent(tmp_path):
    first = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    write_block(first, 'field', block(0, 4), 'example', 0, 4)
    before = files_under(first)
    second = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    assert second == first
    assert files_under(first) == before  # the manifest keeps its creation time, the data stays
    assert os.listdir(tmp_path) == [KEY]


def test_prepare_accepts_a_relative_cache_dir_and_returns_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    group = prepare_result('cache', KEY, Result, {'field': spec()})
    assert os.path.isabs(group) and group == os.path.join(str(tmp_path), 'cache', KEY)


def _prepare_at_once(barrier, queue, cache_dir):
    barrier.wait()
    try:
        queue.put(prepare_result(cache_dir, KEY, Result, {'field': spec(), 'mask': spec(dtype=DType(bool))}))
    except Exception as err:
        queue.put(repr(err))


def test_concurrent_prepare_from_processes_ends_with_one_valid_group(tmp_path):
    context = multiprocessing.get_context('spawn')
    n = 4
    barrier, queue = context.Barrier(n), context.Queue()
    processes = [context.Process(target=_prepare_at_once, args=(barrier, queue, str(tmp_path))) for _ in range(n)]
    for p in processes:
        p.start()
    results = [queue.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=60)
    assert results == [os.path.join(str(tmp_path), KEY)] * n
    assert os.listdir(tmp_path) == [KEY]  # no temporary copies left behind
    assert set(read_manifest(results[0])['arrays']) == {'field', 'mask'}


def test_losing_the_race_to_create_keeps_the_winners_group(tmp_path, monkeypatch):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    write_block(group, 'field', block(0, 4), 'example', 0, 4)
    before = files_under(group)
    monkeypatch.setattr(_write.os.path, 'lexists', lambda path: False)  # as if the group appeared after the check
    assert prepare_result(str(tmp_path), KEY, Result, {'field': spec()}) == group
    assert files_under(group) == before
    assert os.listdir(tmp_path) == [KEY]


@pytest.mark.parametrize('change, difference', [
    (dict(cls=Other), "class is 'test_storage_write:Result' on disk, 'test_storage_write:Other' now"),
    (dict(arrays={'field': spec(dtype=DType(float, 64))}), "array 'field': dtype is 'float32' on disk, 'float64' now"),
    (dict(arrays={'field': spec(chunk=5)}), "array 'field': chunks is [4, 3, 2] on disk, [5, 3, 2] now"),
    (dict(arrays={'field': spec(shape=SHAPE.with_dim_size('example', 12))}), "sizes is [10, 3, 2] on disk"),
    (dict(arrays={'field': spec(), 'extra': spec()}), "arrays are ['field'] on disk, ['extra', 'field'] now"),
])
def test_prepare_refuses_a_different_result_under_the_same_key(tmp_path, change, difference):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    before = files_under(group)
    arguments = {'cls': Result, 'arrays': {'field': spec()}, **change}
    with pytest.raises(ValueError, match=KEY) as info:
        prepare_result(str(tmp_path), KEY, arguments['cls'], arguments['arrays'])
    assert difference in str(info.value) and 'delete_result' in str(info.value)
    assert files_under(group) == before  # never overwritten


@pytest.mark.parametrize('key', ['', '.hidden', 'a/b', 'zarr.json', 'lazyphi.json', 'x.done'])
def test_prepare_rejects_keys_that_cannot_name_a_directory(tmp_path, key):
    with pytest.raises(ValueError, match='cannot name a file'):
        prepare_result(str(tmp_path), key, Result, {'field': spec()})


def test_array_spec_checks_its_fields():
    with pytest.raises(ValueError, match='positive int'):
        spec(chunk=0)
    with pytest.raises(ValueError, match="'time' is not a dim"):
        ArraySpec(SHAPE, DType(float, 32), 'numpy', 'time', 4)
    with pytest.raises(ValueError, match='int sizes'):
        spec(shape=batch(example=None))
    with pytest.raises(ValueError, match='bool, int, float and complex'):
        spec(dtype=DType(object))
    with pytest.raises(ValueError, match='compressor'):
        spec(compressor='gzip')
    assert spec(dtype='float32').dtype == DType(float, 32)


# --- writing blocks ------------------------------------------------------------------------------------

def test_write_blocks_record_their_chunks_including_a_partial_last_chunk(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    assert complete_chunks(group, 'field') == set()
    write_block(group, 'field', block(0, 4), 'example', 0, 4)
    write_block(group, 'field', block(8, 10), 'example', 8, 10)
    assert complete_chunks(group, 'field') == {(0, 0, 0), (2, 0, 0)}
    assert block_complete(group, 'field', 'example', 0, 4)
    assert block_complete(group, 'field', 'example', 8, 10)
    assert not block_complete(group, 'field', 'example', 4, 8)
    assert not block_complete(group, 'field', 'example', 0, 10)
    write_block(group, 'field', block(4, 8), 'example', 4, 8)
    assert block_complete(group, 'field', 'example', 0, 10)
    records = os.path.join(group, 'field.done')
    tags = {index: _results.chunk_tag(KEY, 'field', index, _results.stored_checksum(
        os.path.join(group, 'field', _results.chunk_file_name(index)))) for index in [(0, 0, 0), (1, 0, 0), (2, 0, 0)]}
    # hard links of the empty .record, each named by its chunk and the tag of the checksum its file ends with
    assert sorted(os.listdir(records)) == ['.record', *(f'{i}.0.0.{tags[(i, 0, 0)]}' for i in range(3))]
    assert {(os.stat(os.path.join(records, n)).st_ino, os.path.getsize(os.path.join(records, n)))
            for n in os.listdir(records)} == {(os.stat(os.path.join(records, '.record')).st_ino, 0)}
    expected = np.concatenate([block(0, 4).numpy('example,x,vector'), block(4, 8).numpy('example,x,vector'),
                               block(8, 10).numpy('example,x,vector')])
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'field'), mode='r')[:], expected)


def test_records_are_files_of_their_own_where_hard_links_fail(tmp_path, monkeypatch):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    records = os.path.join(group, 'field.done')

    def no_links(source, target):
        raise PermissionError(f'no hard links on this file system: {target}')

    monkeypatch.setattr(os, 'link', no_links)
    write_block(group, 'field', block(0, 8), 'example', 0, 8)
    assert _chunks_named(records) == ['0.0.0', '1.0.0']
    assert complete_chunks(group, 'field') == {(0, 0, 0), (1, 0, 0)}
    monkeypatch.undo()
    os.remove(os.path.join(records, next(n for n in os.listdir(records) if n.startswith('0.0.0.'))))
    write_block(group, 'field', block(0, 10), 'example', 0, 10)  # links again; 1.0.0 exists already
    assert sorted(os.listdir(records))[0] == '.record' and _chunks_named(records) == ['0.0.0', '1.0.0', '2.0.0']
    assert complete_chunks(group, 'field') == {(0, 0, 0), (1, 0, 0), (2, 0, 0)}
    shutil.rmtree(records)
    with pytest.raises(FileNotFoundError):  # deleted while writing: this block's records are not made
        write_block(group, 'field', block(0, 4), 'example', 0, 4)
    prepare_result(str(tmp_path), KEY, Result, {'field': spec()})  # the next run makes the directory again
    assert complete_chunks(group, 'field') == set()
    write_block(group, 'field', block(0, 4), 'example', 0, 4)
    assert complete_chunks(group, 'field') == {(0, 0, 0)}


def _chunks_named(records: str) -> list[str]:
    """The grid positions (`3.0.0`) the records in directory `records` name, sorted."""
    parsed = [_results.parse_record(n, 3) for n in os.listdir(records)]
    return sorted('.'.join(map(str, p[0])) for p in parsed if p is not None)


def test_a_block_of_several_chunks_records_each(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(chunk=2)})
    write_block(group, 'field', block(2, 8), 'example', 2, 8)
    assert complete_chunks(group, 'field') == {(1, 0, 0), (2, 0, 0), (3, 0, 0)}
    assert block_complete(group, 'field', 'example', 2, 8)
    assert block_complete(group, 'field', 'example', 3, 5)  # any range whose chunks are all complete
    assert not block_complete(group, 'field', 'example', 0, 8)


def test_blocks_written_at_once_from_threads_are_all_recorded(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(chunk=2)})
    ranges = [(0, 2), (2, 6), (6, 8), (8, 10)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda r: write_block(group, 'field', block(*r), 'example', *r), ranges))
    assert complete_chunks(group, 'field') == {(i, 0, 0) for i in range(5)}
    expected = np.concatenate([block(*r).numpy('example,x,vector') for r in ranges])
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'field'), mode='r')[:], expected)


def test_numpy_ints_are_accepted_as_bounds(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    write_block(group, 'field', block(0, 4), 'example', np.int64(0), np.int64(4))
    assert block_complete(group, 'field', 'example', np.int32(0), np.int32(4))
    with pytest.raises(TypeError, match='int bounds'):
        block_complete(group, 'field', 'example', 0.0, 4)


def test_the_value_may_list_its_dims_in_another_order(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    value = block(0, 4)
    transposed = math.tensor(value.numpy('vector,x,example'), channel(vector='a,b'), spatial(x=3), batch(example=4))
    write_block(group, 'field', transposed, 'example', 0, 4)
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'field'), mode='r')[0:4],
                                  value.numpy('example,x,vector'))


def test_zero_blocks_are_written_as_chunks(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    write_block(group, 'field', math.zeros(batch(example=4), spatial(x=3), channel(vector='a,b')), 'example', 0, 4)
    assert os.path.isfile(os.path.join(group, 'field', 'c.0.0.0'))
    assert block_complete(group, 'field', 'example', 0, 4)


@pytest.mark.parametrize('start, stop', [(1, 4), (0, 3), (4, 9), (2, 10), (0, 11), (-4, 0), (8, 4)])
def test_misaligned_or_out_of_range_blocks_raise(tmp_path, start, stop):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    value = block(0, max(stop - start, 0))
    with pytest.raises(ValueError, match=rf"{start}:{stop} along 'example'.*'field'"):
        write_block(group, 'field', value, 'example', start, stop)
    assert complete_chunks(group, 'field') == set()


def test_blocks_along_another_dim_or_of_an_unknown_array_raise(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    with pytest.raises(ValueError, match="in blocks along 'example', not 'x'"):
        write_block(group, 'field', block(0, 4), 'x', 0, 3)
    with pytest.raises(ValueError, match=r"no array 'missing'; its arrays are \['field'\]"):
        write_block(group, 'missing', block(0, 4), 'example', 0, 4)
    with pytest.raises(ValueError, match='outside array'):
        block_complete(group, 'field', 'example', 0, 11)


@pytest.mark.parametrize('value, problem', [
    (block(0, 3), "'example' of size 3 instead of 4"),
    (math.zeros(batch(example=4), spatial(x=3)), "dims ['example', 'x'] instead of ['example', 'vector', 'x']"),
    (math.zeros(batch(example=4), spatial(x=5), channel(vector='a,b')), "'x' of size 5 instead of 3"),
    (math.zeros(batch(example=4), channel(x=3), channel(vector='a,b')), "'x' of type channel instead of spatial"),
    (math.zeros(batch(example=4), spatial(x=3), channel(vector='a,b'), dtype=DType(float, 64)),
     'dtype float64 instead of float32'),
])
def test_values_of_another_shape_or_dtype_raise(tmp_path, value, problem):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    with pytest.raises(ValueError, match="into 0:4 along 'example' of array 'field'") as info:
        write_block(group, 'field', value, 'example', 0, 4)
    assert problem in str(info.value)
    assert complete_chunks(group, 'field') == set()


def test_records_are_written_only_after_the_data(tmp_path, monkeypatch):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    seen = []

    def record_after_checking_the_data(records, names):
        seen.append([os.path.isfile(os.path.join(group, 'field', 'c.' + name.rsplit('.', 1)[0])) for name in names])
        raise OSError('killed before the records')
    monkeypatch.setattr(_write, 'write_records', record_after_checking_the_data)
    with pytest.raises(OSError, match='killed before the records'):
        write_block(group, 'field', block(0, 8), 'example', 0, 8)
    assert seen == [[True, True]]  # the chunks' data was on disk when their records were due
    assert not block_complete(group, 'field', 'example', 0, 4)
    assert complete_chunks(group, 'field') == set()


@pytest.mark.parametrize('compressor', [None, 'zstd'])
def test_a_failing_data_write_leaves_no_record_and_no_chunk(tmp_path, monkeypatch, compressor):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(compressor=compressor)})

    def disk_full(*args):
        raise OSError('disk full')
    # uncompressed chunks are files lazyphi writes itself; compressed ones go through Zarr
    monkeypatch.setattr(_chunks, '_reserve', disk_full)
    monkeypatch.setattr(zarr.Array, 'set_block_selection', disk_full)
    with pytest.raises(OSError, match='disk full'):
        write_block(group, 'field', block(0, 4), 'example', 0, 4)
    assert complete_chunks(group, 'field') == set()
    assert not [f for _, _, files in os.walk(os.path.join(group, 'field')) for f in files if f != 'zarr.json']


def test_stray_files_among_the_records_are_ignored(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    tag = '0123456789abcdef'
    for name in (f'9.0.0.{tag}', f'0.0.{tag}', f'a.0.0.{tag}', 'notes.txt', '2.0.0', f'2.0.0.{tag[1:]}',
                 f'2.0.0.{tag.upper()}', f'1.0.0.{tag}'):
        open(os.path.join(group, 'field.done', name), 'w').close()
    assert complete_chunks(group, 'field') == {(1, 0, 0)}


def test_same_inputs_write_identical_bytes(tmp_path):
    groups = []
    for run in ('first', 'second'):
        group = prepare_result(str(tmp_path / run), KEY, Result, {'field': spec(), 'mask': spec(dtype=DType(bool))})
        for start, stop in ((8, 10), (0, 4), (4, 8)):
            write_block(group, 'field', block(start, stop), 'example', start, stop)
        write_block(group, 'mask', block(0, 4) > 0, 'example', 0, 4)
        groups.append(files_under(group))
    first, second = ({k: v for k, v in g.items() if k != 'lazyphi.json'} for g in groups)
    assert first == second
    manifests = [json.loads(g['lazyphi.json']) for g in groups]
    for m in manifests:  # they differ in their time of creation, and so in their checksums, which cover it
        assert _results.checksum_problem(m) is None
        del m['created'], m['checksum']
    assert manifests[0] == manifests[1]


def test_zstd_compressed_arrays_read_back_equal(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(compressor='zstd')})
    write_block(group, 'field', block(0, 4), 'example', 0, 4)
    array = zarr.open_array(os.path.join(group, 'field'), mode='r')
    assert [c.to_dict()['name'] for c in array.metadata.codecs] == ['bytes', 'zstd', 'crc32c']
    np.testing.assert_array_equal(array[0:4], block(0, 4).numpy('example,x,vector'))


def test_writes_from_every_backend(tmp_path, backend):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec(), 'count': spec(dtype=DType(int, 64))})
    value = math.random_normal(batch(example=4), spatial(x=3), channel(vector='a,b'))
    assert value.backend is backend
    write_block(group, 'field', value, 'example', 0, 4)
    counts = math.cast(value * 10, DType(int, 64))
    write_block(group, 'count', counts, 'example', 0, 4)
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'field'), mode='r')[0:4],
                                  value.numpy('example,x,vector'))
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'count'), mode='r')[0:4],
                                  counts.numpy('example,x,vector'))


# --- killed writers -------------------------------------------------------------------------------------

KILLED_WRITER = '''
import os, pathlib, sys
from lazyphi import math
from lazyphi.math import batch, channel, spatial
from lazyphi.storage._write import write_block

def die(*args):  # the process is killed between writing a chunk's temporary file and renaming it
    os._exit(3)
os.replace = pathlib.Path.replace = die  # lazyphi's chunk files, Zarr's
write_block(sys.argv[1], 'field', math.ones(batch(example=4), spatial(x=3), channel(vector='a,b')), 'example', 0, 4)
'''


def _age(path: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_temporary_files_of_a_killed_writer_are_cleaned(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    run = subprocess.run([sys.executable, '-c', KILLED_WRITER, group], capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    left = [p for p in files_under(group) if p.endswith('.partial')]
    assert left, 'the killed writer left no temporary file: chunks are written differently now'
    assert not block_complete(group, 'field', 'example', 0, 4)
    prepare_result(str(tmp_path), KEY, Result, {'field': spec()})  # at once: their names say the writer is gone
    assert not [p for p in files_under(group) if p.endswith('.partial')]
    write_block(group, 'field', block(0, 4), 'example', 0, 4)
    assert block_complete(group, 'field', 'example', 0, 4)


def test_fresh_temporary_files_of_a_live_or_unknown_writer_stay_until_stale(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    live = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        names = [f'c.0.0.0.{_results._machine()}{live.pid:08x}{"0" * 16}.partial',  # a live writer here
                 f'c.1.0.0.{"f" * 8}{1:08x}{"0" * 16}.partial',  # a writer on another machine
                 f'c.2.0.0.{uuid.uuid4().hex}.partial']  # Zarr's own, which name no writer
        paths = [os.path.join(group, 'field', n) for n in names]
        for path in paths:
            open(path, 'w').close()
        prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
        assert all(os.path.exists(p) for p in paths)
        for path in paths:
            _age(path, STALE_AFTER_SECONDS + 1)
        prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
        assert not any(os.path.exists(p) for p in paths)
    finally:
        live.kill()
        live.wait()


def test_stale_temporary_manifests_and_group_copies_are_cleaned(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    stale_manifest = os.path.join(group, f'lazyphi.{uuid.uuid4().hex}.partial')
    fresh_manifest = os.path.join(group, f'lazyphi.{uuid.uuid4().hex}.partial')
    stale_copy = os.path.join(str(tmp_path), f'.{KEY}.{uuid.uuid4().hex}.partial')
    other_copy = os.path.join(str(tmp_path), f'.otherkey.{uuid.uuid4().hex}.partial')
    user_file = os.path.join(group, 'notes.partial')
    for path in (stale_manifest, fresh_manifest, user_file):
        open(path, 'w').close()
    for path in (stale_copy, other_copy):
        os.makedirs(os.path.join(path, 'field'))
    for path in (stale_manifest, os.path.join(stale_copy, 'field'), stale_copy, os.path.join(other_copy, 'field'),
                 other_copy, user_file):  # a copy is stale once nothing in it changed for a while
        _age(path, STALE_AFTER_SECONDS + 1)
    prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    assert not os.path.exists(stale_manifest) and not os.path.exists(stale_copy)
    assert os.path.exists(fresh_manifest) and os.path.exists(user_file)
    assert os.path.exists(other_copy)  # another result's business


# --- damaged manifests -----------------------------------------------------------------------------------

def _rewrite_manifest(group: str, change) -> None:
    path = os.path.join(group, 'lazyphi.json')
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, 'w') as f:
        json.dump(manifest, f)


@pytest.mark.parametrize('change, problem', [
    (lambda m: m.pop('arrays'), "missing entries ['arrays']"),
    (lambda m: m.update(format=1), 'format 1; this lazyphi reads format 2'),  # records without tags
    (lambda m: m.update(key='elsewhere'), "names key 'elsewhere'"),
    (lambda m: m.update(created='yesterday'), 'ISO-8601'),
    (lambda m: m['arrays']['field'].update(dtype='float'), "dtype 'float'"),
    (lambda m: m['arrays']['field'].update(sizes=[10, 3]), 'lists of equal length'),
    (lambda m: m['arrays']['field'].update(chunks=[4, 2, 2]), 'must be whole'),
    (lambda m: m['arrays']['field'].update(block_dim='time'), "block_dim 'time'"),
    (lambda m: m['arrays']['field'].update(types=['batch', 'space', 'channel']), 'types must be among'),
    (lambda m: m['arrays']['field'].update(labels=[None, None, ['a']]), 'one str per item'),
])
def test_an_invalid_manifest_raises_manifest_damaged(tmp_path, change, problem):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    _rewrite_manifest(group, change)
    with pytest.raises(ManifestDamaged, match='is invalid') as info:
        read_manifest(group)
    assert problem in str(info.value) and group in str(info.value)
    with pytest.raises(ManifestDamaged):
        prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    with pytest.raises(ManifestDamaged):
        write_block(group, 'field', block(0, 4), 'example', 0, 4)


@pytest.mark.parametrize('content', [b'{"format": 1, "key"', b'\xff\xfe', b'[1, 2]'])
def test_an_unreadable_manifest_raises_manifest_damaged(tmp_path, content):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    with open(os.path.join(group, 'lazyphi.json'), 'wb') as f:
        f.write(content)
    with pytest.raises(ManifestDamaged, match=r'lazyphi\.json') as info:
        read_manifest(group)
    assert isinstance(info.value, OSError)


def test_a_directory_without_manifest_is_not_a_result(tmp_path):
    os.makedirs(tmp_path / KEY / 'field')
    with pytest.raises(ManifestDamaged, match='is not a lazyphi result'):
        prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    assert os.listdir(tmp_path / KEY) == ['field']  # left as it was
    with pytest.raises(FileNotFoundError, match='does not exist'):
        read_manifest(str(tmp_path / 'absent'))
    (tmp_path / 'afile').write_text('')
    with pytest.raises(ManifestDamaged, match='it is a file'):
        prepare_result(str(tmp_path), 'afile', Result, {'field': spec()})


def test_manifests_are_replaced_atomically(tmp_path):
    group = prepare_result(str(tmp_path), KEY, Result, {'field': spec()})
    manifest = read_manifest(group)
    write_manifest(group, {**manifest, 'created': '2020-01-01T00:00:00+00:00'})
    assert read_manifest(group)['created'] == '2020-01-01T00:00:00+00:00'
    assert not [name for name in os.listdir(group) if name.endswith('.partial')]  # no temporary file is left


# --- the shared cache_dir check ----------------------------------------------------------------------------

class LocalClient:
    """Runs functions as `distributed.Client.run` does, with workers that see the file system under `roots`."""

    def __init__(self, roots: dict):
        self.roots = roots

    def run(self, function, path, token, on_error='raise'):
        return {worker: function(root + path, token) for worker, root in self.roots.items()}


def test_cache_dir_seen_by_every_worker_passes_and_leaves_nothing(tmp_path):
    check_cache_dir_visible(str(tmp_path / 'cache'), LocalClient({'tcp://a:1': '', 'tcp://b:2': ''}))
    assert os.listdir(tmp_path / 'cache') == []


def test_workers_that_do_not_see_the_cache_dir_are_named(tmp_path):
    elsewhere = str(tmp_path / 'other-machine')
    with pytest.raises(CacheDirNotShared, match=r'1 of 2 Dask workers cannot see cache_dir') as info:
        check_cache_dir_visible(str(tmp_path), LocalClient({'tcp://a:1': '', 'tcp://b:2': elsewhere}))
    assert 'tcp://b:2' in str(info.value) and 'tcp://a:1' not in str(info.value)
    assert 'shared by the host and all workers' in str(info.value)
    assert isinstance(info.value, OSError)
    assert os.listdir(tmp_path) == []


def test_cache_dir_check_on_a_distributed_client(tmp_path):
    distributed = pytest.importorskip('distributed')
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=':0') as client:
        check_cache_dir_visible(str(tmp_path), client)
    assert os.listdir(tmp_path) == []


def test_the_sentinel_check_reads_the_token():
    assert not _results.sees_sentinel('/nonexistent/sentinel', 'abc')
