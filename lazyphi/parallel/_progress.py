"""A text progress bar for local Dask runs that costs nothing until it appears.

Dask's `ProgressBar(minimum=...)` polls on a timer thread that sleeps 0.1 s at a time, and its exit
joins that thread: every run, however short, waits up to 0.1 s more. This bar's thread waits on an
event instead, so the end of a run wakes it at once; it draws only once the run has taken
`after` seconds.
"""

from __future__ import annotations

import sys
import threading
import time

from dask.callbacks import Callback


class LateProgressBar(Callback):
    """Draws `[####    ] | 50% Completed | 1.3 s` on stdout once a run has taken `after` seconds."""

    def __init__(self, after: float = 1.0, interval: float = 0.1, width: int = 40, out=None):
        super().__init__()
        self._after = after
        self._interval = interval
        self._width = width
        self._out = out
        self._state = None
        self._drawn = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def _start(self, dsk) -> None:
        self._started = time.perf_counter()
        self._state = None
        self._drawn = False
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name='lazyphi-progress', daemon=True)
        self._thread.start()

    def _start_state(self, dsk, state) -> None:
        self._state = state

    def _finish(self, dsk, state, errored) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._drawn:
            self._draw(final=not errored)
            self._write('\n')

    def _watch(self) -> None:
        if self._stop.wait(self._after):
            return
        while True:
            self._draw()
            if self._stop.wait(self._interval):
                return

    def _draw(self, final: bool = False) -> None:
        state = self._state
        if state is None:
            return
        done = len(state['finished'])
        total = done + sum(len(state[k]) for k in ('ready', 'waiting', 'running'))
        fraction = 1.0 if final or not total else done / total
        bar = '#' * int(self._width * fraction)
        elapsed = time.perf_counter() - self._started
        self._write(f'\r[{bar:<{self._width}}] | {fraction:4.0%} Completed | {elapsed:.1f} s')
        self._drawn = True

    def _write(self, text: str) -> None:
        out = self._out or sys.stdout
        out.write(text)
        out.flush()
