"""Profiling of backend calls.

While a profile is active, the operations of the profiled backends are replaced, on the backend
instances, by wrappers that time each call; leaving the profile puts the original attributes back.
Outside of a profile nothing is wrapped, so profiling costs nothing when it is not used.

Profiling is process-global, not per thread: calls from every thread are recorded while a profile is
active, and profiles should be entered and exited in a nested (last in, first out) order.
"""

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter
from typing import Any, TextIO

from ._backend import Backend
from ._registry import BACKENDS

# queries that run constantly and take no measurable time
_UNPROFILED = frozenset({
    'is_tensor', 'dtype', 'staticshape', 'shape', 'ndims', 'size', 'is_available', 'is_sparse', 'is_module',
    'list_devices', 'get_default_device', 'set_default_device', 'get_device', 'get_device_by_ref', 'combine_types',
    'requires_fixed_shapes_when_tracing', 'prefers_channels_last', 'determine_size',
})
_BACKEND_DIR = os.path.dirname(os.path.abspath(__file__))
_active: list['Profile'] = []


@dataclass
class BackendCall:
    """One timed call of a backend operation. Times are seconds since the profile started."""

    backend: str
    op: str
    start: float
    duration: float
    thread: int
    inputs: list[str]
    outputs: list[str]
    caller: str | None


def _describe(value: Any) -> str:
    shape = getattr(value, 'shape', None)
    if shape is not None:
        return f"{type(value).__name__}{tuple(shape)} {getattr(value, 'dtype', '')}".rstrip()
    if isinstance(value, tuple | list):
        return f"{type(value).__name__}[{len(value)}]"
    return type(value).__name__


def _caller() -> str:
    frame = sys._getframe(3)
    while frame is not None and frame.f_code.co_filename.startswith(_BACKEND_DIR):
        frame = frame.f_back
    if frame is None:
        return '?'
    return f"{frame.f_code.co_name} ({os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno})"


