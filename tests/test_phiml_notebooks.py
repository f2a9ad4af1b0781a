"""phiml's documentation notebooks (copies in tests/conformance/notebooks/) run on lazyphi with `phiml` renamed.

Each runs top to bottom in a Jupyter kernel of this interpreter, its code cells changed in two ways only: every
name `phiml` reads `lazyphi`, and shell lines (`!pip install phiml`) are left out, so nothing is installed.
"""

import re
from pathlib import Path

import pytest
from kernels import use_this_interpreter

NOTEBOOK_DIR = Path(__file__).resolve().parent / 'conformance' / 'notebooks'
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob('*.ipynb'))
PHIML = re.compile(r'\bphiml\b')


def renamed(source: str) -> str:
    """A code cell's source with `phiml` renamed to `lazyphi` and its shell lines left out."""
    return '\n'.join(PHIML.sub('lazyphi', line) for line in source.splitlines() if not line.lstrip().startswith('!'))


def test_renaming_changes_only_the_name_and_drops_shell_lines():
    source = '%%capture\n!pip install phiml\n\nfrom phiml import math, nn\nphiml_like = 1  # phiml.nn'
    assert renamed(source) == '%%capture\n\nfrom lazyphi import math, nn\nphiml_like = 1  # lazyphi.nn'


def test_the_copies_are_here():
    assert [p.name for p in NOTEBOOKS] == ['Networks.ipynb']
    assert (NOTEBOOK_DIR / 'LICENSE-PhiML.txt').read_text().startswith('MIT License')


@pytest.mark.slow
@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_phiml_notebook_runs_on_lazyphi(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip('nbformat')
    nbclient = pytest.importorskip('nbclient')
    pytest.importorskip('ipykernel')
    pytest.importorskip('matplotlib')
    use_this_interpreter(tmp_path, monkeypatch)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == 'code':
            cell.source = renamed(cell.source)
    # raises CellExecutionError, naming the cell, on the first cell that fails
    nbclient.NotebookClient(nb, timeout=300, kernel_name='python3',
                            resources={'metadata': {'path': str(tmp_path)}}).execute()
    errors = [output for cell in nb.cells for output in cell.get('outputs', []) if output.output_type == 'error']
    assert not errors, errors
    assert all(cell.get('execution_count') for cell in nb.cells if cell.cell_type == 'code')
