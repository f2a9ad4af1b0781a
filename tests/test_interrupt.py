"""Ctrl-C during parallel_compute: the run stops at once, and a new run keeps every block already on disk."""

import contextlib
import glob
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

JOB = textwrap.dedent('''
    import os, sys, time
    from dataclasses import dataclass
    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial
    from lazyphi.parallel import parallel_compute

    MARKS = os.environ['MARKS']


    @dataclass(frozen=True)
    class Slow:
        data: Tensor

        @cached_property
        def result(self) -> Tensor:
            if self.data.available:  # a block on real data: say which, then take a while
                open(os.path.join(MARKS, str(int(self.data.example[0].x[0]))), 'w').close()
                time.sleep(float(os.environ.get('SLEEP', '0.4')))
            return self.data * 2


    def make():
        return Slow(math.expand(math.arange(batch(example=32)), spatial(x=3)) * 1.0)


    if __name__ == '__main__':
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # in case it was inherited ignored (CI, nohup)
        slow = make()
        scheduler = sys.argv[1]
        if scheduler == 'client':
            from distributed import Client, LocalCluster
            scheduler = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                            dashboard_address=':0'))
        print('started', flush=True)
        try:
            parallel_compute(slow, [Slow.result], scheduler=scheduler, max_workers=2, block_size=2,
                             cache_dir=sys.argv[2], progress=False)
        except KeyboardInterrupt:
            ran = len(os.listdir(MARKS))
            time.sleep(2)  # blocks running when interrupted finish; no other block may start
            print('blocks started after the interrupt:', len(os.listdir(MARKS)) - ran - 2, flush=True)
            raise
        finally:  # closed before exiting: left to the interpreter's exit, its workers' heartbeats may log errors
            if not isinstance(scheduler, str):
                scheduler.close()
                scheduler.cluster.close()
        assert slow.result.numpy('example,x').tolist() == [[2.0 * i] * 3 for i in range(32)]
        print('finished', flush=True)
''')


def _start(script, scheduler: str, cache_dir, marks) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), scheduler, str(cache_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, 'MARKS': str(marks)},
                            cwd=script.parent)


def _records(cache_dir) -> set:
    return {int(os.path.basename(p).split('.')[0]) for p in glob.glob(f'{cache_dir}/*/result.done/*')}


@pytest.mark.slow
@pytest.mark.parametrize('scheduler', ['sync', 'threads', 'processes', 'client'])
def test_ctrl_c_stops_the_run_and_the_next_run_resumes(tmp_path, scheduler):
    script = tmp_path / 'slow_job.py'
    script.write_text(JOB)
    cache_dir, marks = tmp_path / 'cache', tmp_path / 'marks'  # MARKS is the same in both runs: it is in the key
    marks.mkdir()
    job = _start(script, scheduler, cache_dir, marks)
    deadline = time.monotonic() + 120
    while not _records(cache_dir) and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = job.communicate(timeout=60)
    assert time.monotonic() - interrupted < 10, 'the run went on after Ctrl-C'
    assert 'finished' not in out and 'KeyboardInterrupt' in err.splitlines(), err[-2000:]
    late = int(out.split('blocks started after the interrupt:')[1].split()[0])
    assert late <= 0, out  # at most the two running when interrupted finished
    assert job.returncode != 0
    done_chunks = _records(cache_dir)
    assert done_chunks  # some blocks had completed and are on disk

    for name in os.listdir(marks):
        os.remove(marks / name)
    job = _start(script, scheduler, cache_dir, marks)
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0 and 'finished' in out, err[-3000:]
    recomputed = {int(name) for name in os.listdir(marks)}  # first examples of the blocks run again
    assert len(_records(cache_dir)) == 16  # 32 examples: chunks of 2, and blocks of one chunk (block_size=2)
    kept = {2 * c for c in done_chunks}
    assert not recomputed & kept  # no block already on disk ran again
    assert recomputed | kept == set(range(0, 32, 2))  # every other block did


def _session(sid: int) -> list:
    """The processes of session `sid` that have not ended (Linux /proc; a zombie has ended)."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != 'Z':
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads sessions from /proc')
@pytest.mark.parametrize('scheduler', ['threads', 'processes'])
def test_sigterm_stops_lazyphi_run_leaving_no_process_and_the_next_run_resumes(tmp_path, scheduler):
    (tmp_path / 'slow_job.py').write_text(JOB)
    cache_dir, marks = tmp_path / 'cache', tmp_path / 'marks'
    marks.mkdir()
    command = [sys.executable, '-m', 'lazyphi', 'run', 'slow_job:make', '--properties', 'result', '--dims', 'example',
               '--scheduler', scheduler, '--max-workers', '2', '--cache-dir', str(cache_dir), '--no-progress']
    env = {**os.environ, 'MARKS': str(marks), 'SLEEP': '2'}
    job = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)  # a session of its own: what it leaves behind is found there
    try:
        deadline = time.monotonic() + 120
        while not _records(cache_dir) and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.05)
        job.send_signal(signal.SIGTERM)  # to lazyphi run alone, as `kill -TERM` does
        terminated = time.monotonic()
        out, err = job.communicate(timeout=60)
        assert time.monotonic() - terminated < 10, 'the run went on after SIGTERM'
        assert job.returncode == 143, err[-2000:]
        assert 'terminated (SIGTERM)' in err and 'Done in' not in out
        left = time.monotonic() + 10
        while _session(job.pid) and time.monotonic() < left:
            time.sleep(0.05)
        assert not _session(job.pid), 'processes of lazyphi run outlived it'
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(job.pid, signal.SIGKILL)
    kept = _records(cache_dir)
    assert kept and len(kept) < 16

    for name in os.listdir(marks):
        os.remove(marks / name)
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(_records(cache_dir)) == 16
    reused, total, computed = map(int, re.search(r'reused (\d+) of (\d+) blocks from the cache; computed (\d+)',
                                                 again.stdout).groups())
    assert reused >= 1 and computed >= 1 and reused + computed == total, again.stdout
    recomputed = {int(name) for name in os.listdir(marks)}  # first examples of the blocks run again
    assert not recomputed & {2 * c for c in kept}  # no chunk already on disk ran again
