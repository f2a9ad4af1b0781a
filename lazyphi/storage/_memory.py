"""The memory side of the disk cache: loaded data kept for a time, load callbacks, and the backend to load into.

Disk-backed tensors load their values through `MEMORY.get_or_load`. A loaded native stays in memory
for `set_cache_ttl` seconds after its last use (a daemon thread frees it on time, so an idle process
does not hold it), and concurrent loads of the same data are merged: one thread reads, the others
wait for its result. Every load calls the `on_load_into_memory` callbacks. `load_cache_as` picks the
backend of loaded data for the current context (thread or task) and, for the engine, for workers.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from ..backend import Backend, backend_by_name

DEFAULT_TTL = 10.0  # seconds a loaded value stays in memory after its last use
_FAILED = object()  # marks a load that raised


class _Entry:
    __slots__ = ('expires', 'value')

    def __init__(self, value, expires: float):
        self.value = value
        self.expires = expires


class TimedCache:
    """Thread-safe map from keys to loaded values that expire `ttl` seconds after their last use."""

    def __init__(self, ttl: float | None = DEFAULT_TTL):
        self._ttl = ttl
        self._entries: dict[Hashable, _Entry] = {}
        self._loading: dict[Hashable, threading.Event] = {}
        self._cond = threading.Condition()
        self._janitor: threading.Thread | None = None

    @property
    def ttl(self) -> float | None:
        return self._ttl

    @ttl.setter
    def ttl(self, seconds: float | None):
        with self._cond:
            self._ttl = seconds
            if seconds is None:
                self._entries.clear()
            else:
                for entry in self._entries.values():
                    entry.expires = min(entry.expires, time.monotonic() + seconds)
            self._cond.notify_all()

    def __len__(self) -> int:
        """Number of values held now, expired ones included until the janitor frees them."""
        with self._cond:
            return len(self._entries)

    def holds(self, key: Hashable) -> bool:
        """Whether `key`'s value is in memory now (does not count as a use)."""
        with self._cond:
            entry = self._entries.get(key)
            return entry is not None and entry.expires > time.monotonic()

    def get_or_load(self, key: Hashable, load: Callable[[], Any]) -> tuple[Any, bool]:
        """The value of `key`, from memory or from `load()`; also whether this call loaded it.

        While one thread loads a key, other threads asking for it wait for that load instead of
        loading it again. With `ttl=None` nothing is kept and every call loads.
        """
        while True:
            with self._cond:
                now = time.monotonic()
                entry = self._entries.get(key)
                if entry is not None and entry.expires > now:
                    entry.expires = now + self._ttl
                    return entry.value, False
                loading = self._loading.get(key)
                mine = loading is None and self._ttl is not None
                if mine:
                    loading = self._loading[key] = threading.Event()
            if loading is None:  # nothing is kept: load without registering
                return load(), True
            if mine:
                break
            loading.wait()  # then look again: the value is there, or that load failed and we try
        value = _FAILED
        try:
            value = load()
        finally:
            with self._cond:  # store and unregister at once, so that no waiter loads again in between
                del self._loading[key]
                if value is not _FAILED:
                    self._store(key, value)
            loading.set()
        return value, True

    def _store(self, key: Hashable, value) -> None:
        """Keep `value` (the caller holds the lock)."""
        if self._ttl is None:
            return
        self._entries[key] = _Entry(value, time.monotonic() + self._ttl)
        if self._janitor is None:
            self._janitor = threading.Thread(target=self._free_expired, name='lazyphi-cache-ttl', daemon=True)
            self._janitor.start()
        else:
            self._cond.notify_all()

    def _free_expired(self) -> None:
        """Janitor thread: drop entries as they expire; ends when the cache is empty."""
        with self._cond:
            while self._entries:
                now = time.monotonic()
                for key in [k for k, e in self._entries.items() if e.expires <= now]:
                    del self._entries[key]
                if self._entries:
                    self._cond.wait(min(e.expires for e in self._entries.values()) - now)
            self._janitor = None

    def discard(self, matches: Callable[[Hashable], bool]) -> None:
        """Drop the values whose keys `matches` (values on disk that were written since they were loaded)."""
        with self._cond:
            for key in [k for k in self._entries if matches(k)]:
                del self._entries[key]

    def clear(self) -> None:
        with self._cond:
            self._entries.clear()
            self._cond.notify_all()


