"""A headless Jupyter kernel of the interpreter running the tests, for the tests that run notebooks."""

import json
import sys
from pathlib import Path


def use_this_interpreter(tmp_path: Path, monkeypatch) -> None:
    """Makes 'python3' name a kernel running this interpreter (e.g. the tox venv's), not whatever 'python3'
    kernel spec happens to be installed on the machine: JUPYTER_PATH is searched before every other place.

    The kernel imports matplotlib: its caches and config stay out of the user's home, and it draws headless.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    monkeypatch.setenv('MPLCONFIGDIR', str(tmp_path / 'mpl'))
    monkeypatch.setenv('MPLBACKEND', 'Agg')
    spec_dir = tmp_path / 'jupyter' / 'kernels' / 'python3'
    spec_dir.mkdir(parents=True)
    spec = {'argv': [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
            'display_name': 'Python 3 (test interpreter)', 'language': 'python'}
    (spec_dir / 'kernel.json').write_text(json.dumps(spec))
    monkeypatch.setenv('JUPYTER_PATH', str(tmp_path / 'jupyter'))
    assert KernelSpecManager().get_kernel_spec('python3').argv[0] == sys.executable
