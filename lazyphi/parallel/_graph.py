"""A `Plan` as one Dask graph of task-spec nodes: its nodes, its keys, and what Dask calls back.

With `_schedulers.py`, `_cluster.py` and `_compute.py`, the modules of lazyphi.parallel importing Dask; loaded
the first time `parallel_compute` runs or a plan is handed to Dask (`Plan`'s collection protocol).
The tasks run the functions of `_engine.py`.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from dask.base import tokenize
from dask.sizeof import sizeof
from dask.system import CPU_COUNT
from dask.task_spec import DataNode, Task, TaskRef

from ..backend import default_backend, get_precision
from ..dataclasses import cached_property_names
from ..math import ShapeDtype, Tensor, config_fields
from ..math import shape as tree_shape
from ..math.kinds import Joined, class_attribute, leaves, memory_bytes
from ..storage import FORMAT, ArraySpec, prepare_result, worker_load_backend
from ._code import value_token
from ._engine import (
    JOIN_COPY_BYTES,
    BlockRange,
    PropertyTask,
    StageTask,
    TaskSettings,
    assemble_groups,
    assemble_stage,
    blocks_on_disk_of,
    collect_results,
    group_outputs,
    pick,
    read_stage,
    run_stage,
)
from ._schedulers import run_graph

FORMAT_VERSION = FORMAT  # of the disk cache: a result of an older format is never looked for
JOIN_GROUP = 250  # blocks per task collecting outputs to be joined on a worker (`_joined_on_a_worker`)
PRESLICE_BYTES = 2 ** 20  # a host value larger than this reaches the block tasks as one slice per block


class CompiledPlan:
    """The Dask graph of one plan: a plain mapping of task-spec nodes, the key of its result, its block tasks."""

    def __init__(self, graph: dict, result_key, token: str, block_keys: frozenset = frozenset(),
                 final_keys: frozenset = frozenset(), stage_tasks: tuple = ()):
        self.graph = graph
        self.result_key = result_key
        self.token = token
        # (stage, its StageTask, the keys of its block tasks, the key of the task with its whole outputs) per stage
        self.stage_tasks = stage_tasks
        self.block_keys = block_keys  # the tasks that compute, worth spreading over worker processes
        self.final_keys = final_keys  # the tasks after the last computing ones: joining and collecting results


def compiled(p) -> CompiledPlan:
    """The graph of plan `p`, compiled once."""
    if p.compiled is None:
        p.compiled = compile_plan(p)
    return p.compiled


@dataclass(frozen=True)
class Receipt:
    """What `deliver` needs, wherever Dask runs it: which instance (by id) gets which values."""

    receiver: str  # the instance's id in this process's `_RECEIVERS`
    kept: frozenset  # the properties it keeps: requested, persistent, and intermediates when asked


class Delivery(dict):
    """The values a plan computed that its instance keeps, as `dask.compute(plan)` returns them.

    Unpickled in the process that planned (a `distributed` worker ran `deliver` and the client fetches
    the result), it fills the instance there, so `client.compute(plan).result()` fills it too.
    """

    def __init__(self, receiver: str, values: dict):
        super().__init__(values)
        self.receiver = receiver

    def __reduce__(self):
        return _delivered, (self.receiver, dict(self))


_RECEIVERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_RECEIVERS_HELD: dict = {}  # instances that cannot be weakly referenced


def receipt(p) -> Receipt:
    """The plan's receipt; made once, registering the plan's instance as its receiver in this process."""
    if p.receipt is None:
        receiver = uuid.uuid4().hex
        try:
            _RECEIVERS[receiver] = p.instance
        except TypeError:
            _RECEIVERS_HELD[receiver] = p.instance
        kept = frozenset(q.name for s in p.stages for q in s.properties
                         if q.name in p.requested or p.keep_intermediate
                         or getattr(class_attribute(p.cls, q.name)[1], 'persistent', False))
        p.receipt = Receipt(receiver, kept)
    return p.receipt


def deliver(results: list, receipt: Receipt) -> Delivery:
    """Dask's post-compute step of a plan: the kept values, stored in the instance when it lives in this process."""
    (values,) = results
    return _delivered(receipt.receiver, {n: v for n, v in values.items() if n in receipt.kept})


def _delivered(receiver: str, values: dict) -> Delivery:
    instance = _RECEIVERS.get(receiver)
    if instance is None:
        instance = _RECEIVERS_HELD.pop(receiver, None)
    if instance is not None:
        instance.__dict__.update(values)
    return Delivery(receiver, values)


