"""The README's demo command works from a fresh clone (the test command is what CI itself runs)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which('git') is None or not (ROOT / '.git').exists(), reason='needs git and a checkout')
def test_demo_command_runs_from_a_fresh_clone(tmp_path):
    clone = tmp_path / 'lazyphi'
    subprocess.run(['git', 'clone', '--quiet', str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('VIRTUAL_ENV', 'PYTHONPATH', 'TOX_'))}
    env['PATH'] = os.pathsep.join(p for p in env.get('PATH', '').split(os.pathsep) if '.tox' not in p)
    result = subprocess.run(['bash', 'scripts/demo.sh'], cwd=clone, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'dashboard:' in result.stdout
    assert 'Plan for SignalAnalysis' in result.stdout and 'What ran where' in result.stdout
    summary = result.stdout.split('What ran where', 1)[1]
    assert '  relative_power ' in summary and '  mean_power ' in summary  # tasks grouped by the property they compute
    assert not re.search(r'[0-9a-f]{32}', summary), summary  # ... without the run's token
