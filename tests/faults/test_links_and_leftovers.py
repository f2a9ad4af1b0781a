"""Writes never follow a link out of the store, and what interrupted writes leave is counted and cleaned (issue #35,
items 5 and 7).

Before: a linked `<array>.done` received a run's records and a linked result group its writes; `cache rm` of a
linked group failed and left a renamed link; a `.replaced` link was moved into place and followed by `load`; a run
after `<array>.done/` was deleted raised FileNotFoundError; leftovers of killed `save` and `cache rm` were not
counted by `cache du`; errors of a save spoke of the disk cache; a full disk named no file.
"""

import errno
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass

import numpy as np
import pytest
import zarr

import lazyphi
from lazyphi import cache, math
from lazyphi.backend import DType
from lazyphi.cli import main
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import parallel_compute
from lazyphi.storage import ChunkMissing, _chunks
from lazyphi.storage._results import ArraySpec
from lazyphi.storage._write import prepare_result, write_block

pytestmark = pytest.mark.skipif(sys.platform == 'win32', reason='symbolic links and SIGKILL')
DATA = math.tensor(np.arange(16 * 4, dtype=np.float32).reshape(16, 4), batch(example=16) & spatial(x=4))


@dataclass(frozen=True)
class Doubled:
    data: Tensor

    @cached_property
    def values(self) -> Tensor:
        return self.data * 2


def _run(cache_dir) -> Doubled:
    d = Doubled(DATA)
    parallel_compute(d, [Doubled.values], scheduler='sync', progress=False, cache_dir=str(cache_dir), memory_limit=1,
                     chunk_bytes=4 * 4 * 4)
    return d


