"""Stops: SIGTERM raised as Ctrl-C is, so one path keeps what a stopped job finished.

Light on purpose (no torch): the ``gnngp`` command installs it before its heavy imports, so a
stop during them is one line too.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


class Stopped(KeyboardInterrupt):
    """SIGTERM (``kill``, SLURM at the end of a walltime), raised in the main thread as Ctrl-C
    raises ``KeyboardInterrupt``: the same clean-up runs (roots' files, the cluster), and the
    job keeps the runs it finished."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_signal(err: KeyboardInterrupt) -> tuple[str, int]:
    """How a stop is named to the user and the exit status it gives (``128 + signal``)."""
    if isinstance(err, Stopped):
        return signal.Signals(err.signum).name, 128 + err.signum
    return "Ctrl-C", 128 + signal.SIGINT


@contextmanager
def signal_handled(signum: int, handler: Any) -> Iterator[None]:
    """Within the block, ``signum`` goes to ``handler`` (a function or ``signal.SIG_IGN``), then
    back to what it was. Python sets handlers in the main thread only: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, before)


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


def stopped_by_signals():
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread (elsewhere: nothing changes)."""
    return signal_handled(signal.SIGTERM, _stop)


@contextmanager
def signals_held() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM wait: each Python handler of theirs (Ctrl-C's
    ``KeyboardInterrupt``, a stop's :class:`Stopped`) is called as the block ends, with the first
    signal that came. What the block does together (a row written and counted) is done whole or not
    at all. Only in the main thread, where signals are handled (masking them there would not do:
    the kernel hands a process's signal to any thread that does not mask it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if callable(handler):   # a Python handler is held; SIG_IGN and SIG_DFL stay as they are
            previous[signum] = handler
            signal.signal(signum, lambda number, frame: pending.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            previous[pending[0]](pending[0], None)
