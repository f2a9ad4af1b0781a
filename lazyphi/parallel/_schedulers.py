"""Choosing and running a Dask scheduler for a graph; lazyphi never starts a cluster on its own."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import dask.local
import dask.multiprocessing
import dask.threaded
from dask.callbacks import Callback
from dask.task_spec import DataNode

from ._clients import SCHEDULER_NAMES, client_of, resolve_scheduler
from ._cluster import PROGRESS_AFTER, run_on_client
from ._engine import exit_with_parent
from ._progress import LateProgressBar

LOG = logging.getLogger('lazyphi')

_pool_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_workers = 0
RERUNS = 3  # how often a run on processes starts again on a new pool after a lost worker


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
        return run_on_client(client, graph, keys, progress, local)
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
    """Run `graph` on the process pool; after a lost worker, on a new pool with the blocks already computed kept.

    A worker that dies breaks the whole pool (the executor fails every task handed out), so the blocks
    running on the other workers are computed again too; those finished are not.
    """
    with _Finished(spread) as finished:
        for attempt in range(RERUNS + 1):
            kept = {key: DataNode(key, value) for key, value in finished.results.items()}
            try:
                return dask.multiprocessing.get({**graph, **kept} if kept else graph, keys,
                                                pool=_Submitter(spread, max_workers), chunksize=1,
                                                optimize_graph=False)
            except BrokenProcessPool:
                discard_pool()
                if attempt == RERUNS:
                    raise
                LOG.warning('A worker process was lost; running the blocks not finished (%d of %d) again on a new '
                            'pool', len(spread) - len(finished.results), len(spread))
            except BaseException:  # Ctrl-C or a failed task: stop the rest (blocks already written stay on disk)
                discard_pool(stop_tasks=True)
                raise
    raise AssertionError('unreachable')


class _Finished(Callback):
    """Keeps the outputs of the tasks in `keys` as Dask's scheduler receives them, across runs of one graph."""

    def __init__(self, keys: frozenset):
        super().__init__()
        self.keys = keys
        self.results = {}

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        if key in self.keys:
            self.results[key] = result


class _Submitter:
    """An executor for Dask's multiprocessing scheduler: tasks in `spread` go to the process pool, others run here.

    Dask submits batches of tasks; with `chunksize=1` a batch is one task, whose key comes first in it. The
    pool is taken (and started, if it is not running) at the first task for it.
    """

    def __init__(self, spread: frozenset, workers: int):
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
        return process_pool(self._max_workers).submit(fn, batch)
