"""Chunk files of uncompressed arrays: lazyphi's own reader and writer agree with Zarr byte for byte, and
the selection reader returns what NumPy's indexing does, chunk layout and codec whatever they are."""

import itertools
import json
import os
import threading

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.storage import LocalStore

from lazyphi.backend import DType, to_numpy_dtype
from lazyphi.math import batch, spatial
from lazyphi.storage import ChunkDamaged, _chunks
from lazyphi.storage._chunks import ChunkFiles, chunk_files
from lazyphi.storage._disk import DiskArray, read_selection

SHAPE = (7, 5, 3)
CHUNKS = (3, 2, 3)  # chunked along two axes, with edge chunks along both
ROWS = (3, 5, 3)  # chunked along the first axis only, as the disk cache and lazyphi.save chunk arrays
DATA = np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE) * 1.5 - 20
CODECS = {'raw': None, 'crc32c': [Crc32cCodec()], 'zstd': [ZstdCodec(level=1)]}


def _zarr_array(path, values: np.ndarray, chunks: tuple, compressors=None, **kwargs):
    array = zarr.create_array(LocalStore(str(path)), shape=values.shape, chunks=chunks, dtype=values.dtype,
                              compressors=compressors, fill_value=0, config={'write_empty_chunks': True}, **kwargs)
    array[...] = values
    return array


def _whole(files: ChunkFiles, index: tuple) -> np.ndarray:
    """The chunk at `index` as stored: the full chunk shape, padding included."""
    out = np.empty(files.chunks, files.dtype)
    whole = tuple(range(c) for c in files.chunks)
    files.read_into(index, whole, out, whole)
    return out


def _info(path, chunks: tuple = CHUNKS, dtype=DATA.dtype, shape: tuple = SHAPE) -> DiskArray:
    store, name = os.path.split(str(path))
    dims = batch(a=shape[0]) & spatial(x=shape[1], y=shape[2])
    return DiskArray(store, name, 'key', '2025-01-01T00:00:00+00:00', dims, str(np.dtype(dtype)), 'numpy', chunks, 1)


