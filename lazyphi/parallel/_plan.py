"""Planning `parallel_compute`: which properties run where, split along which dims, in which blocks.

`plan(instance, properties, ...)` decides everything before anything runs, without touching data:
it analyses which fields and cached values each property reads, traces each property on tracers
to find the dims it mixes (its `requires`), groups properties into stages in dependency order, and
cuts each stage into blocks of whole chunks along one of its parallel dims. The resulting `Plan`
renders as text and as HTML.
"""

from __future__ import annotations

import html
import importlib
import math as pymath
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..dataclasses import ALL, cached_property_names, direct_dependencies
from ..math import EMPTY_SHAPE, Shape, ShapeDtype, batch, data_fields
from ..math import shape as tree_shape
from ..math.kinds import (
    REDUCE,
    Trace,
    Tracer,
    class_attribute,
    is_cached_property,
    leaves,
    memory_bytes,
    output_placeholders,
    reduction_of,
    resolve_dims,
    trace_property,
)
from ..storage import COMPRESSORS, check_cache_dir, parse_bytes
from ._clients import worker_count
from ._code import survey_code, value_token
from ._property import INFER, MIXED

# target size of one storage chunk: 16 and 32 MiB measured alike for whole reads and writes (bench_cache.py);
# the smaller one resumes and reads slices at a finer grain
CHUNK_BYTES = 16 * 2 ** 20
MIN_CHUNKS = 16  # a parallel dim with at least this many elements is cut into at least this many chunks
BLOCKS_PER_WORKER = 2  # of a stage that writes nothing to disk; one that does gets a block per chunk
BLOCK_BYTES = 256 * 2 ** 20  # largest output of one block, so that workers' memory stays bounded
# with cache_dir but no memory_limit: requested outputs of at most this many bytes in all come back in memory
KEPT_BYTES = 2 ** 30


@dataclass(frozen=True)
class Fallback:
    """The tracer could not follow a property: the operation and why; the property kept those dims whole."""

    operation: str
    reason: str

    def __str__(self) -> str:
        return f'{self.operation}: {self.reason}'


@dataclass
class PropertyPlan:
    """How one property is computed."""

    name: str
    requires: frozenset  # parallel dims that must stay whole
    mode: str  # 'block': once per block; 'element': once per element of the block; 'mixed': partials + combine
    output: object  # tree of ShapeDtype, or None when unknown
    fields: frozenset  # data fields read (all of them when the analysis was unsure)
    cached: frozenset  # other cached / parallel properties read
    fallbacks: tuple = ()
    per_element_reason: str | None = None
    trace: Trace | None = field(default=None, repr=False)
    partials: tuple = ()  # MIXED: (node index, combine op) of the reductions split across blocks
    disk: bool = False  # the output is written to the Zarr cache
    in_memory: bool = True  # the output comes back in memory (written to disk or not), else disk-backed
    declared: frozenset = frozenset()  # the dims `@parallel_property(requires=...)` names, parallel or not


@dataclass(slots=True)  # one per block, up to 10^5s of them: no __dict__ (40 bytes less each)
class Block:
    """A contiguous range along the stage's block dim: `start:stop`, covering whole chunks."""

    index: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


