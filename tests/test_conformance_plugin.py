"""The conformance plugin (tests/conformance/phiml_conformance.py) on a small suite of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_suite(suite: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'pytest', '-c', str(ROOT / 'tests' / 'conformance' / 'pytest.ini'),
                           str(suite), '-p', 'no:cacheprovider'], cwd=ROOT, capture_output=True, text=True,
                          env={'PYTHONPATH': f'{ROOT}:{ROOT / "tests" / "conformance"}', 'PATH': ''}, timeout=120)


@pytest.mark.slow  # a pytest run in a subprocess
def test_unimportable_file_fails_each_of_its_tests(tmp_path):
    suite = tmp_path / 'tests'
    suite.mkdir()
    (suite / 'test_broken.py').write_text(
        'from unittest import TestCase\n'
        'from lazyphi import no_such_module\n\n\n'
        'class TestBroken(TestCase):\n'
        '    def test_one(self):\n        pass\n\n'
        '    def test_two(self):\n        pass\n')
    (suite / 'test_fine.py').write_text(
        'from unittest import TestCase\n\n\nclass TestFine(TestCase):\n    def test_ok(self):\n        pass\n')
    result = _run_suite(suite)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert 'error during collection' not in out and 'ERROR' not in out, out
    assert '2 failed, 1 passed' in out, out
    assert "test_broken.py could not be imported: cannot import name 'no_such_module'" in out, out
    assert 'phiml conformance: 1 of 3 pass, 0 expected failures' in out, out


@pytest.mark.slow
def test_file_with_syntax_error_stays_a_collection_error(tmp_path):
    suite = tmp_path / 'tests'
    suite.mkdir()
    (suite / 'test_bad.py').write_text('class TestBad(:\n')
    result = _run_suite(suite)
    assert 'Interrupted: 1 error during collection' in result.stdout, result.stdout + result.stderr
    assert 'SyntaxError' in result.stdout and result.returncode != 0, result.stdout
