"""Shared pieces of the property-based tests (``hypothesis``): the settings profiles and a
guard against hangs.

Profiles, chosen by ``GNNGP_HYPOTHESIS_PROFILE`` (default ``ci``):

- ``ci``: a few examples per property, the same ones every run (``derandomize``), no deadline
  (a shared CI machine's timings are not the property): the fast suite's share is about 20 s
  (the config property's 30 generated override sets and 4 command lines, beside their kept
  examples: 24 s on two shared cores, measured).
- ``soak``: 10,000 examples per property, fresh ones each run; for a measurement by hand, e.g.
  ``GNNGP_HYPOTHESIS_PROFILE=soak python -m pytest -n 0 -p no:randomly tests/cli/test_config_properties.py
  tests/data/test_custom_properties.py --hypothesis-show-statistics``.

Each property scales its ``ci`` count by its cost (:func:`examples`); ``soak`` runs every one
10,000 times.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("GNNGP_HYPOTHESIS_PROFILE", "ci")
SOAK_EXAMPLES = int(os.environ.get("GNNGP_HYPOTHESIS_EXAMPLES", 10_000))   # the soak's count (fewer for a quick look)

settings.register_profile("ci", max_examples=20, deadline=None, derandomize=True, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("soak", max_examples=SOAK_EXAMPLES, deadline=None, derandomize=False, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
if PROFILE not in ("ci", "soak"):
    raise ValueError(f"GNNGP_HYPOTHESIS_PROFILE={PROFILE!r}: use ci or soak")
settings.load_profile(PROFILE)


def examples(ci: int) -> settings:
    """The settings of a property: ``ci`` examples in the ``ci`` profile, the profile's own count in ``soak``."""
    return settings(max_examples=ci if PROFILE == "ci" else SOAK_EXAMPLES)


class Hang(AssertionError):
    """An example that ran past its time: a hang, as the property's failure."""


@contextlib.contextmanager
def within(seconds: float, what: str):
    """Fail the example with :class:`Hang` if the block runs past ``seconds`` (SIGALRM; main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise Hang(f"{what} ran past {seconds:g} s")

    before = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
