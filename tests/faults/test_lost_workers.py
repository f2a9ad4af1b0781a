"""Lost processes never give wrong data or a hang (issue #18, items 1, 5 and 6).

A host SIGKILLed mid-run leaves no process-pool worker behind; a worker lost mid-run costs only the
blocks it held, whatever the size of the inputs, on the process pool and on a distributed cluster; a
cluster whose workers all died is reported, not waited on. Each case runs its host in a process
session this test starts, bounded by timeouts, and ends only that session.
"""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == 'win32', reason='POSIX signals and sessions')]

JOB = textwrap.dedent('''
    import os, sys, time
    from dataclasses import dataclass

    import numpy as np

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial
    from lazyphi.parallel import parallel_compute

    MARKS = os.environ['MARKS']
    SLEEP = float(os.environ.get('SLEEP', '0.5'))


    @dataclass(frozen=True)
    class Slow:
        data: Tensor

        @cached_property
        def total(self) -> Tensor:
            if self.data.available:  # a block on real data: say which process runs it, then take a while
                first = int(self.data.example[0].x[0].y[0])
                with open(os.path.join(MARKS, f'{first}-{os.getpid()}'), 'w'):
                    pass
                time.sleep(SLEEP)
            return math.sum(self.data, spatial)


    def make(size):  # every element's values start with its index: blocks say where they start
        values = np.zeros((16, size, size))
        values[:, 0, 0] = np.arange(16)
        return Slow(math.tensor(values, batch('example'), spatial('x,y')))
''')


def _write(tmp_path, body: str):
    script = tmp_path / 'job.py'
    script.write_text(JOB + textwrap.dedent(body))
    marks = tmp_path / 'marks'
    marks.mkdir()
    return script, marks


def _start(script, marks, *args, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, 'MARKS': str(marks), **env},
                            cwd=script.parent, start_new_session=True)


def _marks(marks) -> list:
    return [tuple(int(x) for x in name.split('-')) for name in os.listdir(marks)]


def _wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {seconds} s for {what}')
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'  # a zombie has ended
    except FileNotFoundError:
        return False


def _end_session(job: subprocess.Popen) -> None:
    """End what is left of the session this test started (nothing, when the code under test is right)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)


def test_process_pool_workers_end_with_their_killed_host(tmp_path):
    script, marks = _write(tmp_path, '''
        if __name__ == '__main__':
            parallel_compute(make(4), [Slow.total], scheduler='processes', max_workers=2, block_size=1,
                             progress=False)
    ''')
    job = _start(script, marks, SLEEP='30')
    try:
        _wait_for(lambda: len(_marks(marks)) >= 2, 120, 'both workers to start a block')
        workers = {pid for _, pid in _marks(marks)}
        os.kill(job.pid, signal.SIGKILL)
        job.communicate(timeout=30)  # the workers do not hold the host's pipes open
        _wait_for(lambda: not any(_alive(pid) for pid in workers), 10, 'the workers to end')
    finally:
        _end_session(job)
