"""Parallel computation of cached and parallel properties: tracing, planning, and running on Dask.

Planning needs no Dask; `parallel_compute` and the engine load it on first use (PEP 562), so
`import lazyphi` stays free of Dask.
"""

from .._lazy import lazy_names as _lazy_names
from ..math.kinds import PerElement, Trace, TraceAborted, Tracer
from ..storage import load_cache_as, on_load_into_memory, set_cache_ttl
from ._plan import Block, Fallback, Plan, PropertyPlan, Stage, missing_dims, plan
from ._property import INFER, MIXED, ParallelProperty, ParallelPropertyNotComputed, parallel_property

# names whose modules import Dask or Zarr
_LAZY = {'parallel_compute': 'lazyphi.parallel._compute', 'PropertyFailed': 'lazyphi.parallel._engine',
         'NoWorkers': 'lazyphi.parallel._cluster', 'WorkersLost': 'lazyphi.parallel._cluster',
         'get_cache_files': 'lazyphi.storage'}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)


__all__ = [
    'INFER', 'MIXED', 'Block', 'Fallback', 'NoWorkers', 'ParallelProperty', 'ParallelPropertyNotComputed',
    'PerElement', 'Plan', 'PropertyFailed', 'PropertyPlan', 'Stage', 'Trace', 'TraceAborted', 'Tracer',
    'WorkersLost', 'get_cache_files', 'load_cache_as', 'missing_dims', 'on_load_into_memory', 'parallel_compute',
    'parallel_property', 'plan', 'set_cache_ttl',
]
