"""Intact chunk files in the wrong place never read as values (issue #35, item 1).

Before, a chunk's checksum covered its bytes only: swapping `c.3.0.0` and `c.5.0.0`, duplicating or hard-linking a
chunk, a chunk from another array or another result, a whole array folder from another result: 28 of 28 readings
gave wrong values. Now each chunk's completion record is tagged with the checksum its file ends with, bound to the
result's key (or the save's id), the array and the chunk's position, and every reading checks it. Each case here
moves real files, then reads the result, runs the computation again with the same cache_dir, or loads a save:
uncompressed and zstd.
"""

import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyphi
from lazyphi import math
from lazyphi.backend import DType
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute
from lazyphi.storage import ChunkDamaged, ChunkMissing, _save, disk_tensor
from lazyphi.storage._results import ArraySpec
from lazyphi.storage._write import prepare_result, write_block

EXAMPLES, ROWS = 32, 4  # 8 chunks of 4 examples along `example`
SHAPE = batch(example=EXAMPLES) & spatial(x=8, y=8)
CHUNK_BYTES = ROWS * 8 * 8 * 4
MANIPULATIONS = ('swap', 'move', 'duplicate', 'hard link', 'chunk of another array', 'chunk of another result',
                 'array folder of another result', 'array folder and records of another result')


def _values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((EXAMPLES, 8, 8)).astype(np.float32)


def _file(array: str, i: int) -> str:
    return os.path.join(array, f'c.{i}.0.0')