def _records(path, chunks: tuple = CHUNKS, shape: tuple = SHAPE) -> None:
    records = f'{path}.done'
    os.makedirs(records)
    for index in itertools.product(*(range(-(-s // c)) for s, c in zip(shape, chunks, strict=True))):
        open(os.path.join(records, '.'.join(map(str, index))), 'wb').close()


@pytest.fixture(scope='module', params=[(codec, chunks) for codec in sorted(CODECS) for chunks in (CHUNKS, ROWS)],
                ids=lambda p: f'{p[0]}-{"x".join(map(str, p[1]))}')
def stored(request, tmp_path_factory) -> DiskArray:
    codec, chunks = request.param
    path = tmp_path_factory.mktemp(codec) / 'values'
    _zarr_array(path, DATA, chunks, CODECS[codec])
    _records(path, chunks)
    return _info(path, chunks)


# --- which arrays are read as files ------------------------------------------------------------------------

@pytest.mark.parametrize(('codec', 'direct'), [('raw', True), ('crc32c', True), ('zstd', False)])
def test_only_arrays_with_the_bytes_codec_and_a_checksum_are_read_as_files(tmp_path, codec, direct):
    _zarr_array(tmp_path / 'a', DATA, CHUNKS, CODECS[codec])
    files = chunk_files(str(tmp_path / 'a'))
    assert (files is not None) == direct
    if direct:
        assert files == ChunkFiles(str(tmp_path / 'a'), SHAPE, CHUNKS, np.dtype('<f8'), '/', codec == 'crc32c')


def test_big_endian_arrays_and_other_key_encodings_go_through_zarr(tmp_path):
    _zarr_array(tmp_path / 'big', DATA.astype('>f8'), CHUNKS)
    big = chunk_files(str(tmp_path / 'big'))
    assert big is None or big.dtype == np.dtype('<f8')  # Zarr may store it little-endian
    _zarr_array(tmp_path / 'v2keys', DATA, CHUNKS, chunk_key_encoding={'name': 'v2', 'separator': '.'})
    assert chunk_files(str(tmp_path / 'v2keys')) is None
    dotted = _zarr_array(tmp_path / 'dots', DATA, CHUNKS, chunk_key_encoding={'name': 'default', 'separator': '.'})
    files = chunk_files(str(tmp_path / 'dots'))
    assert files.separator == '.' and os.path.exists(files.file((2, 1, 0)))
    np.testing.assert_array_equal(_whole(files, (2, 1, 0))[:1, :1], dotted[6:, 2:4][:, :1])


# --- lazyphi's files are Zarr's files --------------------------------------------------------------------------

@pytest.mark.parametrize('codec', ['raw', 'crc32c'])
@pytest.mark.parametrize('dtype', ['bool', 'int8', 'uint16', 'int64', 'float16', 'float32', 'complex64',
                                   'complex128'])
def test_files_written_by_lazyphi_read_back_by_zarr_and_the_other_way(tmp_path, dtype, codec):
    values = (np.arange(np.prod(SHAPE)).reshape(SHAPE) % 5 * (1 + 1j if 'complex' in dtype else 1)).astype(dtype)
    by_zarr = _zarr_array(tmp_path / 'zarr', values, CHUNKS, CODECS[codec])
    _zarr_array(tmp_path / 'lazyphi', np.zeros_like(values), CHUNKS, CODECS[codec])
    files, theirs = chunk_files(str(tmp_path / 'lazyphi')), chunk_files(str(tmp_path / 'zarr'))
    for index in itertools.product(*(range(-(-s // c)) for s, c in zip(SHAPE, CHUNKS, strict=True))):
        part = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, CHUNKS, strict=True))
        files.write(index, values[part])  # clipped at the edges; the file is padded as Zarr pads
        with open(files.file(index), 'rb') as a, open(theirs.file(index), 'rb') as b:
            assert a.read() == b.read()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / 'lazyphi'), mode='r')[...], values)
    np.testing.assert_array_equal(_whole(theirs, (2, 2, 0))[:1, :1], by_zarr[6:, 4:])


@pytest.mark.parametrize('dtype', [DType(bool), DType(int, 8), DType(int, 16, unsigned=True), DType(int, 64),
                                   DType(float, 16), DType(float, 64), DType(complex, 64), DType(complex, 128)])
@pytest.mark.parametrize('compressor', [None, 'zstd'])
@pytest.mark.parametrize('sizes, chunks, names', [((7, 5), (3, 5), ('a', 'x')), ((), (), None),
                                                  ((0, 4), (1, 4), ('a', 'y'))])
def test_the_metadata_lazyphi_writes_is_what_zarr_writes(tmp_path, dtype, compressor, sizes, chunks, names):
    """`create_group` / `create_array` write the `zarr.json` files Zarr's API writes for the same arguments."""
    _chunks.create_group(str(tmp_path / 'ours'))
    _chunks.create_array(str(tmp_path / 'ours'), 'values', sizes, chunks, dtype, names, compressor)
    zarr.create_group(str(tmp_path / 'zarrs'))
    zarr.create_array(str(tmp_path / 'zarrs'), name='values', shape=sizes, chunks=chunks,
                      dtype=to_numpy_dtype(dtype), fill_value=False if dtype.kind is bool else 0,
                      compressors=[ZstdCodec(level=_chunks.ZSTD_LEVEL), Crc32cCodec()] if compressor else
                      [Crc32cCodec()], dimension_names=names, chunk_key_encoding={'name': 'default', 'separator': '.'})
    for node in ('zarr.json', os.path.join('values', 'zarr.json')):
        with open(tmp_path / 'ours' / node) as ours, open(tmp_path / 'zarrs' / node) as zarrs:
            assert json.load(ours) == json.load(zarrs)
    with pytest.raises(FileExistsError):
        _chunks.create_array(str(tmp_path / 'ours'), 'values', sizes, chunks, dtype, names, compressor)


def test_an_array_in_a_missing_group_creates_the_group_as_zarr_does(tmp_path):
    _chunks.create_group(str(tmp_path))
    _chunks.create_array(str(tmp_path), 'a/b/c', (2,), (2,), DType(float, 32), ('x',))
    assert zarr.open_group(str(tmp_path), mode='r')['a/b/c'].shape == (2,)
    assert json.loads((tmp_path / 'a' / 'b' / 'zarr.json').read_text())['node_type'] == 'group'
    with pytest.raises(TypeError, match='not <U'):
        _chunks.create_array(str(tmp_path), 'text', (2,), (2,), DType(str), ('x',))


def test_a_zero_dimensional_array_is_one_file(tmp_path):
    array = _zarr_array(tmp_path / 'scalar', np.array(2.5, np.float32), ())
    files = chunk_files(str(tmp_path / 'scalar'))
    assert files.file(()) == os.path.join(str(tmp_path / 'scalar'), 'c') and _whole(files, ()) == 2.5
    files.write((), np.array(-1.0, np.float32))
    assert array[()] == -1.0


def test_a_chunk_file_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    _zarr_array(tmp_path / 'a', DATA, CHUNKS)
    files = chunk_files(str(tmp_path / 'a'))
    before = _whole(files, (1, 1, 0)).copy()

    class Full(OSError):
        pass

    def failing_reserve(fd, nbytes):
        os.write(fd, b'half a chunk')
        raise Full('no space left')

    monkeypatch.setattr(_chunks, '_reserve', failing_reserve)
    with pytest.raises(Full):
        files.write((1, 1, 0), DATA[3:6, 2:4] + 1)
    np.testing.assert_array_equal(_whole(files, (1, 1, 0)), before)  # the old file is untouched
    assert sorted(os.listdir(os.path.dirname(files.file((1, 1, 0))))) == ['0']  # and no temporary is left


def test_writing_without_fallocate(tmp_path, monkeypatch):
    monkeypatch.setattr(_chunks, '_FALLOCATE', None)
    array = _zarr_array(tmp_path / 'a', np.zeros(SHAPE), CHUNKS)
    chunk_files(str(tmp_path / 'a')).write((2, 2, 0), DATA[6:, 4:])
    np.testing.assert_array_equal(array[6:, 4:], DATA[6:, 4:])


def _whole_checked_by_helper(files: ChunkFiles, index: tuple) -> np.ndarray:
    """`_whole`, read as a selection is: its checksum checked on the helper thread (`Checksums`)."""
    out = np.empty(files.chunks, files.dtype)
    whole = tuple(range(c) for c in files.chunks)
    checks = _chunks.Checksums()
    files.read_into(index, whole, out, whole, checks)
    for _, error in checks.damaged():
        raise error
    return out


@pytest.mark.parametrize('piece', [1000, 4096, 10000])
@pytest.mark.parametrize('read', [_whole, _whole_checked_by_helper], ids=['checked-here', 'checked-by-helper'])
@pytest.mark.parametrize('flipped', [3, -3], ids=['first-piece', 'last-piece'])
def test_chunks_of_many_pieces_match_zarr_and_are_checked(tmp_path, monkeypatch, piece, read, flipped):
    """Chunks far larger than a piece checksummed or read at a time (odd sizes too) are Zarr's bytes, checked in
    every piece, on the reading thread or the helper."""
    monkeypatch.setattr(_chunks, '_PIECE', piece)
    monkeypatch.setattr(_chunks, '_READ_AHEAD', piece)
    values = np.random.default_rng(1).normal(size=(40, 31, 9))  # chunks of 20 x 31 x 9 float64: 44640 bytes
    _zarr_array(tmp_path / 'zarr', values, (20, 31, 9), [Crc32cCodec()])
    _zarr_array(tmp_path / 'lazyphi', np.zeros_like(values), (20, 31, 9), [Crc32cCodec()])
    files, theirs = chunk_files(str(tmp_path / 'lazyphi')), chunk_files(str(tmp_path / 'zarr'))
    for index in range(2):
        files.write((index, 0, 0), values[index * 20:(index + 1) * 20])
        with open(files.file((index, 0, 0)), 'rb') as a, open(theirs.file((index, 0, 0)), 'rb') as b:
            assert a.read() == b.read()
    np.testing.assert_array_equal(read(files, (1, 0, 0)), values[20:])
    np.testing.assert_array_equal(read(theirs, (1, 0, 0)), values[20:])
    with open(files.file((1, 0, 0)), 'r+b') as f:  # one byte of the first or the last piece
        f.seek(flipped % files.chunk_bytes)
        f.write(bytes([f.read(1)[0] ^ 1]))
    with pytest.raises(ValueError, match='checksum does not match'):
        read(files, (1, 0, 0))


def test_a_selection_whose_read_fails_leaves_no_check_running(tmp_path, monkeypatch):
    """A selection read chunk after chunk has its checksums checked on a helper thread; where a later chunk
    cannot be read, the error names that chunk and the helper has stopped, its checks done."""
    ended = threading.Event()
    check_chunks = _chunks._check_chunks

    def recorded(*args):
        try:
            return check_chunks(*args)
        finally:
            ended.set()
    monkeypatch.setattr(_chunks, '_check_chunks', recorded)
    _zarr_array(tmp_path / 'a', DATA, ROWS, [Crc32cCodec()])
    _records(tmp_path / 'a', ROWS)
    os.remove(chunk_files(str(tmp_path / 'a')).file((2, 0, 0)))
    with pytest.raises(ChunkDamaged, match=r'Chunk 2\.0\.0'):
        read_selection(_info(tmp_path / 'a', ROWS), tuple(range(s) for s in SHAPE))
    assert ended.is_set()


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 3000), st.integers(0, 7))
def test_the_checksum_function_is_zarrs_crc32c(data, cut, offset):
    """Whichever implementation `crc32c_function` picks, it computes google-crc32c's value, in one go or in parts."""
    import google_crc32c

    extend = _chunks.crc32c_function()
    values = np.frombuffer(bytes(offset) + data, np.uint8)[offset:]  # a view starting `offset` bytes in
    cut = min(cut, len(values))
    assert extend(values, 0) == google_crc32c.value(data)
    assert extend(values[cut:], extend(values[:cut], 0)) == google_crc32c.value(data)


def test_the_checksum_falls_back_to_google_crc32c(monkeypatch):
    """Without crc32c-rs, or with one that computes other values, checksums come from google-crc32c."""
    import sys
    import types

    choose = _chunks.crc32c_function.__wrapped__
    monkeypatch.setitem(sys.modules, 'crc32c_rs', None)  # not installed: importing it raises ImportError
    assert choose() is _chunks._google_extend
    wrong = types.ModuleType('crc32c_rs')
    wrong.crc32c = lambda data, crc: _chunks._google_extend(data, crc) ^ (len(data) > 4096)
    monkeypatch.setitem(sys.modules, 'crc32c_rs', wrong)
    assert choose() is _chunks._google_extend
    right = types.ModuleType('crc32c_rs')
    right.crc32c = lambda data, crc: _chunks._google_extend(data, crc)
    monkeypatch.setitem(sys.modules, 'crc32c_rs', right)
    assert choose() is right.crc32c


# --- reading selections ------------------------------------------------------------------------------------

def _axis_selection(size: int):
    """One stored axis's selection as DiskTensors hold them: an int, a range (any step) or a tuple of ints."""
    index = st.integers(0, size - 1)
    ranges = st.builds(lambda start, stop, step: range(size)[start:stop:step],
                       st.none() | st.integers(-size - 1, size + 1), st.none() | st.integers(-size - 1, size + 1),
                       st.sampled_from([1, 1, 2, 3, -1, -2, 4]))
    return index | ranges | st.lists(index, max_size=6).map(tuple)


@settings(max_examples=150, deadline=None)
@given(selection=st.tuples(*(_axis_selection(s) for s in SHAPE)))
def test_selections_read_what_numpy_indexing_gives(stored, selection):
    numpy_index = [s if isinstance(s, int) else list(s) for s in selection]
    expected = DATA
    for axis in reversed(range(len(SHAPE))):  # one axis at a time: an orthogonal selection
        expected = np.take(expected, numpy_index[axis], axis=axis)
    got = read_selection(stored, selection)
    assert got.shape == expected.shape and got.dtype == DATA.dtype
    np.testing.assert_array_equal(got, expected)
    assert got.flags.writeable and got.flags.c_contiguous


@pytest.mark.parametrize(('selection', 'direct'), [
    ((range(7), range(5), range(3)), True), ((range(2, 6), range(5), range(3)), True),
    ((4, range(5), range(3)), True), ((range(6, -1, -1), range(5), range(3)), False),
    ((range(7), range(1, 4), range(3)), False), (((5, 1), range(1, 4), 2), False)])
def test_runs_of_whole_rows_are_read_straight_into_the_result(tmp_path, monkeypatch, selection, direct):
    path = tmp_path / 'values'
    _zarr_array(path, DATA, ROWS)
    _records(path, ROWS)
    scratch = []
    original = _chunks.aligned_empty
    monkeypatch.setattr(_chunks, 'aligned_empty', lambda *args: scratch.append(args) or original(*args))
    expected = np.take(np.take(np.take(DATA, _listed(selection[2]), 2), _listed(selection[1]), 1),
                       _listed(selection[0]), 0)
    np.testing.assert_array_equal(read_selection(_info(path, ROWS), selection), expected)
    assert bool(scratch) != direct
    monkeypatch.setattr(_chunks, '_slow_copy', lambda target, offset: True)  # a placement the kernel copies slowly
    np.testing.assert_array_equal(read_selection(_info(path, ROWS), selection), expected)


def _listed(sel):
    return sel if isinstance(sel, int) else list(sel)


def test_slow_placements_are_those_1_to_63_bytes_past_the_file_offset():
    buffer = _chunks.aligned_empty((3 * 4096,), np.dtype(np.uint8), 100)
    assert buffer.ctypes.data % 4096 == 100
    view = memoryview(buffer)
    assert not _chunks._slow_copy(view, 100) and not _chunks._slow_copy(view, 4096 + 100)
    assert _chunks._slow_copy(view, 84) and _chunks._slow_copy(view[63:], 100)
    assert not _chunks._slow_copy(view, 36) and not _chunks._slow_copy(view, 101)


def test_chunks_are_read_once_each_and_only_those_touched(stored, monkeypatch):
    from lazyphi.storage import _disk

    seen = []
    original = _disk._chunk_source

    def counting_source(info):
        read_into = original(info)

        def counting(index, *args):
            seen.append(index)
            return read_into(index, *args)
        return counting

    monkeypatch.setattr(_disk, '_chunk_source', counting_source)
    read_selection(stored, (range(1, 7), (4, 0, 4, 1), 2))
    along_x = (0, 2) if stored.chunks == CHUNKS else (0,)
    assert sorted(seen) == [(a, x, 0) for a in (0, 1, 2) for x in along_x]


def test_a_chunk_file_of_the_wrong_size_or_missing_is_damaged(tmp_path):
    path = tmp_path / 'values'
    _zarr_array(path, DATA, CHUNKS)
    _records(path)
    files = chunk_files(str(path))
    with open(files.file((1, 0, 0)), 'ab') as f:
        f.write(b'\0')
    os.remove(files.file((2, 1, 0)))
    info = _info(path)
    for selection, chunk, problem in [((3, 0, 0), (1, 0, 0), 'holds 145 bytes'),
                                      ((6, range(2, 4), 1), (2, 1, 0), 'FileNotFoundError')]:
        with pytest.raises(ChunkDamaged, match=problem) as error:
            read_selection(info, selection)
        assert error.value.chunk == chunk and str(path.parent) in str(error.value)
    np.testing.assert_array_equal(read_selection(info, (range(3), range(5), range(3))), DATA[:3])