class Profile:
    """Calls to backends and their timing, recorded by `profile()` or `profile_function()`.

    Print a summary with `Profile.print()`, or save a Chrome trace with `Profile.save()`.
    """

    def __init__(self, trace: bool, backends: Sequence[Backend], subtract_trace_time: bool):
        self._trace = trace
        self._backends = tuple(backends)
        self._subtract_trace_time = subtract_trace_time
        self._start = perf_counter()
        self._duration: float | None = None
        self._overhead = 0.0  # time spent recording, taken out of the timeline
        self._timing_run: list[tuple[float, float]] | None = None  # set while retiming
        self._run_start = 0.0
        self._messages: list[str] = []
        self.calls: list[BackendCall] = []
        """The recorded calls in the order they finished."""

    @property
    def duration(self) -> float:
        """Seconds from the start of the profile to its end (or to now, while it is active)."""
        if self._duration is not None:
            return self._duration
        return perf_counter() - self._start - (self._overhead if self._subtract_trace_time else 0.0)

    def add_external_message(self, message: str) -> None:
        """Stores a message that `print()` shows above the summary."""
        self._messages.append(message)

    def _record(self, backend: Backend, op: str, start: float, stop: float, overhead_during: float,
                args: tuple, kwargs: dict, result: Any) -> None:
        begin = perf_counter()
        duration = stop - start - (overhead_during if self._subtract_trace_time else 0.0)
        if self._timing_run is not None:
            self._timing_run.append((start - self._run_start, duration))
            return
        if op == 'call':
            op = f"call {kwargs.get('name') or getattr(args[0], '__name__', '?')}"
        outputs = result if isinstance(result, tuple | list) else (result,)
        self.calls.append(BackendCall(
            backend=backend.name, op=op,
            start=start - self._start - (self._overhead if self._subtract_trace_time else 0.0),
            duration=duration, thread=threading.get_ident(),
            inputs=[_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()],
            outputs=[_describe(o) for o in outputs],
            caller=_caller() if self._trace else None))
        self._overhead += perf_counter() - begin

    def _finish(self) -> None:
        self._duration = perf_counter() - self._start - (self._overhead if self._subtract_trace_time else 0.0)

    @contextmanager
    def _wrapped(self) -> Iterator[None]:
        restore = [_wrap_backend(self, backend) for backend in self._backends]
        _active.append(self)
        try:
            yield
        finally:
            _active.remove(self)
            for backend, previous in zip(self._backends, restore, strict=True):
                _unwrap_backend(backend, previous)

    @contextmanager
    def _timing(self, runs: list) -> Iterator[None]:
        self._timing_run, self._run_start = [], perf_counter()
        try:
            with self._wrapped():
                yield
            total = perf_counter() - self._run_start
        finally:
            run, self._timing_run = self._timing_run, None
        if len(run) != len(self.calls):
            raise RuntimeError(f"Retiming made {len(run)} backend calls but the profile recorded {len(self.calls)}; "
                               f"the code must make the same calls each time (use warmup to fill caches first)")
        runs.append((run, total))

    def _apply_timings(self, runs: list) -> None:
        for i, call in enumerate(self.calls):
            call.start = sum(run[i][0] for run, _ in runs) / len(runs)
            call.duration = sum(run[i][1] for run, _ in runs) / len(runs)
        self._duration = sum(total for _, total in runs) / len(runs)

    @contextmanager
    def retime(self) -> Iterator[None]:
        """Runs the code in the `with` block again, untraced, and replaces the recorded timings with the new ones.

        The block must make the same backend calls, in the same order, as the code that created this profile.
        """
        runs: list = []
        with self._timing(runs):
            yield
        self._apply_timings(runs)

    def summary(self) -> list[dict]:
        """Totals per backend operation, most expensive first: `backend`, `op`, `calls`, `total`, `mean`, `max`."""
        groups: dict[tuple[str, str], list[float]] = {}
        for call in self.calls:
            groups.setdefault((call.backend, call.op), []).append(call.duration)
        rows = [{'backend': backend, 'op': op, 'calls': len(times), 'total': sum(times),
                 'mean': sum(times) / len(times), 'max': max(times)} for (backend, op), times in groups.items()]
        return sorted(rows, key=lambda row: -row['total'])

    def print(self, min_duration: float = 1e-3, code_col: int = 80, code_len: int = 50,
              file: TextIO | None = None) -> None:
        """Prints a table of the time spent per backend operation and, for a traced profile, per calling code.

        Times include nested backend calls, so the shares can add up to more than 100%.

        Args:
            min_duration: Hide operations and calling places whose total time is shorter than this (seconds).
            code_col: Column at which each calling place (function, file and line) is printed.
            code_len: Characters of the calling place shown; longer ones are cropped.
            file: Where to print; standard output by default.

        Raises:
            ValueError: `code_col` or `code_len` is negative.
        """
        if code_col < 0 or code_len < 0:
            raise ValueError(f"code_col and code_len must be at least 0, but got {code_col} and {code_len}")
        total = self.duration
        lines = [f"Profile: {total:.6f} s, {len(self.calls)} backend calls; hiding entries under "
                 f"{1e3 * min_duration:.2f} ms"]
        lines.extend(f"  {message}" for message in self._messages)
        lines.append(f"{'backend':<10} {'operation':<28} {'calls':>7} {'total ms':>10} {'mean us':>10} "
                     f"{'max us':>10} {'share':>7}")
        for row in self.summary():
            if row['total'] >= min_duration:
                share = 100 * row['total'] / total if total > 0 else 0.0
                lines.append(f"{row['backend']:<10} {row['op']:<28} {row['calls']:>7} {1e3 * row['total']:>10.3f} "
                             f"{1e6 * row['mean']:>10.1f} {1e6 * row['max']:>10.1f} {share:>6.1f}%")
        places: dict[str, list[BackendCall]] = {}
        for call in self.calls:
            if call.caller is not None:
                places.setdefault(call.caller, []).append(call)
        timed = sorted(((sum(c.duration for c in calls), place, calls) for place, calls in places.items()),
                       key=lambda entry: -entry[0])
        if any(spent >= min_duration for spent, _, _ in timed):
            lines.append('By calling code:')
        for spent, place, calls in timed:
            if spent >= min_duration:
                ops = ', '.join(dict.fromkeys(c.op for c in calls))
                shown = place if len(place) <= code_len else place[:max(code_len - 3, 0)] + '...'[:code_len]
                timing = f"{1e3 * spent:>10.3f} ms {len(calls):>7} calls  {ops}"
                lines.append(timing.ljust(code_col) + shown if len(timing) < code_col else f"{timing} {shown}")
        print('\n'.join(lines), file=file)

    def trace_events(self) -> list[dict]:
        """The calls as Chrome trace events: complete (`'X'`) events, timestamps in microseconds."""
        pid = os.getpid()
        events: list[dict] = [{'name': 'process_name', 'ph': 'M', 'pid': pid, 'tid': 0,
                               'args': {'name': 'lazyphi backend calls'}}]
        for index, thread in enumerate(dict.fromkeys(call.thread for call in self.calls)):
            events.append({'name': 'thread_name', 'ph': 'M', 'pid': pid, 'tid': thread,
                           'args': {'name': f"thread {index}"}})
        for call in self.calls:
            args = {'inputs': call.inputs, 'outputs': call.outputs}
            if call.caller is not None:
                args['caller'] = call.caller
            events.append({'name': f"{call.backend}.{call.op}", 'cat': call.backend, 'ph': 'X',
                           'ts': 1e6 * call.start, 'dur': 1e6 * call.duration, 'pid': pid, 'tid': call.thread,
                           'args': args})
        return events

    def save(self, path: str | os.PathLike) -> None:
        """Writes the profile as a Chrome trace-event JSON file (a list of events, as phiml writes it), viewable in
        chrome://tracing or Perfetto."""
        with open(path, 'w', encoding='utf-8') as file:
            json.dump(self.trace_events(), file)

    save_trace = save


