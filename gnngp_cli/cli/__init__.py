"""The command line: ``gnngp run|partition|report|verify`` (:mod:`.main`), its help and one-line
mistakes, a job as ``gnngp run`` runs it (:mod:`.execute`), a sweep's summary, tracking, and the
watchdog of sweep workers. Light on purpose: the heavy imports happen inside the commands."""
from .main import main

__all__ = ["main"]
