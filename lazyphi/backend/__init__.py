"""Backends: the layer that delegates array operations to NumPy, PyTorch, JAX or TensorFlow.

`NUMPY` and `OBJECTS` are always available. The backends of PyTorch, JAX and TensorFlow live in the
sub-modules `torch`, `jax` and `tensorflow`, imported only when a value of that library is first seen
by `choose_backend()` or the library is named in `set_global_default_backend()`.
"""

from .._errors import NoBackendFound, UnsupportedDType
from .._lazy import lazy_names as _lazy_names
from ._backend import Backend
from ._device import ComputeDevice
from ._dtype import DType, combine_types, to_numpy_dtype

# re-exported, not in __all__: the solver steps and the SciPy driver that the math layer shares with
# `Backend.linear_solve` and `Backend.minimize` (lazyphi's layers import only each other's packages)
from ._linear_solvers import DIVERGENCE_GROWTH as DIVERGENCE_GROWTH
from ._linear_solvers import adaptive_cg_step as adaptive_cg_step
from ._linear_solvers import bicgstab_step as bicgstab_step
from ._linear_solvers import cg_step as cg_step
from ._minimize import GRADIENT_METHODS as GRADIENT_METHODS
from ._minimize import VALUE_METHODS as VALUE_METHODS
from ._minimize import run_scipy_minimize as run_scipy_minimize
from ._minimize import trajectory_points as trajectory_points
from ._numpy import NUMPY
from ._objects import OBJECTS
from ._precision import get_precision, precision, set_global_precision
from ._registry import (
    BACKENDS,
    ML_LOGGER,
    as_backend,
    backend_by_name,
    choose_backend,
    context_backend,
    convert,
    default_backend,
    on_backend_loaded,
    register_backend,
    register_lazy_backend,
    seed_backends,
    set_global_default_backend,
)

register_backend(NUMPY)
register_backend(OBJECTS)
set_global_default_backend(NUMPY)

# the profiler (and the json module it writes traces with) loads on first use (PEP 562)
__getattr__, __dir__ = _lazy_names(__name__, dict.fromkeys(
    ('Profile', 'get_current_profile', 'profile', 'profile_function'), '._profile'))

__all__ = [
    'BACKENDS',
    'ML_LOGGER',
    'NUMPY',
    'OBJECTS',
    'Backend',
    'ComputeDevice',
    'DType',
    'NoBackendFound',
    'Profile',
    'UnsupportedDType',
    'as_backend',
    'backend_by_name',
    'choose_backend',
    'combine_types',
    'context_backend',
    'convert',
    'default_backend',
    'get_current_profile',
    'get_precision',
    'on_backend_loaded',
    'precision',
    'profile',
    'profile_function',
    'register_backend',
    'register_lazy_backend',
    'seed_backends',
    'set_global_default_backend',
    'set_global_precision',
    'to_numpy_dtype',
]
