"""The notebooks of notebooks/, each run once per state of the code: the docs build and the tests share the run.

`executed(path)` returns a copy of the notebook with its outputs, under `.cache/executed-notebooks/`, named by a
key of the notebook's bytes and of every source file of the `lazyphi` package: a copy of that key is reused, any
other key runs the notebook (top to bottom, in an empty directory) and keeps the copy. A cell that raises fails the
run (`nbclient.exceptions.CellExecutionError`, naming the cell) and keeps nothing. The docs build
(`mkdocs.yml` names this file among its hooks) renders these copies instead of running each notebook again, and
`tests/test_notebooks.py` checks them: whichever comes first runs the notebooks.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / '.cache' / 'executed-notebooks'


def key(path: Path) -> str:
    """A hash of the notebook and of the package's source: its outputs follow both."""
    digest = hashlib.sha256(Path(path).read_bytes())
    for source in sorted((ROOT / 'lazyphi').rglob('*.py')):
        digest.update(str(source.relative_to(ROOT)).encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def executed(path: Path, kernel_name: str = 'python3', timeout: int = 600) -> Path:
    """The notebook at `path` run top to bottom: a copy with outputs, made now or by an earlier run of this code."""
    import nbclient
    import nbformat

    path = Path(path)
    target = CACHE / f'{path.stem}.{key(path)}.ipynb'
    if target.exists():
        return target
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix='lazyphi-notebook-') as work:
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={'metadata': {'path': work}}).execute()
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f'{target.name}.{os.getpid()}.partial')
    nbformat.write(nb, partial)
    os.replace(partial, target)  # atomic: the docs build and a test may run the same notebook at once
    for older in CACHE.glob(f'{path.stem}.*.ipynb'):
        if older != target:
            older.unlink(missing_ok=True)
    return target


def on_files(files, config):
    """MkDocs hook: each notebook page renders its executed copy (mkdocs-jupyter runs none itself)."""
    for file in files:
        if file.src_uri.endswith('.ipynb'):
            file.abs_src_path = str(executed(Path(file.abs_src_path)))
    return files
