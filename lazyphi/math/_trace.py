"""The tracer: a tensor kind carrying shape and dtype only, recording every operation applied to it.

A `Trace` collects what a computation on `Tracer`s did: its nodes (operation, inputs, params,
output shape and dtype), which dims it mixes across (so it cannot be split along them), its
output, and how it ended. Every operation of `lazyphi.math` reaches the tracer through the one
dispatch path, by category. A conversion to Python data (`float`, `len`, iteration, `numpy()`)
of a value that still carries one of the trace's *parallel dims* raises `PerElement`: the code
runs element by element along them. Any other conversion, or an operation of a category the
tracer does not know, raises `TraceAborted`. The trace is a replayable program: `Trace.replay`
runs the recorded nodes on real tensors.

A trace made with every dim parallel (`parallel_dims=None`) answers for any set of parallel dims
(`Trace.under`): up to its first conversion the code does the same whatever the parallel dims are,
and the conversion that ended it says how a trace with fewer parallel dims would have ended. So
one run of the code serves slicing along any dim and planning along any dims.

Tracing a property of a dataclass instance (`trace_property` in `_tree.py`) builds on this.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..backend import NUMPY, Backend, DType, to_numpy_dtype
from ._kinds import stacked_shape
from ._natives import promoted_dtype
from ._shape import Shape, merge_shapes
from ._tensor import (
    ALONG,
    CONCAT,
    ELEMENTWISE,
    EXPAND,
    FFT,
    GATHER,
    GATHER_TENSOR,
    REDUCE,
    RENAME,
    RESHAPE,
    STACK,
    Dense,
    Op,
    Tensor,
    dispatch,
)


class TraceAborted(Exception):
    """The trace cannot continue: an operation needs data, or is of a kind the tracer does not know."""

    def __init__(self, operation: str, reason: str):
        super().__init__(f'{operation}: {reason}')
        self.operation = operation
        self.reason = reason


class DataNeeded(TraceAborted):
    """The traced code converts a value without parallel dims to Python data: only the data can tell what follows."""

    def __init__(self, operation: str, reason: str, shape: Shape | None = None):
        super().__init__(operation, reason)
        self.shape = shape  # of the converted value, where one was converted


class PerElement(Exception):
    """A data-dependent conversion of a value carrying parallel dims: the code runs element by element along them."""

    def __init__(self, operation: str, dims: frozenset, shape: Shape | None = None):
        super().__init__(f'{operation} of a value with parallel dims {sorted(dims)}')
        self.operation = operation
        self.dims = dims
        self.shape = shape  # of the converted value


def _data_reason(shape: Shape) -> str:
    return f'needs the data of a value of shape {shape}, which tracing does not have'


TRACING = contextvars.ContextVar('lazyphi_tracing', default=False)  # set while traced user code runs


def is_tracing() -> bool:
    """Whether the calling code runs on lazyphi's tracers, which hold shapes and dtypes but no values.

    True inside the body of a cached or parallel property while lazyphi analyses it (when slicing,
    stacking or renaming an instance holding cached values, and in `plan()` / `parallel_compute`);
    False when the property computes its value, and under `jit_compile` (where the backend traces;
    `all_available` tells those apart). A property can skip side effects such as printing, counting
    or logging with `if not math.is_tracing(): ...`.
    """
    return TRACING.get()


@dataclass
class Node:
    """One recorded operation: `op` applied to `inputs` (node ids, or constant tensors) with `params`."""

    op: Op
    inputs: tuple
    params: tuple
    shape: Shape
    dtype: DType


@dataclass
class Trace:
    """What a traced call did: its nodes, the dims it mixes, its outputs, and how it ended.

    `parallel_dims` None: every dim is parallel (see `under`).
    """

    parallel_dims: frozenset | None
    nodes: list = field(default_factory=list)
    mixed: set = field(default_factory=set)  # dims some operation combines across
    output: object = None  # the returned tree, with tracers standing for node outputs
    per_element: tuple | None = None  # (operation, dims) when a conversion of a value with parallel dims ended it
    fallback: tuple | None = None  # (operation, reason) when the trace was aborted
    needs_data: bool = False  # it was aborted by a conversion to Python data (not by an unknown operation)
    conversion: tuple | None = None  # (operation, shape of the value) of the conversion to Python data that ended it
    assumptions: bool = False  # a property it read stood in as a guess: right about the dims mixed, not the output

    @property
    def complete(self) -> bool:
        """Whether the traced code ran to its end (its output is known)."""
        return self.fallback is None and self.per_element is None

    @property
    def requires(self) -> frozenset:
        """Parallel dims the traced code cannot be split along."""
        return frozenset(self.mixed) if self.parallel_dims is None else frozenset(self.mixed) & self.parallel_dims

    def under(self, parallel_dims: frozenset) -> Trace | None:
        """This trace, made with every dim parallel, as tracing with only `parallel_dims` parallel ends.

        The nodes, mixed dims and output are shared. A conversion that ended this trace ends that one
        too: element by element along the converted value's dims among `parallel_dims`, else needing
        data. None where that trace would go on: `len()` of a vector along a dim not parallel.
        """
        view = dataclasses.replace(self, parallel_dims=frozenset(parallel_dims))
        if self.conversion is None:
            return view
        operation, shape = self.conversion
        dims = frozenset(shape.names) & view.parallel_dims
        if dims:
            view.per_element, view.fallback, view.needs_data = (operation, dims), None, False
        elif operation == 'len()' and shape.rank == 1:
            return None
        else:
            view.per_element, view.fallback, view.needs_data = None, (operation, _data_reason(shape)), True
        return view

    @property
    def inputs(self) -> dict:
        """Input node index -> the source given when its tracer was made."""
        return {i: n.params[0] for i, n in enumerate(self.nodes) if n.op.category == INPUT}

    @property
    def operations(self) -> tuple:
        return tuple(n.op.name for n in self.nodes)

    def record(self, op: Op, tensors: Sequence[Tensor], params: tuple, shape: Shape, dtype: DType) -> Tracer:
        inputs = tuple(t._node if isinstance(t, Tracer) and t._trace is self else t for t in tensors)
        self.nodes.append(Node(op, inputs, params, shape, dtype))
        return Tracer(self, len(self.nodes) - 1, shape, dtype)

    def replay(self, values: dict, only: set | None = None) -> dict:
        """Run the recorded nodes on real tensors; `values` maps node ids (inputs at least) to tensors.

        With `only`, just those nodes run (they must not need others); otherwise every node whose
        inputs are available.
        """
        results = dict(values)
        for i, node in enumerate(self.nodes):
            if i in results or (only is not None and i not in only):
                continue
            if any(isinstance(x, int) and x not in results for x in node.inputs) or node.op.category == INPUT:
                continue
            args = [results[x] if isinstance(x, int) else x for x in node.inputs]
            results[i] = dispatch(node.op, args, node.params)
        return results


class Tracer(Tensor):
    """A tensor of known shape and dtype but no values, standing for node `node` of a `Trace`."""

    __slots__ = ('_dtype', '_node', '_shape', '_trace')
    _kind_priority = 1000

    def __init__(self, trace: Trace, node: int, shape: Shape, dtype: DType):
        self._trace = trace
        self._node = node
        self._shape = shape
        self._dtype = dtype

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def backend(self) -> Backend:
        return NUMPY

    @property
    def available(self) -> bool:
        return False

    def _dense(self) -> Dense:
        raise self._conversion('materialising the values')

    def native(self, order=None, force_expand: bool = True):
        raise self._conversion('native()')

    def numpy(self, order=None):
        raise self._conversion('numpy()')

    def __len__(self) -> int:
        if self._shape.rank == 1 and not self._parallel_dims():
            return self._shape.sizes[0]
        raise self._conversion('len()')

    def __iter__(self):
        raise self._conversion('iteration')

    def _single_value(self, what: str):
        raise self._conversion(f'{what}()')

    def _parallel_dims(self) -> frozenset:
        if self._trace.parallel_dims is None:
            return frozenset(self._shape.names)
        return frozenset(self._shape.names) & self._trace.parallel_dims

    def _conversion(self, what: str) -> Exception:
        dims = self._parallel_dims()
        if dims:
            return PerElement(what, dims, self._shape)
        return DataNeeded(what, _data_reason(self._shape), self._shape)

    def __reduce__(self):  # MIXED plans send their traces, outputs included, to worker processes
        return Tracer, (self._trace, self._node, self._shape, self._dtype)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        trace = next(t._trace for t in tensors if isinstance(t, Tracer))
        rule = _RULES.get(op.category)
        if rule is None:
            raise TraceAborted(op.name, f"operations of category '{op.category}' are not known to the tracer")
        shape, mixed = rule(tensors, params)
        trace.mixed.update(mixed)
        return trace.record(op, tensors, params, shape, _result_dtype(op, tensors, params))


def _merge_rule(tensors, params):
    return merge_shapes(*[t.shape for t in tensors]), ()


def _reduce_rule(tensors, params):
    (dims,) = params
    return tensors[0].shape.without(dims), dims


def _gather_rule(tensors, params):
    (selection,) = params
    mixed = tuple(d for d, s in selection.items() if s != slice(None))
    return tensors[0].shape.after_gather(selection), mixed


def _rename_rule(tensors, params):
    old, new = params
    shape = tensors[0].shape
    renamed = shape.replace(old, new)
    return renamed, tuple(n for n in old if n not in renamed.names)  # a dim that only changes type is not mixed


def _expand_rule(tensors, params):
    return params[0], ()


def _reshape_rule(tensors, params):
    _, result = params
    before = tensors[0].shape
    kept = {(n, s) for n, s in zip(result.names, result.sizes, strict=True)}
    mixed = tuple(n for n, s in zip(before.names, before.sizes, strict=True) if (n, s) not in kept)
    return result, mixed + tuple(n for n in result.names if n not in before.names)


def _gather_tensor_rule(tensors, params):
    (dim,) = params
    t, index = tensors
    return merge_shapes(t.shape.without(dim), index.shape), (dim,)


def _stack_rule(tensors, params):
    (dim,) = params
    return stacked_shape([t.shape for t in tensors], dim), ()


def _concat_rule(tensors, params):
    dim, result = params
    return result, (dim,)


def _fft_rule(tensors, params):
    (dims,) = params
    return tensors[0].shape, dims


def _along_rule(tensors, params):
    dims, result, *rest = params
    return result(tensors, dims, *rest).shape, dims


_RULES: dict[str, Callable] = {
    ELEMENTWISE: _merge_rule, REDUCE: _reduce_rule, GATHER: _gather_rule, RENAME: _rename_rule,
    RESHAPE: _reshape_rule, GATHER_TENSOR: _gather_tensor_rule, STACK: _stack_rule, CONCAT: _concat_rule,
    FFT: _fft_rule, EXPAND: _expand_rule, ALONG: _along_rule,
}
_SAME_DTYPE = {GATHER, RENAME, RESHAPE, GATHER_TENSOR, EXPAND}


def _result_dtype(op: Op, tensors: Sequence[Tensor], params: tuple) -> DType:
    """The dtype `op` gives, found by running it on one-element stand-ins of the inputs' dtypes."""
    if op.category in _SAME_DTYPE:
        return tensors[0].dtype
    if op.category == CONCAT:
        return promoted_dtype([t.dtype for t in tensors])
    if op.category == ALONG:  # the operation declares its result: index-like inputs make poor stand-ins
        dims, result, *rest = params
        return result(tensors, dims, *rest).dtype
    with np.errstate(all='ignore'):
        return dispatch(op, [_probe(t) for t in tensors], params).dtype


def _probe(t: Tensor) -> Dense:
    """A tensor of ones with the dims of `t`, each of size 1, and `t`'s dtype."""
    dtype = to_numpy_dtype(t.dtype)
    names = t.shape.names
    sizes = (1,) * len(names)
    return Dense(np.ones(sizes, dtype), Shape(sizes, names, t.shape.types, (None,) * len(names)), NUMPY)


def tracer_for(trace: Trace, shape: Shape, dtype: DType, source=None) -> Tracer:
    """A new input tracer of `trace` standing for a value of `shape` and `dtype`.

    `source` says where replaying finds the real value (see `Trace.inputs`).
    """
    trace.nodes.append(Node(_INPUT, (), (source,), shape, dtype))
    return Tracer(trace, len(trace.nodes) - 1, shape, dtype)


def _input_placeholder(tensors, *params):
    raise TraceAborted('input', 'an input node has no implementation; replay needs its value')


INPUT = 'input'  # category of the nodes standing for the traced call's inputs (compared by value: traces travel)
_INPUT = Op('input', INPUT, _input_placeholder)