MEMORY = TimedCache()

_callbacks: list[Callable] = []
_callbacks_lock = threading.Lock()


def set_cache_ttl(ttl_seconds: float | None) -> None:
    """Set how long data loaded from disk (or computed from a dask array) stays in memory after its last use.

    Args:
        ttl_seconds: time to live in seconds (default 10). `None`: nothing is kept; every use of a
            disk-backed tensor loads its data again, and memory is freed right after the use.
    """
    if ttl_seconds is not None and (isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float)):
        raise TypeError(f'set_cache_ttl() takes a number of seconds >= 0 or None, got {ttl_seconds!r:.100}')
    if ttl_seconds is not None and not ttl_seconds >= 0:
        raise ValueError(f'set_cache_ttl() takes a number of seconds >= 0 or None, got {ttl_seconds!r}')
    MEMORY.ttl = None if ttl_seconds is None else float(ttl_seconds)


def clear_memory_cache() -> None:
    """Drop all data loaded from disk that is held in memory; the next use loads again."""
    MEMORY.clear()


def on_load_into_memory(callback: Callable) -> Callable:
    """Register `callback(tensor)`, called every time a disk-backed tensor's data is loaded in this process.

    `tensor` is the disk-backed tensor whose data was read. Returns `callback`, so this works as a decorator.
    """
    if not callable(callback):
        raise TypeError(f'on_load_into_memory() takes a function callback(tensor), got {callback!r}')
    with _callbacks_lock:
        _callbacks.append(callback)
    return callback


def notify_loaded(tensor) -> None:
    """Call every registered load callback with `tensor`."""
    with _callbacks_lock:
        callbacks = tuple(_callbacks)
    for callback in callbacks:
        callback(tensor)


# (host backend, worker backend) of the innermost `load_cache_as`; None: the backend each tensor came from
_load_as: contextvars.ContextVar[tuple[Backend | None, Backend | None]] = contextvars.ContextVar(
    'lazyphi_load_cache_as', default=(None, None))


def _as_backend(value: str | Backend, what: str) -> Backend:
    if isinstance(value, Backend):
        return value
    if isinstance(value, str):
        return backend_by_name(value)
    raise TypeError(f"load_cache_as() {what} must be a backend name such as 'numpy' or 'torch' or a Backend, "
                    f'got {value!r}')


@contextlib.contextmanager
def load_cache_as(host_backend: str | Backend, worker_backend: str | Backend | None = None) -> Iterator[None]:
    """Load disk-cached data as natives of `host_backend` inside the `with` block.

    Args:
        host_backend: backend name or Backend for data loaded in this context (this thread or task),
            including the host stages of `parallel_compute`.
        worker_backend: backend for data loaded on workers during `parallel_compute`; if None, an
            enclosing `load_cache_as` decides, else each tensor loads as the backend it was computed with.

    The setting is a context variable: threads started inside the block do not see it.
    """
    host = _as_backend(host_backend, 'host_backend')
    outer_worker = _load_as.get()[1]
    worker = outer_worker if worker_backend is None else _as_backend(worker_backend, 'worker_backend')
    token = _load_as.set((host, worker))
    try:
        yield
    finally:
        _load_as.reset(token)


def current_load_backend() -> Backend | None:
    """The backend that data loaded here converts to, or None: the backend each tensor was computed with."""
    return _load_as.get()[0]


def worker_load_backend() -> Backend | None:
    """The backend workers of `parallel_compute` should load data as, or None: each tensor's own backend."""
    return _load_as.get()[1]
