"""Progress where there is no terminal: a log line at least every ``interval`` seconds.

A long stage (GNN epochs, a kernel, the RBF gamma search, a stand-in's generation) runs inside
``with Progress("kernel GCNGP on pubmed", total=7) as p:`` and reports its step with
``p.step(3, "conv")`` or ``p.step(12, loss=0.41, val=0.77)``. A step logs when ``interval``
seconds have passed since the last line; a daemon thread logs the current step (with the
elapsed time) when a single step runs longer than that, so a log never goes quiet for more
than ``interval`` seconds. On a terminal the GNN epochs show a progress bar instead, so the
lines are not needed there, but they are harmless.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Optional

log = logging.getLogger("gnngp")

INTERVAL = float(os.environ.get("GNNGP_PROGRESS_SECONDS", 30.0))   # the environment variable shortens it (tests)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Periodic progress lines for one stage (see the module docstring)."""

    def __init__(self, what: str, total: Optional[int] = None, interval: float = INTERVAL, logger: logging.Logger = log,
                 enabled: bool = True):
        self.what, self.total, self.interval, self.log, self.enabled = what, total, interval, logger, enabled
        self.done, self.label, self.info = 0, "", {}
        self._start = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def line(self) -> str:
        share = f" {self.done}/{self.total} ({100 * self.done / self.total:.0f}%)" if self.total else (f" step {self.done}" if self.done else "")
        label = f" {self.label}" if self.label else ""
        info = "".join(f", {k} {v:.4f}" if isinstance(v, float) else f", {k} {v}" for k, v in self.info.items())
        return f"{self.what}:{share}{label}{info}, {_clock(time.monotonic() - self._start)} elapsed"

    def _emit(self) -> None:
        self.log.info(self.line())
        self._last = time.monotonic()

    def step(self, done: int, label: str = "", **info) -> None:
        """The stage has done ``done`` of ``total`` steps; log when the interval has passed."""
        with self._lock:
            self.done, self.label, self.info = done, label, info
            if self.enabled and time.monotonic() - self._last >= self.interval:
                self._emit()

    def _beat(self) -> None:
        while not self._stop.wait(min(self.interval, max(0.05, self.interval - (time.monotonic() - self._last)))):
            with self._lock:
                if time.monotonic() - self._last >= self.interval:
                    self._emit()

    def __enter__(self) -> "Progress":
        if not self.enabled:
            return self
        self._thread = threading.Thread(target=self._beat, name="gnngp-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled and time.monotonic() - self._start >= self.interval:  # a long stage also says where and when it ended
            with self._lock:
                self._emit()
                self.log.info(f"{self.what}: done in {_clock(time.monotonic() - self._start)}")
