"""The Dask cluster of a ``compute=dask`` or ``compute=slurm`` job: started here (a
``LocalCluster``, or a ``dask_jobqueue.SLURMCluster`` that submits worker jobs) or an existing
scheduler (``compute.address``). The dashboard link is logged once when the cluster is up. A
started cluster's workers are closed before it (each left the time it takes to exit), so none
is killed at the end of a run."""
from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from ...errors import ComputeError, ConfigError
from ...stops import signal_handled, stopping

try:  # the dask extra; without it compute=dask stops with its own one line before a client exists
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover
    _WorkerPlugin = object

log = logging.getLogger("gnngp")


def _peak_rss_bytes() -> int:
    """Peak resident memory of this worker process (Linux: ``ru_maxrss`` in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def parse_bytes(text: Any, key: str = "compute.memory_limit", example: str = "3GB, 512MiB or auto") -> int:
    """``text`` as a number of bytes (Dask's parser); one line naming ``key`` when it is not a size."""
    from dask.utils import parse_bytes as parse

    try:
        return int(parse(str(text)))
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{key}={text!r} is not a size; use e.g. {example}") from err


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):   # no sched_getaffinity (macOS)
        return max(1, os.cpu_count() or 1)


MIN_WORKER_BYTES = 512 * 2**20   # a worker process holds Python, torch and Dask (about 300 MB) before any block
WORKERS_PER_CORE = 4             # a LocalCluster of more worker processes than this a core: a mistake, not a plan


def check_local_cluster(c: Any, memory: Any) -> None:
    """Refuse, before any worker starts, a LocalCluster that cannot run: workers of a memory
    limit below what a worker process takes to start (Dask restarts them over and over), or far
    more worker processes than cores. ``memory``: the parsed limit, or ``auto``; 0 is Dask's no limit."""
    text = str(c.memory_limit).strip()
    if memory != "auto" and int(memory) < 0:
        raise ConfigError(f"compute.memory_limit={c.memory_limit} is negative; give a size a worker may hold (e.g. 3GB), 0 for no limit, or auto")
    # a size below a byte (0.5, 0.4B) is floored to 0 bytes by Dask's size parser, which is no limit at all
    number = re.match(r"\s*(\d*\.?\d+(?:e[+-]?\d+)?)", text, re.I)
    if memory != "auto" and int(memory) == 0 and number is not None and float(number.group(1)) > 0:
        raise ConfigError(f"compute.memory_limit={c.memory_limit} reads as 0 bytes, which is no limit; give a size a worker may hold "
                          "(e.g. 3GB), 0 for no limit, or auto (this machine's memory shared among the workers)")
    if c.spill_dir:
        spill = Path(str(c.spill_dir)).expanduser().absolute()
        above = next((p for p in (spill, *spill.parents) if p.exists()), None)   # the nearest part that exists: Dask makes the rest
        why = ("is not a folder" if above == spill and not spill.is_dir() else
               f"lies under {above}, which is not a folder" if above is not None and not above.is_dir() else "")
        if not why and not spill.exists():   # made now, as Dask would: a folder that cannot be is one line, not its traceback
            try:
                spill.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                why = f"cannot be made ({err.strerror or err})"
        if why:
            raise ConfigError(f"compute.spill_dir={c.spill_dir} {why}; give a folder of the workers' local disk, or leave it out "
                              "(Dask's temporary folder)")
    if c.processes and memory != "auto" and 0 < int(memory) < MIN_WORKER_BYTES:
        raise ConfigError(f"compute.memory_limit={c.memory_limit} is below the {MIN_WORKER_BYTES // 2**20} MiB a worker process needs "
                          "(Python, torch and Dask take about 300 MB before any block, and Dask restarts a worker past 95% of its limit); "
                          "give at least 512MiB a worker, or auto")
    cores = usable_cores()
    if str(c.workers) != "auto" and int(c.workers) > WORKERS_PER_CORE * cores:
        raise ConfigError(f"compute.workers={c.workers} starts {c.workers} worker {'processes' if c.processes else 'threads'} on this machine's "
                          f"{cores} core{'s' if cores > 1 else ''}; use at most {WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} a core), or "
                          "auto (one a core)")


WALLTIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")   # SLURM's --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS


def check_slurm(c: Any) -> None:
    """Refuse, before a job is submitted, a SLURM cluster that cannot start: no ``sbatch`` here
    (dask-jobqueue's submissions failed with a traceback each, and the run waited
    ``compute.worker_timeout`` for workers that never came), a memory that is not a size, a
    walltime SLURM does not read."""
    import shutil

    if shutil.which("sbatch") is None:
        raise ConfigError("compute=slurm submits SLURM jobs with sbatch, which is not on this machine's PATH; run from a SLURM login "
                          "node, or use compute=dask (a cluster on this machine)")
    parse_bytes(c.memory, "compute.memory", "32GB (a SLURM job's memory)")
    if c.walltime is not None and not WALLTIME.fullmatch(str(c.walltime).strip()):
        raise ConfigError(f"compute.walltime={c.walltime!r} is not a SLURM time; give minutes, HH:MM:SS or D-HH:MM:SS, e.g. 01:00:00")


def worker_count(c: Any) -> int:
    """``compute.workers``: a number as given; ``auto``: a LocalCluster worker per usable core
    (:func:`usable_cores`), one worker process per SLURM job."""
    if str(c.workers) != "auto":
        return int(c.workers)
    return 1 if c.backend == "slurm" else usable_cores()


def slurm_cluster(c: Any) -> Any:
    """A ``dask_jobqueue.SLURMCluster`` (no job submitted yet): each job runs ``c.workers``
    worker processes on ``c.cores`` cores and ``c.memory``, in ``c.queue`` for ``c.walltime``."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as err:
        raise ComputeError("compute=slurm needs dask-jobqueue; install gnngp with the dask extra: pip install 'gnngp[dask]'") from err
    return SLURMCluster(queue=c.queue, account=c.account, walltime=c.walltime, cores=c.cores, processes=worker_count(c),
                        memory=c.memory, local_directory=c.spill_dir, job_extra_directives=list(c.job_extra),
                        scheduler_options={"dashboard_address": c.dashboard})


@contextmanager
def dask_client(c: Any) -> Iterator[Any]:
    """A ``distributed.Client`` for the compute config ``c`` (closed, and a started cluster shut
    down, on exit), with Dask's low-level task fusion off while it is open (:data:`SAME_KEY_SAME_TASK`)."""
    import dask

    with dask.config.set(SAME_KEY_SAME_TASK):
        with _client(c) as client:
            yield client


# Dask's linear fusion renames a fused chain and leaves the old key as an alias of the new one,
# and which chain it fuses depends on the keys a compute asks for: a row block computed once whole
# and once through a gather aliased the same key to two different tasks, and the scheduler,
# still holding the released key, warned ("Detected different `run_spec` ... can cause failures
# and deadlocks") in the middle of a run. A row block is one coarse task, so fusing saves nothing.
SAME_KEY_SAME_TASK = {"optimization.fuse.active": False}


def _unset_future_race(record: logging.LogRecord) -> bool:
    """False for the one record of a race in distributed's ``sync``: a stop (``KeyboardInterrupt``,
    as a first SIGTERM or Ctrl-C raises it) that lands before ``sync``'s coroutine has made its future
    makes the cancel it schedules raise ``NameError`` on the loop's thread, which tornado logs with a
    traceback; the stop itself goes on as it should, so the record is only noise on the console."""
    error = record.exc_info[1] if record.exc_info else None
    if stopping() and type(error).__name__ in ("CommClosedError", "StreamClosedError"):   # a stop closed the comms as they spoke:
        return False                                                                      # the stop's own line says what was kept
    return not (isinstance(error, NameError) and "'future'" in str(error))


QUIET_AFTER_STOP = ("distributed.scheduler", "distributed.nanny", "distributed.core", "distributed.worker", "distributed.client",
                    "distributed.comm.tcp", "asyncio")


def _silent_after_stop(record: logging.LogRecord) -> bool:
    """False, once a stop (Ctrl-C, SIGTERM) has come, for Dask's and asyncio's records of comms
    closed under them (a broadcast that failed, a future never retrieved, a worker restarted): the
    stop's own line says what was kept, and these followed it with tracebacks."""
    return not stopping()


# Workers that are threads of this process (compute.processes=false) share its memory, which Dask
# reads as theirs: below their memory limit it would pause them for good (no task runs again) and a
# job would wait forever. Their limit still sizes the row blocks (gnngp's own check); Dask's
# spilling, pausing and restarting are for worker processes.
IN_PROCESS_MEMORY = {f"distributed.worker.memory.{key}": False for key in ("target", "spill", "pause", "terminate")}


@contextmanager
def _client(c: Any) -> Iterator[Any]:
    import dask
    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)
    tornado = logging.getLogger("tornado.application")
    if _unset_future_race not in tornado.filters:
        tornado.addFilter(_unset_future_race)
    for name in QUIET_AFTER_STOP:   # a logger's filter sees only its own records: each one that speaks as a stop closes the comms
        if _silent_after_stop not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_silent_after_stop)
    cluster = None
    if c.address:
        try:
            client = Client(c.address, timeout=f"{c.connect_timeout}s")
        except (ValueError, TypeError) as err:   # distributed's parser ("missing port number in address 'garbage'"), or a protocol
            # whose library is absent (ucx://: "Can't instantiate abstract class UCXConnector")
            raise ConfigError(f"compute.address={c.address} is not a scheduler address ({err}); give one as tcp://host:8786, or drop "
                              "compute.address to start a local cluster") from None
        except (OSError, TimeoutError) as err:
            raise ComputeError(f"cannot reach the Dask scheduler at {c.address} ({type(err).__name__}); start it (dask scheduler) "
                               "and its workers, fix compute.address, or drop compute.address to start a local cluster") from err
    elif c.backend == "slurm":
        check_slurm(c)
        cluster = slurm_cluster(c)
        cluster.scale(jobs=c.jobs)
        client = Client(cluster)
        log.info("submitted %d SLURM jobs of %d workers; waiting for the first worker", c.jobs, worker_count(c))
        client.wait_for_workers(1, timeout=c.worker_timeout)
    else:
        memory = c.memory_limit if str(c.memory_limit) == "auto" else parse_bytes(c.memory_limit)
        check_local_cluster(c, memory)
        try:
            with sigint_ignored_by_children(), dask.config.set(IN_PROCESS_MEMORY if not c.processes else {}):
                cluster = LocalCluster(n_workers=worker_count(c), threads_per_worker=c.threads_per_worker, memory_limit=memory,
                                       processes=c.processes, local_directory=c.spill_dir, dashboard_address=c.dashboard,
                                       silence_logs=logging.WARNING)
        except BaseException:
            if stopping():   # stopped while the cluster started: distributed's exit hook would close a cluster that never
                import atexit  # finished starting (AssertionError: Status.init); the stop ends this process's own children

                from distributed.deploy.spec import close_clusters

                atexit.unregister(close_clusters)
            raise
        client = Client(cluster)
    quiet_task_failures()            # threads of this process
    try:
        client.register_plugin(QuietTaskFailures())   # worker processes, and workers that join later (SLURM)
    except Exception as err:  # noqa: BLE001 - only log noise is at stake
        log.debug("worker log filter not installed: %s", err)
    try:
        log.info("Dask dashboard: %s", client.dashboard_link)   # once: the log reaches the console and the run's gnngp.log
        yield client
    finally:
        client.close()
        if cluster is not None:
            close_cluster(cluster)


WORKER_EXIT_SECONDS = 60.0   # how long a worker process of a started LocalCluster may take to exit before it is killed


def close_cluster(cluster: Any, timeout: float = WORKER_EXIT_SECONDS) -> None:
    """Close a started cluster: a LocalCluster's workers first, each through its nanny with
    ``timeout`` seconds to exit, then the scheduler. ``cluster.close()`` alone gives a worker 4 s
    (the nanny's default of 5 s, times 0.8) and then kills it with a warning ("Worker process
    still alive after 4.0 seconds, killing"), one per worker at the end of the 10^6-node run of
    docs/dask.md on 4 workers of 1 GB as issue 49 reported it."""
    from distributed import Nanny

    workers = [w for w in getattr(cluster, "workers", {}).values() if isinstance(w, Nanny)]   # worker processes (not threads, nor SLURM jobs)
    if workers and not getattr(cluster, "asynchronous", False):
        async def close_workers() -> None:
            await asyncio.gather(*(w.close(timeout=timeout) for w in workers), return_exceptions=True)

        try:
            cluster.sync(close_workers, callback_timeout=2 * timeout)
        except Exception as err:  # noqa: BLE001 - cluster.close() below still closes (and if need be kills) them
            log.debug("workers not closed first: %s", err)
    cluster.close()


def sigint_ignored_by_children():
    """SIGINT ignored while the local cluster starts its worker processes, which inherit that
    (Python keeps an ignored SIGINT ignored): a Ctrl-C at the terminal signals the whole process
    group, and each worker printed its own ``KeyboardInterrupt`` traceback (39 lines) before
    the client's one line. The client stops them as it closes; this process handles Ctrl-C again
    once they are started."""
    return signal_handled(signal.SIGINT, signal.SIG_IGN)


