"""The SLURM cluster the SLURM tests run on: the test cluster of `scripts/slurm-up.sh` where its `cluster.env` exists
(`$LAZYPHI_SLURM_BASE`, default /run/lazyphi-slurm), else whatever SLURM `sinfo` reaches.

Also used by the tests' client scripts (run in subprocesses with this folder on PYTHONPATH) to make their clusters.
"""

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ENV_FILE = Path(os.environ.get('LAZYPHI_SLURM_BASE', '/run/lazyphi-slurm')) / 'cluster.env'


@functools.cache
def settings() -> dict:
    """The variables of the test cluster's `cluster.env` (`export NAME=value` lines), {} without one.

    Its SLURM_CONF goes into this process's environment, and so to sinfo, sbatch and the jobs started from here.
    """
    if not ENV_FILE.exists():
        return {}
    found = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.startswith('export '):
            name, _, value = line.removeprefix('export ').partition('=')
            found[name] = ' '.join(shlex.split(value))
    os.environ['SLURM_CONF'] = found['SLURM_CONF']
    return found


@functools.cache
def why_no_slurm() -> str | None:
    """None when SLURM is usable, else why not. Checked once, by the first test that asks."""
    settings()
    if shutil.which('sbatch') is None:
        return 'sbatch is not on PATH (start a test cluster with scripts/slurm-up.sh)'
    conf = os.environ.get('SLURM_CONF', '/etc/slurm/slurm.conf')
    if not os.path.exists(conf):  # without one, SLURM's commands ask DNS for a controller
        return f'no SLURM configuration at {conf} (start a test cluster with scripts/slurm-up.sh)'
    try:  # sinfo retries an absent controller for ~10 s; 5 s is plenty for one that runs
        result = subprocess.run(['sinfo', '-h', '-o', '%P %T'], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f'sinfo does not answer ({type(err).__name__}: {err}); is slurmctld running? see scripts/slurm-up.sh'
    if result.returncode != 0 or not result.stdout.strip():
        return f'sinfo does not answer (exit {result.returncode}): {result.stderr.strip()[:200]}'
    return None


def why_not_nodes(count: int) -> str | None:
    """None when the test cluster has `count` simulated nodes (which tests may kill and start again), else why not."""
    why = why_no_slurm()
    if why is not None:
        return why
    found = settings()
    if found.get('LAZYPHI_SLURM_MODE') != 'namespaces':
        if not found:
            return f'needs the simulated nodes of scripts/slurm-up.sh; {ENV_FILE} does not exist'
        return (f'needs the simulated nodes of scripts/slurm-up.sh, which started one node on the host instead: '
                f'{found.get("LAZYPHI_SLURM_WHY_ONE_NODE")}')
    if len(node_names()) < count:
        return f'needs {count} simulated nodes, the test cluster has {len(node_names())} ({ENV_FILE})'
    return None


def node_names() -> list[str]:
    return settings().get('LAZYPHI_SLURM_NODE_NAMES', '').split()


def node_addresses() -> list[str]:
    return settings().get('LAZYPHI_SLURM_NODE_ADDRS', '').split()


def node(action: str, number: int) -> str:
    """Run `scripts/slurm-node.sh action number` (kill, start, pids) of the test cluster; its output."""
    result = subprocess.run(['bash', settings()['LAZYPHI_SLURM_NODE_SCRIPT'], action, str(number)],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f'slurm-node.sh {action} {number} failed: {result.stderr.strip()}')
    return result.stdout


def slurm(*args: str) -> str:
    """The output of a SLURM command (squeue, sinfo, scontrol); raises CalledProcessError when it fails."""
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout


def cluster(folder, job_name: str, walltime: str = '00:10:00', **kwargs):
    """A dask-jobqueue SLURMCluster of 1-CPU jobs named `job_name`, its scheduler where the nodes reach it.

    The jobs work in `folder` (logs in folder/logs), find modules there first (PYTHONPATH), and are not requeued
    after a node failure (a test that kills a node sees them end). `kwargs` go to SLURMCluster.
    """
    from dask_jobqueue import SLURMCluster

    host = settings().get('LAZYPHI_SLURM_SCHEDULER_HOST')
    return SLURMCluster(
        cores=1, memory='1GB', processes=1, queue='debug', walltime=walltime,
        job_extra_directives=[f'--chdir={folder}', f'--job-name={job_name}', '--no-requeue'],
        job_script_prologue=[f'export PYTHONPATH={folder}${{PYTHONPATH:+:$PYTHONPATH}}'],
        python=sys.executable, log_directory=str(Path(folder) / 'logs'),
        # None still binds 8787; a taken port warns
        scheduler_options={'dashboard_address': ':0', **({'host': host} if host else {})}, **kwargs)
