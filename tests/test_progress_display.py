"""What a run shows while it computes on a `distributed` client in Jupyter: distributed's widget where
ipywidgets is installed (issue #19: it was never displayed), else a text bar redrawn in place."""

import json
import re
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SETUP = textwrap.dedent('''
    import time
    from dataclasses import dataclass

    from distributed import Client, LocalCluster

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch
    from lazyphi.parallel import parallel_compute


    @dataclass(frozen=True)
    class Slow:
        data: Tensor

        @cached_property
        def doubled(self) -> Tensor:
            if self.data.available:
                time.sleep(1.5)  # the display appears once a run has taken a second
            return self.data * 2


    client = Client(LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=':0'))
''')
RUN = 'slow = Slow(math.arange(batch(example=4)) * 1.0)\nparallel_compute(slow, [Slow.doubled]);'
WIDGET = 'application/vnd.jupyter.widget-view+json'


def _run_notebook(cells: list, tmp_path, monkeypatch) -> list:
    """Execute `cells` in a kernel running this interpreter; the outputs of each cell."""
    nbformat = pytest.importorskip('nbformat')
    nbclient = pytest.importorskip('nbclient')
    pytest.importorskip('ipykernel')
    spec_dir = tmp_path / 'jupyter' / 'kernels' / 'python3'
    spec_dir.mkdir(parents=True)
    (spec_dir / 'kernel.json').write_text(json.dumps({
        'argv': [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        'display_name': 'Python 3 (test interpreter)', 'language': 'python'}))
    monkeypatch.setenv('JUPYTER_PATH', str(tmp_path / 'jupyter'))  # searched before every other place
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name='python3',
                            resources={'metadata': {'path': str(tmp_path)}}).execute()
    return [cell.outputs for cell in nb.cells]


def test_a_notebook_with_ipywidgets_shows_the_progress_widget(tmp_path, monkeypatch):
    pytest.importorskip('ipywidgets')
    outputs = _run_notebook([SETUP, RUN, 'client.close()'], tmp_path, monkeypatch)
    shown = [output for output in outputs[1] if output.output_type == 'display_data']
    assert any(WIDGET in output.data for output in shown), outputs[1]


def test_a_notebook_without_ipywidgets_shows_the_text_bar_as_one_output_redrawn_in_place(tmp_path, monkeypatch):
    hide = 'import sys\nsys.modules["ipywidgets"] = None  # as if not installed'
    outputs = _run_notebook([hide, SETUP, RUN, 'client.close()'], tmp_path, monkeypatch)
    bars = [output.data['text/plain'] for output in outputs[2]
            if output.output_type == 'display_data' and 'Completed' in output.data.get('text/plain', '')]
    # one output, updated by its display id: a saved notebook or static HTML shows the last state, not every update
    assert len(bars) == 1, outputs[2]
    assert not any(WIDGET in output.get('data', {}) for output in outputs[2])
    assert not any('Completed' in output.get('text', '') for output in outputs[2] if output.output_type == 'stream')
    # its clock counts from the run's start, not from when the bar appears (a second later): the block slept 1.5 s
    match = re.fullmatch(r'\[#{40}\] \| 100% Completed \| ([0-9.]+) s', bars[0])
    assert match and float(match[1]) >= 1.5, bars[0]


def test_a_local_run_in_a_notebook_shows_its_bar_as_one_output_redrawn_in_place(tmp_path, monkeypatch):
    local = SETUP.split('\n\n\nclient = ')[0] + '\nslow = Slow(math.arange(batch(example=4)) * 1.0)\n' \
        "parallel_compute(slow, [Slow.doubled], scheduler='threads', max_workers=2);"
    outputs = _run_notebook([local], tmp_path, monkeypatch)
    bars = [output.data['text/plain'] for output in outputs[0]
            if output.output_type == 'display_data' and 'Completed' in output.data.get('text/plain', '')]
    assert len(bars) == 1 and '100% Completed' in bars[0], outputs[0]
    assert not any('Completed' in output.get('text', '') for output in outputs[0] if output.output_type == 'stream')
