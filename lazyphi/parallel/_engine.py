"""Running a `Plan` on Dask: one graph of task-spec nodes per call, on any Dask scheduler.

This is the only module of lazyphi besides the scheduler helpers that imports Dask; it is
loaded the first time `parallel_compute` runs or a plan is handed to Dask.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import time
import traceback
from collections.abc import Callable, Sequence

from dask.base import tokenize
from dask.sizeof import sizeof
from dask.system import CPU_COUNT
from dask.task_spec import DataNode, Task, TaskRef

from .. import math
from ..backend import backend_by_name, default_backend, get_precision, precision
from ..dataclasses import cached_property_names
from ..math import Tensor, batch, concat, config_fields, data_fields, stack
from ..math import shape as tree_shape
from ..math import slice as slice_
from ..math.kinds import Joined, Tracer, tree_map
from ..storage import (
    ArraySpec,
    DiskTensor,
    array_spec,
    block_complete,
    check_cache_dir_visible,
    disk_tensor,
    load_cache_as,
    prepare_result,
    worker_load_backend,
    write_block,
)
from ._clients import client_of
from ._plan import CHUNK_BYTES, Plan, Stage, _descriptor, _tensors, plan
from ._schedulers import run_graph

FORMAT_VERSION = 1
PRESLICE_BYTES = 2 ** 20  # a host value larger than this reaches the block tasks as one slice per block


class PropertyFailed(RuntimeError):
    """A property raised while `parallel_compute` ran it; the message holds the original traceback."""


def parallel_compute(instance, properties: Sequence, parallel_dims=batch, max_workers: int | None = None,
                     memory_limit: float | None = None, cache_dir: str | None = None, keep_intermediate: bool = False,
                     *, scheduler=None, block_size: int | None = None, progress: bool | None = None,
                     chunk_bytes: int = CHUNK_BYTES, compressor: str | None = None) -> Plan:
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
            the CPUs for local threads and processes, one for 'sync').
        memory_limit: bytes of property outputs to hold in memory; outputs beyond it, largest
            first, go to `cache_dir`. Needs `cache_dir`; 1 sends everything to disk.
        cache_dir: directory of the disk cache (a shared file system for a cluster). With it every
            requested output is written there, and running again resumes from what is written.
        keep_intermediate: keep the values of properties computed only as inputs of `properties`.
        scheduler: see above.
        block_size: elements per block along the split dim, instead of two blocks per worker.
        progress: show a progress bar (None: after a second, for runs that take that long).
        chunk_bytes: target bytes of one disk-cache chunk (default 16 MiB); it is part of a result's key.
        compressor: None (uncompressed, the default: measured fastest) or 'zstd', for the arrays of a
            result created by this run; an existing result keeps its codec and is reused.

    Returns:
        The plan that ran (print it to see what ran where).

    Raises:
        TypeError, ValueError: bad arguments (see `plan`).
        PropertyFailed: a property raised; the message names it, its block and the original traceback.
        CacheDirNotShared: on a `distributed` cluster whose workers do not see `cache_dir`.
    """
    p = plan(instance, properties, parallel_dims, max_workers, memory_limit, cache_dir, keep_intermediate,
             scheduler=scheduler, block_size=block_size, progress=progress, chunk_bytes=chunk_bytes,
             compressor=compressor)
    started = time.perf_counter()
    client = client_of(scheduler)
    if cache_dir is not None and client is not None:
        check_cache_dir_visible(cache_dir, client)
    graph = compiled(p)
    results = run_graph(graph.graph, [graph.result_key], scheduler, p.max_workers, progress)[0]
    finish([results], p)
    p.elapsed = time.perf_counter() - started
    return p


def compiled(p: Plan) -> CompiledPlan:
    """The plan's graph, compiled once."""
    if p.compiled is None:
        p.compiled = compile_plan(p, p.instance)
    return p.compiled


def finish(results: list, p: Plan) -> dict:
    """Store computed values in the instance (requested, persistent, and intermediates when asked); return them."""
    (values,) = results
    cls = type(p.instance)
    kept = {}
    for name, value in values.items():
        if name in p.requested or p.keep_intermediate or getattr(_descriptor(cls, name), 'persistent', False):
            p.instance.__dict__[name] = value
            kept[name] = value
    return kept


