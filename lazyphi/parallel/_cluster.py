"""Running a graph on a `distributed` client: large inputs sent to the workers, recovered when a worker is lost,
and a run that stops when the cluster has no workers left instead of waiting for ever.

Imports Dask; distributed itself only inside the functions (a client exists when they run).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import itertools
import logging
import threading
import time
import uuid

import dask.config
import dask.utils
from dask.sizeof import sizeof
from dask.task_spec import Alias, DataNode

from ._progress import KernelLine, bar_text, in_kernel

LOG = logging.getLogger('lazyphi')
PROGRESS_AFTER = 1.0  # seconds before the progress bar appears
SCATTER_BYTES = 2 ** 20  # graph data of this size or more is scattered to the workers first
# data left in the graph at most: distributed warns of graphs over 10 MB ('Sending large graph'); beyond, the
# largest pieces are scattered too (16 blocks of just under 1 MiB each made a 16 MiB graph)
GRAPH_DATA_BYTES = 8 * 2 ** 20
# what a task of lazyphi's costs in the sent graph besides data (about 130 bytes measured at 10^5 blocks), with margin
TASK_BYTES = 512
NO_WORKERS_TIMEOUT = 120.0  # seconds a run waits for a worker where nothing says one is coming
RELEASE_AFTER = 0.1  # seconds a finished run's futures are held where the client submits nothing else
GATHER_BATCH = 1000  # results fetched at a time: see `_Wait._in_batches`
SUBMIT_BATCH = 1000  # graph nodes sent at a time: see `_submit`
RESUBMISSIONS = 3  # how often a run sends lost inputs again before it gives up
_CLOSED = frozenset({'closing', 'closed', 'failed', 'closing_gracefully'})
_announced: set = set()


class NoWorkers(RuntimeError):
    """The cluster has had no workers for too long while a run waited on it (none started, or all were lost)."""


class WorkersLost(RuntimeError):
    """The cluster cancelled a run's tasks because workers died: with inputs sent from here more often than a run
    sends them again, or without any such input lost (then distributed gave up on its own)."""


def run_on_client(client, graph: dict, keys: list, progress: bool | None, local: frozenset) -> list:
    """Run `graph` on a `distributed` client; the tasks in `local` run here on what the cluster computed for them.

    Joining blocks' outputs here fetches each from its worker once, instead of moving them all to one
    worker first and then here. Each submission goes under keys of its own (the graph's keys with a
    suffix): the same plan run again, or after a failure, never meets the states the scheduler and
    client keep of an earlier run's keys (a failed run's cancelled futures, held by its traceback, made
    the next run of the same computation fail or hang). Graph data of `SCATTER_BYTES` or more (and, where
    the rest would pass `GRAPH_DATA_BYTES`, the largest of it) is scattered to the
    workers, not sent in the graph; it and the results travel straight between here and the workers where
    `direct_transfers` says so. The scattered data's only copy on the cluster dies with its worker, so when
    a worker is lost, the lost data is sent again from here and the graph submitted again, reusing the
    outputs already fetched from the cluster's memory, and those already here: only the lost blocks run again.
    The graph goes in parts (`_submit`), and each batch of results is let go on the cluster once it is here
    (`_Wait`): the client's memory per block stays small at 10^4 and more blocks.

    Raises:
        NoWorkers: the cluster has had no workers for `NO_WORKERS_TIMEOUT` seconds (at once when its
            workers are closed processes of this one, as after Ctrl-C on a `LocalCluster`).
    """
    import distributed  # loaded: a client exists

    started = time.perf_counter()  # the progress bar's clock, which appears only later, counts from here
    if id(client) not in _announced and progress is not False:
        _announced.add(id(client))
        print(f'lazyphi: running on {client.scheduler.address if client.scheduler else client}; '
              f'dashboard: {client.dashboard_link}')
    if not set(keys) <= local:
        local = frozenset()
    remote = {key: node for key, node in graph.items() if key not in local}
    fetch = list(dict.fromkeys(d for key in local for d in graph[key].dependencies if d not in local)) if local \
        else keys
    sizes = {key: sizeof(node.value) for key, node in remote.items() if isinstance(node, DataNode)}
    large = {key: remote[key].value for key in _to_scatter(sizes)}
    inline = _inlined(remote, large.keys() | set(fetch))
    done = {}  # key to fetch -> its future in an earlier submission, finished or running
    values = {}  # fetched key -> its value, kept across submissions
    direct = direct_transfers(client)
    with _Scattered(client, large, direct) as inputs:
        departed, losses = set(), []  # workers that left during the run; the inputs lost at each loss
        for submission in range(RESUBMISSIONS + 1):
            workers = _workers(client)
            pending = [key for key in fetch if key not in values]
            futures = _submit(client, remote, pending, inline, inputs.aliases(), done, values)
            LATE_RELEASE.release(client)
            wait = _Wait(client, progress, started)
            try:
                wait.gather(futures, pending, values, direct)
                LATE_RELEASE.hold(client, _held(futures))
                break
            except distributed.CancelledError as cancelled:  # by the watch, or by the scheduler: inputs were lost
                if wait.gave_up is not None:
                    raise NoWorkers(wait.gave_up) from None
                lost = inputs.lost()
                departed |= workers - _workers(client)
                losses.append(lost)
                if submission == RESUBMISSIONS or not (lost or done):
                    client.cancel(_held(futures))
                    raise WorkersLost(_lost_message(cancelled, losses, departed)) from cancelled
                held = {key: f for key, f in zip(pending, futures, strict=True) if f is not None and key not in values}
                done = _kept(client, held, remote, set(lost))
                again = len(fetch) - len(done) - len(values)
                if lost:
                    LOG.warning('A worker was lost with %d of the inputs sent to the cluster: sending them again and '
                                'computing again the %d of %d outputs that depended on them', len(lost), again,
                                len(fetch))
                    inputs.send(lost)
                else:  # outputs of the last submission it reused were lost with their worker
                    LOG.warning('A worker was lost with outputs computed before: computing again the %d of %d '
                                'outputs not at hand', again, len(fetch))
            except BaseException:  # Ctrl-C or a failed task: stop the rest (blocks already written stay on disk)
                client.cancel(_held(futures))
                raise
    done.clear()
    if not local:
        return [values[key] for key in keys]
    return _run_here({key: graph[key] for key in local}, keys, values)


def _held(futures: list) -> list:
    """The futures of a submission not yet released (`_Wait` releases those whose values it fetched)."""
    return [f for f in futures if f is not None]


def _run_here(tasks: dict, keys: list, values: dict) -> list:
    """The values of `keys`, running `tasks` (a few: joining, collecting) on `values` fetched for them, in this thread.

    Called directly rather than through Dask's synchronous scheduler, which orders and tracks every fetched value as
    a node of its own: 2.7 s of this process's time for 3,000 blocks of `block_size=1` on a loaded machine.
    """
    def value_of(key):
        if key not in values:
            node = tasks[key]
            values[key] = node({d: value_of(d) for d in node.dependencies})
        return values[key]
    return [value_of(key) for key in keys]


def _workers(client) -> set:
    """The addresses of the cluster's workers now (empty where the scheduler cannot be asked)."""
    try:
        return set(client.nthreads())
    except Exception as err:  # a closing client: the run fails on its own
        LOG.debug('Cannot ask the scheduler for its workers: %s', err)
        return set()


