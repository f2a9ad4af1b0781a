"""lazyphi: scientific array code on named-dim tensors, computed lazily and in parallel.

`import lazyphi` loads NumPy and the core of `lazyphi.backend` and `lazyphi.math` only (what `tensor()`,
the dims functions and Tensor's operators need); the rest of `lazyphi.math`, the packages `dataclasses`,
`parallel` and `storage`, Dask, distributed, Zarr, SciPy and the optional array libraries are imported
when first used (PEP 562; docs/design.md, "Import time").
"""

import logging as _logging

from . import backend, math
from ._errors import DimNotFound, IncompatibleShapes, NoBackendFound
from ._lazy import lazy_names as _lazy_names
from .math.kinds import register_tensor_source as _register_tensor_source

# the names phiml offers at its top level, as lazyphi has them (docs/migration.md lists the others): those of
# lazyphi.math, resolved there on first use
_MATH_NAMES = (
    'INF', 'NAN', 'PI', 'DType', 'Shape', 'Tensor', 'always_close', 'arange', 'arccos', 'arccosh', 'arcsin', 'arcsinh',
    'arctan', 'arctanh', 'assert_close', 'b2i', 'batch', 'brange', 'c2b', 'c2d', 'cast', 'ccat', 'ceil', 'channel',
    'clip', 'close', 'cmax', 'cmean', 'cmin', 'concat', 'convolve', 'cos', 'cosh', 'cpack', 'cprod', 'crange', 'csize',
    'csum', 'd2i', 'd2s', 'dcat', 'dmax', 'dmean', 'dmin', 'dot', 'dpack', 'dprod', 'drange', 'dsize', 'dsum', 'dual',
    'equal', 'erf', 'exp', 'expand', 'extrapolation', 'factorial', 'finite_max', 'finite_min', 'flatten', 'floor',
    'gather', 'gradient', 'i2b', 'icat', 'identity', 'imax', 'imean', 'imin', 'incomplete_gamma', 'instance', 'ipack',
    'iprod', 'irange', 'is_finite', 'is_inf', 'is_nan', 'isize', 'isum', 'iterate', 'jit_compile', 'jit_compile_linear',
    'l1_loss', 'l2_loss', 'linspace', 'log', 'log2', 'log10', 'log_gamma', 'map_c2b', 'map_c2d', 'map_d2b', 'map_d2c',
    'map_i2b', 'map_s2b', 'maximum', 'mean', 'median', 'meshgrid', 'minimum', 'non_batch', 'non_channel', 'non_dual',
    'non_instance', 'non_primal', 'non_spatial', 'nonzero', 'ones', 'ones_like', 'p2d', 'pack_dims', 'pmax', 'pmean',
    'pmin', 'pprod', 'primal', 'psum', 'rename_dims', 'round', 's2b', 'safe_div', 'scat', 'scatter', 'shape', 'si2d',
    'sigmoid', 'sign', 'sin', 'sinh', 'smax', 'smean', 'smin', 'soft_plus', 'spack', 'spatial', 'sprod', 'sqrt',
    'srange', 'ssize', 'ssum', 'stack', 'tan', 'tanh', 'tcat', 'tensor', 'unpack_dim', 'unstack', 'vec', 'where',
    'wrap', 'zeros', 'zeros_like',
)

__version__ = '0.1.0.dev0'

_LAZY = {
    **dict.fromkeys(_MATH_NAMES, '.math'),
    'PERIODIC': '.math.extrapolation', 'ZERO_GRADIENT': '.math.extrapolation',
    'dataclasses': '.dataclasses', 'nn': '.nn', 'parallel': '.parallel', 'storage': '.storage',
    'save': '.storage', 'load': '.storage',  # these import Zarr
    'verify': '._verify',
}

# math.tensor(dask_array) makes a DaskTensor: registered here rather than by lazyphi.parallel, which loads on first use
_register_tensor_source('dask', 'lazyphi.parallel._dask_tensor:from_dask')


_LEVELS = ('critical', 'fatal', 'error', 'warning', 'info', 'debug')


def set_logging_level(level: str = 'debug') -> None:
    """Sets the level of the 'lazyphi' logger, which lazyphi's modules log to.

    Args:
        level: one of 'critical', 'fatal', 'error', 'warning', 'info', 'debug' (any case).
    """
    if not isinstance(level, str) or level.lower() not in _LEVELS:
        raise ValueError(f'set_logging_level(): level must be one of {", ".join(_LEVELS)}, got {level!r}')
    _logging.getLogger('lazyphi').setLevel(level.upper())


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)


__all__ = [
    'INF',
    'NAN',
    'PERIODIC',
    'PI',
    'ZERO_GRADIENT',
    'DType',
    'DimNotFound',
    'IncompatibleShapes',
    'NoBackendFound',
    'Shape',
    'Tensor',
    '__version__',
    'always_close',
    'arange',
    'arccos',
    'arccosh',
    'arcsin',
    'arcsinh',
    'arctan',
    'arctanh',
    'assert_close',
    'b2i',
    'backend',
    'batch',
    'brange',
    'c2b',
    'c2d',
    'cast',
    'ccat',
    'ceil',
    'channel',
    'clip',
    'close',
    'cmax',
    'cmean',
    'cmin',
    'concat',
    'convolve',
    'cos',
    'cosh',
    'cpack',
    'cprod',
    'crange',
    'csize',
    'csum',
    'd2i',
    'd2s',
    'dataclasses',
    'dcat',
    'dmax',
    'dmean',
    'dmin',
    'dot',
    'dpack',
    'dprod',
    'drange',
    'dsize',
    'dsum',
    'dual',
    'equal',
    'erf',
    'exp',
    'expand',
    'extrapolation',
    'factorial',
    'finite_max',
    'finite_min',
    'flatten',
    'floor',
    'gather',
    'gradient',
    'i2b',
    'icat',
    'identity',
    'imax',
    'imean',
    'imin',
    'incomplete_gamma',
    'instance',
    'ipack',
    'iprod',
    'irange',
    'is_finite',
    'is_inf',
    'is_nan',
    'isize',
    'isum',
    'iterate',
    'jit_compile',
    'jit_compile_linear',
    'l1_loss',
    'l2_loss',
    'linspace',
    'load',
    'log',
    'log2',
    'log10',
    'log_gamma',
    'map_c2b',
    'map_c2d',
    'map_d2b',
    'map_d2c',
    'map_i2b',
    'map_s2b',
    'math',
    'maximum',
    'mean',
    'median',
    'meshgrid',
    'minimum',
    'non_batch',
    'non_channel',
    'non_dual',
    'non_instance',
    'non_primal',
    'non_spatial',
    'nonzero',
    'ones',
    'ones_like',
    'p2d',
    'pack_dims',
    'parallel',
    'pmax',
    'pmean',
    'pmin',
    'pprod',
    'primal',
    'psum',
    'rename_dims',
    'round',
    's2b',
    'safe_div',
    'save',
    'scat',
    'scatter',
    'set_logging_level',
    'shape',
    'si2d',
    'sigmoid',
    'sign',
    'sin',
    'sinh',
    'smax',
    'smean',
    'smin',
    'soft_plus',
    'spack',
    'spatial',
    'sprod',
    'sqrt',
    'srange',
    'ssize',
    'ssum',
    'stack',
    'tan',
    'tanh',
    'tcat',
    'tensor',
    'unpack_dim',
    'unstack',
    'vec',
    'verify',
    'where',
    'wrap',
    'zeros',
    'zeros_like',
]
