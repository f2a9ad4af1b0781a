"""lazyphi.verify(): the status of each backend and optional dependency, printed and returned."""

import numpy as np

import lazyphi
from lazyphi import _verify

NAMES = ['numpy', 'torch', 'jax', 'tensorflow', 'scipy', 'dask', 'distributed', 'zarr']


def test_verify_reports_working_and_missing_libraries(monkeypatch, capsys):
    monkeypatch.setattr(_verify, '_installed', lambda name: name in ('numpy', 'dask'))
    report = lazyphi.verify()
    assert list(report) == NAMES
    assert report['numpy'] == f'{np.__version__}, 0 GPUs, works'
    assert report['dask'].endswith(', imports')
    assert all(report[n] == 'not installed' for n in NAMES if n not in ('numpy', 'dask'))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(NAMES)
    assert lines[0].startswith('NumPy') and lines[0].endswith('works')
    assert lines[1].startswith('PyTorch') and lines[1].endswith('not installed')


def test_verify_reports_a_failing_backend_instead_of_raising(monkeypatch, capsys):
    def broken(name):
        raise RuntimeError(f'{name}: no driver')
    monkeypatch.setattr(_verify, '_installed', lambda name: name in ('numpy', 'torch', 'zarr'))
    monkeypatch.setattr(_verify, '_version', lambda name: '9.9' if name == 'torch' else broken(name))
    monkeypatch.setattr(_verify, 'backend_by_name', broken)
    report = lazyphi.verify()
    assert report['torch'] == '9.9, but its backend fails: RuntimeError: torch: no driver'
    assert report['numpy'] == 'installed but fails to import: RuntimeError: numpy: no driver'
    assert report['zarr'] == 'installed but fails to import: RuntimeError: zarr: no driver'
    assert 'PyTorch' in capsys.readouterr().out