def _lost_message(cancelled: Exception, losses: list, departed: set) -> str:
    """What `WorkersLost` says: what was cancelled, which inputs and workers were lost, and what to do."""
    left = (f'workers that left during the run: {", ".join(sorted(departed))}' if departed else
            'no worker left the cluster during the run as far as its scheduler tells')
    if not losses[-1]:
        return (f'The Dask cluster cancelled the run ({cancelled}) while none of the inputs sent from here was lost; '
                f'{left}. Distributed gives up on tasks whose data it cannot recompute, e.g. after workers died '
                f'repeatedly running them (see the workers\' logs: often they ran out of memory). Run again: outputs '
                f'already written to cache_dir are not computed again')
    counts = ', '.join(str(len(lost)) for lost in losses)
    inputs = ', '.join(map(str, sorted({str(k) for lost in losses for k in lost})[:8]))
    return (f'Workers of the Dask cluster died {len(losses)} times during the run, each time with inputs sent from '
            f'here ({counts} of them: {inputs}); they were sent again {len(losses) - 1} times, the most a run does '
            f'(RESUBMISSIONS), and the cluster then cancelled what depended on them ({cancelled}); {left}. See the '
            f"workers' logs for why they died (often memory: give them more, or use smaller blocks, block_size=). "
            f'Run again: outputs already written to cache_dir are not computed again')


