"""Fault and hostile-input tests (issue #18): damaged files, crafted manifests, killed writers, bad arguments.

Every case is bounded in time; tests that kill a process start it themselves and end only it.
"""

import pytest

from lazyphi.storage import _memory, clear_memory_cache, set_cache_ttl


@pytest.fixture(autouse=True)
def nothing_kept_in_memory():
    """Every read goes to the files: a value held in the memory cache would hide damage on disk."""
    clear_memory_cache()
    set_cache_ttl(None)
    yield
    set_cache_ttl(_memory.DEFAULT_TTL)
