"""The notebooks in notebooks/ run top to bottom without errors, and are stored without outputs."""

import importlib.util
import json
from pathlib import Path

import pytest
from kernels import use_this_interpreter

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / 'notebooks'
_SPEC = importlib.util.spec_from_file_location('executed_notebooks', ROOT / 'scripts' / 'executed_notebooks.py')
executed_notebooks = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(executed_notebooks)
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob('*.ipynb'))


@pytest.mark.slow
@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path, tmp_path, monkeypatch):
    """Runs the notebook, or checks the run the docs build made of this very notebook and code (one run each)."""
    nbformat = pytest.importorskip('nbformat')
    pytest.importorskip('nbclient')
    pytest.importorskip('ipykernel')
    pytest.importorskip('matplotlib')
    use_this_interpreter(tmp_path, monkeypatch)
    # raises CellExecutionError, naming the cell, on the first cell that fails
    nb = nbformat.read(executed_notebooks.executed(path, timeout=300), as_version=4)
    errors = [output for cell in nb.cells for output in cell.get('outputs', []) if output.output_type == 'error']
    assert not errors, errors
    assert all(cell.get('execution_count') for cell in nb.cells if cell.cell_type == 'code')


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4, NOTEBOOKS


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding='utf-8'))
    dirty = [i for i, cell in enumerate(nb['cells']) if cell['cell_type'] == 'code'
             and (cell.get('outputs') or cell.get('execution_count') is not None)]
    assert not dirty, (f'{path.name}: code cells {dirty} have outputs or execution counts; strip them '
                       f'(e.g. `jupyter nbconvert --clear-output --inplace {path.name}`)')