def direct_transfers(client) -> bool:
    """Whether inputs and results travel between here and the workers directly instead of through the scheduler.

    The client's own choice (`Client(direct_to_workers=...)`, or Dask's `distributed.client.direct-to-workers`)
    where it made one. Otherwise directly when the scheduler listens on this machine only (a loopback address, or
    in-process, as a `LocalCluster` does), so its workers run here too and are reachable; through the scheduler
    elsewhere (Dask's default), for a client that can reach the scheduler but not the workers, as on a login node.
    Relaying costs a hop and the scheduler's time: 16 FFTs of 256x256 on a 2-worker LocalCluster took 48 ms
    through it and 40 ms directly (`benchmarks/bench_parallel.py`, case (e)).
    """
    if client.direct_to_workers is not None:
        return bool(client.direct_to_workers)
    from distributed.comm import get_address_host, parse_address

    address = getattr(client.scheduler, 'address', None)
    if not address:
        return False
    if parse_address(address)[0] == 'inproc':
        return True
    host = get_address_host(address)
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def _to_scatter(sizes: dict) -> set:
    """The data nodes (key -> bytes) to scatter: those of `SCATTER_BYTES` or more, then the largest others until
    the data left in the graph takes at most `GRAPH_DATA_BYTES`."""
    chosen = {key for key, n in sizes.items() if n >= SCATTER_BYTES}
    rest = sorted(((n, key) for key, n in sizes.items() if key not in chosen), key=lambda item: item[0])
    left = sum(n for n, _ in rest)
    while rest and left > GRAPH_DATA_BYTES:
        n, key = rest.pop()
        chosen.add(key)
        left -= n
    return chosen


def _inlined(graph: dict, kept: set) -> dict:
    """The data nodes of `graph` not in `kept` to write into the tasks that read them (by key), where all those
    copies together take at most `SCATTER_BYTES` (a block's slice of an input; the instance's template).

    A data node of its own is a task the scheduler places on some worker; every task reading it elsewhere
    then waits for a transfer between workers (2 ms each on a 2-worker LocalCluster). Inside the task, it
    reaches the worker with the task: 16 FFTs of 256x256 there took 26 ms instead of 36 ms.
    """
    readers = collections.Counter(d for node in graph.values() for d in node.dependencies)
    return {key: node for key, node in graph.items() if isinstance(node, DataNode) and key not in kept
            and sizeof(node.value) * readers[key] < SCATTER_BYTES}


def _named(graph: dict, token: str):
    """`graph` as the expression distributed's client makes of a dict, but named by `token` (unique already).

    Given a dict, the client names it by tokenizing every task, data included: 2 ms of this process's time
    for a run of 16 FFTs of 256x256 in 4 blocks, which paid 0.7 ms of it to hash the blocks' slices. The
    client's own `submit` names its one-task expressions the same way. A plain dict where the client makes no
    such expression (older versions) or its class takes no `_determ_token`.
    """
    import distributed.client

    expression = getattr(distributed.client, 'LLGExpr', None)
    if expression is None:
        return graph
    try:
        return expression(graph, _determ_token=token)
    except TypeError:
        return graph


def _kept(client, futures: dict, graph: dict, lost: set) -> dict:
    """Of a failed submission's `futures` (by the graph's keys), those the next one reuses: outputs still being
    computed from inputs that survived, and outputs computed that a worker still holds.

    A pending output that depends on a `lost` input is not kept: the scheduler cancels it once it learns of the
    loss, and a submission aliasing it would fail with its key 'already forgotten'.
    """
    finished = [f for f in futures.values() if f.status == 'finished']
    held = client.who_has(finished) if finished else {}
    return {key: f for key, f in futures.items()
            if (f.status == 'pending' and not _depends_on(graph, key, lost)) or held.get(f.key)}


def _depends_on(graph: dict, key, keys: set) -> bool:
    """Whether the node `key` of `graph` depends on any of `keys`, directly or through other nodes."""
    seen, todo = set(), [key]
    while todo:
        k = todo.pop()
        if k in keys:
            return True
        if k not in seen and k in graph:
            seen.add(k)
            todo.extend(graph[k].dependencies)
    return False