def _manipulate(how: str, array: str, sibling: str, foreign: str, rows: int = ROWS) -> set[int]:
    """Damage the array at directory `array` as `how` says, with files of the `sibling` array of the same result or
    save and the array of the same name in another (`foreign`); returns the chunk positions now wrong there."""
    if how == 'swap':
        os.rename(_file(array, 3), _file(array, 3) + '.x')
        os.rename(_file(array, 5), _file(array, 3))
        os.rename(_file(array, 3) + '.x', _file(array, 5))
        return {3, 5}
    if how == 'move':
        os.replace(_file(array, 3), _file(array, 5))
        return {3, 5}
    if how == 'duplicate':
        shutil.copyfile(_file(array, 3), _file(array, 5))
        return {5}
    if how == 'hard link':
        os.remove(_file(array, 5))
        os.link(_file(array, 3), _file(array, 5))
        return {5}
    if how == 'chunk of another array':
        shutil.copyfile(_file(sibling, 5), _file(array, 5))
        return {5}
    if how == 'chunk of another result':
        shutil.copyfile(_file(foreign, 5), _file(array, 5))
        return {5}
    shutil.rmtree(array)
    shutil.copytree(foreign, array)
    if how == 'array folder and records of another result':
        shutil.rmtree(array + '.done')
        shutil.copytree(foreign + '.done', array + '.done')
    return set(range(EXAMPLES // rows))


def _assert_never_wrong(tensor, expected: np.ndarray, wrong: set[int], files: str) -> None:
    """Every chunk of `tensor` reads as `expected` or raises ChunkDamaged naming its file; those in `wrong` raise."""
    with pytest.raises(ChunkDamaged) as whole:
        tensor.numpy('example,x,y')
    assert whole.value.chunk[0] in wrong and _file(files, whole.value.chunk[0]) in str(whole.value)
    rows = tensor.chunks[0]
    for i in range(EXAMPLES // rows):
        part = tensor.example[i * rows + 1]  # a row only: read through the memo of checked files
        if i in wrong:
            with pytest.raises(ChunkDamaged, match=f'Chunk {i}\\.0\\.0 of array') as error:
                part.numpy('x,y')
            assert _file(files, i) in str(error.value)
        else:
            np.testing.assert_array_equal(part.numpy('x,y'), expected[i * rows + 1])


# --- results read directly ----------------------------------------------------------------------------------------

class Result:
    """The class whose properties the results stand for."""


def _result(cache_dir: str, key: str, compressor, seed: int) -> str:
    spec = ArraySpec(SHAPE, DType(float, 32), 'numpy', 'example', ROWS, compressor)
    group = prepare_result(cache_dir, key, Result, {'values': spec, 'other': spec})
    for name, values in (('values', _values(seed)), ('other', _values(seed + 1))):
        write_block(group, name, math.tensor(values, SHAPE), 'example', 0, EXAMPLES)
    return group


@pytest.mark.parametrize('compressor', [None, 'zstd'])
@pytest.mark.parametrize('how', MANIPULATIONS)
def test_a_misplaced_chunk_of_a_result_raises_naming_its_file(tmp_path, how, compressor):
    group = _result(str(tmp_path), 'mine', compressor, 0)
    foreign = _result(str(tmp_path), 'theirs', compressor, 10)
    tensor = disk_tensor(group, 'values')
    np.testing.assert_array_equal(tensor.numpy('example,x,y'), _values(0))  # checked once: the memo knows them
    array = os.path.join(group, 'values')
    wrong = _manipulate(how, array, os.path.join(group, 'other'), os.path.join(foreign, 'values'))
    _assert_never_wrong(disk_tensor(group, 'values'), _values(0), wrong, array)


# --- a computation run again with the same cache_dir ------------------------------------------------------------------

@dataclass(frozen=True)
class Pipeline:
    data: Tensor
    offset: float = 1.0

    @cached_property
    def values(self) -> Tensor:
        return self.data + self.offset

    @cached_property
    def other(self) -> Tensor:
        return self.data * 2 + self.offset


def _run(data, offset: float, cache_dir: str, compressor):
    p = Pipeline(data, offset)
    parallel_compute(p, [Pipeline.values, Pipeline.other], scheduler='sync', progress=False, cache_dir=cache_dir,
                     memory_limit=1, chunk_bytes=CHUNK_BYTES, compressor=compressor)
    return p


@pytest.mark.parametrize('compressor', [None, 'zstd'])
@pytest.mark.parametrize('how', MANIPULATIONS)
def test_a_misplaced_chunk_is_never_read_by_a_run_again(tmp_path, how, compressor):
    data = math.tensor(_values(0), SHAPE)
    cache_dir = str(tmp_path)
    mine = _run(data, 1.0, cache_dir, compressor)
    theirs = _run(data, 2.0, cache_dir, compressor)
    expected = _values(0) + 1
    np.testing.assert_array_equal(mine.values.numpy('example,x,y'), expected)
    array, foreign = mine.values.path, theirs.values.path
    assert os.path.dirname(array) != os.path.dirname(foreign)  # two results
    wrong = _manipulate(how, array, mine.other.path, foreign, mine.values.chunks[0])
    try:
        again = _run(data, 1.0, cache_dir, compressor)
    except Exception as err:  # the run itself read a chunk: it must have found it damaged
        assert _damage_in(err) is not None, err
        return
    values = again.values
    if os.path.dirname(values.path) == os.path.dirname(array):
        _assert_never_wrong(values, expected, wrong, array)
    else:
        np.testing.assert_array_equal(values.numpy('example,x,y'), expected)


def _damage_in(err: BaseException) -> ChunkDamaged | None:
    while err is not None and not isinstance(err, ChunkDamaged):
        err = err.__cause__ or err.__context__
    return err


# --- saves --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('how', MANIPULATIONS)
def test_a_misplaced_chunk_of_a_save_raises_naming_its_file(tmp_path, how, monkeypatch):
    monkeypatch.setattr(_save, 'CHUNK_BYTES', CHUNK_BYTES)
    for name, seed in (('mine', 0), ('theirs', 10)):
        lazyphi.save({'values': math.tensor(_values(seed), SHAPE), 'other': math.tensor(_values(seed + 1), SHAPE)},
                     tmp_path / name)
    mine = str(tmp_path / 'mine')
    np.testing.assert_array_equal(lazyphi.load(mine)['values'].numpy('example,x,y'), _values(0))
    array = os.path.join(mine, 'values')
    wrong = _manipulate(how, array, os.path.join(mine, 'other'), os.path.join(str(tmp_path / 'theirs'), 'values'))
    _assert_never_wrong(lazyphi.load(mine)['values'], _values(0), wrong, array)
    with pytest.raises(ChunkDamaged, match='in the save') as error:
        lazyphi.load(mine, lazy=False)
    assert 'disk cache' not in str(error.value) and 'cache_dir' not in str(error.value)
    with pytest.raises(ChunkDamaged):  # a save of the loaded tree copies chunk by chunk, reading each
        lazyphi.save(lazyphi.load(mine), tmp_path / 'copy')
    assert not os.path.exists(tmp_path / 'copy')


# --- random moves -------------------------------------------------------------------------------------------------

CHUNKS = 4  # per array here, of 2 examples each
PLACES = [(r, a, i) for r in ('one', 'two') for a in ('a', 'b') for i in range(CHUNKS)]
MOVES = st.lists(st.tuples(st.sampled_from(('move', 'copy', 'link', 'swap')), st.sampled_from(PLACES),
                           st.sampled_from(PLACES)), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moves=MOVES, compressor=st.sampled_from([None, 'zstd']), repeated=st.booleans())
def test_random_moves_of_chunk_files_never_give_wrong_values(moves, compressor, repeated):
    """After any moves, copies, hard links and swaps of chunk files within and between arrays of two results, each
    read gives the right values or raises ChunkDamaged / ChunkMissing. `repeated`: chunks of equal values (a file
    moved onto its twin reads right)."""
    shape = batch(example=2 * CHUNKS) & spatial(x=3)
    spec = ArraySpec(shape, DType(float, 64), 'numpy', 'example', 2, compressor)
    with tempfile.TemporaryDirectory() as cache_dir:
        expected = {}
        for result in ('one', 'two'):
            group = prepare_result(cache_dir, result, Result, {'a': spec, 'b': spec})
            for k, array in enumerate(('a', 'b')):
                values = np.arange(2 * CHUNKS * 3, dtype=np.float64).reshape(2 * CHUNKS, 3) + 100 * k
                values = values % 6 if repeated else values + 1000 * (result == 'two')
                write_block(group, array, math.tensor(values, shape), 'example', 0, 2 * CHUNKS)
                expected[result, array] = values
                disk_tensor(group, array).numpy('example,x')  # checked: the memo knows these files
        for how, source, target in moves:
            _move(cache_dir, how, source, target)
        for (result, array), values in expected.items():
            tensor = disk_tensor(os.path.join(cache_dir, result), array)
            for read in (lambda t: t.numpy('example,x'),
                         *(lambda t, i=i: t.example[2 * i + 1].numpy('x') for i in range(CHUNKS))):
                try:
                    got = read(tensor)
                except (ChunkDamaged, ChunkMissing):
                    continue
                want = read(math.tensor(values, shape))
                np.testing.assert_array_equal(got, want)


def _move(cache_dir: str, how: str, source: tuple, target: tuple) -> None:
    source, target = (os.path.join(cache_dir, r, a, f'c.{i}.0') for r, a, i in (source, target))
    if source == target or not os.path.exists(source):
        return
    if how == 'move':
        os.replace(source, target)
    elif how == 'copy':
        shutil.copyfile(source, target)
    elif how == 'link':
        if os.path.exists(target):
            os.remove(target)
        os.link(source, target)
    elif os.path.exists(target):
        os.replace(source, source + '.x')
        os.replace(target, source)
        os.replace(source + '.x', target)


def test_a_result_of_the_format_before_tags_is_listed_as_damaged_and_never_read(tmp_path):
    """Format-1 results (records without tags) lie under keys of format 1: a run now computes under a new key,
    and `cache ls` names the old one's format."""
    from lazyphi import cache
    from lazyphi.storage import _results

    data = math.tensor(_values(0), SHAPE)
    group = os.path.dirname(_run(data, 1.0, str(tmp_path), None).values.path)
    old = os.path.join(str(tmp_path), 'f0f0f0')  # as a key of format 1 would name it
    manifest = _results.read_manifest(group)
    os.rename(group, old)
    _results.write_manifest(old, {**{k: v for k, v in manifest.items() if k != 'checksum'}, 'format': 1,
                                  'key': 'f0f0f0'})
    for array in ('values', 'other'):
        records = os.path.join(old, f'{array}.done')
        for name in os.listdir(records):
            if not name.startswith('.'):
                os.rename(os.path.join(records, name), os.path.join(records, name.rpartition('.')[0]))
    again = _run(data, 1.0, str(tmp_path), None)
    np.testing.assert_array_equal(again.values.numpy('example,x,y'), _values(0) + 1)
    listed = {r.key: r for r in cache.list_results(str(tmp_path))}
    assert listed[os.path.basename(group)].complete
    assert 'format 1; this lazyphi reads format 2' in listed['f0f0f0'].error