class Blocks(Sequence):
    """The blocks of a stage: `length` elements cut into blocks of `per_block` (the last one shorter where they do not
    divide), each made when asked for.

    A list of `Block`s held 150 bytes a block (tracemalloc) for as long as the plan lives, the run included: 15 MB
    at 10^5 blocks of `block_size=1`. Grids compare by their ranges, without making them.
    """

    __slots__ = ('length', 'per_block')

    def __init__(self, length: int, per_block: int):
        self.length = length
        self.per_block = per_block

    def __len__(self) -> int:
        return -(-self.length // self.per_block)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        count = len(self)
        if not -count <= index < count:
            raise IndexError(f'block {index} of a stage of {count} blocks')
        index %= count
        start = index * self.per_block
        return Block(index, start, min(start + self.per_block, self.length))

    def __eq__(self, other) -> bool:
        if isinstance(other, Blocks):  # the same ranges: the same sizes, or one block (or none) each
            one_each = max(len(self), len(other)) <= 1
            return self.length == other.length and (self.per_block == other.per_block or one_each)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None

    def __repr__(self) -> str:
        return f'Blocks(length={self.length}, per_block={self.per_block})'


@dataclass
class Stage:
    """Properties computed together, split along `split_dims` (a host stage when there are none)."""

    index: int
    properties: list
    split_dims: Shape
    block_dim: str | None = None
    chunk_size: int = 0
    blocks: Sequence[Block] = ()  # a `Blocks` where the stage is split
    fields: frozenset = frozenset()
    cached_inputs: frozenset = frozenset()

    @property
    def host(self) -> bool:
        return not self.split_dims

    @property
    def combine(self) -> bool:
        return any(p.mode == 'mixed' for p in self.properties)


@dataclass
class Plan:
    """What `parallel_compute` will do; print it, or show it in a notebook."""

    cls: type
    requested: tuple
    parallel_dims: Shape
    stages: list
    done: tuple
    notes: list
    max_workers: int
    block_size: int | None
    memory_limit: float | None = None
    cache_dir: str | None = None
    keep_intermediate: bool = False
    # with cache_dir: bytes of outputs held in memory at most, those kept plus those of the blocks running
    memory_bound: int | None = None
    instance: object = field(default=None, repr=False)
    field_names: tuple = ()  # the instance's data fields, found once per plan
    code: tuple = ()  # code_token of the class when planned
    cache_key_token: object = None  # token of the `cache_key` value given, part of the disk cache key
    compressor: str | None = None  # codec of the arrays a new disk-cache result is created with
    elapsed: float | None = None  # seconds the run took, once it ran
    reused: int = 0  # blocks found complete in the disk cache when the run started, read instead of computed
    resumable: int = 0  # blocks of the stages writing all their outputs to the disk cache
    compiled: object = field(default=None, repr=False)  # the Dask graph, built on first use
    receipt: object = field(default=None, repr=False)  # how results find the instance (see _graph.receipt)

    # --- the Dask collection protocol: dask.compute(plan), dask.persist(plan), Client.compute(plan) ---
    def __dask_graph__(self):
        return _graph().compiled(self).graph

    def __dask_keys__(self):
        return [_graph().compiled(self).result_key]

    def __dask_layers__(self):
        return (_graph().compiled(self).result_key,)

    def __dask_tokenize__(self):
        return _graph().compiled(self).token

    __dask_optimize__ = None  # the graph is built final: no Dask optimisation pass

    def __dask_postcompute__(self):
        return _graph().deliver, (_graph().receipt(self),)

    def __dask_postpersist__(self):
        return _graph().rebuild, (self,)

    @staticmethod
    def __dask_scheduler__(graph, keys, **kwargs):
        return _graph().default_get(graph, keys, **kwargs)

    @property
    def properties(self) -> dict:
        return {p.name: p for s in self.stages for p in s.properties}

    @property
    def fallbacks(self) -> list:
        return [(p.name, f) for p in self.properties.values() for f in p.fallbacks]

    def __str__(self) -> str:
        lines = [f'Plan for {self.cls.__name__}: {", ".join(self.requested)} over {self.parallel_dims or "no dims"} '
                 f'({_count(self.max_workers, "worker")})']
        lines += [f'  note: {n}' for n in self.notes]
        if self.done:
            lines.append(f'  already cached: {", ".join(self.done)}')
        if self.memory_bound is not None:
            limit = (f'memory_limit {_bytes_text(self.memory_limit)}' if self.memory_limit is not None else
                     f'no memory_limit: results kept up to {_bytes_text(KEPT_BYTES)}')
            lines.append(f'  outputs in memory: at most {_bytes_text(self.memory_bound)} ({limit})')
        for s in self.stages:
            where = 'host' if s.host else f'split along {s.split_dims}'
            chunks = f' (chunks of {s.chunk_size})' if any(p.disk for p in s.properties) else ''
            blocks = '' if s.host else (f', {len(s.blocks)} blocks of {_block_sizes(s.blocks)} along '
                                        f'{s.block_dim!r}{chunks}')
            lines.append(f'  stage {s.index}: {where}{blocks}{", then combine on host" if s.combine else ""}')
            lines.append(f'    reads fields {sorted(s.fields)}' + (f' and cached {sorted(s.cached_inputs)}'
                                                                     if s.cached_inputs else ''))
            for p in s.properties:
                out = _describe_output(p.output)
                where = '' if not p.disk else (f', to disk{f" ({self.compressor})" if self.compressor else ""}'
                                               f'{" and kept in memory" if p.in_memory else ""}')
                lines.append(f'    {p.name}: {p.mode}, requires {_requirement(p, "nothing")}, out {out}{where}')
                lines += [f'      fallback: {f}' for f in p.fallbacks]
                if p.per_element_reason:
                    lines.append(f'      per element: {p.per_element_reason}')
        if self.elapsed is not None:
            lines.append(f'  ran in {self.elapsed:.2f} s' + (f'; {self.reuse}' if self.reuse else ''))
        return '\n'.join(lines)

    @property
    def reuse(self) -> str | None:
        """'reused 12 of 16 blocks from the cache; computed 4' once a run with a disk cache ran, else None."""
        if self.elapsed is None or not self.resumable:
            return None
        return (f'reused {self.reused} of {self.resumable} block{"" if self.resumable == 1 else "s"} from the '
                f'cache; computed {self.resumable - self.reused}')

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = []
        for s in self.stages:
            where = 'host' if s.host else html.escape(str(s.split_dims))
            blocks = '' if s.host else f'{len(s.blocks)} × {html.escape(_block_sizes(s.blocks))} on {s.block_dim}'
            for i, p in enumerate(s.properties):
                notes = '; '.join(html.escape(str(f)) for f in p.fallbacks) or html.escape(p.per_element_reason or '')
                stage_cells = (f'<td rowspan="{len(s.properties)}">{s.index}</td><td rowspan="{len(s.properties)}">'
                               f'{where}</td><td rowspan="{len(s.properties)}">{blocks}</td>') if i == 0 else ''
                rows.append(f'<tr>{stage_cells}<td><b>{html.escape(p.name)}</b></td><td>{p.mode}</td>'
                            f'<td>{html.escape(_requirement(p, "—"))}</td>'
                            f'<td>{html.escape(_describe_output(p.output))}</td><td>{notes}</td></tr>')
        head = ''.join(f'<th>{h}</th>' for h in ('stage', 'split along', 'blocks', 'property', 'mode', 'requires',
                                                  'output', 'fallbacks / notes'))
        items = [html.escape(n) for n in self.notes]
        if self.done:
            items.append(f'already cached: {html.escape(", ".join(self.done))}')
        if self.memory_bound is not None:
            items.append(f'outputs in memory: at most {_bytes_text(self.memory_bound)} (memory_limit '
                         f'{_bytes_text(self.memory_limit)})')
        notes = f'<ul>{"".join(f"<li>{n}</li>" for n in items)}</ul>' if items else ''
        ran = '' if self.elapsed is None else (f'<p>ran in {self.elapsed:.2f} s'
                                               f'{f"; {html.escape(self.reuse)}" if self.reuse else ""}</p>')
        return (f'<div><b>Plan for {html.escape(self.cls.__name__)}</b> over '
                f'{html.escape(str(self.parallel_dims))}, {_count(self.max_workers, "worker")}{notes}'
                f'<table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{ran}</div>')


def _graph():
    """The module building a plan's Dask graph (`_graph.py`), for `Plan`'s Dask collection protocol.

    The one lazy import of lazyphi.parallel: planning must not load Dask, while a plan handed to
    Dask needs its graph. `_graph.py` never imports this module, so this is no import cycle.
    """
    return importlib.import_module('lazyphi.parallel._graph')


def _count(n: int, noun: str) -> str:
    return f'{n} {noun}{"" if n == 1 else "s"}'


def _requirement(p: PropertyPlan, none: str) -> str:
    """The dims a property keeps whole: parallel dims as a list, declared dims that are not parallel (never split
    anyway) by name, like `['run'] and x, y (not parallel dims)`; `none` when it keeps none."""
    parts = [str(sorted(p.requires))] if p.requires else []
    whole = sorted(p.declared - p.requires)
    if whole:
        parts.append(f'{", ".join(whole)} (not parallel dims)')
    return ' and '.join(parts) or none


def _block_sizes(blocks: Sequence[Block]) -> str:
    sizes = sorted({b.size for b in blocks})
    return '/'.join(str(s) for s in sizes)


def _describe_output(output) -> str:
    if output is None:
        return 'unknown'
    if isinstance(output, ShapeDtype):
        return repr(output)
    if isinstance(output, (tuple, list)):
        return '(' + ', '.join(_describe_output(o) for o in output) + ')'
    if isinstance(output, dict):
        return '{' + ', '.join(f'{k}: {_describe_output(v)}' for k, v in output.items()) + '}'
    return repr(output)


def property_name(prop) -> str:
    """The attribute name of a cached or parallel property given as `Cls.prop`, or the name itself."""
    if isinstance(prop, str):
        return prop
    if is_cached_property(prop) and prop.attrname:
        return prop.attrname
    raise TypeError(f'parallel_compute takes properties as Cls.prop of a @cached_property or @parallel_property '
                    f'(or their names); got {prop!r}')


def plan(instance, properties: Sequence, parallel_dims=batch, max_workers: int | None = None,
         memory_limit: float | None = None, cache_dir: str | None = None, keep_intermediate: bool = False, *,
         scheduler=None, block_size: int | None = None, chunk_bytes: int | None = None,
         compressor: str | None = None, cache_key=None) -> Plan:
    """Decide how `parallel_compute` with the same arguments would compute `properties`; runs nothing.

    With `cache_dir`, the plan notes each function of the class's code that reads what the disk cache key
    cannot see (environment variables, files, objects without readable state): see `parallel_compute`'s
    `cache_key`.

    Raises:
        TypeError: `instance` has no `__dict__`, or a property is not a cached or parallel property.
        ValueError: `memory_limit` without `cache_dir`, or a bad `block_size` / `max_workers` /
            `chunk_bytes` / `compressor`.
    """
    cls = type(instance)
    if not hasattr(instance, '__dict__'):
        raise TypeError(f'parallel_compute needs an instance with a __dict__ to cache results in; '
                        f'{cls.__name__} defines __slots__ without __dict__')
    if memory_limit is not None and cache_dir is None:
        raise ValueError(f'memory_limit={memory_limit!r} needs cache_dir, the directory where outputs beyond the '
                         f'limit are written')
    memory_limit = None if memory_limit is None else parse_bytes(memory_limit, 'memory_limit')
    if cache_dir is not None:
        check_cache_dir(cache_dir)
    if block_size is not None and (not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f'block_size must be a positive int (elements per block), got {block_size!r}')
    if chunk_bytes is not None and (not isinstance(chunk_bytes, int) or isinstance(chunk_bytes, bool)
                                    or chunk_bytes < 1):
        raise ValueError(f'chunk_bytes must be a positive int (bytes of one storage chunk) or None (about '
                         f'{CHUNK_BYTES} and at least {MIN_CHUNKS} chunks), got {chunk_bytes!r}')
    if compressor not in COMPRESSORS:
        raise ValueError(f'compressor must be one of {COMPRESSORS} (None: uncompressed), got {compressor!r}')
    workers, guess = worker_count(max_workers, scheduler)
    names = tuple(property_name(p) for p in properties)
    known = cached_property_names(cls)
    for n in names:
        if n not in known:
            raise TypeError(f'{cls.__name__}.{n} is not a @cached_property or @parallel_property; those of '
                            f'{cls.__name__} are {list(known)}')
    notes = [] if guess is None else [guess]
    instance_shape = tree_shape(instance)
    dims = instance_shape.only(resolve_dims(parallel_dims, instance_shape))
    missing = missing_dims(parallel_dims, instance_shape)
    if missing:
        warnings.warn(f'parallel_dims={_filter_repr(parallel_dims)} names dims the instance lacks: '
                      f'{", ".join(missing)}; its dims are {", ".join(instance_shape.names) or "none"}'
                      f'{"" if dims else ", so everything runs on the host"}', UserWarning, stacklevel=_caller_level())
    if not dims:
        notes.append(f'the instance has no dims matching parallel_dims={_filter_repr(parallel_dims)} '
                     f'(its shape is {instance_shape}): everything runs on the host')
    field_names = tuple(f.name for f in data_fields(instance))
    reads = _dependency_order(cls, names, frozenset(field_names))
    survey = survey_code(cls, [getattr(instance, n) for n in field_names])
    code = survey.token
    if cache_dir is not None:
        notes.extend(f'{unseen}, which the disk cache key cannot see: a result computed with other values would be '
                     f'reused; pass such a value as a config field or as cache_key=...' for unseen in survey.unseen)
    done = tuple(n for n in reads if n in instance.__dict__)
    plans: dict[str, PropertyPlan] = {}
    for name, read in reads.items():
        if name not in done:
            plans[name] = _plan_property(instance, cls, name, read, dims, instance_shape, code)
    props = list(plans.values())
    bound = None
    if cache_dir is None:
        stages = _stages(instance, props, dims, workers, block_size, memory_limit, chunk_bytes)
    else:
        storable = _storable_outputs(plans, names, memory_limit, notes)
        if memory_limit is None:
            stages = _stages(instance, props, dims, workers, block_size, memory_limit, chunk_bytes)
            bound = _keep_within(storable, stages, workers, notes)
        else:
            stages, bound = _fit_memory_limit(instance, props, storable, dims, workers, block_size, memory_limit,
                                              chunk_bytes, notes)
    return Plan(cls, names, dims, stages, done, notes, workers, block_size, memory_limit, cache_dir,
                keep_intermediate, bound, instance, field_names, code=code, compressor=compressor,
                cache_key_token=None if cache_key is None else value_token(cache_key, cls.__module__.split('.')[0]))


def _storable_outputs(plans: dict, requested: tuple, memory_limit, notes: list) -> dict:
    """Mark every requested output that can go to disk as written to Zarr (so that running again resumes).

    Only single-Tensor outputs of known shape with at least one dim can go to disk (chunks are cut along a
    dim); the others stay in memory (noted, with the reason). Returns {name: PropertyPlan} of the outputs that can.
    """
    storable = {n: p for n, p in plans.items() if isinstance(p.output, ShapeDtype) and p.output.shape.rank}
    for n, p in plans.items():
        if n not in storable and (n in requested or memory_limit is not None):
            notes.append(f'{n} stays in memory: {_not_storable(p.output)}')
    for n in requested:
        if n in storable:
            storable[n].disk = True
    return storable


def _not_storable(output) -> str:
    """Why an output cannot go to the disk cache, in words."""
    if output is None:
        return 'its output is known only once computed, and only tensors of known shape go to the disk cache'
    if isinstance(output, ShapeDtype):
        return 'its output has no dims (one value); the disk cache stores tensors in chunks along a dim'
    return f'its output is {_describe_output(output)}; only single tensors go to the disk cache'


def _keep_within(storable: dict, stages: list, workers: int, notes: list) -> int:
    """Without `memory_limit`: written outputs come back in memory up to `KEPT_BYTES` in all, the largest others
    disk-backed, so that a run's peak does not grow with its results. Returns the bytes held at most."""
    kept = {n: _output_bytes(p.output) for n, p in storable.items() if p.disk}
    total = sum(kept.values())
    for n in sorted(kept, key=lambda k: -kept[k]):
        if total <= KEPT_BYTES:
            break
        storable[n].in_memory = False
        total -= kept[n]
        notes.append(f'{n} comes back disk-backed: the results kept in memory without memory_limit are at most '
                     f'{_bytes_text(KEPT_BYTES)} (memory_limit= chooses)')
    return _memory_bound(stages, workers)[0]


def _fit_memory_limit(instance, props: list, storable: dict, dims: Shape, workers: int, block_size, memory_limit,
                      chunk_bytes, notes: list) -> tuple:
    """Send outputs to disk, largest first, until the outputs held in memory at once fit `memory_limit`.

    What a run holds (`_memory_bound`): the outputs kept in memory, and the outputs of each block being
    computed, before they are written or handed over. Outputs sent to disk are written and come back
    disk-backed (intermediate ones included); the others stay in memory, written or not. Blocks depend
    on which outputs go to disk, so the stages are cut again for each choice. Where even all outputs on
    disk leave the blocks running at once beyond the limit while one of them fits, a note says how many
    workers would fit; a limit below one block (`memory_limit=1`: everything to disk) gets no note, the
    plan's `outputs in memory` line shows what the run holds. Returns (stages, bytes held at most).
    """
    order = sorted(storable, key=lambda n: -memory_bytes(storable[n].output))
    written = {n for n in storable if storable[n].disk}
    for sent in range(len(order) + 1):
        for i, n in enumerate(order):
            storable[n].in_memory = i >= sent
            storable[n].disk = n in written or i < sent
        stages = _stages(instance, props, dims, workers, block_size, memory_limit, chunk_bytes)
        bound, running, largest = _memory_bound(stages, workers)
        if bound <= memory_limit:
            return stages, bound
    kept = bound - running * largest
    fitting = int((memory_limit - kept) // largest) if largest else running
    if fitting >= 1:
        notes.append(f'memory_limit={_bytes_text(memory_limit)} is less than the {running} blocks being computed at '
                     f'once hold ({running} x {_bytes_text(largest)}): max_workers={fitting} would fit it, or smaller '
                     f'chunks (chunk_bytes=), as a block of a stage writing to disk is one chunk at least')
    return stages, bound


def _memory_bound(stages: list, workers: int) -> tuple[int, int, int]:
    """Bytes of outputs a run of `stages` holds in memory at most, the number of blocks running at once, and the
    bytes of outputs of the largest block.

    Those kept in memory (outputs of unknown size are not counted), plus, for each of at most `workers`
    tasks running at once, the outputs of the largest block (of a host stage: all its outputs).
    """
    kept = sum(_output_bytes(p.output) for s in stages for p in s.properties if p.in_memory)
    largest, tasks = 0, 0
    for s in stages:
        if s.host:
            largest, tasks = max(largest, sum(_output_bytes(p.output) for p in s.properties)), tasks + 1
        else:
            n = s.split_dims.get_size(s.block_dim)
            block = max(b.size for b in s.blocks)
            per_block = sum(_output_bytes(p.output, s.block_dim, block / n) for p in s.properties)
            largest, tasks = max(largest, int(per_block)), tasks + len(s.blocks)
    running = min(workers, tasks)
    return kept + running * largest, running, largest


def _output_bytes(output, dim: str | None = None, fraction: float = 1.0) -> float:
    """Bytes of an output tree of known leaves (0 when unknown); of leaves along `dim`, only `fraction`."""
    if output is None:
        return 0
    return sum(memory_bytes(leaf) * (fraction if dim in leaf.shape.names else 1)
               for leaf in leaves(output, ShapeDtype))


def _bytes_text(n: float) -> str:
    """`n` bytes in binary units, like '1.5 MiB'."""
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(n) < 1024 or unit == 'TiB':
            return f'{n:.0f} {unit}' if unit == 'B' else f'{n:.1f} {unit}'
        n /= 1024


def missing_dims(parallel_dims, shape: Shape) -> tuple:
    """The dims `parallel_dims` names (as names or a Shape; a filter such as `batch` names none) that `shape` lacks."""
    if callable(parallel_dims) and not isinstance(parallel_dims, Shape):
        return ()
    return tuple(n for n in resolve_dims(parallel_dims, shape) if n not in shape.names)


def _caller_level() -> int:
    """The `stacklevel` of a warning that names the first caller outside lazyphi (seen from the caller of this)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get('__name__', '').startswith('lazyphi.'):
        frame, level = frame.f_back, level + 1
    return level


def _filter_repr(dims) -> str:
    return getattr(dims, '__name__', repr(dims))


class _Reads:
    """What one property reads: data fields, other cached properties, and whether the analysis was unsure."""

    def __init__(self, fields: frozenset, cached: frozenset, unsure: bool):
        self.fields = fields
        self.cached = cached
        self.unsure = unsure


def _reads(cls: type, name: str, field_names: frozenset) -> _Reads:
    deps = direct_dependencies(cls, name)
    if deps is ALL:
        return _Reads(field_names, frozenset(), True)
    cached = frozenset(deps.cached) & frozenset(cached_property_names(cls))
    return _Reads(frozenset(deps.attributes) & field_names, cached, False)


def _dependency_order(cls: type, names: tuple, field_names: frozenset) -> dict:
    """{name: what it reads} of the requested properties and every cached property they read, dependencies first."""
    order: dict[str, _Reads] = {}
    visiting = set()

    def visit(n):
        if n in order:
            return
        if n in visiting:
            raise ValueError(f'The cached properties of {cls.__name__} read each other in a cycle through {n!r}')
        visiting.add(n)
        read = _reads(cls, n, field_names)
        for dep in sorted(read.cached):
            visit(dep)
        visiting.discard(n)
        order[n] = read
    for n in names:
        visit(n)
    return order


def _plan_property(instance, cls: type, name: str, read: _Reads, dims: Shape, instance_shape: Shape,
                   code: tuple) -> PropertyPlan:
    descriptor = class_attribute(cls, name)[1]
    parallel = frozenset(dims.names)
    declared = getattr(descriptor, 'requires', INFER)
    out = getattr(descriptor, 'out', INFER)
    fallbacks = []
    if read.unsure:
        fallbacks.append(Fallback('dependency analysis', 'the code may read any field (self escapes the analysis); '
                                  'all fields are sent to its tasks'))
    trace, free, reason = _trace_property(instance, name, parallel, code)
    if free and trace.needs_data:  # per element, and what an element gives depends on its data: nothing went wrong
        reason += '; what an element gives is known once computed'
    elif trace.fallback is not None:
        fallbacks.append(Fallback(*trace.fallback))
    named = frozenset() if declared is INFER or declared is MIXED else frozenset(resolve_dims(declared, instance_shape))
    if declared is INFER or declared is MIXED:
        if trace.fallback is not None:
            requires = parallel - free
        else:
            requires = trace.requires
    else:
        requires = named & parallel
        if trace.fallback is None:
            requires |= trace.requires & (parallel - free)
    split = parallel - requires
    if free:
        mode = 'element'
    elif trace.fallback is not None:
        mode = 'element' if split else 'block'
    else:
        mode = 'block'
    partials = ()
    if declared is MIXED and trace.complete:
        partials = _mixed_partials(trace, parallel)
        if partials is None:
            fallbacks.append(Fallback('MIXED', 'a reduction over a parallel dim cannot be split into partial '
                                      'results; the property keeps those dims whole'))
            partials = ()
        elif partials:
            mode, requires = 'mixed', frozenset()
    # a trace that read a guess for another property's output is right about the dims it mixes, not its output
    traced = None if trace.fallback is not None or trace.assumptions else output_placeholders(
        trace.output, dims.only(tuple(free)) if free else EMPTY_SHAPE)
    output = out if out is not INFER else traced
    return PropertyPlan(name, requires, mode, output, read.fields, read.cached, tuple(fallbacks), reason, trace,
                        partials, declared=named)


def _trace_property(instance, name: str, parallel: frozenset, code: tuple) -> tuple:
    """Trace a property on the whole instance, then element-wise along the dims a data conversion proved free.

    The traces are the analyses slicing uses too (`trace_property`): the cached properties it reads
    are traced on what their own analyses give, never run again.
    Returns (trace, free dims, reason for per-element evaluation or None).
    """
    free = frozenset()
    reason = None
    while True:
        trace = trace_property(instance, name, parallel, free, code)
        if trace.per_element is None:
            return trace, free, reason
        operation, dims = trace.per_element
        free |= dims
        reason = f'{operation} of a value with {sorted(dims)} proves element-wise evaluation'


def _mixed_partials(trace: Trace, parallel: frozenset):
    """The reductions over parallel dims to split, as (node index, reduction name in `REDUCTIONS`).

    None when the split is impossible: a reduction that has no partial form, or an output that
    still needs per-element values after the reductions (such as `x - sum(x)`).
    """
    partials = []
    per_block = []  # whether each node's value is only available per block
    for i, node in enumerate(trace.nodes):
        upstream = any(per_block[x] for x in node.inputs if isinstance(x, int))
        if node.op.category == REDUCE and set(node.params[0]) & parallel:
            if reduction_of(node.op) is None or not upstream:
                return None
            partials.append((i, node.op.name))
            per_block.append(False)
        else:
            per_block.append(upstream or not node.inputs)
    if any(per_block[t._node] for t in leaves(trace.output, Tracer)):
        return None
    return tuple(partials)


def _stages(instance, props: list, dims: Shape, workers: int, block_size, memory_limit, chunk_bytes) -> list:
    """Group properties (in dependency order) into stages of equal split dims, then cut blocks."""
    stage_of: dict[str, int] = {}
    split_of = {p.name: frozenset(dims.names) - p.requires for p in props}
    for p in props:
        index = 0
        for dep in p.cached:
            if dep in stage_of:
                index = max(index, stage_of[dep] + (0 if split_of[dep] == split_of[p.name] else 1))
        stage_of[p.name] = index
    groups: dict[tuple, list] = {}
    for p in props:
        groups.setdefault((stage_of[p.name], tuple(sorted(split_of[p.name]))), []).append(p)
    stages = []
    for (_, split), members in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[0][1]), kv[0][1])):
        split_dims = dims.only(split)
        stage = Stage(len(stages), members, split_dims)
        stage.fields = frozenset().union(*[p.fields for p in members])
        stage.cached_inputs = frozenset().union(*[p.cached for p in members]) - {p.name for p in members}
        if split_dims:
            _cut_blocks(stage, instance, workers, block_size, memory_limit, chunk_bytes)
        stages.append(stage)
    return stages


def _cut_blocks(stage: Stage, instance, workers: int, block_size, memory_limit, chunk_bytes: int | None) -> None:
    """Cut the stage into blocks along its largest split dim, at least one per worker where it has the elements.

    The chunk grid comes from the data alone, so that another run (other workers) finds the same chunks:
    chunks of about `CHUNK_BYTES` of output, but at least `MIN_CHUNKS` of them (every element its own
    chunk on a dim shorter than that), or of about `chunk_bytes` when given. A stage that writes to
    disk gets a block per chunk: the chunk is what a run resumes from, so a job killed or preempted loses
    at most the chunk each worker was writing (two blocks per worker lost up to half of a run). Other
    stages get two blocks per worker, of any range of elements. Either way, a block's outputs stay within
    `BLOCK_BYTES` (and the memory limit shared by the workers): else more, smaller blocks.
    """
    dim = max(stage.split_dims.names, key=lambda n: (stage.split_dims.get_size(n), n))
    n = stage.split_dims.get_size(dim)
    per_element = _bytes_per_element(stage, instance, dim, n)
    if chunk_bytes is None:
        chunk = max(1, min(CHUNK_BYTES // per_element, n // MIN_CHUNKS))
    else:
        chunk = max(1, min(chunk_bytes // per_element, n))
    if block_size is not None:
        chunk = min(chunk, block_size)
    disk = any(p.disk for p in stage.properties)
    if block_size is not None:
        per_block = max(chunk, block_size // chunk * chunk) if disk else block_size
    elif disk:
        per_block = chunk  # whole chunks: no two tasks write one chunk
    else:
        budget = BLOCK_BYTES if memory_limit is None else min(BLOCK_BYTES, memory_limit / workers)
        per_block = min(pymath.ceil(n / min(n, workers * BLOCKS_PER_WORKER)), max(1, int(budget // per_element)))
    stage.block_dim = dim
    stage.chunk_size = chunk
    stage.blocks = Blocks(n, per_block)


def _bytes_per_element(stage: Stage, instance, dim: str, n: int) -> int:
    """Bytes of the stage's outputs per element along `dim` (inputs when outputs are unknown)."""
    total = 0
    for p in stage.properties:
        found = leaves(p.output, ShapeDtype) if p.output is not None else []
        if not found:
            found = [ShapeDtype(t.shape, t.dtype) for f in p.fields for t in leaves(getattr(instance, f))]
        total += sum(memory_bytes(leaf) // (n if dim in leaf.shape.names else 1) for leaf in found)
    return max(total, 1)
