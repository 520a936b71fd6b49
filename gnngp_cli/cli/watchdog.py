"""Sweep workers exit when the process that launched the sweep dies.

The joblib launcher runs jobs in loky worker processes; when the ``gnngp run -m`` process is
killed (``kill -9``, a lost terminal), they would otherwise compute on, unseen, until their job
ends. The launching process records itself in ``GNNGP_SWEEP_PID`` and ``GNNGP_SWEEP_HOST``; a job
running in another process on the same host starts a daemon thread that checks every
:data:`POLL_SECONDS` whether that process still lives, and ends its own process when it does
not. (Jobs on other hosts, e.g. SLURM, are left to their scheduler.)
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time

PID_ENV, HOST_ENV = "GNNGP_SWEEP_PID", "GNNGP_SWEEP_HOST"
POLL_SECONDS = 1.0


def mark_launcher() -> None:
    """Called in the ``gnngp`` process itself, before Hydra starts any job."""
    os.environ[PID_ENV] = str(os.getpid())
    os.environ[HOST_ENV] = socket.gethostname()


def watch_launcher() -> bool:
    """In a worker process: exit when the launching process dies. Returns whether it watches."""
    from ..data.files import process_alive

    try:
        launcher = int(os.environ.get(PID_ENV, ""))
    except ValueError:
        return False
    if launcher == os.getpid() or os.environ.get(HOST_ENV) != socket.gethostname():
        return False

    def watch() -> None:
        while process_alive(launcher):
            time.sleep(POLL_SECONDS)
        print(f"gnngp: error: the sweep process {launcher} is gone; this job (pid {os.getpid()}) stops", file=sys.stderr)
        sys.stderr.flush()
        os._exit(143)

    threading.Thread(target=watch, name="gnngp-launcher-watchdog", daemon=True).start()
    return True
