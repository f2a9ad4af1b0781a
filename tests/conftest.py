"""Shared fixtures: `backend` runs a test once per installed array library; JAX's compiled functions are released
after each test module; the peak RSS of each test file is recorded and the largest are printed at the end."""

import ctypes
import ctypes.util
import gc
import os
import resource
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


def _glibc():
    """The C library where it is glibc (whose `malloc_trim` returns freed heap pages to the system), else None."""
    name = ctypes.util.find_library('c')
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, 'malloc_trim') else None


_LIBC = _glibc()


@pytest.fixture(autouse=True, scope='module')
def _release_compiled_functions():
    """JAX keeps every function it compiled, for every shape, for the life of the process: cleared after each test
    module, so that the suite's one process does not grow module after module (tests/test_linear_function.py alone
    peaked at 2.7 GB of RSS with them kept, 1.9 GB with them cleared after each test). Then the heap pages freed go
    back to the system: kept by malloc, they made each later file start higher (tests/test_magic.py, test_perm.py,
    test_extrapolation.py, test_html_repr.py and test_tree.py in one run: the last two peaked at 1485 MiB without,
    at 1053 and 1025 MiB with)."""
    yield
    jax = sys.modules.get('jax')
    if jax is not None:
        jax.clear_caches()
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


RSS_LIMIT = 4 * 2 ** 30  # a test process's peak RSS should stay below this (a test needing more says why)
RELEASE_ABOVE = 2 * 2 ** 30  # past this RSS, JAX's compiled functions are released after each test, not each file


def _rss() -> int:
    """This process's RSS in bytes (0 where /proc is missing)."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except OSError:
        return 0


@pytest.fixture(autouse=True)
def _release_compiled_functions_when_large():
    """Within a file, JAX's compiled functions pile up too: tests/test_optimize.py alone peaked at 3485 MiB with
    them released after the file only. Released after each test, it peaked at 1426 MiB but took 461 s instead of
    290 s (recompiling what later tests share; both runs side by side), so they are released only once the process
    is past `RELEASE_ABOVE`: then it peaked at 2145 MiB and took 119 s instead of 95 s (at a lower load)."""
    yield
    jax = sys.modules.get('jax')
    if jax is not None and _rss() > RELEASE_ABOVE:
        jax.clear_caches()
        gc.collect()
        if _LIBC is not None:
            _LIBC.malloc_trim(0)
_PEAKS = {}  # test file -> (peak RSS of this process during it, peak RSS of its largest child if it set a new high)


def _reset_peak_rss() -> None:
    """Start this process's peak RSS (VmHWM) over from its current RSS (Linux 4.0+); where it cannot, nothing."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
    except OSError:
        pass


def _peak_rss() -> int:
    """This process's peak RSS in bytes since it started or since `_reset_peak_rss` (`ru_maxrss` where no VmHWM)."""
    try:
        with open('/proc/self/status') as f:
            return next(int(line.split()[1]) for line in f if line.startswith('VmHWM:')) * 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@pytest.fixture(autouse=True, scope='module')
def _record_peak_rss(request):
    """The peak RSS of the test process during each test file, and of the largest child process it waited for.

    The kernel keeps only the largest child's peak over the whole session, so a child's figure is recorded for the
    file where it grew; a child started by fork or vfork counts this process's RSS at that moment in its own peak.
    Where VmHWM cannot be reset (not Linux), the process's figure is its peak since the session started.
    """
    _reset_peak_rss()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    yield
    grown = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    _PEAKS[os.path.relpath(request.path)] = (_peak_rss(), grown * 1024 if grown > children else 0)


def pytest_terminal_summary(terminalreporter):
    """Prints the test files of the largest peak RSS, and any over `RSS_LIMIT`."""
    if not _PEAKS:
        return
    mib = 2 ** 20
    largest = sorted(_PEAKS.items(), key=lambda item: max(item[1]), reverse=True)
    terminalreporter.section('peak RSS per test file (this process / its largest child, where that grew)')
    for path, (own, child) in largest[:5]:
        child_text = f'{child / mib:6.0f} MiB' if child else '     -    '
        terminalreporter.write_line(f'{own / mib:6.0f} MiB / {child_text}  {path}')
    over = [path for path, peaks in largest if max(peaks) > RSS_LIMIT]
    if over:
        terminalreporter.write_line(f'over {RSS_LIMIT / 2 ** 30:.0f} GiB: {", ".join(over)}', red=True)
