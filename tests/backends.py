"""The backends the test suite runs on: one pytest param per array library, skipped only when not installed."""

import importlib.util
import itertools

import pytest

from lazyphi.backend import Backend, backend_by_name

# backend name -> the library whose presence it needs
LIBRARIES = {'numpy': 'numpy', 'torch': 'torch', 'jax': 'jax', 'tensorflow': 'tensorflow'}


def _param(name: str):
    installed = importlib.util.find_spec(LIBRARIES[name]) is not None
    return pytest.param(name, id=name, marks=() if installed else pytest.mark.skip(
        reason=f'{LIBRARIES[name]} is not installed'))


BACKEND_NAMES = [_param(name) for name in LIBRARIES]
ML_BACKEND_NAMES = [_param(name) for name in LIBRARIES if name != 'numpy']
"""The libraries with networks and gradients (lazyphi.nn)."""


def _pair(name: str, other: str):
    missing = [LIBRARIES[n] for n in (name, other) if importlib.util.find_spec(LIBRARIES[n]) is None]
    return pytest.param(name, other, id=f'{name}-{other}', marks=pytest.mark.skip(
        reason=f'{missing} not installed') if missing else ())


FOREIGN_PAIRS = [_pair(a, b) for a, b in itertools.permutations(['torch', 'jax', 'tensorflow'], 2)]
"""Ordered pairs of backends of which neither accepts the other's natives (all accept NumPy's)."""


def get_backend(name: str) -> Backend:
    """The lazyphi backend of that name, imported on demand."""
    return backend_by_name(name)