def rebuild(graph: dict, p: Plan, *, rename=None) -> Plan:
    """The plan after dask.persist: same plan, its graph holding the persisted result."""
    clone = copy.copy(p)
    clone.compiled = CompiledPlan(dict(graph), p.compiled.result_key, p.compiled.token)
    return clone


def default_get(graph, keys, **kwargs):
    """The scheduler Dask uses for a plan when none is configured: the active client, else threads."""
    return run_graph(graph, keys, None, kwargs.pop('num_workers', None) or _cpu_count(), None)


def _cpu_count() -> int:
    return CPU_COUNT


class CompiledPlan:
    """The Dask graph of one plan: a plain mapping of task-spec nodes and the key of its result."""

    def __init__(self, graph: dict, result_key, token: str):
        self.graph = graph
        self.result_key = result_key
        self.token = token


def compile_plan(p: Plan, instance) -> CompiledPlan:
    """One graph for the whole plan: field nodes, per-block tasks, assembly per stage, one result node."""
    key = cache_key(p, instance)
    token = plan_token(p, instance, key)
    worker_backend = worker_load_backend()
    settings = (get_precision(), default_backend().name, worker_backend.name if worker_backend else None)
    group = _prepare_disk(p, instance, key) if p.cache_dir is not None else None
    graph = {}
    template_key = f'template-{token}'
    graph[template_key] = DataNode(template_key, _template(instance))
    host_values = {**{f.name: (f'field-{f.name}-{token}', getattr(instance, f.name)) for f in data_fields(instance)},
                   **{n: (f'cached-{n}-{token}', instance.__dict__[n]) for n in p.done}}
    field_keys = {}  # name -> key of the node holding a host value whole, made when first needed

    def whole(n: str) -> TaskRef:
        if n not in field_keys:
            key, value = host_values[n]
            graph[key] = DataNode(key, value)
            field_keys[n] = key
        return TaskRef(field_keys[n])

    assembled = {}  # property name -> key of the task holding its full value (a dict entry)
    block_outputs = {}  # property name -> (stage, list of block keys)
    for stage in p.stages:
        names = [q.name for q in stage.properties]
        if stage.host:
            key = f'host-{stage.index}-{"-".join(names)}-{token}'
            inputs = {**{f: whole(f) for f in stage.fields},
                      **{c: _full_ref(c, assembled, whole) for c in stage.cached_inputs}}
            graph[key] = Task(key, run_stage, TaskRef(template_key), _stage_spec(stage, group), None, settings,
                              tuple(inputs), (), *inputs.values())
            for n in names:
                assembled[n] = key
            continue
        block_keys = []
        name = f'{"-".join(names)}-{token}'
        spec = _stage_spec(stage, group)
        template_ref = TaskRef(template_key)
        input_names = (*stage.fields, *stage.cached_inputs)
        same_grid = {c for c in stage.cached_inputs if c in block_outputs and _same_grid(block_outputs[c][0], stage)}
        # large host values go to each block as its own slice: a process or cluster worker receives its part only
        cut = {n for n in input_names if n in host_values and n not in assembled
               and host_bytes(host_values[n][1]) > PRESLICE_BYTES
               and stage.block_dim in tree_shape(host_values[n][1]).names}
        full = {n: _full_ref(n, assembled, whole) for n in input_names if n not in same_grid and n not in cut}
        sliced = tuple(full)  # the task cuts its block out of these
        with _gc_paused():  # 100,000s of small objects: the cyclic collector would rescan them all repeatedly
            for block in stage.blocks:
                values = []
                for n in input_names:
                    if n in same_grid:
                        values.append(Task(None, _pick, TaskRef(block_outputs[n][1][block.index]), n))
                    elif n in cut:
                        key = (host_values[n][0], stage.index, block.index)
                        graph[key] = DataNode(key, slice_block(host_values[n][1], stage.block_dim, block.start,
                                                               block.stop))
                        values.append(TaskRef(key))
                    else:
                        values.append(full[n])
                key = (name, block.index)
                graph[key] = Task(key, run_stage, template_ref, spec, (stage.block_dim, block.start, block.stop),
                                  settings, input_names, sliced, *values)
                block_keys.append(key)
        assemble_key = f'assemble-{stage.index}-{token}'
        graph[assemble_key] = Task(assemble_key, assemble_stage, spec, stage.block_dim, settings,
                                   *[TaskRef(k) for k in block_keys])
        for n in names:
            assembled[n] = assemble_key
            block_outputs[n] = (stage, block_keys)
    result_key = f'result-{token}'
    graph[result_key] = Task(result_key, collect_results, tuple(assembled), *[TaskRef(k) for k in assembled.values()])
    return CompiledPlan(graph, result_key, token)