def _submit(client, graph: dict, fetch: list, inline: dict, aliases: dict, done: dict, values: dict) -> list:
    """Send the part of `graph` that `fetch` needs under keys of its own (see `_renamed`); the futures of `fetch`.

    Nodes whose values were fetched already (`values`, in an earlier submission) are not computed again: the
    tasks only they needed are left out, and they are sent as data where a task sent still reads them.
    The graph goes in parts of `SUBMIT_BATCH` nodes, each after those it reads, each renamed and serialized only
    while it is sent: sent whole, its renamed copy and distributed's pickling of it (its memo of every object)
    took 2.0 KiB per block besides the compiled graph (10,000 blocks of `block_size=1`, tracemalloc). The nodes of
    a part that later parts read are held by futures until the last of those parts is sent, so that the scheduler
    keeps them.
    """
    if values:
        graph = _needed(graph, fetch, values.keys() | aliases.keys() | done.keys())
    suffix = uuid.uuid4().hex[:12]
    names = _names(graph, inline, suffix)
    order = [key for key in _in_order(graph) if key not in inline]
    parts = [order[start:start + SUBMIT_BATCH] for start in range(0, len(order), SUBMIT_BATCH)]
    del order
    last_read = {}  # node -> the last part reading it
    for i, part in enumerate(parts):
        for key in part:
            for d in graph[key].dependencies:
                last_read[d] = i
    wanted = set(fetch)
    futures, shared = {}, {}  # shared: the last part reading them -> futures of nodes that later parts read
    try:
        for i, part in enumerate(parts):
            requested = [key for key in part if key in wanted or last_read.get(key, i) > i]
            sent = _named(_renamed({key: graph[key] for key in part}, names, inline, aliases, done, values),
                          f'lazyphi-{suffix}-{i}')
            got = _send(client, sent, [names[k] for k in requested], len(part))
            for key, future in zip(requested, got, strict=True):
                if key in wanted:
                    futures[key] = future
                else:
                    shared.setdefault(last_read[key], []).append(future)
            # after the graphs that read them: released on the scheduler only once those tasks ran
            _release(shared.pop(i, []))
    finally:
        for held in shared.values():
            _release(held)
    return [futures[key] for key in fetch]


def _send(client, graph, keys: list, tasks: int) -> list:
    """The futures of `keys`, sending `graph` (of `tasks` nodes) to the scheduler."""
    # distributed warns of graphs over 10 MB ('Sending large graph ... load the data with Dask'), which is about data
    # sent in the graph; a graph of lazyphi's holds GRAPH_DATA_BYTES of data at most (the rest is scattered), so a
    # larger one is a graph of many tasks, which the warning's advice does not help
    expected = GRAPH_DATA_BYTES + TASK_BYTES * tasks
    setting = 'distributed.admin.large-graph-warning-threshold'
    with dask.config.set({setting: max(expected, dask.utils.parse_bytes(dask.config.get(setting)))}):
        return client.get(graph, keys, sync=False)


def _in_order(graph: dict):
    """The keys of `graph`, each after the nodes of `graph` it reads."""
    seen = set()
    for root in graph:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(graph[root].dependencies))]
        while stack:
            key, dependencies = stack[-1]
            for d in dependencies:
                if d in graph and d not in seen:
                    seen.add(d)
                    stack.append((d, iter(graph[d].dependencies)))
                    break
            else:
                stack.pop()
                yield key


def _needed(graph: dict, keys: list, given: set) -> dict:
    """The nodes of `graph` that computing `keys` needs, walking no further than the nodes in `given`."""
    needed, todo = {}, list(keys)
    while todo:
        key = todo.pop()
        if key not in needed and key in graph:
            needed[key] = graph[key]
            if key not in given:
                todo.extend(graph[key].dependencies)
    return needed


def _names(graph: dict, inline: dict, suffix: str) -> dict:
    """The key of each node of `graph` not in `inline` -> the same key with `suffix` on its name (a string key, or the
    first item of a tuple key), which keeps its Dask group.

    The tuple keys of a stage's blocks share one suffixed name: a string each took 60 bytes a block, here and in the
    pickled graph.
    """
    prefixes = {}
    names = {}
    for key in graph:
        if key in inline:
            continue
        if isinstance(key, tuple):
            prefix = prefixes.get(key[0])
            if prefix is None:
                prefix = prefixes[key[0]] = f'{key[0]}-{suffix}'
            names[key] = (prefix, *key[1:])
        else:
            names[key] = f'{key}-{suffix}'
    return names


