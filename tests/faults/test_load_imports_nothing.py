"""`lazyphi.load` never imports a module a save names: classes resolve only among modules already imported or
listed by the caller (`allow_modules=`); otherwise they come back as plain data with a warning.

Item 4 of issue #18: a `payload.py` in the working directory ran on load, and the refusal came after the import.
"""

import dataclasses
import enum
import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

import lazyphi
from lazyphi import math
from lazyphi.storage import UnknownClassWarning
from lazyphi.storage._results import manifest_checksum

PAYLOAD = '''
import dataclasses, enum, os
open(os.environ['LAZYPHI_TEST_MARKER'], 'w').close()  # proof that the module ran

@dataclasses.dataclass
class Thing:
    x: object
    label: str = 'a'

class Colour(enum.Enum):
    RED = 1
'''


@dataclasses.dataclass
class Holder:
    x: object
    label: str = 'a'


class Colour(enum.Enum):
    RED = 1


@pytest.fixture
def payload(tmp_path, monkeypatch):
    """A module `lazyphi_payload` on sys.path that leaves a marker file when it runs; yields the marker."""
    folder = tmp_path / 'modules'
    folder.mkdir()
    (folder / 'lazyphi_payload.py').write_text(PAYLOAD)
    marker = tmp_path / 'ran'
    monkeypatch.setenv('LAZYPHI_TEST_MARKER', str(marker))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, 'lazyphi_payload', raising=False)
    yield marker
    sys.modules.pop('lazyphi_payload', None)


def _save_naming(tmp_path, module: str) -> str:
    """A save of a dataclass with an enum config value, its class paths changed to `module`."""
    target = tmp_path / 'save'
    lazyphi.save(Holder(math.tensor([1.0, 2.0], math.spatial('x')), Colour.RED), target)
    file = target / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    manifest['root']['class'] = f'{module}:Thing'
    manifest['root']['config']['label']['class'] = f'{module}:Colour'
    manifest['checksum'] = manifest_checksum(manifest)  # crafted: signed as lazyphi signs
    file.write_text(json.dumps(manifest))
    return str(target)


def test_a_module_named_by_a_save_is_not_imported(tmp_path, payload):
    target = _save_naming(tmp_path, 'lazyphi_payload')
    with pytest.warns(UnknownClassWarning, match="'lazyphi_payload:(Thing|Colour)'.*allow_modules") as caught:
        loaded = lazyphi.load(target)
    assert not payload.exists() and 'lazyphi_payload' not in sys.modules
    assert {str(w.message).split(':')[0] for w in caught} == {'lazyphi.load found no class for obj',
                                                              'lazyphi.load found no class for obj.label'}
    assert set(loaded) == {'x', 'label'} and loaded['label'] == 'RED'
    math.assert_close(loaded['x'], math.tensor([1.0, 2.0], math.spatial('x')))


def test_modules_the_caller_allows_are_imported(tmp_path, payload):
    target = _save_naming(tmp_path, 'lazyphi_payload')
    loaded = lazyphi.load(target, allow_modules=['lazyphi_payload'])
    assert payload.exists() and type(loaded).__name__ == 'Thing' and loaded.label.name == 'RED'


def test_a_package_allows_its_submodules(tmp_path, monkeypatch):
    package = tmp_path / 'pkg_allowed'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'models.py').write_text(PAYLOAD)
    monkeypatch.setenv('LAZYPHI_TEST_MARKER', str(tmp_path / 'ran'))
    monkeypatch.syspath_prepend(str(tmp_path))
    target = _save_naming(tmp_path, 'pkg_allowed.models')
    try:
        loaded = lazyphi.load(target, allow_modules='pkg_allowed')
        assert type(loaded).__module__ == 'pkg_allowed.models'
    finally:
        for name in ('pkg_allowed.models', 'pkg_allowed'):
            sys.modules.pop(name, None)


def test_modules_already_imported_resolve_without_running_module_getattr(tmp_path, monkeypatch):
    asked = []
    module = types.ModuleType('lazyphi_lazy_module')
    module.__getattr__ = lambda name: asked.append(name) or Holder
    monkeypatch.setitem(sys.modules, 'lazyphi_lazy_module', module)
    target = _save_naming(tmp_path, 'lazyphi_lazy_module')
    with pytest.warns(UnknownClassWarning):
        loaded = lazyphi.load(target)
    assert isinstance(loaded, dict) and asked == []  # a lazy attribute could import anything
    module.Thing, module.Colour = Holder, Colour
    loaded = lazyphi.load(target)
    assert type(loaded) is Holder and loaded.label is Colour.RED