def _full_ref(name: str, assembled: dict, whole: Callable):
    if name in assembled:
        return Task(None, _pick, TaskRef(assembled[name]), name)
    return whole(name)


def host_bytes(value) -> int:
    """Bytes of the in-memory tensors in `value` (a tree); disk-backed tensors count nothing."""
    return sum(_tensor_bytes(t) for t in _tensors(value) if not isinstance(t, DiskTensor))


def _tensor_bytes(t: Tensor) -> int:
    return (t.shape.volume or 0) * (t.dtype.itemsize or 1)


@sizeof.register(Tensor)
def _sizeof_tensor(t: Tensor) -> int:
    """What a tensor holds in memory, for Dask's memory accounting (a disk-backed one: its reference)."""
    return 1024 if isinstance(t, DiskTensor) else _tensor_bytes(t)


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _same_grid(a: Stage, b: Stage) -> bool:
    return [(x.start, x.stop) for x in a.blocks] == [(x.start, x.stop) for x in b.blocks]


def _pick(values: dict, name: str):
    return values[name]


def _template(instance):
    """A copy of `instance` without data or cached values: what every task builds its instance from."""
    template = copy.copy(instance)
    for n in cached_property_names(type(instance)):
        template.__dict__.pop(n, None)
    for f in data_fields(instance):
        object.__setattr__(template, f.name, None)
    return template


def _stage_spec(stage: Stage, group: str | None) -> tuple:
    """What a task needs to know about the stage's properties.

    Per property: (name, mode, split dims, MIXED partials, MIXED trace, the result group if it goes to disk).
    """
    return tuple((q.name, q.mode, tuple(stage.split_dims.names), q.partials, q.trace if q.mode == 'mixed' else None,
                  group if q.disk else None) for q in stage.properties)


def _prepare_disk(p: Plan, instance, key: str) -> str | None:
    """Create (if absent) the result group of this computation and an array per output that goes to disk."""
    specs = {}
    for stage in p.stages:
        for q in stage.properties:
            if q.disk:
                shape = q.output.shape
                along = stage.block_dim if stage.block_dim in shape.names else shape.names[0]
                chunk = stage.chunk_size if along == stage.block_dim else shape.get_size(along)
                specs[q.name] = ArraySpec(shape, q.output.dtype, default_backend().name, along, chunk, p.compressor)
    config = {f.name: getattr(instance, f.name) for f in config_fields(instance)}
    return prepare_result(p.cache_dir, key, type(instance), specs, config) if specs else None


def slice_block(value, dim: str, start: int, stop: int):
    """The part of `value` (a tree) along `dim` from `start` to `stop`."""
    return slice_(value, {dim: slice(start, stop)})


