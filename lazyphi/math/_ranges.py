"""Integer ranges along one new dim of a given type: `srange(x=4)` is 0, 1, 2, 3 along the spatial dim x."""

from __future__ import annotations

from collections.abc import Callable

from ._creation import arange
from ._dims import batch, channel, dual, instance, spatial
from ._tensor import Tensor


def _typed_range(dim_type: Callable, type_name: str, name: str) -> Callable:
    def typed_range(start: int = 0, **stop: int) -> Tensor:
        if len(stop) != 1:
            raise ValueError(f'{name}() takes the dim and its stop as one keyword argument, e.g. {name}(x=4); '
                             f'got {sorted(stop)}')
        (dim, end), = stop.items()
        return arange(dim_type(dim), start, end)
    typed_range.__name__ = typed_range.__qualname__ = name
    typed_range.__doc__ = (f'The integers from `start` up to (not including) the stop given as a keyword, along a '
                           f'new {type_name} dim of that name: `{name}(x=4)`, `{name}(1, x=4)`.')
    return typed_range


brange = _typed_range(batch, 'batch', 'brange')
crange = _typed_range(channel, 'channel', 'crange')
drange = _typed_range(dual, 'dual', 'drange')
irange = _typed_range(instance, 'instance', 'irange')
srange = _typed_range(spatial, 'spatial', 'srange')