def rebuild(graph: dict, p, *, rename=None):
    """The plan after dask.persist: same plan, its graph holding the persisted result."""
    clone = copy.copy(p)
    clone.compiled = CompiledPlan(dict(graph), p.compiled.result_key, p.compiled.token)
    return clone


def default_get(graph, keys, **kwargs):
    """The scheduler Dask uses for a plan when none is configured: the active client, else threads."""
    return run_graph(graph, keys, None, kwargs.pop('num_workers', None) or CPU_COUNT, None)


def compile_plan(p) -> CompiledPlan:
    """One graph for the whole plan: field nodes, per-block tasks, assembly per stage, one result node."""
    instance = p.instance
    key = cache_key(p)
    token = plan_token(p, key)
    worker_backend = worker_load_backend()
    settings = TaskSettings(get_precision(), default_backend().name, worker_backend.name if worker_backend else None)
    group = _prepare_disk(p, key) if p.cache_dir is not None else None
    graph = {}
    template_key = f'template({p.cls.__name__})-{token}'
    graph[template_key] = DataNode(template_key, _template(p))
    template_ref = TaskRef(template_key)
    host_values = {**{n: (f'field({n})-{token}', getattr(instance, n)) for n in p.field_names},
                   **{n: (f'cached({n})-{token}', instance.__dict__[n]) for n in p.done}}
    field_keys = {}  # name -> key of the node holding a host value whole, made when first needed

    def whole(n: str) -> TaskRef:
        if n not in field_keys:
            key, value = host_values[n]
            graph[key] = DataNode(key, value)
            field_keys[n] = key
        return TaskRef(field_keys[n])

    assembled = {}  # property name -> key of the task holding its full value (a dict entry)
    spread = []  # keys of the tasks that compute: blocks and host stages
    used = set()  # keys of the assembled values that later stages read
    block_outputs = {}  # property name -> (stage, list of block keys)
    assembles = set()  # keys of the tasks joining a stage's blocks here, on a cluster's client (`_joined_on_a_worker`)
    stage_tasks = []
    for stage in p.stages:
        names = [q.name for q in stage.properties]
        label = task_label(names)
        fields, cached = tuple(sorted(stage.fields)), tuple(sorted(stage.cached_inputs))
        if stage.host:
            key = f'{label}-{token}'
            task = _stage_task(stage, settings, group, fields, cached, frozenset())
            stage_tasks.append((stage, task, (key,), key))
            inputs = [whole(f) for f in fields] + [_full_ref(c, assembled, whole, used) for c in cached]
            graph[key] = Task(key, run_stage, template_ref, task, None, *inputs)
            spread.append(key)
            for n in names:
                assembled[n] = key
            continue
        same_grid = {c for c in cached if c in block_outputs and _same_grid(block_outputs[c][0], stage)}
        # large host values go to each block as its own slice: a process or cluster worker receives its part only
        cut = {n for n in (*fields, *cached) if n in host_values and n not in assembled
               and memory_bytes(host_values[n][1]) > PRESLICE_BYTES
               and stage.block_dim in tree_shape(host_values[n][1]).names}
        full = {n: _full_ref(n, assembled, whole, used) for n in (*fields, *cached)
                if n not in same_grid and n not in cut}
        task = _stage_task(stage, settings, group, fields, cached, frozenset(full))  # tasks cut their block out
        name = f'{label}-{token}'
        block_keys = []
        # joined on a worker: the blocks in groups of JOIN_GROUP, each group's outputs collected by a task right after
        # them, so that a graph sent in parts reads each block in the part that computes it or the next
        there = _joined_on_a_worker(stage)
        grouped = there and len(stage.blocks) > JOIN_GROUP
        groups = []  # keys of the tasks collecting a group's outputs
        with _gc_paused():  # 100,000s of small objects: the cyclic collector would rescan them all repeatedly
            for block in stage.blocks:
                block_range = BlockRange(stage.block_dim, block.start, block.stop)
                values = []
                for n in (*fields, *cached):
                    if n in same_grid:
                        values.append(Task(None, pick, TaskRef(block_outputs[n][1][block.index]), n))
                    elif n in cut:
                        key = (host_values[n][0], stage.index, block.index)
                        graph[key] = DataNode(key, block_range.cut(host_values[n][1]))
                        values.append(TaskRef(key))
                    else:
                        values.append(full[n])
                key = (name, block.index)
                graph[key] = Task(key, run_stage, template_ref, task, block_range, *values)
                block_keys.append(key)
                if grouped and (len(block_keys) % JOIN_GROUP == 0 or block.index == len(stage.blocks) - 1):
                    key = (f'group({label})-{token}', len(groups))
                    first = len(groups) * JOIN_GROUP
                    graph[key] = Task(key, group_outputs, *[TaskRef(k) for k in block_keys[first:]])
                    groups.append(key)
            spread.extend(block_keys)
            assemble_key = f'assemble({label})-{token}'
            stage_tasks.append((stage, task, tuple(block_keys), assemble_key))
            if not there:
                assembles.add(assemble_key)
            if groups:
                graph[assemble_key] = Task(assemble_key, assemble_groups, task, *[TaskRef(k) for k in groups])
            else:
                graph[assemble_key] = Task(assemble_key, assemble_stage, task, *[TaskRef(k) for k in block_keys])
        for n in names:
            assembled[n] = assemble_key
            block_outputs[n] = (stage, block_keys)
    result_key = f'result({task_label(p.requested)})-{token}'
    graph[result_key] = Task(result_key, collect_results, tuple(assembled), *[TaskRef(k) for k in assembled.values()])
    finals = {key for key in assembled.values() if key in assembles} - used
    return CompiledPlan(graph, result_key, token, frozenset(spread), frozenset({*finals, result_key}),
                        tuple(stage_tasks))


