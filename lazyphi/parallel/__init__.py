"""Parallel computation of cached and parallel properties: tracing, planning (and, next, running on Dask)."""

from ._plan import Block, Fallback, Plan, PropertyPlan, Stage, plan
from ._property import INFER, MIXED, ParallelProperty, ParallelPropertyNotComputed, parallel_property
from ._tracer import PerElement, Trace, TraceAborted, Tracer

__all__ = [
    'INFER', 'MIXED', 'Block', 'Fallback', 'ParallelProperty', 'ParallelPropertyNotComputed', 'PerElement', 'Plan',
    'PropertyPlan', 'Stage', 'Trace', 'TraceAborted', 'Tracer', 'parallel_property', 'plan',
]
