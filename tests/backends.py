"""The backends the test suite runs on: one pytest param per array library, skipped only when not installed."""

import importlib.util

import pytest

from lazyphi.backend import Backend, backend_by_name

# backend name -> the library whose presence it needs
LIBRARIES = {'numpy': 'numpy', 'torch': 'torch', 'jax': 'jax', 'tensorflow': 'tensorflow'}


def _param(name: str):
    installed = importlib.util.find_spec(LIBRARIES[name]) is not None
    return pytest.param(name, id=name, marks=() if installed else pytest.mark.skip(
        reason=f'{LIBRARIES[name]} is not installed'))


BACKEND_NAMES = [_param(name) for name in LIBRARIES]


def get_backend(name: str) -> Backend:
    """The lazyphi backend of that name, imported on demand."""
    return backend_by_name(name)
