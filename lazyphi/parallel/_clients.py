"""What a scheduler argument means, and the `distributed` client behind it, without importing Dask or distributed.

The planner asks it how many worker threads a cluster has; the engine runs graphs on it. Dask's
configuration (`dask.config.set(scheduler=...)`) is read only when Dask is already imported.
"""

from __future__ import annotations

import logging
import os
import sys

LOG = logging.getLogger('lazyphi')


def active_client():
    """The current `distributed` client, if `distributed` is in use and one is active; else None."""
    if 'distributed' not in sys.modules:
        return None
    from distributed import default_client
    try:
        return default_client()
    except ValueError:
        return None


SCHEDULER_NAMES = ('threads', 'sync', 'processes')
_ALIASES = {'threads': 'threads', 'threading': 'threads', 'sync': 'sync', 'synchronous': 'sync',
            'single-threaded': 'sync', 'processes': 'processes', 'multiprocessing': 'processes'}  # Dask's names


def resolve_scheduler(scheduler):
    """The scheduler `scheduler` means: itself, or when None Dask's configured one; names as lazyphi's.

    Raises:
        ValueError: 'distributed' is asked for (here or in Dask's configuration) but no client is active.
    """
    if scheduler is None and 'dask' in sys.modules:
        scheduler = sys.modules['dask'].config.get('scheduler', None)
    if not isinstance(scheduler, str):
        return scheduler
    name = scheduler.lower()
    if name in ('distributed', 'dask.distributed'):
        client = active_client()
        if client is None:
            raise ValueError(f'scheduler={scheduler!r} needs an active distributed.Client; none is active')
        return client
    return _ALIASES.get(name, scheduler)


def is_client(scheduler) -> bool:
    return type(scheduler).__module__.startswith('distributed') and hasattr(scheduler, 'get')


def client_of(scheduler):
    """The `distributed` client that `scheduler` means, or None for a local scheduler."""
    return scheduler if is_client(scheduler) else active_client() if scheduler is None else None


def worker_count(max_workers, scheduler) -> tuple[int, str | None]:
    """How many tasks run at once: `max_workers`, else what `scheduler` offers; and a note when it is a guess.

    'sync' runs one task at a time; a `distributed` client as many as its workers have threads; local
    threads and processes one per CPU. A client without workers yet (a cluster still scaling up)
    is planned for the CPUs here, and the note says so. `max_workers=0` (no workers: everything runs
    here, one task at a time) plans for one.

    Raises:
        ValueError: `max_workers` is not a non-negative int or None.
    """
    if max_workers is not None:
        if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 0:
            raise ValueError(f'max_workers must be a non-negative int (0: no workers, everything runs here) or None '
                             f'(as many as the scheduler has), got {max_workers!r}')
        return max(max_workers, 1), None
    scheduler = resolve_scheduler(scheduler)
    if scheduler == 'sync':
        return 1, None
    cpus = os.cpu_count() or 1
    client = client_of(scheduler)
    if client is None:
        return cpus, None
    try:
        threads = sum(client.nthreads().values())
    except Exception as err:  # a closed or asynchronous client: plan as for local threads
        LOG.debug('Cannot ask the Dask client for its workers: %s', err)
        threads = 0
    if threads:
        return threads, None
    return cpus, (f'the Dask client has no workers yet: blocks are planned for {cpus} workers (the CPUs here); '
                  f'pass max_workers= the size the cluster will have')