def _renamed(graph: dict, names: dict, inline: dict, aliases: dict, done: dict, values: dict) -> dict:
    """`graph` under the keys `names`, with the data nodes in `inline` written into the tasks reading them (`_inlined`);
    the nodes in `aliases` (scattered data) and `done` (futures of an earlier submission) become aliases of the keys
    that hold, or will hold, their values on the cluster, those in `values` (fetched before) data.

    One pass, one copy of each task: renaming and inlining separately copied the graph twice (10,000 blocks of
    `block_size=1`: 1.0 KiB per block of this process's memory for the two, 0.5 KiB for one).
    """
    substitutes = {**names, **inline} if inline else names
    renamed = {}
    for key, node in graph.items():
        if key in inline:
            continue
        target = aliases.get(key) or (done[key].key if key in done else None)
        name = names[key]
        if target is not None:
            renamed[name] = Alias(name, target)
        elif key in values:
            renamed[name] = DataNode(name, values[key])
        else:
            renamed[name] = node.substitute(substitutes, key=name)
    return renamed


class _LateRelease:
    """Holds the futures of a client's finished run (its results, its scattered inputs) until the client's next
    submission, or for `RELEASE_AFTER` seconds where none comes.

    Releasing keys is a message on the client's stream to the scheduler, which sends at most one batch every
    10 ms: a graph submitted in the 10 ms after a release waits for the rest of them. Released after the next
    graph was sent, the keys go with it or after it: 16 FFTs of 256x256 called back to back on a 2-worker
    LocalCluster took 32.4 ms each (median of 120) with the keys released at the end of each run, and 26.6 ms held.
    """

    def __init__(self):
        self._held: dict = {}  # id(client) -> (client, the futures of each run held)
        self._lock = threading.Lock()

    def hold(self, client, futures: list) -> None:
        batch = list(futures)
        with self._lock:
            for key, (other, _) in list(self._held.items()):
                if other.status in _CLOSED:  # its loop, and the timers there, are gone
                    del self._held[key]
            self._held.setdefault(id(client), (client, []))[1].append(batch)
        with contextlib.suppress(RuntimeError):  # a closed loop: the client is closed, its keys gone
            client.loop.asyncio_loop.call_soon_threadsafe(
                client.loop.asyncio_loop.call_later, RELEASE_AFTER, self._expire, client, batch)

    def release(self, client) -> None:
        """Release all of `client`'s held futures."""
        with self._lock:
            _, batches = self._held.pop(id(client), (None, []))
        for batch in batches:
            _release(batch)

    def _expire(self, client, batch: list) -> None:
        with self._lock:
            _, batches = self._held.get(id(client), (None, []))
            if not any(b is batch for b in batches):
                return  # released by a submission already
            batches[:] = [b for b in batches if b is not batch]
            if not batches:
                del self._held[id(client)]
        _release(batch)


def _release(futures: list) -> None:
    for future in futures:
        future.release()


LATE_RELEASE = _LateRelease()


class _Scattered:
    """Large graph data on the workers, under keys of its own, released after the run (`LATE_RELEASE`).

    `send` scatters values again after their worker was lost; `direct`: straight to the workers (`direct_transfers`).
    """

    def __init__(self, client, values: dict, direct: bool):
        self.client = client
        self.values = values
        self.direct = direct
        self.futures = {}
        self.send(list(values))

    def send(self, keys: list) -> None:
        if keys:
            futures = self.client.scatter([self.values[k] for k in keys], hash=False, direct=self.direct)
            self.futures.update(zip(keys, futures, strict=True))

    def aliases(self) -> dict:
        """The graph's key of each value -> the key it is scattered under."""
        return {key: future.key for key, future in self.futures.items()}

    def lost(self) -> list:
        """The keys whose data the cluster no longer has (its worker died).

        The scheduler is asked too: the futures' states reach the client on another message than the cancelled
        tasks', and may not say so yet.
        """
        try:
            holders = self.client.who_has(list(self.futures.values()))
        except Exception as err:  # a closing client: the futures' states are all there is
            LOG.debug('Cannot ask the scheduler who holds the inputs: %s', err)
            holders = None
        return [key for key, future in self.futures.items()
                if future.status != 'finished' or (holders is not None and not holders.get(future.key))]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        # released even while a traceback holds the caller's frame (cancelling scattered data upsets the scheduler)
        LATE_RELEASE.hold(self.client, list(self.futures.values()))
        self.futures.clear()


