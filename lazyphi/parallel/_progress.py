"""A text progress bar for local Dask runs that costs nothing until it appears.

Dask's `ProgressBar(minimum=...)` polls on a timer thread that sleeps 0.1 s at a time, and its exit
joins that thread: every run, however short, waits up to 0.1 s more. This bar's thread waits on an
event instead, so the end of a run wakes it at once; it draws only once the run has taken
`after` seconds. In a Jupyter kernel a bar is one output redrawn in place (`KernelLine`), so that a notebook
saved or rendered to static HTML holds its last state, not one line per update as carriage returns leave.
"""

from __future__ import annotations

import sys
import threading
import time

from dask.callbacks import Callback


def bar_text(fraction: float, elapsed: float, width: int = 40) -> str:
    """`[####    ] | 50% Completed | 1.3 s`."""
    return f'[{"#" * int(width * fraction):<{width}}] | {fraction:4.0%} Completed | {elapsed:.1f} s'


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (IPython with a kernel; never imports IPython)."""
    ipython = sys.modules.get('IPython')
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, 'get_ipython') else None
    return getattr(shell, 'kernel', None) is not None


class KernelLine:
    """One line of text in a Jupyter kernel's output, redrawn in place: a display updated by its id."""

    def __init__(self):
        self._handle = None

    def show(self, text: str) -> None:
        from IPython.display import display  # loaded: this runs in a kernel

        if self._handle is None:
            self._handle = display({'text/plain': text}, raw=True, display_id=True)
        else:
            self._handle.update({'text/plain': text}, raw=True)


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
        self._line = KernelLine() if out is None and in_kernel() else None

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
            if self._line is None:
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
        text = bar_text(fraction, time.perf_counter() - self._started, self._width)
        if self._line is not None:
            self._line.show(text)
        else:
            self._write(f'\r{text}')
        self._drawn = True

    def _write(self, text: str) -> None:
        out = self._out or sys.stdout
        out.write(text)
        out.flush()
