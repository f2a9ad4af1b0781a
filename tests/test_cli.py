"""The `lazyphi` command: info, cache ls/du/rm on a real disk cache, and run, in subprocesses and in-process."""

import argparse
import importlib.util
import os
import subprocess
import sys
import textwrap
import typing

import pytest

from lazyphi import math
from lazyphi.cache import list_results
from lazyphi.cli import UsageError, assignment, check_arguments, duration, main

MODULE = textwrap.dedent('''
    from dataclasses import dataclass

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch


    @dataclass(frozen=True)
    class Ramp:
        values: Tensor
        label: str = 'ramp'

        @cached_property
        def doubled(self) -> Tensor:
            return self.values * 2

        @cached_property
        def broken(self) -> Tensor:
            raise ValueError('the broken property failed')


    def make(n=4, label='ramp'):
        return Ramp(math.arange(batch(example=n)) * 1.0, label)


    not_callable = 42
''')


def lazyphi_cli(*args: str, cwd, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    """Run `python -m lazyphi ARGS` in a fresh interpreter."""
    return subprocess.run([sys.executable, '-m', 'lazyphi', *args], cwd=cwd, stdin=stdin, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def workdir(tmp_path):
    """A directory holding the module `ramp_model` with the class `Ramp` and the factory `make`."""
    (tmp_path / 'ramp_model.py').write_text(MODULE)
    return tmp_path


@pytest.fixture
def filled_cache(workdir):
    """A cache directory holding two results of `Ramp.doubled`, written by a real parallel_compute."""
    from lazyphi.parallel import parallel_compute

    spec = importlib.util.spec_from_file_location('ramp_model', workdir / 'ramp_model.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache_dir = str(workdir / 'cache')
    for n in (6, 8):
        parallel_compute(module.make(n), ['doubled'], 'example', scheduler='sync', cache_dir=cache_dir, progress=False)
    return cache_dir


def test_info_names_the_array_libraries_and_the_engine(tmp_path):
    result = lazyphi_cli('info', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert 'lazyphi' in result.stdout
    assert 'numpy' in result.stdout
    assert 'Zarr' in result.stdout
    assert "CPU 'CPU'" in result.stdout  # the NumPy backend's device


def test_cache_ls_lists_every_result(filled_cache, capsys):
    assert main(['cache', 'ls', filled_cache]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ['KEY', 'CLASS', 'CONFIG', 'PROPERTIES', 'SIZE', 'AGE', 'STATE']
    assert len(lines) == 3
    for r in list_results(filled_cache):
        line = next(x for x in lines if x.startswith(r.key))
        assert 'ramp_model:Ramp' in line and 'doubled' in line and 'complete' in line
        assert 'B' in line  # a human-readable size


def test_cache_ls_verbose_shows_each_result_in_full(filled_cache, capsys):
    assert main(['cache', 'ls', filled_cache]) == 0
    short = capsys.readouterr().out
    assert main(['cache', 'ls', '-v', filled_cache]) == 0
    out = capsys.readouterr().out
    assert out.startswith(short)
    results = list_results(filled_cache)
    assert sorted(r.arrays['doubled'] for r in results) == [
        f"(exampleᵇ={n}) float32, chunks of 1 along 'example'" for n in (6, 8)]
    for r in results:
        details = out.split(f'\n{r.key}\n', 1)[1].split('\n\n')[0].splitlines()
        assert details == [f'  path     {os.path.abspath(r.path)}', f'  created  {r.created:%Y-%m-%d %H:%M:%S} UTC',
                           f"  doubled: {r.arrays['doubled']}; 100% of its chunks written"]


def test_cache_ls_tells_apart_results_that_differ_only_in_config_values(workdir, capsys):
    from lazyphi.parallel import parallel_compute

    spec = importlib.util.spec_from_file_location('ramp_model', workdir / 'ramp_model.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cache_dir = str(workdir / 'cache')
    for label in ('first', 'second'):  # equal data: the results differ only in the config field `label`
        parallel_compute(module.make(4, label), ['doubled'], 'example', scheduler='sync', cache_dir=cache_dir,
                         progress=False)
    assert main(['cache', 'ls', cache_dir]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert sorted(row[2] for row in rows) == ["label='first'", "label='second'"]
    assert {r.config['label'] for r in list_results(cache_dir)} == {"'first'", "'second'"}


def test_cache_ls_of_an_empty_and_a_missing_directory(tmp_path, capsys):
    assert main(['cache', 'ls', str(tmp_path)]) == 0
    assert 'No results' in capsys.readouterr().out
    assert main(['cache', 'ls', str(tmp_path / 'missing')]) == 2
    assert 'no cache directory' in capsys.readouterr().err


def test_cache_du_gives_the_total_and_each_result(filled_cache, capsys):
    assert main(['cache', 'du', filled_cache]) == 0
    lines = capsys.readouterr().out.splitlines()
    keys = [r.key for r in list_results(filled_cache)]
    assert [line.split()[-1] for line in lines[:2]] == keys
    assert 'total (2 results' in lines[2]


def test_cache_rm_without_yes_and_closed_stdin_deletes_nothing(filled_cache):
    result = lazyphi_cli('cache', 'rm', filled_cache, cwd=os.path.dirname(filled_cache))
    assert result.returncode == 1
    assert '--yes' in result.stderr
    assert len(list_results(filled_cache)) == 2


def test_cache_rm_asks_and_takes_no_for_an_answer(filled_cache):
    result = subprocess.run([sys.executable, '-m', 'lazyphi', 'cache', 'rm', filled_cache], input='n\n',
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert 'Delete 2 results' in result.stdout
    assert len(list_results(filled_cache)) == 2
    result = subprocess.run([sys.executable, '-m', 'lazyphi', 'cache', 'rm', filled_cache], input='y\n',
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert list_results(filled_cache) == []


def test_cache_rm_yes_deletes_the_named_result(filled_cache):
    first, second = (r.key for r in list_results(filled_cache))
    result = lazyphi_cli('cache', 'rm', filled_cache, first, '--yes', cwd=os.path.dirname(filled_cache))
    assert result.returncode == 0, result.stderr
    assert 'Deleted 1 result' in result.stdout
    assert [r.key for r in list_results(filled_cache)] == [second]


def test_cache_rm_older_than_keeps_newer_results(filled_cache, capsys):
    assert main(['cache', 'rm', filled_cache, '--older-than', '1d', '--yes']) == 0
    assert 'Nothing to delete' in capsys.readouterr().out
    assert len(list_results(filled_cache)) == 2
    assert main(['cache', 'rm', filled_cache, '--older-than', '0s', '--yes']) == 0
    assert list_results(filled_cache) == []


def test_cache_rm_of_an_unknown_key_fails_with_the_keys_there(filled_cache, capsys):
    assert main(['cache', 'rm', filled_cache, 'nosuchkey', '--yes']) == 2
    err = capsys.readouterr().err
    assert "no result 'nosuchkey'" in err and list_results(filled_cache)[0].key in err
    assert len(list_results(filled_cache)) == 2


def test_run_computes_and_summarises(workdir):
    cache_dir = str(workdir / 'results')
    result = lazyphi_cli('run', 'ramp_model:make', '--set', 'n=8', '--set', 'label=hello', '--properties', 'doubled',
                         '--dims', 'batch', '--scheduler', 'sync', '--cache-dir', cache_dir, '--memory-limit', '1GiB',
                         cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert 'Plan for Ramp: doubled' in result.stdout and '(1 worker)' in result.stdout  # sync: one at a time
    assert 'doubled: (exampleᵇ=8), float32, in memory' in result.stdout  # written, and within the memory limit
    [stored] = list_results(cache_dir)
    assert stored.complete and stored.properties == ('doubled',)


def test_run_chooses_chunk_size_and_codec(workdir):
    cache_dir = str(workdir / 'results')
    result = lazyphi_cli('run', 'ramp_model:make', '--set', 'n=8', '--properties', 'doubled', '--scheduler', 'sync',
                         '--cache-dir', cache_dir, '--chunk-bytes', '8B', '--compressor', 'zstd', cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert '(chunks of 2)' in result.stdout and 'to disk (zstd)' in result.stdout  # 8 bytes: two float32
    bad = lazyphi_cli('run', 'ramp_model:make', '--properties', 'doubled', '--chunk-bytes', 'lots', cwd=workdir)
    assert bad.returncode == 2 and '--chunk-bytes' in bad.stderr and 'Traceback' not in bad.stderr


def test_run_in_process_without_a_cache_keeps_results_in_memory(workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))  # main() puts the current directory there: already done, undone after
    sys.modules.pop('ramp_model', None)
    try:
        assert main(['run', 'ramp_model:make', '--set', 'n=5', '--properties', 'doubled', '--dims', 'example',
                     '--scheduler', 'sync', '--max-workers', '1']) == 0
    finally:
        sys.modules.pop('ramp_model', None)
    out = capsys.readouterr().out
    assert 'doubled: (exampleᵇ=5), float32, in memory' in out


def test_run_with_a_cache_key_keeps_results_apart(workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    sys.modules.pop('ramp_model', None)
    cache_dir = str(workdir / 'results')
    outputs = []
    try:
        for key in ('v1', 'v2', 'v1'):
            assert main(['run', 'ramp_model:make', '--properties', 'doubled', '--scheduler', 'sync', '--cache-dir',
                         cache_dir, '--cache-key', key, '--no-progress']) == 0
            outputs.append(capsys.readouterr().out)
    finally:
        sys.modules.pop('ramp_model', None)
    assert len(list_results(cache_dir)) == 2
    assert 'computed 4' in outputs[1] and 'reused 4 of 4 blocks' in outputs[2]


def test_a_failing_property_exits_1_with_a_one_line_reason(workdir):
    result = lazyphi_cli('run', 'ramp_model:make', '--properties', 'broken', '--scheduler', 'sync', cwd=workdir)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith('lazyphi run: PropertyFailed: ')
    assert 'the broken property failed' in lines[0]
    verbose = lazyphi_cli('run', 'ramp_model:make', '--properties', 'broken', '--scheduler', 'sync', '-v',
                          cwd=workdir)
    assert verbose.returncode == 1
    assert 'Traceback' in verbose.stderr


@pytest.mark.parametrize(('target', 'message'), [
    ('no_such_module:make', "cannot import module 'no_such_module'"),
    ('ramp_model:nope', "module 'ramp_model' has no 'nope'"),
    ('ramp_model:not_callable', 'not a callable factory'),
    ('ramp_model', 'expected module:factory'),
])
def test_a_bad_target_exits_2_with_a_clear_message(workdir, target, message):
    result = lazyphi_cli('run', target, '--properties', 'doubled', cwd=workdir)
    assert result.returncode == 2
    assert message in result.stderr
    assert 'Traceback' not in result.stderr


def test_bad_arguments_exit_2(tmp_path):
    assert lazyphi_cli('run', 'x:y', cwd=tmp_path).returncode == 2  # --properties missing
    assert lazyphi_cli('cache', 'rm', str(tmp_path), '--older-than', 'soon', cwd=tmp_path).returncode == 2
    result = lazyphi_cli('run', 'x:y', '--properties', 'a', '--scheduler', 'fast', cwd=tmp_path)
    assert result.returncode == 2


@pytest.mark.parametrize('count', ['0', '-2', 'many'])
def test_max_workers_below_one_exits_2_pointing_at_the_sync_scheduler(workdir, count, capsys):
    with pytest.raises(SystemExit) as stop:
        main(['run', 'ramp_model:make', '--properties', 'doubled', '--max-workers', count])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"expected a whole number of workers, at least 1, got '{count}'" in err and '--scheduler sync' in err


def test_a_cache_dir_that_cannot_be_created_exits_2_before_the_plan(workdir):
    (workdir / 'a_file').write_text('not a directory')
    for cache_dir, reason in [(workdir / 'a_file' / 'results', 'Not a directory'), (workdir / 'a_file', 'is a file')]:
        result = lazyphi_cli('run', 'ramp_model:make', '--properties', 'doubled', '--scheduler', 'sync',
                             '--cache-dir', str(cache_dir), cwd=workdir)
        assert result.returncode == 2, result.stderr
        assert f"--cache-dir '{cache_dir}' cannot hold results" in result.stderr and reason in result.stderr
        assert 'Plan for' not in result.stdout


def test_run_help_names_the_default_scheduler(capsys):
    with pytest.raises(SystemExit):
        main(['run', '--help'])
    assert "default: Dask's configured scheduler, dask.config.set(scheduler=...), else threads" in ' '.join(
        capsys.readouterr().out.split())


@pytest.mark.parametrize(('setting', 'message'), [
    ('n=sixty-four', "--set n='sixty-four': parameter 'n' of ramp_model:make wants int (from its default 4), got str"),
    ('n=True', "parameter 'n' of ramp_model:make wants int (from its default 4), got bool"),
    ('label=3', "parameter 'label' of ramp_model:make wants str (from its default 'ramp'), got int; to pass the "
                "text, quote it: --set \"label='3'\""),
    ('size=3', "ramp_model:make has no parameter 'size'; its parameters are n, label"),
])
def test_a_set_value_the_factory_does_not_take_exits_2_naming_field_and_type(workdir, setting, message):
    result = lazyphi_cli('run', 'ramp_model:make', '--set', setting, '--properties', 'doubled', '--scheduler', 'sync',
                         cwd=workdir)
    assert result.returncode == 2
    assert message in result.stderr and 'Traceback' not in result.stderr


def test_set_values_are_checked_against_annotations_and_defaults():
    def factory(n: int | None = None, scale: float = 1.0, mode: typing.Literal['a', 'b'] = 'a',
                shape: list | None = None, anything=None, tensor: math.Tensor | None = None, **extra):
        return None

    check_arguments(factory, 'f', {'n': 3, 'scale': 2, 'mode': 'b', 'shape': [1, 2], 'anything': 'x',
                                   'tensor': 'zeros', 'other': 1})  # tensors: not literals, not checked
    check_arguments(factory, 'f', {'n': None, 'scale': 2.5})
    for bad in ({'n': 2.5}, {'scale': 'big'}, {'mode': 'c'}, {'shape': (1, 2)}):
        with pytest.raises(UsageError, match=f"parameter '{next(iter(bad))}' of f wants"):
            check_arguments(factory, 'f', bad)


def test_an_unknown_property_exits_2_naming_the_properties_there(workdir):
    result = lazyphi_cli('run', 'ramp_model:make', '--properties', 'doubled,tripled', '--scheduler', 'sync',
                         cwd=workdir)
    assert result.returncode == 2
    assert "Ramp has no cached or parallel property 'tripled'; its properties are doubled, broken" in result.stderr
    assert 'Traceback' not in result.stderr


def test_set_values_are_literals_or_strings():
    assert assignment('n=8') == ('n', 8)
    assert assignment('xs=[1, 2.5]') == ('xs', [1, 2.5])
    assert assignment('name=hello') == ('name', 'hello')
    assert assignment('path=a=b') == ('path', 'a=b')
    with pytest.raises(argparse.ArgumentTypeError):
        assignment('novalue')


def test_durations():
    assert duration('7d') == 7 * 86400
    assert duration('12h') == 12 * 3600
    assert duration('30m') == duration('30min') == 1800
    assert duration('1.5s') == 1.5
    with pytest.raises(argparse.ArgumentTypeError):
        duration('7 days')


def test_importing_the_cli_loads_no_dask_or_zarr():
    code = 'import sys, lazyphi.cli; print(sorted(m for m in ("dask", "distributed", "zarr") if m in sys.modules))'
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == '[]', result.stderr
