"""`parallel_property`: a cached property with controls over how `parallel_compute` splits its work."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..dataclasses import cached_property
from ..math import Shape, ShapeDtype


class _Marker:
    """A named sentinel (`INFER`, `MIXED`)."""

    __slots__ = ('name',)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return self.name


INFER = _Marker('INFER')  # determine `requires` / `out` by tracing the property
MIXED = _Marker('MIXED')  # split the property into per-block parts and reductions combined across blocks
ON_DIRECT_EVAL = ('raise', 'host-compute')


class ParallelPropertyNotComputed(AttributeError):
    """A `parallel_property` with `on_direct_eval='raise'` was read before `parallel_compute` computed it."""


class ParallelProperty(cached_property):
    """A cached property that `parallel_compute` plans and runs; see `parallel_property`."""

    def __init__(self, func: Callable, requires, out, persistent: bool, on_direct_eval: str):
        super().__init__(func)
        self.requires = requires
        self.out = out
        self.persistent = persistent
        self.on_direct_eval = on_direct_eval

    def __get__(self, instance, owner: type | None = None):
        if instance is None:
            return self
        if self.on_direct_eval == 'raise' and self.attrname not in getattr(instance, '__dict__', {}):
            cls = type(instance).__name__
            raise ParallelPropertyNotComputed(
                f'{cls}.{self.attrname} is a parallel_property that is not computed yet. Compute it with '
                f'parallel_compute(instance, [{cls}.{self.attrname}]), or declare it with '
                f"@parallel_property(on_direct_eval='host-compute') to compute it on direct access.")
        return super().__get__(instance, owner)

    def __repr__(self) -> str:
        return (f'<parallel_property {self.attrname!r} requires={self.requires!r} persistent={self.persistent} '
                f'on_direct_eval={self.on_direct_eval!r}>')


def parallel_property(func: Callable | None = None, /, requires=None, out: Any = INFER, persistent: bool = False,
                      on_direct_eval: str = 'raise'):
    """Declare a property whose value `parallel_compute` computes, split along the parallel dims it allows.

    Args:
        func: the method computing the value.
        requires: dims that must be whole within one task (a dim filter); `INFER` traces the property
            to find them; `MIXED` also splits reductions over parallel dims into per-block partial
            results and a combine on the host, for every reduction of `lazyphi.math` (a mean or std
            weighs each block by its element count).
        out: the output's shapes and dtypes as `shape * dtype` placeholders (a Shape alone means
            float), in the structure the property returns; `INFER` traces it.
        persistent: keep the value after `parallel_compute` even when it was only computed as an
            input of the requested properties.
        on_direct_eval: 'raise' (reading it before it is computed is an error) or 'host-compute'
            (compute it in place, as a cached property).
    """
    if on_direct_eval not in ON_DIRECT_EVAL:
        raise ValueError(f"on_direct_eval must be one of {ON_DIRECT_EVAL}, got {on_direct_eval!r}")
    if out is not INFER:
        out = normalize_out(out)
    if func is None:
        return functools.partial(parallel_property, requires=requires, out=out, persistent=persistent,
                                 on_direct_eval=on_direct_eval)
    return ParallelProperty(func, requires, out, persistent, on_direct_eval)


def normalize_out(out):
    """`out` with every Shape turned into a float `ShapeDtype`; anything but placeholders is a TypeError."""
    if isinstance(out, ShapeDtype):
        return out
    if isinstance(out, Shape):
        return out * float
    if isinstance(out, (tuple, list)):
        return type(out)(normalize_out(o) for o in out)
    if isinstance(out, dict):
        return {k: normalize_out(v) for k, v in out.items()}
    raise TypeError(f'out= takes shape * dtype placeholders such as spatial(x=8) * complex, or tuples, lists and '
                    f'dicts of them; got {out!r}')
