"""What runs inside the tasks of a plan's graph: a stage's properties on one block, assembling and combining.

The task protocol is a few frozen dataclasses: a `StageTask` (the stage's `PropertyTask`s, the
`TaskSettings` captured when planning, which inputs a task gets) shared by all blocks of a stage,
and a `BlockRange` per block. Nothing here imports Dask: `_graph.py` builds the graph that calls
these functions, and a worker process unpickles them without the graph builder.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import itertools
import math as pymath
import multiprocessing
import multiprocessing.connection
import os
import platform
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from .. import math
from ..backend import backend_by_name, precision
from ..math import Tensor, concat, merge_shapes, stack, unstack
from ..math import shape as tree_shape
from ..math import slice as slice_
from ..math.kinds import REDUCTIONS, Dense, Joined, Trace, Tracer, class_attribute, leaves, memory_bytes, tree_map
from ..storage import array_spec, block_chunks, block_complete, complete_chunks, disk_tensor, load_cache_as, write_block

# block outputs of at most this many bytes in all (and more of them than Joined.PART_LIMIT) are joined into one array
JOIN_COPY_BYTES = 16 * 2 ** 20


class PropertyFailed(RuntimeError):
    """A property raised while `parallel_compute` ran it; the message holds the original traceback."""


@dataclass(frozen=True)
class PropertyTask:
    """How the tasks of a stage compute one of its properties."""

    name: str
    mode: str  # 'block': once per block; 'element': once per element; 'mixed': partial results, combined after
    partials: tuple = ()  # MIXED: (node index, combine op) of the reductions split across blocks
    trace: Trace | None = None  # MIXED: replayed on each block's values, finished when combining
    disk: str | None = None  # the result group the output is written to; None: it is not written
    in_memory: bool = True  # the task returns the value in memory (written or not), else a disk-backed tensor


@dataclass(frozen=True)
class TaskSettings:
    """What the plan captured and every task re-applies: precision, default backend, backend of loaded disk data."""

    precision: int
    backend: str
    load_backend: str | None

    @contextlib.contextmanager
    def applied(self):
        with precision(self.precision), backend_by_name(self.backend), (
                load_cache_as(self.load_backend) if self.load_backend else contextlib.nullcontext()):
            yield


@dataclass(frozen=True, slots=True)  # one per block task: no __dict__ (40 bytes less), pickled 45 bytes, not 66
class BlockRange:
    """The elements `start:stop` along `dim` that one block task computes."""

    dim: str
    start: int
    stop: int

    def cut(self, value):
        """The part of `value` (a tree) in this block: views of in-memory data, selections of disk-backed data."""
        return slice_(value, {self.dim: slice(self.start, self.stop)})

    def __str__(self) -> str:
        return f'{self.dim}[{self.start}:{self.stop}]'


@dataclass(frozen=True)
class StageTask:
    """What every task of one stage shares.

    A task gets the values of `fields` and then of `cached` (values of other properties), in that
    order; those named in `sliced` come whole and the task cuts its block out of them.
    """

    properties: tuple  # PropertyTask of each property, in dependency order
    split: tuple  # names of the dims the stage is split along (element-wise evaluation loops over them)
    block_dim: str | None  # the dim its blocks cut (None for a host stage)
    settings: TaskSettings
    fields: tuple = ()
    cached: tuple = ()
    sliced: frozenset = frozenset()


def run_stage(template, stage: StageTask, block: BlockRange | None, *values) -> dict:
    """Compute the stage's properties on one block (or, for a host stage, on the whole instance).

    `values` are the stage's inputs (see `StageTask`), built into a copy of `template` (the instance
    without data or cached values). Outputs that go to disk are written as whole chunks and returned as
    disk-backed tensors; a block whose outputs are all on disk already (a resumed run) is not computed again.
    """
    if not _ALLOCATOR_CHECKED:
        restore_allocator_thresholds()
    with stage.settings.applied():
        if block_on_disk(stage, block):  # a resumed run: read, don't compute
            return _disk_results(stage, block)
        instance = copy.copy(template)
        inputs = {}  # name -> value of every field and cached value the properties of the stage may read
        for name, value in zip((*stage.fields, *stage.cached), values, strict=True):
            inputs[name] = block.cut(value) if name in stage.sliced else value
        for name in stage.fields:
            object.__setattr__(instance, name, inputs[name])
        for name in stage.cached:
            instance.__dict__[name] = inputs[name]
        results = {}
        for q in stage.properties:
            func = class_attribute(type(instance), q.name)[1].func
            try:
                if q.mode == 'mixed':
                    value = _partials(q.trace, q.partials, instance)
                elif q.mode == 'element' and stage.split:
                    value = _per_element(func, instance, inputs, frozenset(stage.fields), stage.split)
                else:
                    value = func(instance)
            except _ElementFailed as failed:
                element = ', '.join(f'{d}={i + (block.start if block is not None and d == block.dim else 0)}'
                                    for d, i in failed.element.items())
                raise _failure(template, q.name, f'on element {element} of {_where(block)[3:]}',
                               failed.error) from failed.error
            except Exception as err:
                raise _failure(template, q.name, _where(block), err) from err
            instance.__dict__[q.name] = value
            inputs[q.name] = value
            if q.disk is not None:
                written = _written_range(q.disk, q.name, block)
                write_block(q.disk, q.name, value, written.dim, written.start, written.stop)
                if not q.in_memory:
                    value = _disk_result(q, block)
            results[q.name] = value
        return results


def _written_range(group: str, name: str, block: BlockRange | None) -> BlockRange:
    """What a task writes: its block, or the whole array for a host stage."""
    return block if block is not None else BlockRange(*_block_bounds(array_spec(group, name), None))


def block_on_disk(stage: StageTask, block: BlockRange | None) -> bool:
    """Whether every output of the stage goes to disk and is complete there for `block` (None: a host stage)."""
    return all(q.disk is not None for q in stage.properties) and all(
        _on_disk(q.disk, q.name, block) for q in stage.properties)


def _on_disk(group: str, name: str, block: BlockRange | None) -> bool:
    written = _written_range(group, name, block)
    return block_complete(group, name, written.dim, written.start, written.stop)


def blocks_on_disk_of(stage: StageTask, blocks: list) -> list[bool]:
    """`block_on_disk` for each of `blocks` of one stage, from one listing of each output's completion records."""
    if not all(q.disk is not None for q in stage.properties):
        return [False] * len(blocks)
    outputs = [(q.name, array_spec(q.disk, q.name), complete_chunks(q.disk, q.name)) for q in stage.properties]
    if not all(recorded for _, _, recorded in outputs):  # nothing written yet: a fresh result
        return [False] * len(blocks)
    found = []
    for block in blocks:
        found.append(all(recorded.issuperset(block_chunks(spec, name, *_block_bounds(spec, block)))
                         for name, spec, recorded in outputs))
    return found


