"""Shared fixtures: `backend` runs a test once per installed array library."""

import pytest
from backends import BACKEND_NAMES, get_backend


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    """A lazyphi Backend, one per installed library, made the default for the test's duration."""
    b = get_backend(request.param)
    with b:
        yield b
