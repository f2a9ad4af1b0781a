"""`lazyphi.cache`: listing what a cache_dir holds, its age and completeness, and deleting results."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from lazyphi import cache, math
from lazyphi.backend import DType
from lazyphi.cache import ResultInfo, ResultNotFound, delete_result, delete_results, list_results
from lazyphi.math import batch, spatial
from lazyphi.storage._results import ArraySpec, read_manifest, write_manifest
from lazyphi.storage._write import prepare_result, write_block

SHAPE = batch(example=10) & spatial(x=4)  # chunks of 4: three chunks, the last one partial


class Sim:
    """Stands for the class whose properties a result holds."""


def spec(chunk: int = 4) -> ArraySpec:
    return ArraySpec(SHAPE, DType(float, 32), 'numpy', 'example', chunk)


def write(group: str, name: str, start: int, stop: int) -> None:
    write_block(group, name, math.ones(batch(example=stop - start), spatial(x=4)), 'example', start, stop)


def backdate(group: str, **age) -> None:
    manifest = read_manifest(group)
    write_manifest(group, {**manifest, 'created': (datetime.now(UTC) - timedelta(**age)).isoformat()})


@pytest.fixture
def cache_dir(tmp_path):
    """A cache with a complete result 'aaa' (two arrays) and a result 'bbb' with one chunk of three written."""
    complete = prepare_result(str(tmp_path), 'aaa', Sim, {'u': spec(), 'v': spec(chunk=10)})
    for start, stop in ((0, 4), (4, 8), (8, 10)):
        write(complete, 'u', start, stop)
    write(complete, 'v', 0, 10)
    partial = prepare_result(str(tmp_path), 'bbb', Sim, {'u': spec()})
    write(partial, 'u', 4, 8)
    return str(tmp_path)


def test_lists_every_result_with_its_class_arrays_and_completion(cache_dir):
    results = list_results(cache_dir)
    assert [r.key for r in results] == ['aaa', 'bbb']
    aaa, bbb = results
    assert isinstance(aaa, ResultInfo)
    assert aaa.path == os.path.join(cache_dir, 'aaa')
    assert aaa.class_name == f'{__name__}:Sim'
    assert aaa.properties == ('u', 'v')
    assert aaa.complete and aaa.completion == {'u': 1.0, 'v': 1.0}
    assert not bbb.complete and bbb.completion == {'u': pytest.approx(1 / 3)}
    assert aaa.error is None


def test_sizes_count_every_file_of_a_result(cache_dir):
    aaa, bbb = list_results(cache_dir)
    data = 3 * 4 * 4 * 4 + 10 * 4 * 4  # three chunks of 4x4 float32 (the last one padded) and one of 10x4
    assert data < aaa.nbytes < data + 10_000
    assert 4 * 4 * 4 < bbb.nbytes < aaa.nbytes
    total = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(aaa.path) for f in files)
    assert aaa.nbytes == total


def test_creation_time_and_age(cache_dir):
    before = datetime.now(UTC)
    aaa, _ = list_results(cache_dir)
    assert aaa.created.tzinfo is not None
    assert before - timedelta(minutes=5) < aaa.created <= before
    assert 0 <= aaa.age_seconds < 300
    backdate(aaa.path, days=2)
    old = {r.key: r for r in list_results(cache_dir)}['aaa']
    assert old.age_seconds == pytest.approx(2 * 86400, abs=60)
    assert [r.key for r in list_results(cache_dir)] == ['aaa', 'bbb']  # oldest first


def test_results_print_as_one_line(cache_dir):
    aaa, bbb = list_results(cache_dir)
    assert str(aaa).startswith('aaa  test_cache_listing:Sim  [u, v]  ') and str(aaa).endswith('old  complete')
    assert 'incomplete (u 33%)' in str(bbb)


def test_directories_without_results_list_nothing(tmp_path):
    assert list_results(str(tmp_path)) == []
    os.makedirs(tmp_path / 'plots')
    (tmp_path / 'notes.txt').write_text('not a result')
    os.makedirs(tmp_path / '.aaa.0123456789abcdef0123456789abcdef.partial')  # a group being built
    assert list_results(str(tmp_path)) == []


def test_a_missing_cache_dir_is_named(tmp_path):
    missing = str(tmp_path / 'nowhere')
    for call in (list_results, delete_results, lambda d: delete_result(d, 'aaa')):
        with pytest.raises(FileNotFoundError, match='nowhere'):
            call(missing)


def test_delete_one_result(cache_dir):
    delete_result(cache_dir, 'aaa')
    assert [r.key for r in list_results(cache_dir)] == ['bbb']
    assert sorted(os.listdir(cache_dir)) == ['bbb']  # nothing hidden left behind


def test_an_unknown_key_is_named_with_the_known_ones(cache_dir):
    with pytest.raises(ResultNotFound) as info:
        delete_result(cache_dir, 'zzz')
    assert isinstance(info.value, KeyError)
    assert str(info.value) == f"No result 'zzz' in cache_dir {cache_dir!r}; the results there are ['aaa', 'bbb']"
    with pytest.raises(ResultNotFound, match="'zzz'"):
        delete_results(cache_dir, ['aaa', 'zzz'])
    assert [r.key for r in list_results(cache_dir)] == ['aaa', 'bbb']  # checked before deleting anything


def test_delete_results_by_key_and_age(cache_dir):
    backdate(os.path.join(cache_dir, 'aaa'), days=8)
    assert delete_results(cache_dir, older_than=timedelta(days=30)) == []
    assert delete_results(cache_dir, older_than=7 * 86400) == ['aaa']
    assert [r.key for r in list_results(cache_dir)] == ['bbb']
    assert delete_results(cache_dir, 'bbb') == ['bbb']
    assert list_results(cache_dir) == []


def test_delete_all_results(cache_dir):
    assert delete_results(cache_dir) == ['aaa', 'bbb']
    assert os.listdir(cache_dir) == []


def test_a_damaged_result_is_listed_with_its_problem_and_can_be_deleted(cache_dir):
    with open(os.path.join(cache_dir, 'bbb', 'lazyphi.json'), 'w') as f:
        json.dump({'format': 1}, f)
    aaa, bbb = sorted(list_results(cache_dir), key=lambda r: r.key)
    assert aaa.complete
    assert bbb.error is not None and 'missing entries' in bbb.error
    assert not bbb.complete and bbb.class_name is None and bbb.properties == ()
    assert 'damaged' in str(bbb)
    delete_result(cache_dir, 'bbb')
    assert [r.key for r in list_results(cache_dir)] == ['aaa']


def test_a_result_prepared_again_after_deletion_starts_empty(cache_dir):
    delete_result(cache_dir, 'bbb')
    group = prepare_result(cache_dir, 'bbb', Sim, {'u': spec()})
    assert {r.key: r for r in list_results(cache_dir)}['bbb'].completion == {'u': 0.0}
    assert os.listdir(os.path.join(group, 'u.done')) == []


def test_the_module_loads_no_zarr_or_dask(tmp_path):
    script = ('import json, sys\nfrom lazyphi import cache\n'
              f'assert cache.list_results({str(tmp_path)!r}) == []\n'
              'print(json.dumps(sorted(sys.modules)))')
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    loaded = {m.split('.')[0] for m in json.loads(out.splitlines()[-1])}
    assert not loaded & {'zarr', 'dask', 'distributed', 'numcodecs', 'torch', 'jax', 'tensorflow'}


def test_public_names():
    assert set(cache.__all__) == {'Leftover', 'ResultInfo', 'ResultNotFound', 'delete_leftovers', 'delete_result',
                                  'delete_results', 'list_leftovers', 'list_results'}