def blocks_on_disk(compiled_plan: CompiledPlan) -> tuple[frozenset, int]:
    """(keys of the block tasks whose outputs are all complete on disk, blocks of the stages writing all to disk).

    What a run will read instead of computing, checked here before it starts (a host stage counts as one
    block); its tasks check again as they run.
    """
    found, total = [], 0
    for stage, task, keys, _ in compiled_plan.stage_tasks:
        if not task.properties or any(q.disk is None for q in task.properties):
            continue
        blocks = _block_ranges(stage)
        total += len(blocks)
        found += [key for key, done in zip(keys, blocks_on_disk_of(task, blocks), strict=True) if done]
    return frozenset(found), total


def _block_ranges(stage) -> list:
    """What each block task of `stage` covers, in the order of its keys (a host stage: one task, None)."""
    return [None] if stage.host else [BlockRange(stage.block_dim, b.start, b.stop) for b in stage.blocks]


def without_finished_blocks(compiled_plan: CompiledPlan, finished: frozenset) -> dict:
    """The graph with the block tasks in `finished` reading their outputs from disk, and without the nodes
    that only they needed (a resumed run sends no inputs of finished blocks to its workers).

    A stage whose blocks are all finished and whose outputs all stay on disk gets one task making the
    whole outputs' disk-backed references, in place of joining one per block (a task per block left only
    where a stage still to compute reads the blocks).
    """
    graph = dict(compiled_plan.graph)
    for stage, task, keys, joined in compiled_plan.stage_tasks:
        if joined not in keys and finished.issuperset(keys) and all(
                q.disk is not None and not q.in_memory for q in task.properties):
            graph[joined] = Task(joined, read_stage, task, None)
        for key, block in zip(keys, _block_ranges(stage), strict=True):
            if key in finished:
                graph[key] = Task(key, read_stage, task, block)
    needed, todo = {}, [compiled_plan.result_key]
    while todo:
        key = todo.pop()
        if key not in needed:
            needed[key] = graph[key]
            todo.extend(needed[key].dependencies)
    return needed


def only_references_left(compiled_plan: CompiledPlan, finished: frozenset) -> bool:
    """Whether, with the blocks in `finished` read from disk, the run only makes disk-backed references.

    True when every computing task is finished and none of their outputs is loaded into memory: the tasks left
    open files' metadata and join references, in far less time than any scheduler takes to start them.
    """
    return compiled_plan.block_keys <= finished and not any(
        q.in_memory for _, task, _, _ in compiled_plan.stage_tasks for q in task.properties)


def task_label(names) -> str:
    """The name the tasks computing properties `names` show under on Dask's dashboard and progress bars.

    Dask groups tasks by the part of their key before the first '-' followed by a word that is not all letters
    (`dask.utils.key_split`), so names are joined by ',' and wrapped in parentheses: `mean_power`,
    `assemble(mean_power)`, `field(signals)` keep the whole property name where `assemble-mean_power` would show
    as `assemble`.
    """
    return ','.join(names)


def _stage_task(stage, settings: TaskSettings, group: str | None, fields: tuple, cached: tuple,
                sliced: frozenset) -> StageTask:
    """What the stage's tasks share; a MIXED property carries its trace, an output to disk its result group."""
    properties = tuple(PropertyTask(q.name, q.mode, q.partials, q.trace if q.mode == 'mixed' else None,
                                    group if q.disk else None, q.in_memory) for q in stage.properties)
    return StageTask(properties, tuple(stage.split_dims.names), stage.block_dim, settings, fields, cached, sliced)


