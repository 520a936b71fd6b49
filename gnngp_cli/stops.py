"""Stops: SIGTERM raised as Ctrl-C is, so one path keeps what a stopped job finished; and a
second signal during that path's clean-up, which cuts the clean-up short in order.

Light on purpose (no torch): the ``gnngp`` command installs it before its heavy imports, so a
stop during them is one line too.

The first SIGTERM (or Ctrl-C) raises :class:`Stopped` (``KeyboardInterrupt``) in the main
thread; the job's clean-up runs as the exception unwinds (roots' files, the Dask cluster), then
one line says what was kept. A second signal while that clean-up runs, where the command line
asked for it (:func:`command_stops`), does not raise inside the clean-up (a traceback from
inside Dask, an interrupted close, worker processes and semaphores left for the interpreter's
exit to warn about): it prints one line, ends this process's child processes (a local cluster's
workers), releases multiprocessing's resources (no "leaked semaphore" warning) and exits with
``128 + signal``. The rows written so far are on disk: each is written as its run finishes.
Elsewhere (a notebook, which must not be ended by a second Ctrl-C) a second signal raises again.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Optional

SECOND_STOP_CLEANUP_SECONDS = 3.0   # the most a second stop waits for multiprocessing's own exit clean-up


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


def stopping() -> bool:
    """Whether a first stop (Ctrl-C, SIGTERM) has come and its clean-up runs."""
    return _STATE.first is not None


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class _Stops:
    """This process's stop: the first signal's number while its clean-up runs, whether a second
    one ends the process (the command line's :func:`command_stops`), and what the stopped job has
    kept (the newest teller first)."""

    def __init__(self) -> None:
        self.first: Optional[int] = None
        self.orderly = 0
        self.tellers: list[Callable[[], str]] = []


_STATE = _Stops()


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
    if _STATE.first is not None and _STATE.orderly:
        second_stop(signum)   # does not return
    if _STATE.first is None:
        _STATE.first = signum
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signum)


def stopped_by_signals():
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread (elsewhere: nothing changes)."""
    return signal_handled(signal.SIGTERM, _stop)


@contextmanager
def signals_held() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM wait: each Python handler of theirs (Ctrl-C's
    ``KeyboardInterrupt``, a stop's :class:`Stopped`) is called as the block ends, with the first
    signal that came. What the block does together (a row written and counted) is done whole or not
    at all. Only in the main thread, where signals are handled (:func:`signal_handled`; masking them
    there would not do: the kernel hands a process's signal to any thread that does not mask it)."""
    pending: list[int] = []
    held = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    held = {signum: handler for signum, handler in held.items() if callable(handler)}   # SIG_IGN and SIG_DFL stay as they are
    try:
        with ExitStack() as stack:
            for signum in held:
                stack.enter_context(signal_handled(signum, lambda number, frame: pending.append(number)))
            yield
    finally:
        if pending:
            held[pending[0]](pending[0], None)


@contextmanager
def command_stops() -> Iterator[None]:
    """The command line's stops: within the block, SIGTERM raises :class:`Stopped` and Ctrl-C
    ``KeyboardInterrupt`` (where it is not ignored: a job started in the background keeps
    ignoring it), and a second signal during the first one's clean-up ends the process in order
    (:func:`second_stop`). After a stop the handlers stay installed: the interpreter's own
    exit (a cluster's last close) is clean-up too. Without a stop, all is as before."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signal.SIGTERM: signal.getsignal(signal.SIGTERM), signal.SIGINT: signal.getsignal(signal.SIGINT)}
    signal.signal(signal.SIGTERM, _stop)
    if before[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stop)
    _STATE.orderly += 1
    stopped = False
    try:
        yield
    except BaseException:
        stopped = _STATE.first is not None
        raise
    finally:
        _STATE.orderly -= 1
        if stopped:
            _STATE.orderly += 1   # the process is ending: a second signal during its exit is still orderly
        else:
            for signum, handler in before.items():
                signal.signal(signum, handler)
            _STATE.first = None


@contextmanager
def telling_kept(teller: Callable[[], str]) -> Iterator[None]:
    """Within the block, ``teller()`` says what a stopped job has kept (``the 3 run(s) finished in
    this job are in .../results.csv``): the line of a second stop, which cuts short the clean-up
    after which the job would have said it."""
    _STATE.tellers.insert(0, teller)
    try:
        yield
    finally:
        _STATE.tellers.remove(teller)


def second_stop(signum: int) -> None:
    """The second signal's orderly end: one line (what the job kept), this process's children
    ended, multiprocessing's exit clean-up (its semaphores released, so its resource tracker has
    nothing to warn about), then ``os._exit(128 + signum)``: no interpreter exit, whose handlers
    (a cluster's close) are the clean-up being cut short."""
    try:
        kept = _STATE.tellers[0]() if _STATE.tellers else "rows already written are kept"
    except Exception:  # noqa: BLE001 - the line must go out whatever the teller does
        kept = "rows already written are kept"
    first = signal_name(_STATE.first) if _STATE.first is not None else "a signal"
    line = (f"gnngp: error: stopped by {signal_name(signum)} during the clean-up after {first}: clean-up cut short "
            f"(child processes ended); {kept}\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    for signum_ in (signal.SIGTERM, signal.SIGINT):   # nothing interrupts the end now
        signal.signal(signum_, signal.SIG_IGN)
    try:
        os.write(2, line.encode("utf-8", "replace"))
    except OSError:
        pass
    import logging

    logging.disable(logging.CRITICAL)   # the line above is the last word: not a cluster's thread logging its killed workers
    _end_children()
    done = threading.Thread(target=_multiprocessing_exit, daemon=True)
    done.start()
    done.join(SECOND_STOP_CLEANUP_SECONDS)
    os._exit(128 + signum)


def _end_children() -> None:
    """SIGKILL every process this one started, and theirs (a local cluster's workers), but
    multiprocessing's resource tracker, which releases what they registered once all have gone."""
    import multiprocessing.resource_tracker as tracker

    spare = getattr(getattr(tracker, "_resource_tracker", None), "_pid", None)
    for pid in _descendants(os.getpid()):
        if pid != spare:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _descendants(root: int) -> list[int]:
    """The processes under ``root``, deepest first (Linux's /proc; elsewhere multiprocessing's children)."""
    parents: dict[int, list[int]] = {}
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        stat = f.read().decode("ascii", "replace")
                    parents.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
                except (OSError, ValueError, IndexError):
                    continue
    except OSError:
        import multiprocessing

        return [p.pid for p in multiprocessing.active_children() if p.pid]
    out: list[int] = []

    def walk(pid: int) -> None:
        for child in parents.get(pid, []):
            walk(child)
            out.append(child)
    walk(root)
    return out


def _multiprocessing_exit() -> None:
    """multiprocessing's own exit clean-up (what ``atexit`` would run): its children joined (ended
    already) and its finalizers run, which unregister the semaphores from the resource tracker."""
    try:
        from multiprocessing import util

        util._exit_function()
    except Exception:  # noqa: BLE001 - best effort: the process is ending
        pass