def _block_bounds(spec, block: BlockRange | None) -> tuple:
    """(dim, start, stop) written for `block` (None: the whole array, as a host stage writes it)."""
    if block is None:
        return spec.block_dim, 0, spec.shape.get_size(spec.block_dim)
    return block.dim, block.start, block.stop


def read_stage(stage: StageTask, block: BlockRange | None) -> dict:
    """The outputs of a block found complete on disk before the run (a task needing none of the block's inputs);
    `block` None: the stage's whole outputs (a host stage, or every block of the stage)."""
    with stage.settings.applied():
        return _disk_results(stage, block)


def _disk_results(stage: StageTask, block: BlockRange | None) -> dict:
    return {q.name: _disk_result(q, block) for q in stage.properties}


def _disk_result(q: PropertyTask, block: BlockRange | None) -> Tensor:
    """The block's part of the written output: disk-backed, or loaded when it is kept in memory."""
    part = disk_tensor(q.disk, q.name, None if block is None else {block.dim: slice(block.start, block.stop)})
    return part._dense() if q.in_memory else part


_ALLOCATOR_CHECKED = False
ALLOCATOR_THRESHOLDS = {-3: 32 * 2 ** 20, -1: 64 * 2 ** 20}  # glibc mallopt: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def restore_allocator_thresholds() -> bool:
    """Give glibc's allocator back the thresholds it would reach itself, where a `distributed` nanny pinned them.

    A nanny starts its worker with MALLOC_TRIM_THRESHOLD_=65536 (to return memory eagerly). Setting it
    switches off glibc's adaptive mmap threshold, so every allocation over 128 KiB — each NumPy temporary of a
    block — is mapped and zero-filled anew and given back at once: measured 4x slower FFTs of 256x256 images
    on such workers. This sets the mmap threshold to 32 MiB and the trim threshold to 64 MiB (where glibc's
    adaptation ends) once per process, on Linux with glibc, when MALLOC_TRIM_THRESHOLD_ is set and
    MALLOC_MMAP_THRESHOLD_ is not (a user's own choice is kept). Returns whether it changed them.
    """
    global _ALLOCATOR_CHECKED
    _ALLOCATOR_CHECKED = True
    if (sys.platform != 'linux' or 'MALLOC_TRIM_THRESHOLD_' not in os.environ
            or 'MALLOC_MMAP_THRESHOLD_' in os.environ or platform.libc_ver()[0] != 'glibc'):
        return False
    try:
        libc = ctypes.CDLL(None)
        return all(libc.mallopt(parameter, value) == 1 for parameter, value in ALLOCATOR_THRESHOLDS.items())
    except (OSError, AttributeError):
        return False


