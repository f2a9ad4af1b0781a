"""parallel_compute on a real SLURM cluster: dask-jobqueue workers in SLURM jobs, and `lazyphi run` inside sbatch.

Runs only where `sbatch` is on PATH and `sinfo` answers (start a test cluster with `scripts/slurm-up.sh`: 3
simulated nodes, or one where it cannot make them; stop it with `scripts/slurm-down.sh`); skipped elsewhere. The
cluster must offer a partition `debug` with room for two 1-CPU, 1 GB jobs, and tmp_path must be visible to its nodes
under the same path (true for the test clusters of slurm-up.sh). `tests/slurm_cluster.py` finds the test cluster.
"""

import importlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import slurm_cluster

from lazyphi import cache
from lazyphi.storage import DiskTensor

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_slurm():
    why = slurm_cluster.why_no_slurm()
    if why is not None:
        pytest.skip(why)


MODULE = 'lazyphi_slurm_sim'  # written into tmp_path: importable by the test and, through PYTHONPATH, by the jobs
SOURCE = textwrap.dedent('''
    from dataclasses import dataclass

    import numpy as np

    from lazyphi import math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial


    @dataclass(frozen=True)
    class Simulation:
        field: Tensor
        steps: int = 3

        @cached_property
        def energy(self) -> Tensor:
            u = self.field
            for _ in range(self.steps):
                u = 0.5 * (u + math.sin(u))
            return math.sum(u ** 2, spatial)


    def values(n, size, seed):
        return np.random.default_rng(seed).standard_normal((n, size, size)).astype(np.float32)


    def make(n: int = 8, size: int = 16, steps: int = 3, seed: int = 0) -> Simulation:
        data = math.tensor(values(n, size, seed), batch('sample'), spatial('x,y'))
        return Simulation(data, steps)


    def expected(n: int = 8, size: int = 16, steps: int = 3, seed: int = 0):
        u = values(n, size, seed)
        for _ in range(steps):
            u = 0.5 * (u + np.sin(u))
        return (u ** 2).sum(axis=(1, 2))
''')


@pytest.fixture
def sim(tmp_path, monkeypatch):
    (tmp_path / f'{MODULE}.py').write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield importlib.import_module(MODULE)
    sys.modules.pop(MODULE, None)


def _queued_job_ids() -> set[str]:
    return set(slurm_cluster.slurm('squeue', '-h', '-o', '%i').split())


def test_parallel_compute_on_slurm_workers(tmp_path, sim):
    pytest.importorskip('dask_jobqueue')
    from distributed import Client

    logs, cache_dir = tmp_path / 'logs', tmp_path / 'cache'
    cluster = slurm_cluster.cluster(tmp_path, 'lazyphi-test-worker')
    try:
        cluster.scale(jobs=2)
        with Client(cluster) as client:
            client.wait_for_workers(2, timeout=180)
            job_ids = {job.job_id for job in cluster.workers.values()}
            assert len(job_ids) == 2 and all(job_ids), job_ids
            assert job_ids <= _queued_job_ids()  # real SLURM jobs, running now
            instance = sim.make(n=8)
            parallel_compute_on(client, instance, sim.Simulation.energy, str(cache_dir))
            executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
            assert len(executed) == 2 and sum(executed.values()) > 0, executed  # the jobs' workers did the work
    finally:
        cluster.close()
    assert isinstance(instance.energy, DiskTensor)
    np.testing.assert_allclose(instance.energy.numpy('sample'), sim.expected(n=8), rtol=1e-5)
    (info,) = cache.list_results(str(cache_dir))
    assert info.complete and info.properties == ('energy',) and info.class_name.startswith(MODULE)
    assert sorted(p.name for p in logs.iterdir())  # each job left its log


def parallel_compute_on(client, instance, prop, cache_dir):
    from lazyphi.parallel import parallel_compute

    return parallel_compute(instance, [prop], 'sample', cache_dir=cache_dir, memory_limit=1, scheduler=client,
                            block_size=2, progress=False)