class _Wait:
    """A run's wait for its results, all of it on the client's event loop, in one call from here: no thread of its own.

    While the results are gathered, it checks each second that the cluster has workers, and cancels the run
    when it has had none for too long (saying why in `gave_up`). Where the client's cluster object lives in this
    process, it tells whether workers are coming: an adaptive cluster or jobs not yet started (wait as long as it
    takes), or only closed workers (as after Ctrl-C killed a `LocalCluster`'s processes: give up at once).
    Otherwise nothing tells, and the run waits `NO_WORKERS_TIMEOUT` seconds. Unless `progress` is False, a run
    still going after `PROGRESS_AFTER` seconds shows distributed's progress display (`_bar`); nothing before.
    """

    def __init__(self, client, progress: bool | None, started: float):
        self.client = client
        self.progress = progress
        self.started = started
        self.gave_up: str | None = None
        self.bar = None  # distributed's progress display, once shown
        self.listening = None  # its task, listening to the scheduler
        self.decided = False  # whether the display was shown or not, once it is too late for it
        self.fetched = 0  # futures whose values are here (the first ones)
        self.released = 0  # of them, those released

    def gather(self, futures: list, keys: list, values: dict, direct: bool) -> None:
        """Fetch the values of `futures` (those of `keys`) into `values`, straight from the workers where `direct`,
        else through the scheduler; each future is released, and its place in `futures` set to None, once its value
        is here (see `_release_fetched`)."""
        self.client.sync(self._gather, futures, keys, values, direct)

    async def _gather(self, futures: list, keys: list, values: dict, direct: bool) -> None:
        watch = asyncio.ensure_future(self._watch(futures))
        gathering = asyncio.ensure_future(self._in_batches(futures, keys, values, direct))
        try:
            if self.progress is not False:
                done, _ = await asyncio.wait({gathering}, timeout=PROGRESS_AFTER)
                # not for a run already cancelled: distributed's bar would wait for its tasks on the scheduler for ever
                if not done and all(f is None or f.status in ('pending', 'finished') for f in futures):
                    self.bar = _bar(self.client, _held(futures), self.started)
                    self.listening = asyncio.ensure_future(self.bar.listen())
            self.decided = True
            await gathering
        finally:
            watch.cancel()
            if self.listening is not None:
                # the bar's last update (100 %, or the error) comes right after the run's end; a cancelled run's never
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.listening, 1.0)

    async def _in_batches(self, futures: list, keys: list, values: dict, direct: bool) -> None:
        """Fetch the values of `futures` into `values`, `GATHER_BATCH` at a time, raising the first error of any at
        once.

        Distributed's gather waits on a coroutine per future, and decodes all values from one message: the client's
        peak for 10,000 blocks of `block_size=1` was 5.3 KiB per block gathered whole, 3.7 KiB in batches of 1,000
        (tracemalloc). While a batch is awaited, the later futures are looked at each second for one that failed.
        """
        for start in range(0, len(futures), GATHER_BATCH):
            stop = start + GATHER_BATCH
            batch = asyncio.ensure_future(self.client.gather(futures[start:stop], direct=direct, asynchronous=True))
            while not (await asyncio.wait({batch}, timeout=1.0))[0]:
                later = itertools.islice(futures, stop, None)
                failed = next((f for f in later if f.status in ('error', 'cancelled')), None)
                if failed is not None:
                    batch.cancel()
                    await self.client.gather([failed], asynchronous=True)  # raises its error, or CancelledError
            values.update(zip(keys[start:stop], batch.result(), strict=True))
            if stop < len(futures):  # the last batch's are held after the run (`LATE_RELEASE`)
                self.fetched = stop
                self._release_fetched(futures)

    def _release_fetched(self, futures: list) -> None:
        """Release the futures whose values are here, and drop them from `futures`, where the progress display allows.

        A finished future costs the client 0.9 KiB (its state, with an `asyncio.Event` and its queue of waiters,
        and distributed's reference count): held until the end, 10,000 blocks of `block_size=1` took 3.4 KiB per
        block at the client's peak while gathering (tracemalloc), 2.8 KiB released as fetched. Not before the
        progress display has its tasks: distributed's `Progress` waits for ever for a key the scheduler forgot
        before it started, and its widget (`MultiProgress`) stops with an error at any key forgotten; with the
        widget, nothing is released until the run's end.
        """
        if not self.decided or self.fetched <= self.released:
            return
        if self.bar is not None and (hasattr(self.bar, 'widget') or getattr(self.bar, 'status', None) is None):
            return  # the widget, or a text bar not yet set up on the scheduler
        _release(futures[self.released:self.fetched])
        futures[self.released:self.fetched] = [None] * (self.fetched - self.released)
        self.released = self.fetched

    async def _watch(self, futures: list) -> None:
        since = None
        while True:
            await asyncio.sleep(1.0)
            try:
                workers = len(await self.client.nthreads(asynchronous=True))
            except Exception as err:  # a closing client: the run fails on its own
                LOG.debug('Cannot ask the scheduler for its workers: %s', err)
                return
            if workers:
                since = None
                continue
            since = since or time.monotonic()
            coming = workers_coming(self.client)
            waited = time.monotonic() - since
            if coming is False or (coming is None and waited >= NO_WORKERS_TIMEOUT):
                why = ('left: its workers were closed (Ctrl-C at a terminal closes those of a LocalCluster)'
                       if coming is False else f'after {waited:.0f} s of waiting')
                self.gave_up = (f'the Dask cluster at {self.client.scheduler.address} has no workers {why}; start '
                                f'or scale it again and rerun (blocks already written to cache_dir stay there)')
                with contextlib.suppress(Exception):
                    await self.client.cancel(_held(futures), asynchronous=True)
                return


