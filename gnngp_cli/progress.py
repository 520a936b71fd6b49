"""Progress where there is no terminal: a log line at least every ``interval`` seconds.

A long stage (GNN epochs, a kernel, the RBF gamma search, a stand-in's generation) runs inside
``with Progress("kernel GCNGP on pubmed", total=7) as p:`` and reports its step with
``p.step(3, "conv")`` or ``p.step(12, loss=0.41, val=0.77)``. A step logs when ``interval``
seconds have passed since the last line; a daemon thread logs the current step (with the
elapsed time) when a single step runs longer than that, so a log never goes quiet for more
than ``interval`` seconds, and never speaks more often. On a terminal the GNN epochs show a
progress bar instead, so the lines are not needed there, but they are harmless.

Inside a step, code that does not hold the stage (a kernel's blocks, the row blocks of a root)
says where it is with ``with within("readout"):``, ``with within("branch 3 of 7"):`` or
``with within("A Q row block 12 of 40"):``: the innermost open stage's line then ends with
``... [readout > branch 3 of 7 > A Q row block 12 of 40]``, so the line of a long step moves
(H2GCNGP-X on tolokers spent minutes in one step whose line did not change). ``within`` only
records where the work is; lines still go out at the stage's interval. Outside a stage it
does nothing. An inner stage (a graph operator's build inside a kernel) speaks for the time it
is open; the stage around it stays quiet meanwhile.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

log = logging.getLogger("gnngp")

INTERVAL = float(os.environ.get("GNNGP_PROGRESS_SECONDS", 30.0))   # the environment variable shortens it (tests)

_OPEN: list["Progress"] = []   # the stages open in this process, innermost last
_OPEN_LOCK = threading.Lock()


@contextmanager
def within(label: str) -> Iterator[None]:
    """Where the innermost open stage's current step is, while the block runs (see the module
    docstring); nothing outside a stage."""
    with _OPEN_LOCK:
        stage = _OPEN[-1] if _OPEN else None
    if stage is None:
        yield
        return
    with stage._lock:
        stage.where.append(label)
    try:
        yield
    finally:
        with stage._lock:
            if stage.where and stage.where[-1] == label:
                stage.where.pop()
            elif label in stage.where:   # left out of order (a thread's block): drop it anyway
                stage.where.remove(label)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Periodic progress lines for one stage (see the module docstring)."""

    def __init__(self, what: str, total: Optional[int] = None, interval: Optional[float] = None, logger: logging.Logger = log,
                 enabled: bool = True):
        self.what, self.total, self.log, self.enabled = what, total, logger, enabled
        self.interval = INTERVAL if interval is None else interval
        self.done, self.label, self.info = 0, "", {}
        self.where: list[str] = []   # within(...) labels, outermost first
        self._start = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def line(self) -> str:
        share = f" {self.done}/{self.total} ({100 * self.done / self.total:.0f}%)" if self.total else (f" step {self.done}" if self.done else "")
        label = f" {self.label}" if self.label else ""
        info = "".join(f", {k} {v:.4g}" if isinstance(v, float) and k == "loss" else f", {k} {v:.4f}" if isinstance(v, float) else f", {k} {v}" for k, v in self.info.items())
        where = f" [{' > '.join(self.where)}]" if self.where else ""
        body, elapsed = f"{share}{label}{info}{where}", f"{_clock(time.monotonic() - self._start)} elapsed"
        return f"{self.what}:{body}, {elapsed}" if body else f"{self.what}: {elapsed}"

    def _emit(self) -> None:
        self.log.info(self.line())
        self._last = time.monotonic()

    def step(self, done: int, label: str = "", **info) -> None:
        """The stage has done ``done`` of ``total`` steps; log when the interval has passed."""
        with self._lock:
            self.done, self.label, self.info = done, label, info
            if self.enabled and time.monotonic() - self._last >= self.interval:
                self._emit()

    def _innermost(self) -> bool:
        with _OPEN_LOCK:
            return bool(_OPEN) and _OPEN[-1] is self

    def _beat(self) -> None:
        while not self._stop.wait(min(self.interval, max(0.05, self.interval - (time.monotonic() - self._last)))):
            with self._lock:
                if time.monotonic() - self._last >= self.interval:
                    if self._innermost():
                        self._emit()
                    else:   # an inner stage speaks for this time
                        self._last = time.monotonic()

    def __enter__(self) -> "Progress":
        if not self.enabled:
            return self
        with _OPEN_LOCK:
            _OPEN.append(self)
        self._thread = threading.Thread(target=self._beat, name="gnngp-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        with _OPEN_LOCK:
            if self in _OPEN:
                _OPEN.remove(self)
        if self._thread is not None:
            self._thread.join()
        if self.enabled and time.monotonic() - self._start >= self.interval:  # a long stage also says where and when it ended
            with self._lock:
                self._emit()
                self.log.info(f"{self.what}: stopped after {_clock(time.monotonic() - self._start)}" if exc[0] is not None
                              else f"{self.what}: done in {_clock(time.monotonic() - self._start)}")