def test_lazyphi_run_inside_sbatch(tmp_path, sim):
    cache_dir = tmp_path / 'results'
    script = tmp_path / 'job.sh'
    script.write_text(textwrap.dedent(f'''\
        #!/bin/bash
        #SBATCH --job-name=lazyphi-test-run
        #SBATCH --partition=debug
        #SBATCH --ntasks=1
        #SBATCH --cpus-per-task=1
        #SBATCH --mem=1G
        #SBATCH --time=00:05:00
        #SBATCH --chdir={tmp_path}
        #SBATCH --output={tmp_path}/run-%j.out
        export PYTHONPATH={tmp_path}${{PYTHONPATH:+:$PYTHONPATH}}
        srun {sys.executable} -m lazyphi run {MODULE}:make --set n=6 --set seed=3 --properties energy \\
            --dims batch --scheduler sync --cache-dir {cache_dir} --no-progress
        '''))
    submitted = subprocess.run(['sbatch', '--wait', '--parsable', str(script)], capture_output=True, text=True,
                               timeout=300)
    job_id = submitted.stdout.strip().split(';')[0]
    output = (tmp_path / f'run-{job_id}.out').read_text() if job_id.isdigit() else ''
    assert submitted.returncode == 0, f'{submitted.stderr}\n{output}'
    assert job_id.isdigit(), submitted.stdout
    assert re.search(r'^energy: \(sample\S*=6\), float32, in memory$', output, re.M) and 'Done in' in output, output
    (info,) = cache.list_results(str(cache_dir))
    assert info.complete and info.properties == ('energy',)
    # the host reads what the job wrote, and it equals a direct computation
    again = sim.make(n=6, seed=3)
    from lazyphi.parallel import parallel_compute

    parallel_compute(again, [sim.Simulation.energy], 'sample', cache_dir=str(cache_dir), scheduler='sync',
                     progress=False)
    np.testing.assert_allclose(again.energy.numpy('sample'), sim.expected(n=6, seed=3), rtol=1e-5)
    assert len(cache.list_results(str(cache_dir))) == 1  # found the job's result, wrote no new one


RUNNER_SCRIPT = textwrap.dedent('''
    import sys
    from dask.distributed import Client
    from dask_jobqueue.slurm import SLURMRunner
    from lazyphi import math
    from lazyphi.parallel import parallel_compute
    from {module} import make

    if __name__ == '__main__':
        # every srun task runs this: one becomes the scheduler, one the client (this block), the rest workers
        with SLURMRunner(scheduler_file=sys.argv[1], scheduler_options={{'dashboard_address': ':0'}}) as runner:
            with Client(runner) as client:
                client.wait_for_workers(runner.n_workers)
                sim = make(n=6, seed=5)
                parallel_compute(sim, ['energy'], 'sample', scheduler=client, cache_dir=sys.argv[2], progress=False)
                print('energy', sim.energy.shape, 'workers', runner.n_workers, 'RUNNER OK')
''')


def test_batch_script_with_dask_jobqueue_runner_under_srun(tmp_path, sim):
    pytest.importorskip('dask_jobqueue.slurm')
    (tmp_path / 'runner_job.py').write_text(RUNNER_SCRIPT.format(module=MODULE))
    script = tmp_path / 'runner.sh'
    script.write_text(textwrap.dedent(f'''\
        #!/bin/bash
        #SBATCH --job-name=lazyphi-test-runner
        #SBATCH --partition=debug
        #SBATCH --ntasks=3
        #SBATCH --overcommit
        #SBATCH --mem=1500M
        #SBATCH --time=00:05:00
        #SBATCH --chdir={tmp_path}
        #SBATCH --output={tmp_path}/runner-%j.out
        export PYTHONPATH={tmp_path}${{PYTHONPATH:+:$PYTHONPATH}}
        srun --overcommit -n 3 {sys.executable} runner_job.py {tmp_path}/scheduler.json {tmp_path}/results
        '''))
    submitted = subprocess.run(['sbatch', '--wait', '--parsable', str(script)], capture_output=True, text=True,
                               timeout=300)
    job_id = submitted.stdout.strip().split(';')[0]
    output = (tmp_path / f'runner-{job_id}.out').read_text() if job_id.isdigit() else ''
    assert submitted.returncode == 0, f'{submitted.stderr}\n{output[-3000:]}'
    assert 'RUNNER OK' in output, output[-3000:]
    (info,) = cache.list_results(str(tmp_path / 'results'))
    assert info.complete
