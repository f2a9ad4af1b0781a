"""lazyphi: scientific array code on named-dim tensors, computed lazily and in parallel.

`import lazyphi` loads NumPy and the pure-Python core only; Dask, distributed, Zarr,
SciPy and the optional array libraries are imported when first used.
"""

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

__all__ = [
    'DimNotFound', 'IncompatibleShapes', 'NoBackendFound', 'Shape', 'Tensor', '__version__', 'backend', 'batch',
    'channel', 'dataclasses', 'dual', 'instance', 'math', 'parallel', 'shape', 'spatial', 'tensor', 'vec', 'wrap',
]
