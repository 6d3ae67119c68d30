"""A broker host's CPU read over SSH: busy and total CPU time of the whole host from
``/proc/stat``, timed by the host's own uptime (one short command per host), in the tick or
in the background (:class:`LatestReadings`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from topologies.base import CpuReading

HOST_CPU_COMMAND = "getconf CLK_TCK; cut -d' ' -f1 /proc/uptime; head -1 /proc/stat"
"""Prints the clock ticks per second, the uptime (s) and the ``cpu`` line, in that order; a
command may print more after them."""


def parse_host_cpu(lines: list[str]) -> tuple[CpuReading, int, float]:
    """The host's reading from :data:`HOST_CPU_COMMAND`'s first three lines (busy and total
    seconds of all cores, at its uptime), its clock ticks per second and that uptime; a
    ValueError or IndexError for output that is not that."""
    ticks, at = int(lines[0]), float(lines[1])
    fields = [int(v) for v in lines[2].split()[1:9]]  # user .. steal
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return CpuReading((sum(fields) - idle) / ticks, at, sum(fields) / ticks), ticks, at


class LatestReadings:
    """Hosts' CPU read in the background, one read at a time, so a slow SSH answer never
    holds up the tick that asks: :meth:`latest` starts the next read when none is under way
    and returns the newest readings that arrived (each stamped with its host's own time, so a
    rate over two of them is over their true interval; the same reading twice gives none)."""

    def __init__(self, read: Callable[[], dict[str, CpuReading | None]]):
        self._read = read
        self._latest: dict[str, CpuReading | None] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def latest(self) -> dict[str, CpuReading | None]:
        """The newest readings (empty before the first arrives); starts the next read."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._take, name="host-cpu", daemon=True)
            self._thread.start()
        with self._lock:
            return dict(self._latest)

    def _take(self) -> None:
        readings = self._read()
        with self._lock:
            self._latest = readings
