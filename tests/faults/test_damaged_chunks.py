"""Damaged or missing chunk files raise OSErrors naming store, array and chunk; they never read as values.

Item 2 of issue #18: with `compressor='zstd'` a deleted chunk file whose completion record remained read
as zeros, and a flipped byte read silently, compressed or not.
"""

import os

import numpy as np
import pytest

import lazyphi
from lazyphi import math
from lazyphi.backend import DType
from lazyphi.math import batch, spatial
from lazyphi.storage import ChunkDamaged, disk_tensor
from lazyphi.storage._chunks import chunk_files
from lazyphi.storage._results import ArraySpec
from lazyphi.storage._write import prepare_result, write_block

VALUES = np.random.default_rng(1).standard_normal((8, 32, 32)).astype(np.float32)  # 8,192 values per example
SHAPE = batch(example=8) & spatial(x=32, y=32)


class Result:
    """The class whose property the test result stands for."""


def _result(cache_dir, compressor) -> str:
    spec = ArraySpec(SHAPE, DType(float, 32), 'numpy', 'example', 2, compressor)  # 4 chunks of 2 examples
    group = prepare_result(str(cache_dir), 'key', Result, {'values': spec})
    write_block(group, 'values', math.tensor(VALUES, SHAPE), 'example', 0, 8)
    return group


def _chunk_file(array_path: str, index: tuple) -> str:
    return os.path.join(array_path, '.'.join(('c', *map(str, index))))


def _flip_byte(file: str, position: int) -> None:
    with open(file, 'r+b') as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x10]))


READS = {  # how a user reaches the values: whole, one example (part of a chunk), a strided view
    'whole': lambda t: t.numpy('example,x,y'),
    'part': lambda t: t.example[3].numpy('x,y'),
    'view': lambda t: t.example[1:7:2].x[5].numpy('example,y'),
}


@pytest.mark.parametrize('read', sorted(READS))
@pytest.mark.parametrize('compressor', [None, 'zstd'])
@pytest.mark.parametrize('damage', ['deleted', 'flipped', 'flipped last', 'truncated', 'appended'])
def test_a_damaged_chunk_of_a_result_raises_naming_it(tmp_path, compressor, damage, read):
    group = _result(tmp_path, compressor)
    file = _chunk_file(os.path.join(group, 'values'), (1, 0, 0))  # examples 2 and 3
    size = os.path.getsize(file)
    if damage == 'deleted':
        os.remove(file)
    elif damage == 'flipped':
        _flip_byte(file, size // 2)
    elif damage == 'flipped last':
        _flip_byte(file, size - 1)
    elif damage == 'truncated':
        os.truncate(file, size - 4)
    else:
        with open(file, 'ab') as f:
            f.write(b'\0\0\0\0')
    tensor = disk_tensor(group, 'values')
    with pytest.raises(ChunkDamaged) as error:
        READS[read](tensor)
    assert (error.value.store, error.value.array, error.value.chunk) == (group, 'values', (1, 0, 0))
    assert 'values' in str(error.value) and group in str(error.value) and '1.0.0' in str(error.value)
    np.testing.assert_array_equal(tensor.example[4:].numpy('example,x,y'), VALUES[4:])  # other chunks read


@pytest.mark.parametrize('damage', ['deleted', 'flipped'])
def test_a_damaged_chunk_of_a_save_raises_naming_it(tmp_path, damage, monkeypatch):
    from lazyphi.storage import _save

    monkeypatch.setattr(_save, 'CHUNK_BYTES', 2 * 32 * 32 * 4)  # chunks of 2 examples
    lazyphi.save({'a': math.tensor(VALUES, SHAPE)}, tmp_path / 'save')
    array = os.path.join(str(tmp_path / 'save'), 'a')
    file = _chunk_file(array, (2, 0, 0))
    if damage == 'deleted':
        os.remove(file)
    else:
        _flip_byte(file, 100)
    for lazy in (True, False):
        with pytest.raises(ChunkDamaged, match=r"Chunk 2\.0\.0 of array 'a'"):
            loaded = lazyphi.load(tmp_path / 'save', lazy=lazy)
            loaded['a'].numpy('example,x,y')


def test_chunks_carry_a_checksum_that_zarr_checks_too(tmp_path):
    import zarr

    group = _result(tmp_path, None)
    files = chunk_files(os.path.join(group, 'values'))
    assert files is not None and files.checksum  # still read and written by lazyphi itself
    np.testing.assert_array_equal(zarr.open_array(os.path.join(group, 'values'), mode='r')[...], VALUES)
    _flip_byte(_chunk_file(os.path.join(group, 'values'), (0, 0, 0)), 7)
    with pytest.raises(ValueError, match='checksum'):
        zarr.open_array(os.path.join(group, 'values'), mode='r')[0]


def test_a_flip_after_a_partial_read_is_found_by_the_next_read(tmp_path):
    group = _result(tmp_path, None)
    tensor = disk_tensor(group, 'values')
    np.testing.assert_array_equal(tensor.example[2].numpy('x,y'), VALUES[2])
    file = _chunk_file(os.path.join(group, 'values'), (1, 0, 0))
    replacement = file + '.new'
    with open(file, 'rb') as f, open(replacement, 'wb') as g:
        g.write(f.read())
    os.replace(replacement, file)  # the same bytes in a new file: another inode
    _flip_byte(file, 40)
    with pytest.raises(ChunkDamaged, match='checksum'):
        tensor.example[2].numpy('x,y')
