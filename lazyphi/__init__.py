"""lazyphi: scientific array code on named-dim tensors, computed lazily and in parallel.

`import lazyphi` loads NumPy and the pure-Python core only; Dask, distributed, Zarr,
SciPy and the optional array libraries are imported when first used.
"""

import importlib

from . import backend, dataclasses, math, parallel
from ._errors import DimNotFound, IncompatibleShapes, NoBackendFound
from .math import (
    Shape,
    Tensor,
    batch,
    channel,
    dual,
    instance,
    shape,
    spatial,
    tensor,
    vec,
    wrap,
)

__version__ = '0.1.0.dev0'

_LAZY = {'save': '.storage', 'load': '.storage'}  # these import Zarr: loaded on first use (PEP 562)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lazyphi' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


__all__ = [
    'DimNotFound', 'IncompatibleShapes', 'NoBackendFound', 'Shape', 'Tensor', '__version__', 'backend', 'batch',
    'channel', 'dataclasses', 'dual', 'instance', 'load', 'math', 'parallel', 'save', 'shape', 'spatial', 'tensor',
    'vec', 'wrap',
]