def _full_ref(name: str, assembled: dict, whole: Callable, used: set):
    if name in assembled:
        used.add(assembled[name])
        return Task(None, pick, TaskRef(assembled[name]), name)
    return whole(name)


@sizeof.register(Tensor)
def _sizeof_tensor(t: Tensor) -> int:
    """What a tensor holds in memory, for Dask's memory accounting (a disk-backed one: its reference)."""
    return memory_bytes(t)


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _joined_on_a_worker(stage) -> bool:
    """Whether a cluster joins the stage's block outputs on one of its workers, for the client to fetch them whole.

    So where they are joined into one array anyway (`_small_parts`): many blocks whose outputs, all of known size,
    take `JOIN_COPY_BYTES` at most. The client then holds one future and one value where it held one per block:
    10,000 blocks of `block_size=1` took 3.6 KiB per block at the client's peak when each was fetched, 1.5 KiB now
    (with `JOIN_GROUP`; by `bench_cluster.py`'s measure, in a fresh process; distributed's own `client.map` of as
    many no-ops took 4.7). Larger outputs are fetched from the workers that made them, each once, rather than moved
    to one worker first. A worker that dies takes the outputs it holds for joining with it: those blocks run again.
    """
    if len(stage.blocks) <= Joined.PART_LIMIT:
        return False
    outputs = [leaves(q.output, ShapeDtype) if q.output is not None else [] for q in stage.properties]
    return all(outputs) and sum(memory_bytes(leaf) for found in outputs for leaf in found) <= JOIN_COPY_BYTES


def _same_grid(a, b) -> bool:
    return a.blocks == b.blocks


def _template(p):
    """A copy of the instance without data or cached values: what every task builds its instance from."""
    template = copy.copy(p.instance)
    for n in cached_property_names(p.cls):
        template.__dict__.pop(n, None)
    for n in p.field_names:
        object.__setattr__(template, n, None)
    return template


def _prepare_disk(p, key: str) -> str | None:
    """Create (if absent) the result group of this computation and an array per output that goes to disk."""
    specs = {}
    for stage in p.stages:
        for q in stage.properties:
            if q.disk:
                shape = q.output.shape
                along = stage.block_dim if stage.block_dim in shape.names else shape.names[0]
                chunk = stage.chunk_size if along == stage.block_dim else shape.get_size(along)
                specs[q.name] = ArraySpec(shape, q.output.dtype, default_backend().name, along, chunk, p.compressor)
    config = {f.name: getattr(p.instance, f.name) for f in config_fields(p.instance)}
    return prepare_result(p.cache_dir, key, p.cls, specs, config) if specs else None


def cache_key(p) -> str:
    """A deterministic key of everything that determines the results, and so names their group on disk.

    It covers the inputs' contents, the class's code and the user code and values it reaches (`code_token`), config
    values and other attributes of the instance by content (`value_token`), the `cache_key` value given, the
    properties computed and how, the chunk grid, precision, default backend and the format version — not the
    worker count or block grid, so a run with other workers finds the same results.
    """
    instance, cls = p.instance, p.cls
    layout = [(s.split_dims.names, s.block_dim, s.chunk_size,
               [(q.name, q.mode, sorted(q.requires), q.disk) for q in s.properties]) for s in p.stages]
    package, cached, data = cls.__module__.split('.')[0], cached_property_names(cls), set(p.field_names)
    # config fields and any attribute set outside the fields (in __post_init__, say), which the tasks' copies keep
    config = tuple((n, value_token(v, package)) for n, v in sorted(instance.__dict__.items())
                   if n not in data and n not in cached)
    # fields and cached inputs by content, like config: Dask's own tokens of an object of a class made in __main__ or
    # by exec() differ from process to process
    fields = tuple((n, value_token(getattr(instance, n), package)) for n in p.field_names)
    done = tuple((n, value_token(instance.__dict__[n], package)) for n in p.done)
    return tokenize(FORMAT_VERSION, cls.__module__, cls.__qualname__, p.code, p.cache_key_token, fields, done,
                    config, layout, get_precision(), default_backend().name)


def plan_token(p, key: str) -> str:
    """The key of this run's graph: the result key plus the block grid."""
    grid = [(len(s.blocks), s.blocks[0].size if s.blocks else 0) for s in p.stages]  # blocks are regular
    return tokenize(key, grid, p.requested, p.keep_intermediate)
