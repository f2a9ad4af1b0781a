"""Choosing and running a Dask scheduler for a graph; lazyphi never starts a cluster on its own."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import multiprocessing
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import dask.local
import dask.multiprocessing
import dask.threaded
from dask.sizeof import sizeof
from dask.task_spec import Alias, DataNode

from ._clients import SCHEDULER_NAMES, client_of, resolve_scheduler
from ._engine import exit_with_parent
from ._progress import LateProgressBar

LOG = logging.getLogger('lazyphi')
PROGRESS_AFTER = 1.0  # seconds before a local progress bar appears
SCATTER_BYTES = 2 ** 20  # graph data larger than this is scattered to a distributed cluster's workers first

_pool_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_workers = 0
_announced: set = set()


def run_graph(graph: dict, keys: list, scheduler, max_workers: int, progress: bool | None,
              spread: frozenset = frozenset(), local: frozenset = frozenset()) -> list:
    """Compute `keys` of `graph` on `scheduler` (see `parallel_compute`), showing progress unless told not to.

    `scheduler` None means Dask's configured scheduler (`dask.config.set(scheduler=...)`), else the
    active `distributed` client, else threads. On 'processes' only the tasks in `spread` go to the
    worker processes, one per submission; the rest (data nodes, assembling) run here. On a client, the
    tasks in `local` (joining the last blocks, collecting results) run here on what the cluster gives them.
    """
    scheduler = resolve_scheduler(scheduler)
    client = client_of(scheduler)
    if client is not None:
        return _run_on_client(client, graph, keys, progress, local)
    with LateProgressBar(PROGRESS_AFTER) if progress is not False else contextlib.nullcontext():
        if scheduler is None or scheduler == 'threads':
            return dask.threaded.get(graph, keys, num_workers=max_workers)
        if scheduler == 'sync':
            return dask.local.get_sync(graph, keys)
        if scheduler == 'processes':
            return _run_on_processes(graph, keys, max_workers, spread)
        if callable(scheduler):
            return scheduler(graph, keys)
    raise ValueError(f'scheduler must be one of {SCHEDULER_NAMES}, a distributed.Client, a Dask scheduler function '
                     f'get(graph, keys), or None (Dask\'s configured scheduler, else the active distributed client, '
                     f'else threads); got {scheduler!r}')


def _run_on_client(client, graph: dict, keys: list, progress: bool | None, local: frozenset) -> list:
    """Run `graph` on a `distributed` client; the tasks in `local` run here on what the cluster computed for them.

    Joining blocks' outputs here fetches each from its worker once, instead of moving them all to one
    worker first and then here.
    """
    if id(client) not in _announced and progress is not False:
        _announced.add(id(client))
        print(f'lazyphi: running on {client.scheduler.address if client.scheduler else client}; '
              f'dashboard: {client.dashboard_link}')
    if not set(keys) <= local:
        local = frozenset()
    remote = {key: node for key, node in graph.items() if key not in local}
    fetch = list(dict.fromkeys(d for key in local for d in graph[key].dependencies if d not in local)) if local \
        else keys
    # Large data goes to the workers straight from here, not through the scheduler inside the graph. Under keys
    # of its own (the graph's keys repeat when the same plan runs again, while the last run's data may still
    # be being released), which the graph's nodes alias.
    large = [key for key, node in remote.items() if isinstance(node, DataNode) and sizeof(node.value) > SCATTER_BYTES]
    scattered = dict(zip(large, client.scatter([remote[key].value for key in large], hash=False), strict=True)
                     ) if large else {}
    remote.update({key: Alias(key, future.key) for key, future in scattered.items()})
    futures = client.get(remote, fetch, sync=False)
    try:
        if progress is not False:
            _progress_on_client(futures)
        values = client.gather(futures)
    except BaseException:  # Ctrl-C or a failed task: stop the rest (blocks already written stay on disk)
        client.cancel(futures)
        raise
    finally:  # release the scattered data even while a traceback holds this frame (cancelling it upsets the scheduler)
        for future in scattered.values():
            future.release()
        scattered.clear()
    if not local:
        return values
    here = {key: DataNode(key, value) for key, value in zip(fetch, values, strict=True)}
    here.update({key: graph[key] for key in local})
    return dask.local.get_sync(here, keys)


def _progress_on_client(futures: list) -> None:
    """Distributed's progress bar, once the run has taken `PROGRESS_AFTER` seconds (nothing before)."""
    import distributed  # loaded: a client exists

    try:
        distributed.wait(futures, timeout=PROGRESS_AFTER)
    except TimeoutError:
        # in a notebook distributed draws a widget, which needs ipywidgets; without it, a text bar
        distributed.progress(futures, notebook=None if importlib.util.find_spec('ipywidgets') else False)


def process_pool(max_workers: int) -> ProcessPoolExecutor:
    """The spawn-based process pool, created once and reused while `max_workers` stays the same.

    Its workers end when this process dies (`exit_with_parent`), even when it is killed with SIGKILL.
    """
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers != max_workers:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(max_workers, mp_context=multiprocessing.get_context('spawn'),
                                        initializer=exit_with_parent)
            _pool_workers = max_workers
        return _pool


def discard_pool(stop_tasks: bool = False) -> None:
    """Shut the process pool down; the next call makes a new one.

    With `stop_tasks`, its worker processes are also ended at once: the executor would still run the
    tasks already handed to them. A task ended mid-write leaves a temporary file and no record.
    """
    global _pool
    with _pool_lock:
        if _pool is not None:
            workers = list((getattr(_pool, '_processes', None) or {}).values())
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None
            if stop_tasks:
                for worker in workers:
                    worker.terminate()


def _run_on_processes(graph: dict, keys: list, max_workers: int, spread: frozenset) -> list:
    for attempt in range(2):
        pool = process_pool(max_workers)
        try:
            return dask.multiprocessing.get(graph, keys, pool=_Submitter(pool, spread, max_workers), chunksize=1,
                                            optimize_graph=False)
        except BrokenProcessPool:
            discard_pool()
            if attempt:
                raise
            LOG.warning('A worker process was lost; running the lost work again once on a new pool')
        except BaseException:  # Ctrl-C or a failed task: stop the rest (blocks already written stay on disk)
            discard_pool(stop_tasks=True)
            raise
    raise AssertionError('unreachable')


class _Submitter:
    """An executor for Dask's multiprocessing scheduler: tasks in `spread` go to the process pool, others run here.

    Dask submits batches of tasks; with `chunksize=1` a batch is one task, whose key comes first in it.
    """

    def __init__(self, pool: ProcessPoolExecutor, spread: frozenset, workers: int):
        self.pool = pool
        self.spread = spread
        self._max_workers = workers  # what Dask reads of an executor

    def submit(self, fn, batch) -> Future:
        if len(batch) == 1 and batch[0][0] not in self.spread:
            future = Future()
            try:
                future.set_result(fn(batch))
            except BaseException as err:  # handed to the scheduler, which raises it
                future.set_exception(err)
            return future
        return self.pool.submit(fn, batch)
