"""`parallel_compute`: plan, compile into one Dask graph, run on the user's scheduler, fill the instance.

Imports Dask (through `_graph.py` and `_schedulers.py`); `lazyphi.parallel` loads it on first use (PEP 562).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..math import batch
from ..storage import check_cache_dir_visible
from ._clients import client_of
from ._graph import blocks_on_disk, compiled, deliver, only_references_left, receipt, without_finished_blocks
from ._plan import Plan, plan
from ._schedulers import run_graph


def parallel_compute(instance, properties: Sequence, parallel_dims=batch, max_workers: int | None = None,
                     memory_limit: float | None = None, cache_dir: str | None = None, keep_intermediate: bool = False,
                     *, scheduler=None, block_size: int | None = None, progress: bool | None = None,
                     chunk_bytes: int | None = None, compressor: str | None = None, cache_key=None) -> Plan:
    """Compute cached and parallel properties of `instance` in parallel, with Dask.

    The computation is planned (`lazyphi.parallel.plan`), compiled into one Dask graph and run
    on `scheduler`: 'threads', 'sync', 'processes', a `distributed.Client`, any Dask scheduler
    callable, or by default the active `distributed` client, else threads. Results go into the
    instance's property cache; read them as attributes afterwards.

    Args:
        instance: a dataclass instance (frozen or not) with a `__dict__` to cache results in.
        properties: the `cached_property` / `parallel_property` members to compute (`Cls.prop` or names).
        parallel_dims: the dims to split the work along (a dim filter: `batch`, 'example', a Shape, ...).
        max_workers: tasks run at once; None: what the scheduler offers (a client's worker threads,
            the CPUs for local threads and processes, one for 'sync'); 0: no workers, everything runs here in
            this thread, as with `scheduler='sync'` (phiml computes on the host then).
        memory_limit: bytes of property outputs the run may hold in memory at once: those kept in
            memory plus those of the blocks being computed (one block per worker, before it is written
            or handed over); outputs beyond it, largest first, go to `cache_dir` and come back
            disk-backed (`Plan.memory_bound` says what the run holds at most). Not counted: inputs,
            temporaries inside a property, outputs of unknown shape. Needs `cache_dir`; 1 sends
            everything to disk. Without it, requested outputs of up to 1 GiB in all come back in memory,
            larger ones disk-backed (largest first), so that a run's peak does not grow with its results.
        cache_dir: directory of the disk cache (a shared file system for a cluster). With it every
            requested output is written there, and running again resumes from what is written.
        keep_intermediate: keep the values of properties computed only as inputs of `properties`.
        scheduler: see above.
        block_size: elements per block along the split dim (whole chunks where a stage writes to disk),
            instead of one block per chunk where a stage writes to disk and two blocks per worker elsewhere.
        progress: show a progress bar (None: after a second, for runs that take that long).
        chunk_bytes: target bytes of one disk-cache chunk; None: about 16 MiB, and at least 16 chunks along
            the dim blocks are cut along (one element each on a shorter one). It is part of a result's key.
        compressor: None (uncompressed, the default: measured fastest) or 'zstd', for the arrays of a
            result created by this run; an existing result keeps its codec and is reused.
        cache_key: any value the results depend on that the disk cache key cannot see, made part of it by content
            (like a global the code reads): an environment variable's value, a data file's name and modification
            time or hash. The key already covers the inputs, config fields, the class's code and the user code and
            values it reads; the plan notes reads it cannot see.

    Returns:
        The plan that ran (print it to see what ran where, how long it took and, with `cache_dir`, how many
        blocks were read from the cache instead of computed: `reused` of `resumable`).

    Raises:
        TypeError, ValueError: bad arguments (see `plan`).
        PropertyFailed: a property raised; the message names it, its block and the original traceback.
        CacheDirNotShared: on a `distributed` cluster whose workers do not see `cache_dir`.
    """
    if type(max_workers) is int and max_workers == 0:
        scheduler = 'sync'
    p = plan(instance, properties, parallel_dims, max_workers, memory_limit, cache_dir, keep_intermediate,
             scheduler=scheduler, block_size=block_size, chunk_bytes=chunk_bytes, compressor=compressor,
             cache_key=cache_key)
    started = time.perf_counter()
    client = client_of(scheduler)
    if cache_dir is not None and client is not None:
        check_cache_dir_visible(cache_dir, client)
    graph = compiled(p)
    on_disk = frozenset()
    if cache_dir is not None:
        on_disk, p.resumable = blocks_on_disk(graph)
        p.reused = len(on_disk)
    # blocks found complete are only read, without their inputs: on 'processes' they run here, and a run with
    # nothing left to compute starts no worker process
    nodes = without_finished_blocks(graph, on_disk) if on_disk else graph.graph
    if on_disk and only_references_left(graph, on_disk):  # nothing to compute or load: no scheduler is worth its start
        scheduler, progress = 'sync', False
    # no copy of the set of all blocks where none is on disk (52 bytes a block, held through the run)
    spread = graph.block_keys - on_disk if on_disk else graph.block_keys
    results = run_graph(nodes, [graph.result_key], scheduler, p.max_workers, progress, spread, graph.final_keys)[0]
    deliver([results], receipt(p))
    p.elapsed = time.perf_counter() - started
    return p
