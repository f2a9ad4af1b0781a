"""Parallel computation of cached and parallel properties: tracing, planning, and running on Dask.

Planning needs no Dask; `parallel_compute` and the engine load it on first use (PEP 562), so
`import lazyphi` stays free of Dask.
"""

import importlib

from ._plan import Block, Fallback, Plan, PropertyPlan, Stage, plan
from ._property import INFER, MIXED, ParallelProperty, ParallelPropertyNotComputed, parallel_property
from ._tracer import PerElement, Trace, TraceAborted, Tracer

_ENGINE_NAMES = ('parallel_compute', 'PropertyFailed')


def __getattr__(name: str):
    if name in _ENGINE_NAMES:
        return getattr(importlib.import_module('lazyphi.parallel._engine'), name)
    raise AttributeError(f"module 'lazyphi.parallel' has no attribute {name!r}")


__all__ = [
    'INFER', 'MIXED', 'Block', 'Fallback', 'ParallelProperty', 'ParallelPropertyNotComputed', 'PerElement', 'Plan',
    'PropertyFailed', 'PropertyPlan', 'Stage', 'Trace', 'TraceAborted', 'Tracer', 'parallel_compute',
    'parallel_property', 'plan',
]