def workers_coming(client) -> bool | None:
    """Whether the client's cluster will get workers: True (adaptive, or workers starting), False (only closed
    ones), None (no cluster object here to ask: a scheduler at an address)."""
    cluster = getattr(client, 'cluster', None)
    if cluster is None:
        return None
    adaptive = getattr(cluster, '_adaptive', None)
    if adaptive is not None and getattr(adaptive, 'state', None) in ('starting', 'running'):
        return True
    workers = getattr(cluster, 'workers', None)
    if not isinstance(workers, dict):
        return None
    return any(_status(w) not in _CLOSED for w in workers.values())


def _status(worker) -> str:
    status = getattr(worker, 'status', None)
    return getattr(status, 'name', str(status))


def _bar(client, futures: list, started: float):
    """Distributed's progress display of `futures`, made on the client's event loop, listening there.

    In a Jupyter kernel with ipywidgets, a widget with a bar per task group, displayed here; elsewhere a text bar
    (in a kernel, one output redrawn in place).
    Never in the calling thread: `distributed.progress` blocks in its text bar (and waits for ever where the run's
    tasks were cancelled before it started), and leaves its widget undisplayed, to be updated by the notebook's
    event loop, which a running cell blocks. Its clock counts from `started` (`time.perf_counter()`, the run's
    start), not from when it appears: distributed's own clock starts with the bar, a second or more late.
    """
    from distributed.diagnostics.progressbar import MultiProgressWidget, TextProgressBar

    address = client.scheduler.address
    if in_kernel() and _has_widgets():
        from IPython.display import display

        bar = MultiProgressWidget(futures, scheduler=address, complete=True, group_by='prefix')
        display(bar.widget)
    else:
        bar = TextProgressBar(futures, scheduler=address, complete=True, start=False, loop=client.loop)
        if in_kernel():  # one output redrawn in place, not a line per update in a saved notebook
            line = KernelLine()
            bar._draw_bar = lambda remaining, all, **_: line.show(bar_text(1 - remaining / all if all else 1.0,
                                                                              bar.elapsed))
            bar._draw_stop = lambda **_: None
    bar._start_time = started  # the start `elapsed` counts from: distributed's bars use time.perf_counter too
    return bar


def _has_widgets() -> bool:
    """Whether ipywidgets can be imported (distributed's widget needs it; without it, the text bar)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
