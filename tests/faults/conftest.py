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


class DeadlinePassed(Exception):
    """A fault test ran past its deadline: a hang. Not an OSError, so no test takes it for an expected error."""


@pytest.fixture(autouse=True)
def deadline():
    """Fail a test that runs longer than 120 s (a hang becomes a failure, not a stuck run).

    The alarm repeats every second after the deadline, so code that catches the first one does not keep the
    test running.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, 'setitimer'):
        yield
        return

    def expired(signum, frame):
        raise DeadlinePassed('the test ran past its deadline of 120 s')

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, 120, 1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