def exit_with_parent() -> None:
    """End this process when the process that started it dies: the initializer of lazyphi's process pool.

    A pool's worker waits for tasks on a queue whose pipe it holds both ends of, so a host killed with
    SIGKILL (or by the out-of-memory killer) would leave its workers running their tasks and then waiting
    for ever, holding the host's stdout and stderr open. A daemon thread here waits on the sentinel of the
    parent process (a pipe the parent alone holds open, which the kernel closes when it dies) and ends
    this process at once; a block it was writing leaves a temporary file and no record.
    """
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_when_ready, args=(parent.sentinel,), name='lazyphi-parent-watch',
                         daemon=True).start()


def _exit_when_ready(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def _where(block: BlockRange | None) -> str:
    return 'on the host' if block is None else f'on block {block}'


def _failure(template, name: str, where: str, err: Exception) -> PropertyFailed:
    tb = ''.join(traceback.format_exception(err))
    return PropertyFailed(f'{type(template).__name__}.{name} raised {type(err).__name__} {where}: {err}\n'
                          f'Original traceback:\n{tb}')


class _ElementFailed(Exception):
    """A property raised on one element of a block; `element` names it ({dim: index}), `error` is what it raised."""

    def __init__(self, element: dict, error: Exception):
        super().__init__(element, error)
        self.element = element
        self.error = error


def _per_element(func: Callable, instance, inputs: dict, fields: frozenset, dims: tuple):
    """Evaluate `func` on each element along `dims` and stack what it gives.

    An element is a copy of `instance` holding, of each input (`inputs`: name -> value of a field or
    cached value), its slice at that element; inputs without those dims are shared by all elements.
    """
    shape = merge_shapes(*[tree_shape(v) for v in inputs.values()]).only(dims)
    indices = list(itertools.product(*[range(s) for s in shape.sizes]))  # the elements, row-major
    columns = {}  # name -> the input's slice at each element, in the order of `indices`
    for name, value in inputs.items():
        own = tree_shape(value)
        present = tuple(n for n in own.names if n in shape.names)
        if present:
            slices = unstack(value, present)  # row-major over `present`, in the input's own dim order
            if present == shape.names:
                columns[name] = slices
            else:
                where = [shape.index(n) for n in present]
                strides = [pymath.prod(own.get_size(m) for m in present[k + 1:]) for k in range(len(present))]
                columns[name] = [slices[sum(index[w] * s for w, s in zip(where, strides, strict=True))]
                                 for index in indices]
    cls = type(instance)
    state = instance.__dict__
    plain = _state_in_dict(cls)
    parts = []
    for k in range(len(indices)):
        if plain:  # the instance's whole state lives in its __dict__: make the element's directly (fast)
            obj = object.__new__(cls)
            object.__setattr__(obj, '__dict__', {**state, **{name: column[k] for name, column in columns.items()}})
        else:
            obj = copy.copy(instance)
            for name, column in columns.items():
                if name in fields:
                    object.__setattr__(obj, name, column[k])
                else:
                    obj.__dict__[name] = column[k]
        try:
            parts.append(func(obj))
        except Exception as err:
            raise _ElementFailed(dict(zip(shape.names, indices[k], strict=True)), err) from err
    return _stack_parts(parts, shape)


def _state_in_dict(cls: type) -> bool:
    """Whether instances of `cls` keep all their attributes in `__dict__` (no class along the MRO has `__slots__`)."""
    return not any(vars(klass).get('__slots__') for klass in cls.__mro__[:-1])


def _stack_parts(parts: list, shape) -> object:
    """Stack the values of the elements (in row-major order over `shape`) along the dims of `shape`."""
    for name in reversed(shape.names):  # innermost dim first
        dim = shape[name]
        n = dim.size
        parts = [_stack_one(parts[i:i + n], dim) for i in range(0, len(parts), n)]
    return parts[0]


def _stack_one(values: list, dim) -> object:
    if all(type(v) in _PLAIN_NUMBERS for v in values):  # numbers: one array, not one tensor each
        return math.tensor(values, dim)
    return stack(values, dim)


_PLAIN_NUMBERS = frozenset({float, int, complex, bool})


def _partials(trace, partials: tuple, instance) -> dict:
    """MIXED: replay the trace on the block's values up to the inputs of its split reductions; return each
    reduction's partial result of the block (see `lazyphi.math.kinds.REDUCTIONS`)."""
    reduced = {i: trace.nodes[i].inputs[0] for i, _ in partials}
    needed = _upstream(trace, list(reduced.values()))
    values = {}
    inputs = {}
    for node, (origin, name, index) in trace.inputs.items():
        if node not in needed:
            continue
        if (origin, name) not in inputs:
            inputs[origin, name] = leaves(getattr(instance, name) if origin == 'field' else instance.__dict__[name])
        values[node] = inputs[origin, name][index]
    results = trace.replay(values, only=needed)
    block = {}
    for i, name in partials:
        value = results[reduced[i]]
        dims = tuple(d for d in trace.nodes[i].params[0] if d in value.shape)
        block[i] = REDUCTIONS[name].partial(value, dims)
    return block


def _upstream(trace, nodes: list) -> set:
    """The nodes `nodes` depend on, themselves included."""
    needed, todo = set(), list(nodes)
    while todo:
        i = todo.pop()
        if i not in needed:
            needed.add(i)
            todo.extend(x for x in trace.nodes[i].inputs if isinstance(x, int))
    return needed


def assemble_stage(stage: StageTask, *blocks: dict) -> dict:
    """Join the block outputs of each property along the block dim (and combine MIXED partials)."""
    with stage.settings.applied():
        result = {}
        for q in stage.properties:
            outputs = [b[q.name] for b in blocks]
            if q.disk is not None and not q.in_memory:
                result[q.name] = disk_tensor(q.disk, q.name)
            elif q.mode == 'mixed':
                result[q.name] = _combine(q.trace, q.partials, outputs)
            else:
                result[q.name] = _join(outputs, stage.block_dim)
        return result


def group_outputs(*blocks: dict) -> tuple:
    """The outputs of a group of blocks, as they are: a step of joining them on a worker (`assemble_groups`)."""
    return blocks


def assemble_groups(stage: StageTask, *groups: tuple) -> dict:
    """`assemble_stage` of the blocks of all `groups` (`group_outputs`), in order."""
    return assemble_stage(stage, *itertools.chain.from_iterable(groups))


def _join(outputs: list, dim: str):
    first = outputs[0]
    if len(outputs) == 1:
        return first
    if isinstance(first, Tensor):
        if dim not in first.shape.names:
            return first
        joined = Joined(outputs, dim)  # kept apart, not copied: assembling needs no memory of its own
        return joined._dense() if _small_parts(outputs) else joined
    if isinstance(first, (tuple, list)):
        return type(first)(_join([o[i] for o in outputs], dim) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _join([o[k] for o in outputs], dim) for k in first}
    return concat(outputs, dim)


def _small_parts(outputs: list) -> bool:
    """Whether joining `outputs` into one array is better than keeping them apart: more parts than a `Joined` works
    on part by part, all in memory as arrays, of `JOIN_COPY_BYTES` in all at most.

    10,000 blocks of one element came back as a `Joined` of 10,000 parts: each operation on it built the whole
    concatenation again (15 ms for `+ 1`), and the parts held 0.5 KiB each where their values took 8 bytes.
    """
    if len(outputs) <= Joined.PART_LIMIT or any(type(o) is not Dense for o in outputs):
        return False
    total = 0
    for o in outputs:
        total += memory_bytes(o)
        if total > JOIN_COPY_BYTES:
            return False
    return True


def _combine(trace, partials: tuple, outputs: list):
    """Combine the blocks' partial results with each reduction's combine, then finish the trace on the host."""
    combined = {node: REDUCTIONS[name].combine([o[node] for o in outputs]) for node, name in partials}
    results = trace.replay(combined)
    return tree_map(lambda t: results[t._node], trace.output, leaf_types=Tracer)


def pick(values: dict, name: str):
    """The value of property `name` from a stage's result dict."""
    return values[name]


def collect_results(names: tuple, *stage_results: dict) -> dict:
    """The value of each property from the result dict of the stage that computed it."""
    return {name: values[name] for name, values in zip(names, stage_results, strict=True)}
