"""The layer rule, checked on the source: each package imports only downward, and only public modules of others.

Layers, bottom up: `_errors` and `_lazy` (PEP 562 helpers); `backend`; `math`; `storage`, `dataclasses` and
`nn` (siblings, none imports another); `parallel`; the top-level modules (`lazyphi/__init__.py`, `cli.py`,
`cache.py`). A module may import its own package freely; from another package only public modules (no path
part starting with `_`), except the shared `lazyphi._errors` and `lazyphi._lazy`. Module paths in string
constants (`importlib.import_module('lazyphi...')`, PEP 562 tables) count as imports; the allowed references
are `lazyphi.dataclasses` naming the parallel API of the reference's older layout, `TensorClass` resolving
`lazyphi.storage` on first use of its memmap methods, and a backend's `nn_library()` finding its module of
`lazyphi.nn`. No lazyphi module is imported inside a function, except
under `if TYPE_CHECKING:`.
"""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / 'lazyphi'
LAYERS = {'_errors': 0, '_lazy': 0, 'backend': 1, 'math': 2, 'storage': 3, 'dataclasses': 3, 'nn': 3, 'parallel': 4}
TOP = 5
# the PEP 562 alias, TensorClass's memmap methods and the backends' `nn_library()` (a plug-in lookup of the
# library's lazyphi.nn module), resolved on first use, documented in docs/design.md
ALLOWED_UPWARD = {('dataclasses', 'lazyphi.parallel'), ('dataclasses', 'lazyphi.storage'), ('backend', 'lazyphi.nn')}
MODULE_PATH = re.compile(r'^\.?lazyphi(\.\w+)+$|^\.\.?\w+(\.\w+)*$')


def package_of(module: str) -> str | None:
    """The package or top-level module of a dotted lazyphi module path (`math`, `cli`); None for `lazyphi` itself."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else None


def resolve(relative: str, level: int, importer: str) -> str:
    base = importer.split('.')[:-level] if level else []
    return '.'.join(base + ([relative] if relative else []))


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imports_of(path: Path, root: Path) -> list[tuple[int, str, bool]]:
    """(line, imported lazyphi module, inside a function) for every import and module-path string in a file."""
    name = module_name(path, root)
    package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, in_function: bool, type_checking: bool):
        if isinstance(node, ast.If) and getattr(node.test, 'id', None) == 'TYPE_CHECKING':
            type_checking = True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, ast.ImportFrom):
            target = resolve(node.module or '', node.level, package + '.x') if node.level else node.module or ''
            if target.startswith('lazyphi'):
                for alias in node.names:  # `from . import _engine` imports a module
                    full = f'{target}.{alias.name}'
                    found.append((node.lineno, full if _is_module(full, root) else target,
                                  in_function and not type_checking))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, in_function and not type_checking) for a in node.names
                         if a.name.startswith('lazyphi'))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_PATH.match(node.value):
            target = node.value
            if target.startswith('.'):
                level = len(target) - len(target.lstrip('.'))
                target = resolve(target.lstrip('.'), level, package + '.x')
            if target.startswith('lazyphi') and _is_module(target, root):
                found.append((node.lineno, target, False))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, type_checking)
    visit(tree, False, False)
    return found


def _is_module(dotted: str, root: Path) -> bool:
    path = root.parent.joinpath(*dotted.split('.'))
    return path.with_suffix('.py').exists() or (path / '__init__.py').exists()


def violations(root: Path = PACKAGE) -> list[str]:
    """Every import in the package `root` that breaks the layer rule, as readable lines."""
    problems = []
    for path in sorted(root.rglob('*.py')):
        importer = module_name(path, root)
        own = package_of(importer)
        own_layer = LAYERS.get(own, TOP)
        for line, target, in_function in imports_of(path, root):
            where = f'{path.relative_to(root.parent)}:{line}'
            other = package_of(target)
            if in_function:
                problems.append(f'{where} imports {target} inside a function')
            if other == own:
                continue
            other_layer = LAYERS.get(other, TOP)
            if (own, target) in ALLOWED_UPWARD or (own, f'lazyphi.{other}') in ALLOWED_UPWARD:
                continue
            if other_layer > own_layer or (other_layer == own_layer and own_layer != TOP):
                problems.append(f'{where}: {own or "lazyphi"} (layer {own_layer}) imports {target} '
                                f'(layer {other_layer})')
            elif other != '_errors' and any(part.startswith('_') for part in target.split('.')[2:]):
                problems.append(f'{where}: {own or "lazyphi"} imports the private module {target} of {other}')
    return problems


def test_every_import_points_down_to_public_modules():
    assert violations() == []


def planted(tmp_path: Path, module: str, source: str) -> Path:
    """A copy of the package with `source` appended to `module` (a path relative to the package)."""
    copy = tmp_path / 'lazyphi'
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns('__pycache__'))
    with open(copy / module, 'a') as f:
        f.write('\n' + source + '\n')
    return copy


@pytest.mark.parametrize('module, source, expected', [
    ('math/_ops.py', 'from ..parallel import plan', 'math (layer 2) imports lazyphi.parallel (layer 4)'),
    ('storage/_memory.py', 'from ..dataclasses import replace', 'storage (layer 3) imports lazyphi.dataclasses'),
    ('backend/_numpy.py', "import importlib\nimportlib.import_module('lazyphi.math')", 'imports lazyphi.math'),
    ('parallel/_plan.py', 'from ..math._tensor import Dense', 'imports the private module lazyphi.math._tensor'),
    ('math/_ops.py', 'def f():\n    from ._tree import tree_map', 'imports lazyphi.math._tree inside a function'),
    ('storage/_memory.py', 'from ..cache import list_results', 'storage (layer 3) imports lazyphi.cache (layer 5)'),
    ('parallel/_plan.py', "import importlib\nimportlib.import_module('lazyphi.cli')", 'imports lazyphi.cli (layer 5)'),
])
def test_a_planted_violation_is_found(tmp_path, module, source, expected):
    problems = violations(planted(tmp_path, module, source))
    assert any(expected in p for p in problems), problems


BANNED = ('torch', 'jax', 'tensorflow', 'dask', 'distributed', 'zarr', 'scipy')


def test_lint_bans_module_level_imports_of_heavy_libraries(tmp_path):
    """ruff's TID253 (configured in pyproject.toml) flags `import torch` at module level outside its owners."""
    ruff = [sys.executable, '-m', 'ruff']
    if subprocess.run([*ruff, '--version'], capture_output=True).returncode != 0:
        pytest.skip('ruff is not installed in this environment (the lint environment runs it)')
    config = PACKAGE.parent / 'pyproject.toml'
    for library in BANNED:
        copy = planted(tmp_path / library, 'math/_ops.py', f'import {library}')
        result = subprocess.run([*ruff, 'check', '--config', str(config), '--select', 'TID253', str(copy)],
                                capture_output=True, text=True)
        flagged = [line for line in result.stdout.splitlines() if 'TID253' in line or '_ops.py' in line]
        assert any('math/_ops.py' in line for line in flagged), (library, result.stdout)
    clean = subprocess.run([*ruff, 'check', '--config', str(config), '--select', 'TID253', str(PACKAGE)],
                           capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout
