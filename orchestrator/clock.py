"""The time a run keeps: one interface for the real clock and the fake one tests drive.

The run loop, the scaler and the collector never call :mod:`time` themselves; they are given a
:class:`Clock`, so a test runs a minute-long plan in milliseconds and decides exactly when
every reading arrives (kopf's ``looptime`` is the model).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time for intervals, wall time for records, and waiting."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (intervals, deadlines)."""

    def time(self) -> float:
        """Seconds since the epoch (what rows are stamped with)."""

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Wait ``seconds``, or until ``stop`` is set."""


class SystemClock:
    """The machine's clocks."""

    def monotonic(self) -> float:
        """:func:`time.monotonic`."""
        return time.monotonic()

    def time(self) -> float:
        """:func:`time.time`."""
        return time.time()

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Sleep, waking early when ``stop`` is set."""
        if seconds <= 0:
            return
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)


SYSTEM_CLOCK = SystemClock()
