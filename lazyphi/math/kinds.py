"""The extension interface of `lazyphi.math` for the layers above it.

The layers above math (storage, dataclasses, parallel) import from math only `lazyphi.math`, the
user's API, and this module; never math's private modules (a test walks the imports).

**Tensor kinds.** Every operation is an `Op` with a category (`ELEMENTWISE`, `REDUCE`, `GATHER`, `ALONG`, ...)
and runs through `dispatch(op, tensors, params)`: all-`Dense` arguments run the dense
implementation; otherwise each kind present is asked through its class method
`__handle__(op, tensors, params)`, highest `_kind_priority` first, and a kind returns
`NotImplemented` to pass; when all pass, the arguments are materialised with `_dense()` (except for ops
marked `any_kind`, such as lazy expansion, whose implementation takes every kind as it is). A new
kind subclasses `Tensor`, implements `shape`, `dtype`, `backend` and `_dense()` (and `available`
if its data may be absent), and handles by category whatever it can serve better than
materialising — so it takes part in operations written after it. `Expanded`, `Stacked`,
`Joined` and the `Tracer` (shapes and dtypes only, recording a replayable `Trace`; `trace_property`
traces a cached property of an instance) are the kinds of this layer; the disk-backed kind
(storage) is another.

**Reductions.** `REDUCTIONS` says how each reduction behaves (under repetition, split into partial
results and combined); kinds and the planner read it instead of keeping lists of their own.

**Helpers** the layers above build on: tree traversal of tensors in tuples, lists, dicts and
dataclasses; dim filters and specs; backend-native layout of dense tensors; HTML views of tensors
(`tensor_html`, for a kind's `_repr_html_`); `register_tensor_source` for values of other libraries
that `tensor()` converts (dask arrays: registered by `lazyphi.parallel`); the class-attribute lookup
along the MRO and `cached_property` with the one test for either kind of cached property; the analysis
of which attributes a cached property reads (`direct_dependencies`, `property_dependencies`), which
the tree functions need to trace a property on what the properties it reads give.
"""

from ._deps import ALL, DirectDependencies, direct_dependencies, explain_dependencies, property_dependencies
from ._dims import parse_dim_spec
from ._fields import resolved_annotations
from ._foreign import register_tensor_source
from ._html import HTML_STYLE, dims_table, tensor_html, tensor_summary_html
from ._items import normalize_selection
from ._kinds import Expanded, Joined, PartsKind, Stacked, expand_to, stack_dense, stacked_shape
from ._properties import (
    CACHED_PROPERTY_TYPES,
    cached_property,
    cached_property_names,
    class_attribute,
    is_cached_property,
)
from ._reductions import REDUCTIONS, Reduction, reduction_of
from ._shape import DIM_TYPES, resolve_dims
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
    aligned_native,
    auto_cast,
    common_backend,
    content_hash,
    dispatch,
    element_bytes,
    read_only_native,
)
from ._trace import PerElement, Trace, TraceAborted, Tracer, tracer_for
from ._tree import (
    Analysis,
    analyse_property,
    leaves,
    map_tensors,
    memory_bytes,
    output_placeholders,
    property_stand_in,
    trace_property,
    tree_map,
)

__all__ = [
    'ALL',
    'ALONG',
    'CACHED_PROPERTY_TYPES',
    'CONCAT',
    'DIM_TYPES',
    'ELEMENTWISE',
    'EXPAND',
    'FFT',
    'GATHER',
    'GATHER_TENSOR',
    'HTML_STYLE',
    'REDUCE',
    'REDUCTIONS',
    'RENAME',
    'RESHAPE',
    'STACK',
    'Analysis',
    'Dense',
    'DirectDependencies',
    'Expanded',
    'Joined',
    'Op',
    'PartsKind',
    'PerElement',
    'Reduction',
    'Stacked',
    'Tensor',
    'Trace',
    'TraceAborted',
    'Tracer',
    'aligned_native',
    'analyse_property',
    'auto_cast',
    'cached_property',
    'cached_property_names',
    'class_attribute',
    'common_backend',
    'content_hash',
    'dims_table',
    'direct_dependencies',
    'dispatch',
    'element_bytes',
    'expand_to',
    'explain_dependencies',
    'is_cached_property',
    'leaves',
    'map_tensors',
    'memory_bytes',
    'normalize_selection',
    'output_placeholders',
    'parse_dim_spec',
    'property_dependencies',
    'property_stand_in',
    'read_only_native',
    'reduction_of',
    'register_tensor_source',
    'resolve_dims',
    'resolved_annotations',
    'stack_dense',
    'stacked_shape',
    'tensor_html',
    'tensor_summary_html',
    'trace_property',
    'tracer_for',
    'tree_map',
]
