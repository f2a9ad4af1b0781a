"""A writer killed at any point leaves a loadable save (the old or the new one) and nothing the next run keeps.

Item 8 of issue #18: `save(overwrite=True)` killed between its two renames left no save at the path (load raised
FileNotFoundError, the old save sat in a hidden `.partial`). Each case runs the writer in a process this test
starts and kills (SIGKILL from within, at the chosen moment), bounded by a timeout.
"""

import os
import subprocess
import sys
import time

import pytest

import lazyphi
from lazyphi.storage import _results

pytestmark = pytest.mark.skipif(sys.platform == 'win32', reason='kills itself with SIGKILL')

WRITER = '''
import os, signal, sys
import lazyphi
from lazyphi.storage import _save

path, moment = sys.argv[1], sys.argv[2]
lazyphi.save({'version': 1}, path)


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


if moment == 'between renames':  # a file system without an atomic exchange: two renames
    _save._EXCHANGE = None
    rename = os.rename
    def rename_then_die(source, target):
        rename(source, target)
        if target != path:  # the old save was moved away; the new one is not in place yet
            die()
    _save.os.rename = rename_then_die
elif moment == 'after exchange':
    _save.shutil.rmtree = die
elif moment == 'while writing':
    _save.write_manifest = die
lazyphi.save({'version': 2}, path, overwrite=True)
'''


def _kill_writer(tmp_path, moment: str) -> str:
    path = str(tmp_path / 'save')
    done = subprocess.run([sys.executable, '-c', WRITER, path, moment], timeout=120, capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    return path


def _age(folder) -> None:
    """Make the temporary entries in `folder` look left over by a writer killed long ago."""
    old = time.time() - 2 * _results.STALE_AFTER_SECONDS
    for name in os.listdir(folder):
        if name.startswith('.'):
            for root, _, files in os.walk(os.path.join(folder, name), topdown=False):
                for entry in (*(os.path.join(root, n) for n in files), root):
                    os.utime(entry, (old, old))


@pytest.mark.parametrize(('moment', 'version'), [('between renames', 1), ('after exchange', 2),
                                                 ('while writing', 1)])
def test_a_killed_overwrite_leaves_a_save_and_the_next_run_cleans_up(tmp_path, moment, version):
    path = _kill_writer(tmp_path, moment)
    assert lazyphi.load(path) == {'version': version}
    _age(tmp_path)
    lazyphi.save({'version': 3}, path, overwrite=True)
    assert lazyphi.load(path) == {'version': 3}
    assert os.listdir(tmp_path) == ['save']  # the next save removed what the killed one left


def test_a_recovered_save_is_found_by_the_next_save_too(tmp_path):
    path = _kill_writer(tmp_path, 'between renames')
    with pytest.raises(FileExistsError):  # the old save is back in place, and protected
        lazyphi.save({'version': 3}, path)
    assert lazyphi.load(path) == {'version': 1}


def test_temporaries_of_a_killed_writer_go_at_once_and_fresh_ones_of_others_stay(tmp_path):
    _kill_writer(tmp_path, 'while writing')
    left = [name for name in os.listdir(tmp_path) if name.startswith('.')]
    assert left
    live = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        others = [f'.save.{_results._machine()}{live.pid:08x}{"0" * 16}.partial',  # a live writer here
                  f'.save.{"f" * 8}{1:08x}{"0" * 16}.partial']  # a writer on another machine
        for name in others:
            os.makedirs(tmp_path / name / 'a')
        lazyphi.save({'version': 3}, str(tmp_path / 'save'), overwrite=True)
    finally:
        live.kill()
        live.wait()
    assert not set(left) & set(os.listdir(tmp_path))  # their writer is gone: removed, however fresh
    assert set(others) <= set(os.listdir(tmp_path))  # they may be live writers': kept
