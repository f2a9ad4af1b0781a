"""Shared fixtures: `backend` runs a test once per installed array library; JAX's compiled functions are released
after each test module."""

import gc
import sys

import pytest
from backends import BACKEND_NAMES, ML_BACKEND_NAMES, get_backend


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    """A lazyphi Backend, one per installed library, made the default for the test's duration."""
    b = get_backend(request.param)
    with b:
        yield b


@pytest.fixture(params=ML_BACKEND_NAMES)
def nn_backend(request):
    """The Backend of one machine-learning library (torch, JAX, TensorFlow), the default for the test's duration."""
    b = get_backend(request.param)
    with b:
        yield b


@pytest.fixture(autouse=True, scope='module')
def _release_compiled_functions():
    """JAX keeps every function it compiled, for every shape, for the life of the process: cleared after each test
    module, so that the suite's one process does not grow module after module (tests/test_linear_function.py alone
    peaked at 2.7 GB of RSS with them kept, 1.9 GB with them cleared after each test)."""
    yield
    jax = sys.modules.get('jax')
    if jax is not None:
        jax.clear_caches()
    gc.collect()
