"""pytest plugin running PhiML's own test suite against lazyphi with a strict list of expected failures.

Loaded by `pytest -c tests/conformance/pytest.ini` (see its comment for the whole command). Each line of
`expected_failures.txt` names one test (`file::Class::test`, relative to the suite's `tests/` folder)
and, after ` | `, why lazyphi fails it. Listed tests are strict expected failures: one that passes fails
the run, so the list only shrinks. An entry naming no collected test of a collected file fails the run
too. A file that fails to import yields its tests failing with that ImportError (`SuiteModule`). At the
end one line reports `phiml conformance: N of M pass, K expected failures`, M counting the suite's tests that
pass on PhiML itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIST = Path(__file__).with_name('expected_failures.txt')
# fails on PhiML itself (see the suite's README): not counted among the tests lazyphi should pass
FAILS_ON_PHIML = {'math/test__ops.py::TestOps::test_grid_sample_gradient_1d'}


def read_expected_failures(path: Path = LIST) -> dict[str, str]:
    """Test id -> reason, from the list file; a malformed line is a ValueError naming it."""
    entries = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        test_id, sep, reason = line.partition(' | ')
        if not sep or not reason.strip() or '::' not in test_id:
            raise ValueError(f'{path}:{number}: expected "file::Class::test | reason", got {line!r}')
        if test_id in entries:
            raise ValueError(f'{path}:{number}: {test_id} is listed twice')
        entries[test_id.strip()] = reason.strip()
    return entries


def file_test_ids(file: Path) -> list[str]:
    """`Class::test` of each test method of one suite file, read from its source (no import needed).

    A method defined twice in one class counts once, as Python keeps only the last definition.
    """
    ids = []
    for cls in ast.parse(file.read_text()).body:
        if isinstance(cls, ast.ClassDef):
            ids += [f'{cls.name}::{f.name}' for f in cls.body if isinstance(f, ast.FunctionDef)
                    and f.name.startswith('test')]
    return list(dict.fromkeys(ids))


def suite_test_ids(root: Path) -> list[str]:
    """Ids (`file::Class::test`) of the test methods in the suite's files."""
    return [f'{file.relative_to(root).as_posix()}::{test}' for file in sorted(root.rglob('test_*.py'))
            for test in file_test_ids(file)]


class UnimportableTest(pytest.Item):
    """A test of a suite file that cannot be imported: it fails with that ImportError, so it can be listed."""

    def __init__(self, *, error: ImportError, **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self):
        raise ImportError(f'{self.path.name} could not be imported: {self.error}') from self.error

    def reportinfo(self):
        return self.path, None, self.name


class SuiteModule(pytest.Module):
    """A suite file whose import fails with an ImportError yields its tests (read from its source) failing with it.

    A file that imports a name lazyphi lacks (`from lazyphi import nn`) would otherwise stop the whole run at
    collection; this way each of its tests fails on its own and is listed as an expected failure like any other.
    """

    def collect(self):
        try:
            self.obj  # noqa: B018 -- reading it imports the file
        except self.CollectError as error:
            if not isinstance(error.__cause__, ImportError):
                raise
            return [UnimportableTest.from_parent(self, name=test, error=error.__cause__)
                    for test in file_test_ids(self.path)]
        return super().collect()


@pytest.fixture(autouse=True)
def _in_temporary_directory(tmp_path, monkeypatch):
    """Run each test in its own empty directory: the suite writes files to relative paths (`files.npz`, `data/`)."""
    monkeypatch.chdir(tmp_path)


def suite_root(path: Path) -> Path:
    """The suite's `tests/` folder: `path` itself or the nearest folder above it of that name."""
    path = path.resolve()
    return next((p for p in (path, *path.parents) if p.name == 'tests'), path)


class Conformance:
    def __init__(self):
        self.expected = read_expected_failures()
        self.root: Path | None = None
        self.outcomes: dict[str, str] = {}
        self.ids: dict[str, str] = {}  # pytest node id -> test id relative to the suite's root

    def test_id(self, item_path: Path, nodeid: str) -> str:
        relative = item_path.resolve().relative_to(self.root).as_posix()
        return relative + '::' + nodeid.split('::', 1)[1]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config, items):
        self.root = suite_root(Path(config.args[0]) if config.args else Path.cwd())
        seen = set()
        for item in items:
            test_id = self.test_id(item.path, item.nodeid)
            self.ids[item.nodeid] = test_id
            seen.add(test_id)
            if test_id in self.expected:
                item.add_marker(pytest.mark.xfail(reason=self.expected[test_id], strict=True))
        files = {test_id.split('::')[0] for test_id in seen}
        stale = sorted(t for t in set(self.expected) - seen if t.split('::')[0] in files)
        if stale:
            raise pytest.UsageError(f'{LIST.name} lists tests that were not collected (renamed or removed?): '
                                    f'{stale}')

    def pytest_runtest_logreport(self, report):
        if report.nodeid in self.ids and (report.when == 'call' or report.outcome != 'passed'):
            test_id = self.ids[report.nodeid]
            if hasattr(report, 'wasxfail'):
                outcome = 'xpassed' if report.passed else 'xfailed'
            else:
                outcome = report.outcome
            if self.outcomes.get(test_id) in (None, 'passed'):
                self.outcomes[test_id] = outcome

    def pytest_terminal_summary(self, terminalreporter):
        if self.root is None:
            return
        counted = [t for t in suite_test_ids(self.root) if t not in FAILS_ON_PHIML]
        passed = sum(1 for t in counted if self.outcomes.get(t) == 'passed')
        xfailed = sum(1 for t in counted if self.outcomes.get(t) == 'xfailed')
        terminalreporter.write_line(f'phiml conformance: {passed} of {len(counted)} pass, {xfailed} expected failures')


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    return SuiteModule.from_parent(parent, path=module_path)


def pytest_configure(config):
    config.pluginmanager.register(Conformance(), 'lazyphi-conformance')