def _files(folder) -> dict:
    """Every file under `folder` with its size and modification time."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            stat = os.lstat(os.path.join(root, name))
            found[os.path.join(root, name)] = (stat.st_size, stat.st_mtime_ns)
    return found


# --- item 5: links --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('linked', ['records', 'array', 'group'])
def test_a_run_never_writes_through_a_link_in_its_result(tmp_path, linked):
    cache_dir = tmp_path / 'cache'
    group = os.path.dirname(_run(cache_dir).values.path)
    outside = tmp_path / 'outside'
    place = {'records': os.path.join(group, 'values.done'), 'array': os.path.join(group, 'values'),
             'group': group}[linked]
    shutil.move(place, outside)
    os.symlink(outside, place)
    records = os.path.join(group, 'values.done')
    for name in os.listdir(records):  # the run would write these chunks and records again
        os.remove(os.path.join(records, name))
    before = _files(outside)
    with pytest.raises(OSError, match='symbolic link') as error:
        _run(cache_dir)
    assert place in str(error.value)
    assert _files(outside) == before  # nothing written there


def test_cache_rm_of_a_linked_result_removes_the_link_only(tmp_path):
    cache_dir = tmp_path / 'cache'
    group = os.path.dirname(_run(cache_dir).values.path)
    key = os.path.basename(group)
    outside = tmp_path / 'outside'
    shutil.move(group, outside)
    os.symlink(outside, group)
    before = _files(outside)
    assert [r.key for r in cache.list_results(str(cache_dir))] == [key]
    assert main(['cache', 'rm', str(cache_dir), key, '--yes']) == 0
    assert os.listdir(cache_dir) == []  # no renamed link left behind
    assert _files(outside) == before


def test_a_replaced_link_is_neither_moved_into_place_nor_followed(tmp_path):
    lazyphi.save({'whose': 'theirs'}, tmp_path / 'theirs')
    path = tmp_path / 'mine'
    planted = tmp_path / f'.mine.{uuid.uuid4().hex}.replaced'
    os.symlink(tmp_path / 'theirs', planted)
    with pytest.raises(FileNotFoundError):
        lazyphi.load(path)
    assert not os.path.lexists(path) and os.path.islink(planted)
    lazyphi.save({'whose': 'mine'}, path)
    assert lazyphi.load(path) == {'whose': 'mine'} and lazyphi.load(tmp_path / 'theirs') == {'whose': 'theirs'}


# --- item 7: what interrupted work leaves -------------------------------------------------------------------------

def test_a_run_after_the_records_were_deleted_computes_them_again(tmp_path):
    group = os.path.dirname(_run(tmp_path).values.path)
    shutil.rmtree(os.path.join(group, 'values.done'))
    again = _run(tmp_path)
    np.testing.assert_array_equal(again.values.numpy('example,x'), DATA.numpy('example,x') * 2)
    (info,) = cache.list_results(str(tmp_path))
    assert info.complete


KILLED_RM = '''
import os, shutil, sys
from lazyphi import cache

def die(*args, **kwargs):  # killed after the result was renamed out of sight, before it was deleted
    os._exit(3)
shutil.rmtree = die
cache.delete_result(sys.argv[1], sys.argv[2])
'''
KILLED_SAVE = '''
import os, sys
import lazyphi
from lazyphi import math
from lazyphi.storage import _save

def die(*args, **kwargs):  # killed with every array written, before the manifest
    os._exit(3)
_save.write_manifest = die
lazyphi.save({'a': math.ones(math.batch(b=1000))}, sys.argv[1])
'''


def test_cache_du_counts_leftovers_of_killed_writers_and_cache_rm_deletes_those_no_one_uses(tmp_path, capsys):
    cache_dir = str(tmp_path)
    group = os.path.dirname(_run(tmp_path).values.path)
    key = os.path.basename(group)
    for script, argument in ((KILLED_RM, key), (KILLED_SAVE, os.path.join(cache_dir, 'saved'))):
        done = subprocess.run([sys.executable, '-c', script, cache_dir if script is KILLED_RM else argument,
                               argument], capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr
    live = os.path.join(cache_dir, f'.other.{uuid.uuid4().hex}.partial')  # fresh, of no known writer: maybe live
    os.makedirs(live)
    left = sorted(os.path.join(cache_dir, n) for n in os.listdir(cache_dir) if n.startswith('.'))
    assert len(left) == 3 and not cache.list_results(cache_dir)
    hidden = sum(x.nbytes for x in cache.list_leftovers(cache_dir))
    assert hidden > 4000 and [x.path for x in cache.list_leftovers(cache_dir)] == left
    capsys.readouterr()
    assert main(['cache', 'du', cache_dir]) == 0
    out = capsys.readouterr().out
    assert '3 hidden leftovers of interrupted writes (2 no longer in use' in out
    assert f'{hidden} B  total' in out or 'KiB  total' in out
    assert main(['cache', 'rm', cache_dir, '--yes']) == 0
    assert 'Deleted 0 results and 2 leftovers.' in capsys.readouterr().out
    assert os.listdir(cache_dir) == [os.path.basename(live)]


def test_a_missing_chunk_of_a_save_speaks_of_the_save(tmp_path):
    lazyphi.save({'a': DATA}, tmp_path / 'saved')
    records = tmp_path / 'saved' / 'a.done'
    for record in records.iterdir():
        if not record.name.startswith('.'):
            record.unlink()
    with pytest.raises(ChunkMissing, match='in the save') as error:
        lazyphi.load(tmp_path / 'saved')['a'].numpy('example,x')
    assert 'cache_dir' not in str(error.value) and 'disk cache' not in str(error.value)


@pytest.mark.parametrize('compressor', [None, 'zstd'])
def test_a_full_disk_names_the_file(tmp_path, monkeypatch, compressor):
    spec = ArraySpec(DATA.shape, DType(float, 32), 'numpy', 'example', 4, compressor)
    group = prepare_result(str(tmp_path), 'key', Doubled, {'values': spec})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(_chunks, '_write_all', full)  # lazyphi's own chunk files
    monkeypatch.setattr(zarr.Array, 'set_block_selection', full)  # Zarr's
    with pytest.raises(OSError) as error:
        write_block(group, 'values', DATA, 'example', 0, 16)
    assert error.value.errno == errno.ENOSPC
    assert error.value.filename == os.path.join(group, 'values', 'c.0.0')
    assert os.path.join(group, 'values', 'c.0.0') in str(error.value)
