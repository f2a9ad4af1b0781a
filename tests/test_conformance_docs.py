"""The pass count and the list of phiml tests lazyphi fails, as the README and docs/migration.md state them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT.parent / 'shared' / 'conformance' / 'phiml-all' / 'tests'


def _plugin():
    spec = importlib.util.spec_from_file_location('phiml_conformance', ROOT / 'tests' / 'conformance' /
                                                  'phiml_conformance.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SUITE.is_dir(), reason='phiml conformance suite not beside the repository')
@pytest.mark.parametrize('doc', ['README.md', 'docs/migration.md'])
def test_stated_count_matches_expected_failures(doc):
    plugin = _plugin()
    counted = [t for t in plugin.suite_test_ids(SUITE) if t not in plugin.FAILS_ON_PHIML]
    listed = plugin.read_expected_failures()
    stated = re.findall(r'(\d+) of (?:its |the )?(\d+)(?: of phiml\'s)? tests pass', (ROOT / doc).read_text())
    assert stated, f'{doc} states no pass count'
    assert {(int(a), int(b)) for a, b in stated} == {(len(counted) - len(listed), len(counted))}


def test_migration_names_every_expected_failure():
    text = (ROOT / 'docs' / 'migration.md').read_text()
    missing = []
    for test_id in _plugin().read_expected_failures():
        if f"{test_id.rsplit('::', 1)[1]}`" not in text:
            missing.append(test_id)
    assert not missing, f'docs/migration.md does not name these expected failures: {missing}'
