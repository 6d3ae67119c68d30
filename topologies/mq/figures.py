"""A queue manager's figures over time, from the scrapes of its ``mq_prometheus`` exporter.

The exporter has a new CPU figure and new MQI counts only after the queue manager published its
resource statistics, every ``statistics_interval`` seconds (``MonitorPublishHeartBeat``); the
scrapes in between carry none (see :mod:`topologies.mq.metrics`). So:

- A CPU figure is given once, on the tick that first shows it, as a cumulative reading whose
  interval is the real time since the previous figure (about one statistics interval: the rows'
  ``cpu_interval_s``), with ``cpu_age_s`` the most it can be old (the time since the scrape
  before, which had not seen it). Between figures the CPU is unknown, never the last figure
  again (that would count it once a second in every CPU-second sum).
- A figure that arrives longer than ``FRESH_FACTOR`` statistics intervals after the previous
  one (a publication missed: the exporter or the scrape was down) covers only its own
  interval, not the gap: it starts a new series and its own tick says unknown (the cumulative
  reading goes back to zero, which :class:`~orchestrator.run.sampling.TickMath` takes as a
  restart).
- MQPUT/MQPUT1 and destructive MQGET counts are the deltas of the publications each scrape
  processed, summed into cumulative ``messages_in``/``messages_out`` from surge's first read of
  the exporter on (publications wait on the exporter's queue while a scrape fails, so a failed
  scrape delays counts rather than losing them).
- Connections come from the exporter's status poll at every scrape.

Nothing here reads a clock: every call is given ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.base import CpuReading
from topologies.mq.metrics import ExporterReading

FRESH_FACTOR = 1.5  # consecutive figures further apart than this many intervals break a series
SCRAPE_SLACK_S = 1.0  # plus one tick: a figure may be seen a scrape late


@dataclass(frozen=True)
class Figures:
    """One tick's figures of one queue manager (``None``: unknown this tick)."""

    cpu: CpuReading | None = None
    cpu_age_s: float | None = None
    connections: int | None = None
    messages_in: int | None = None
    messages_out: int | None = None


class PublishedFigures:
    """Keeps one queue manager's figures between scrapes (see the module docstring)."""

    def __init__(self, interval_s: float, host_cpus: int | None):
        self.interval_s = interval_s
        self.host_cpus = host_cpus
        self.busy_s = 0.0  # CPU-seconds of one core over ``covered_s`` of the current series
        self.covered_s = 0.0
        self.figure_at: float | None = None  # when the latest CPU figure arrived
        self.scraped_at: float | None = None  # the latest scrape that answered
        self.messages_in = 0
        self.messages_out = 0
        self.counting = False  # the latest publication carried both counts

    @property
    def fresh_for_s(self) -> float:
        """Longest time between two figures of one series."""
        return self.interval_s * FRESH_FACTOR + SCRAPE_SLACK_S

    def observe(self, reading: ExporterReading | None, now: float) -> Figures:
        """Fold one scrape taken at ``now`` (``None``: the exporter did not answer)."""
        if reading is None:
            return Figures()
        previous_scrape, self.scraped_at = self.scraped_at, now
        if reading.published:
            self.counting = None not in (reading.qmgr_puts, reading.qmgr_gets)
            self.messages_in += reading.qmgr_puts or 0
            self.messages_out += reading.qmgr_gets or 0
        cpu, age = self._cpu(reading, now, previous_scrape)
        return Figures(cpu, age, reading.connections,
                       self.messages_in if self.counting else None,
                       self.messages_out if self.counting else None)

    def _cpu(self, reading: ExporterReading, now: float, previous_scrape: float | None
             ) -> tuple[CpuReading | None, float | None]:
        percent = reading.cpu_percent_of_core(self.host_cpus) if reading.published else None
        if percent is None:
            return None, None
        gap = None if self.figure_at is None else now - self.figure_at
        self.figure_at = now
        if gap is None or gap > self.fresh_for_s:  # the first figure, or one after a gap
            self.busy_s = self.covered_s = 0.0
        else:
            self.busy_s += percent / 100 * gap
            self.covered_s += gap
        age = self.interval_s if previous_scrape is None else \
            min(now - previous_scrape, self.interval_s)
        return CpuReading(self.busy_s, now, capacity=self.covered_s), age