def run_stage(template, spec: tuple, block, settings: tuple, names: tuple, sliced: tuple, *values) -> dict:
    """Compute the stage's properties on one block (or, for a host stage, on the whole instance).

    `names` name the fields and cached values given in `values`; those in `sliced` are whole and the
    task cuts its block out of them (a view for in-memory data, a selection for disk-backed data).
    Outputs that go to disk are written as whole chunks and returned as disk-backed tensors; a block
    whose outputs are all on disk already (a resumed run) is not computed again.
    """
    with _task_settings(settings):
        if all(disk is not None for *_, disk in spec) and all(
                _on_disk(disk, name, block) for name, *_, disk in spec):
            return {name: _disk_result(disk, name, block) for name, *_, disk in spec}
        instance = copy.copy(template)
        cached = cached_property_names(type(template))
        for name, value in zip(names, values, strict=True):
            if name in sliced:
                value = slice_block(value, *block)
            if name in cached:
                instance.__dict__[name] = value
            else:
                object.__setattr__(instance, name, value)
        results = {}
        for name, mode, split, partials, trace, disk in spec:
            func = _descriptor(type(instance), name).func
            try:
                if mode == 'mixed':
                    value = _partials(trace, partials, instance)
                elif mode == 'element' and split:
                    value = _per_element(func, instance, split)
                else:
                    value = func(instance)
            except Exception as err:
                where = 'on the host' if block is None else f'on block {block[0]}[{block[1]}:{block[2]}]'
                raise PropertyFailed(f'{type(template).__name__}.{name} raised {type(err).__name__} {where}: {err}\n'
                                     f'Original traceback:\n{traceback.format_exc()}') from err
            instance.__dict__[name] = value
            if disk is not None:
                dim, start, stop = _written_range(disk, name, block)
                write_block(disk, name, value, dim, start, stop)
                value = _disk_result(disk, name, block)
            results[name] = value
        return results


@contextlib.contextmanager
def _task_settings(settings: tuple):
    """Re-apply in a task what the plan captured: precision, default backend, backend of loaded disk data."""
    bits, backend_name, load_backend = settings
    with precision(bits), backend_by_name(backend_name), (
            load_cache_as(load_backend) if load_backend else contextlib.nullcontext()):
        yield


def _written_range(group: str, name: str, block) -> tuple:
    """(dim, start, stop) a task writes: its block, or the whole array for a host stage."""
    if block is not None:
        return block
    spec = array_spec(group, name)
    return spec.block_dim, 0, spec.shape.get_size(spec.block_dim)


def _on_disk(group: str, name: str, block) -> bool:
    return block_complete(group, name, *_written_range(group, name, block))


def _disk_result(group: str, name: str, block):
    dim, start, stop = _written_range(group, name, block)
    return disk_tensor(group, name, {dim: slice(start, stop)} if block is not None else None)


def _per_element(func: Callable, instance, dims: tuple):
    """Evaluate `func` on each element along `dims` (instances without those dims) and stack the results."""
    dim = tree_shape(instance)[dims[0]]
    parts = []
    for i in range(dim.size):
        element = slice_(instance, {dim.name: i})
        parts.append(_per_element(func, element, dims[1:]) if len(dims) > 1 else func(element))
    return stack(parts, dim)


def _partials(trace, partials: tuple, instance) -> dict:
    """MIXED: replay the trace on the block's values up to its split reductions; return their partial results."""
    needed = _upstream(trace, [i for i, _ in partials])
    values = {}
    leaves = {}
    for node, (origin, name, index) in trace.inputs.items():
        if node not in needed:
            continue
        if (origin, name) not in leaves:
            leaves[origin, name] = _tensors(getattr(instance, name) if origin == 'field' else instance.__dict__[name])
        values[node] = leaves[origin, name][index]
    results = trace.replay(values, only=needed)
    return {i: _partial(trace.nodes[i], results[i], op, results) for i, op in partials}


def _partial(node, result: Tensor, op: str, results: dict):
    """A block's partial `result` of reduction `node`; a mean or std with what weighs it when combined."""
    if op not in ('mean', 'std'):
        return result
    value = results[node.inputs[0]]  # the reduced tensor: per block, so a node of the trace
    dims = [d for d in node.params[0] if d in value.shape]
    count = value.shape.only(dims).volume
    return (count, result) if op == 'mean' else (count, math.mean(value, dims), result)


def _upstream(trace, nodes: list) -> set:
    """The nodes `nodes` depend on, themselves included."""
    needed, todo = set(), list(nodes)
    while todo:
        i = todo.pop()
        if i not in needed:
            needed.add(i)
            todo.extend(x for x in trace.nodes[i].inputs if isinstance(x, int))
    return needed


