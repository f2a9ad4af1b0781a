"""`verify()`: which array libraries and optional dependencies work in this installation."""

from __future__ import annotations

import importlib
import importlib.util

from .backend import NUMPY, backend_by_name
from .math import close, ones

_BACKENDS = {'numpy': 'NumPy', 'torch': 'PyTorch', 'jax': 'JAX', 'tensorflow': 'TensorFlow'}
# what each optional dependency serves (see pyproject.toml's extras)
_DEPENDENCIES = {'scipy': 'SciPy (SciPy solvers, sparse matrices)', 'dask': 'Dask (parallel_compute)',
                 'distributed': 'distributed (clusters)', 'zarr': 'Zarr (disk cache, save/load)'}


def verify() -> dict[str, str]:
    """Checks which backends and optional dependencies work here, prints one line for each and returns them.

    A backend's library is imported, its devices are listed and `ones() + ones()` is computed and compared on it;
    a failure there is reported, not raised. The optional dependencies are only imported.

    Returns:
        Module name ('numpy', 'torch', 'jax', 'tensorflow', 'scipy', 'dask', 'distributed', 'zarr') -> its status:
        'not installed', the version and what works, or the version and the error that stops it.
    """
    report = {name: _backend_status(name) for name in _BACKENDS}
    report.update({name: _dependency_status(name) for name in _DEPENDENCIES})
    width = max(len(label) for label in (*_BACKENDS.values(), *_DEPENDENCIES.values()))
    for name, status in report.items():
        print(f'{_BACKENDS.get(name) or _DEPENDENCIES[name]:<{width}}  {status}')
    return report


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _version(name: str) -> str:
    """The version of the module `name`, which is imported."""
    return importlib.import_module(name).__version__


def _backend_status(name: str) -> str:
    if not _installed(name):
        return 'not installed'
    try:
        version = _version(name)
    except Exception as err:  # an installed library that fails to import: the point of verify() is to say so
        return f'installed but fails to import: {type(err).__name__}: {err}'
    try:
        backend = NUMPY if name == 'numpy' else backend_by_name(name)
        gpus = len(backend.list_devices('GPU'))
        with backend:
            one = ones()
            works = bool(close(one + one, 2)) and (one + one).backend is backend
    except Exception as err:
        return f'{version}, but its backend fails: {type(err).__name__}: {err}'
    if not works:
        return f'{version}, but its backend computes 1 + 1 wrongly'
    return f'{version}, {gpus} GPU{"" if gpus == 1 else "s"}, works'


def _dependency_status(name: str) -> str:
    if not _installed(name):
        return 'not installed'
    try:
        return f'{_version(name)}, imports'
    except Exception as err:
        return f'installed but fails to import: {type(err).__name__}: {err}'