def _timed(profile: Profile, backend: Backend, op: str, function: Callable) -> Callable:
    def timed(*args: Any, **kwargs: Any) -> Any:
        overhead = profile._overhead
        start = perf_counter()
        result = function(*args, **kwargs)
        stop = perf_counter()
        profile._record(backend, op, start, stop, profile._overhead - overhead, args, kwargs, result)
        return result
    timed.__name__ = timed.__qualname__ = op
    timed.__wrapped__ = function
    return timed


def _wrap_backend(profile: Profile, backend: Backend) -> dict[str, Any]:
    """Replaces the operations of `backend` by timing wrappers; returns what `_unwrap_backend` needs.

    While wrapped, the backend shows as `profile[name]` (its `name` stays).
    """
    previous = {'_label': backend._label}
    backend._label = f'profile[{backend.name}]'
    for op in backend.implemented_ops():
        if op not in _UNPROFILED:
            previous[op] = backend.__dict__.get(op)  # None: a class method, not bound on the instance
            setattr(backend, op, _timed(profile, backend, op, getattr(backend, op)))
    return previous


def _unwrap_backend(backend: Backend, previous: dict[str, Any]) -> None:
    for attribute_name, attribute in previous.items():
        if attribute is None:
            delattr(backend, attribute_name)
        else:
            setattr(backend, attribute_name, attribute)


def get_current_profile() -> Profile | None:
    """The innermost active `Profile`, or `None` if no profile is active."""
    return _active[-1] if _active else None


@contextmanager
def profile(backends: Sequence[Backend] | None = None, trace: bool = True, subtract_trace_time: bool = True,
            save: str | os.PathLike | None = None) -> Iterator[Profile]:
    """Records the backend calls made inside `with profile() as prof:`.

    The profile is process-global: it records calls from all threads while the block runs, and nested
    profiles must end in the reverse order they started.

    Args:
        backends: Backends to profile; all registered backends by default.
        trace: Record for each call the function outside of the backend layer that made it.
        subtract_trace_time: Take the time spent recording out of the reported times.
        save: If given, save the profile as a Chrome trace to this path when the block ends.
    """
    prof = Profile(trace, BACKENDS if backends is None else backends, subtract_trace_time)
    with prof._wrapped():
        yield prof
    prof._finish()
    if save is not None:
        prof.save(save)


def profile_function(fun: Callable, args: Sequence = (), kwargs: dict | None = None,
                     backends: Sequence[Backend] | None = None, trace: bool = True, subtract_trace_time: bool = True,
                     retime: bool = True, warmup: int = 1, call_count: int = 1) -> Profile:
    """Profiles `fun(*args, **kwargs)`.

    Args:
        fun: The function to profile. With `retime` or `call_count > 1`, it must make the same backend calls
            each time it is called.
        backends: Backends to profile; all registered backends by default.
        trace: Record for each call the function outside of the backend layer that made it.
        subtract_trace_time: Take the time spent recording out of the reported times.
        retime: Call `fun` once more without recording details and report those (more accurate) timings.
        warmup: How often to call `fun` before profiling, so that caches are filled.
        call_count: Calls to average the timings over (the warmup calls excluded).
    """
    kwargs = kwargs or {}
    for _ in range(warmup):
        fun(*args, **kwargs)
    with profile(backends, trace, subtract_trace_time) as prof:
        fun(*args, **kwargs)
    runs: list = [] if retime else [([(c.start, c.duration) for c in prof.calls], prof.duration)]
    for _ in range(call_count - 1 + int(retime)):
        with prof._timing(runs):
            fun(*args, **kwargs)
    if len(runs) > 1 or retime:
        prof._apply_timings(runs)
    return prof