class _NoTaskTracebacks(logging.Filter):
    """Drops a worker's "Compute Failed" record (a traceback) and its warnings about the tasks
    cancelled after it: the task's error reaches the client, which stops with its one line. Also
    drops the heartbeat's traceback of a worker whose scheduler closed first (a run stopped by an
    error: about 35 lines before the one line, in 3 of 4 runs of a refused shard): a scheduler
    lost during a run reaches the client as its own error."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        return not (text.startswith(("Compute Failed", "Failed to communicate with scheduler during heartbeat"))
                    or (text.startswith("Async instruction for") and "CancelledError" in text))


class _NoStoppedGathers(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" record (a traceback) of the client's
    gather that a stop (Ctrl-C, SIGTERM) left behind: ``distributed.client.AllExit``, raised
    as the client closes; the stop itself is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith("Task exception was never retrieved") and "AllExit" in record.getMessage())


def quiet_task_failures() -> None:
    """Install :class:`_NoTaskTracebacks` on the worker loggers of this process (once), and
    :class:`_NoStoppedGathers` on asyncio's."""
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _NoStoppedGathers) for f in asyncio_log.filters):
        asyncio_log.addFilter(_NoStoppedGathers())
    for name in ("distributed.worker", "distributed.worker.state_machine"):
        worker_log = logging.getLogger(name)
        if not any(isinstance(f, _NoTaskTracebacks) for f in worker_log.filters):
            worker_log.addFilter(_NoTaskTracebacks())


class QuietTaskFailures(_WorkerPlugin):
    """A worker plugin: :func:`quiet_task_failures` on every worker, now and joining later."""

    name = "gnngp-quiet-task-failures"

    def setup(self, worker: Any) -> None:
        quiet_task_failures()


def worker_memory_limits(client: Any) -> list[int]:
    """Each worker's memory limit in bytes (0: none)."""
    return [int(w.get("memory_limit") or 0) for w in client.scheduler_info(n_workers=-1)["workers"].values()]


def peak_worker_mb(client: Any) -> float:
    """Peak resident memory of the largest worker process, in MiB (with threads-only workers,
    the client process itself)."""
    peaks = client.run(_peak_rss_bytes)
    return max(peaks.values(), default=0) / 2**20


def _time_by_action(dask_scheduler: Any = None) -> dict:
    """On the scheduler: seconds the workers spent, by task kind (prefix) and action (compute,
    transfer, disk-read, disk-write, ...), since the scheduler started."""
    return {name: dict(prefix.all_durations) for name, prefix in dask_scheduler.task_prefixes.items()}


def task_times(client: Any) -> dict:
    """The scheduler's seconds by task kind and action so far ({} where it cannot say)."""
    try:
        return client.run_on_scheduler(_time_by_action)
    except Exception:  # a scheduler without the table (another version): no summary, the run goes on
        return {}


def time_summary(client: Any, top: int = 4, since: Optional[dict] = None) -> str:
    """One line: the workers' seconds by action (summed over workers, so past the wall time) and
    the task kinds that took longest, each by action; ``since``: :func:`task_times` at the run's
    start (a scheduler may have run other work before)."""
    since = since or {}
    actions: dict[str, float] = {}
    kinds: dict[str, dict[str, float]] = {}
    for name, durations in task_times(client).items():
        words = [w for w in name.lstrip("_").split("-") if w not in ("from", "value", "concatenate")]   # Dask's fused names
        kind = kinds.setdefault("-".join(words) or name, {})
        for action, seconds in durations.items():
            seconds -= since.get(name, {}).get(action, 0.0)
            actions[action] = actions.get(action, 0.0) + seconds
            kind[action] = kind.get(action, 0.0) + seconds

    def split(durations: dict[str, float]) -> str:
        return ", ".join(f"{a} {s:.0f}" if s >= 10 else f"{a} {s:.1f}" for a, s in sorted(durations.items(), key=lambda kv: -kv[1]) if s >= 0.05)

    longest = [(name, d) for name, d in sorted(kinds.items(), key=lambda kv: -sum(kv[1].values()))[:top] if split(d)]
    if not longest:
        return "worker seconds: under 0.1 s in all"
    return f"worker seconds by action: {split(actions)}; longest task kinds: " + "; ".join(f"{name} ({split(d)})" for name, d in longest)