def assemble_stage(spec: tuple, dim: str, settings: tuple, *blocks: dict) -> dict:
    """Join the block outputs of each property along the block dim (and combine MIXED partials)."""
    with _task_settings(settings):
        result = {}
        for name, mode, _, partials, trace, disk in spec:
            outputs = [b[name] for b in blocks]
            if disk is not None:
                result[name] = disk_tensor(disk, name)
            elif mode == 'mixed':
                result[name] = _combine(trace, partials, outputs)
            else:
                result[name] = _join(outputs, dim)
        return result


def _join(outputs: list, dim: str):
    first = outputs[0]
    if len(outputs) == 1:
        return first
    if isinstance(first, Tensor):  # kept apart, not copied: assembling needs no memory of its own
        return Joined(outputs, dim) if dim in first.shape.names else first
    if isinstance(first, (tuple, list)):
        return type(first)(_join([o[i] for o in outputs], dim) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _join([o[k] for o in outputs], dim) for k in first}
    return concat(outputs, dim)


BLOCKS_DIM = batch('blocks_')


def _reduced(reduce: Callable) -> Callable:
    return lambda parts: reduce(stack(parts, BLOCKS_DIM), BLOCKS_DIM)


def _weights_and_means(parts: list) -> tuple:
    """Blocks' share of the elements, their means stacked, and the mean of all elements."""
    counts = [part[0] for part in parts]
    weights = math.tensor([c / sum(counts) for c in counts], BLOCKS_DIM)
    means = stack([part[1] for part in parts], BLOCKS_DIM)
    return weights, means, math.sum_(means * weights, BLOCKS_DIM)


def _combined_std(parts: list) -> Tensor:
    """The std of all elements from the blocks' (count, mean, std): the within- and between-block variances."""
    weights, means, mean = _weights_and_means(parts)
    stds = stack([part[2] for part in parts], BLOCKS_DIM)
    return math.sqrt(math.sum_(weights * (stds ** 2 + (means - mean) ** 2), BLOCKS_DIM))


COMBINE = {'sum': _reduced(math.sum_), 'prod': _reduced(math.prod), 'max': _reduced(math.max_),
           'min': _reduced(math.min_), 'any': _reduced(math.any_), 'all': _reduced(math.all_),
           'mean': lambda parts: _weights_and_means(parts)[2], 'std': _combined_std}


def _combine(trace, partials: tuple, outputs: list):
    """Reduce the blocks' partial results with each reduction's combine op, then finish the trace on the host."""
    combined = {node: COMBINE[op]([o[node] for o in outputs]) for node, op in partials}
    results = trace.replay(combined)
    return tree_map(lambda t: results[t._node], trace.output, leaf_types=Tracer)


def collect_results(names: tuple, *stage_results: dict) -> dict:
    """The value of each property from the result dict of the stage that computed it."""
    return {name: values[name] for name, values in zip(names, stage_results, strict=True)}


def cache_key(p: Plan, instance) -> str:
    """A deterministic key of everything that determines the results, and so names their group on disk.

    It covers the inputs' contents, the class's code and the user code it reaches (`code_token`), config values, the
    properties computed and how, the chunk grid, precision, default backend and the format version —
    not the worker count or block grid, so a run with other workers finds the same results.
    """
    cls = type(instance)
    layout = [(s.split_dims.names, s.block_dim, s.chunk_size,
               [(q.name, q.mode, sorted(q.requires), q.disk) for q in s.properties]) for s in p.stages]
    return tokenize(FORMAT_VERSION, cls.__module__, cls.__qualname__, p.code,
                    {f.name: getattr(instance, f.name) for f in data_fields(instance)},
                    {n: instance.__dict__[n] for n in p.done},
                    _config(instance), layout, get_precision(), default_backend().name)


def plan_token(p: Plan, instance, key: str) -> str:
    """The key of this run's graph: the result key plus the block grid."""
    grid = [(len(s.blocks), s.blocks[0].size if s.blocks else 0) for s in p.stages]  # blocks are regular
    return tokenize(key, grid, p.requested, p.keep_intermediate)


def _config(instance) -> tuple:
    return tuple((f.name, repr(getattr(instance, f.name))) for f in config_fields(instance))