def test_classes_of_this_process_resolve(tmp_path):
    target = tmp_path / 'save'
    lazyphi.save(Holder(math.tensor(1.0), Colour.RED), target)
    loaded = lazyphi.load(target)
    assert type(loaded) is Holder and loaded.label is Colour.RED


@pytest.mark.parametrize('bad', [5, [3], ['.relative'], ['a b'], [''], 'x..y'])
def test_allow_modules_takes_module_names(tmp_path, bad):
    lazyphi.save({'a': 1}, tmp_path / 'save')
    with pytest.raises((TypeError, ValueError), match='allow_modules'):
        lazyphi.load(tmp_path / 'save', allow_modules=bad)


class _LazyProxy:
    """Stands in a module's namespace for a module imported on first attribute access, as lazy importers do."""

    def __init__(self, record: list):
        object.__setattr__(self, '_record', record)

    def __getattribute__(self, name):
        object.__getattribute__(self, '_record').append(name)  # here a real proxy would import its module
        return Holder

    def __getattr__(self, name):
        return self.__getattribute__(name)


@pytest.mark.parametrize('path', ['lazyphi_proxy_module:proxy.Thing', 'lazyphi_proxy_module:proxy',
                                  'lazyphi_proxy_module:proxy.__dict__.Thing'])
def test_load_never_walks_through_a_lazy_proxy(tmp_path, monkeypatch, path):
    touched = []
    module = types.ModuleType('lazyphi_proxy_module')
    module.proxy = _LazyProxy(touched)
    monkeypatch.setitem(sys.modules, 'lazyphi_proxy_module', module)
    target = _save_naming(tmp_path, 'lazyphi_proxy_module')
    manifest_file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(manifest_file.read_text())
    manifest['root']['class'] = path
    manifest['checksum'] = manifest_checksum(manifest)
    manifest_file.write_text(json.dumps(manifest))
    with pytest.warns(UnknownClassWarning, match='proxy'):
        loaded = lazyphi.load(target)
    assert touched == [] and isinstance(loaded, dict)


def test_load_never_loads_a_lazily_imported_module(tmp_path, monkeypatch):
    """A module registered through importlib's LazyLoader runs on first attribute access; load must not touch it.

    A module name of its own: classes loaded from `lazyphi_payload` by other tests may still be alive, and load
    finds those (they were allowed once in this process).
    """
    file = tmp_path / 'lazyphi_lazily_loaded.py'
    file.write_text(PAYLOAD)
    marker = tmp_path / 'ran'
    monkeypatch.setenv('LAZYPHI_TEST_MARKER', str(marker))
    spec = importlib.util.spec_from_file_location('lazyphi_lazily_loaded', file)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, 'lazyphi_lazily_loaded', module)
    spec.loader.exec_module(module)
    target = _save_naming(tmp_path, 'lazyphi_lazily_loaded')
    with pytest.warns(UnknownClassWarning):
        loaded = lazyphi.load(target)
    assert not marker.exists() and isinstance(loaded, dict)


def test_the_lazy_proxies_of_importlib_metadata_import_nothing(tmp_path):
    """`importlib_metadata` holds `csv` as a lazy proxy: resolving `importlib_metadata:csv.X` imported csv."""
    pytest.importorskip('importlib_metadata')
    target = _save_naming(tmp_path, 'importlib_metadata')
    manifest_file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(manifest_file.read_text())
    manifest['root']['class'] = 'importlib_metadata:csv.Dialect'
    manifest['root']['config']['label']['class'] = 'importlib_metadata:csv.QuoteStyle'
    manifest['checksum'] = manifest_checksum(manifest)
    manifest_file.write_text(json.dumps(manifest))
    script = ('import sys, warnings, importlib_metadata, lazyphi\n'
              'before = set(sys.modules)\n'
              'with warnings.catch_warnings(record=True):\n'
              '    warnings.simplefilter("always")\n'
              f'    loaded = lazyphi.load({str(target)!r})\n'
              'assert isinstance(loaded, dict), loaded\n'
              'print(sorted(set(sys.modules) - before))\n')
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
    imported = eval(result.stdout.strip().splitlines()[-1])
    assert not [m for m in imported if m == 'csv' or m.startswith('email')], imported
