"""Turning timestamped readings from agents, members, queues and hosts into one tick's figures.

Pure: no clock, no I/O. Every reading carries the time it was taken on its source's own clock
(``at``), and the controller's clock when it arrived (``seen``). A rate is always one source's
count delta over that source's own time delta; a total rate is the sum of the sources' rates,
and is unknown (``None``) when a source's reading is missing. A missing reading leaves that
source's previous reading in place, so its next rate spans the gap over the gap's true length.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drivers.protocol import Snapshot
from results.rundir.histogram import LatencyHistogram
from topologies.base import CpuReading, MemberSample

COUNTERS = ("sent", "received", "confirmed", "nacked", "skipped", "errors", "reconnects",
            "connections", "held", "senders_done", "cancels", "blocked", "blocked_s",
            "receivers_done", "unacked")
RATED = ("sent", "received", "confirmed", "skipped")
MIN_INTERVAL_S = 1e-3  # two readings closer than this give no rate
BITS_PER_BYTE = 8
CFS_PERIOD_S = 0.1  # the kernel's CPU quota period (topologies.cgroups.PERIOD_US)
IDLE_AFTER_S = 3.0  # a byte count unchanged this long is a link without traffic, not one
# whose count the broker has not refreshed yet (RabbitMQ does about once a second)


@dataclass(frozen=True)
class AgentReading:
    """One ``/snapshot`` of one agent: cumulative counters, the latency of the interval since
    its previous snapshot (and from the intended send times: ``intended``), taken at ``at``
    (the agent's monotonic clock), asked for at ``asked`` and received at ``seen`` (the
    controller's: the agent took it in between; ``asked`` ``None``: not said, take ``seen``)."""

    agent: int
    at: float
    seen: float
    counters: dict[str, float]  # whole counts, but blocked_s is in seconds
    latency: LatencyHistogram
    cpu_seconds: float | None = None  # the agent process's own CPU time at ``at``
    last_error: str = ""
    intended: LatencyHistogram = field(default_factory=LatencyHistogram)
    confirm: LatencyHistogram = field(default_factory=LatencyHistogram)  # publish to confirm
    consuming: int | None = None  # its receivers consuming now (None: its driver does not say)
    queues: tuple[str, ...] = ()  # the queues its publishing senders send to
    sending: int = 0  # its senders publishing now
    destinations: dict[str, int] = field(default_factory=dict)  # puts per destination so far
    destination_sequence: tuple[str, ...] = ()  # its first puts' destinations, in order
    asked: float | None = None

    @classmethod
    def from_snapshot(cls, agent: int, snapshot: Snapshot, seen: float,
                      asked: float | None = None) -> AgentReading:
        """From the agent's snapshot (``at`` is its ``monotonic_s``)."""
        return cls(agent, snapshot.monotonic_s, seen,
                   {name: getattr(snapshot, name) for name in COUNTERS},
                   _histogram(snapshot.latency), snapshot.cpu_seconds, snapshot.last_error,
                   _histogram(snapshot.intended_latency), _histogram(snapshot.confirm_latency),
                   snapshot.consuming, tuple(snapshot.sending_queues), snapshot.sending,
                   snapshot.destinations, tuple(snapshot.destination_sequence), asked)

    @property
    def taken_after(self) -> float:
        """A time the snapshot was certainly taken after (controller clock)."""
        return self.seen if self.asked is None else self.asked

    @property
    def taken_at(self) -> float:
        """When the snapshot was taken, as well as the controller can say: the midpoint of
        asking and receiving it, as every reading of a tick is stamped."""
        return self.seen if self.asked is None else (self.asked + self.seen) / 2


def _histogram(data: dict[str, Any]) -> LatencyHistogram:
    """A snapshot's histogram (empty when the snapshot has none)."""
    return LatencyHistogram.from_dict(data) if data else LatencyHistogram()


@dataclass(frozen=True)
class DepthReading:
    """Ready messages per queue, read from the queues themselves at ``at`` (controller clock)."""

    ready: dict[str, int]
    at: float


@dataclass
class Tick:
    """One second across every source; ``None`` wherever a source did not answer."""

    elapsed_s: float
    totals: dict[str, int]
    rates: dict[str, float | None]
    latency: LatencyHistogram
    agents_missing: int = 0
    intended: LatencyHistogram = field(default_factory=LatencyHistogram)  # from intended times
    confirm: LatencyHistogram = field(default_factory=LatencyHistogram)  # publish to confirm
    member_cpu_percent: dict[str, float | None] = field(default_factory=dict)
    member_cpu_interval_s: dict[str, float | None] = field(default_factory=dict)
    agent_cpu_percent: dict[int, float | None] = field(default_factory=dict)
    host_cpu_percent: dict[str, float | None] = field(default_factory=dict)
    host_cpu_interval_s: dict[str, float | None] = field(default_factory=dict)
    host_cores_busy: dict[str, float | None] = field(default_factory=dict)
    # each member's client traffic (Mb/s) in and out since its previous reading
    member_network_mbps: dict[str, tuple[float | None, float | None]] = field(
        default_factory=dict)
    # the clients of the live agents (a lost agent's are gone), by each one's latest reading
    sending: int = 0  # senders publishing
    consuming: int | None = None  # receivers consuming (None: an agent does not say)
    queues_in_use: int = 0  # distinct queues the publishing senders send to


def destinations(readings: Mapping[int, AgentReading]) -> dict[str, Any]:
    """The manifest's ``destinations`` (puts per destination, over every agent's latest
    reading) and ``destination_sequence`` (the lowest-numbered agent's first puts, in
    order); nothing where no driver said where its puts went."""
    counts: Counter[str] = Counter()
    for reading in readings.values():
        counts.update(reading.destinations)
    if not counts:
        return {}
    sequence = next((list(r.destination_sequence) for _, r in sorted(readings.items())
                     if r.destination_sequence), [])
    return {"destinations": dict(sorted(counts.items())), "destination_sequence": sequence}


def rate(previous: float | None, previous_at: float | None, now: float, at: float
         ) -> tuple[float | None, float | None]:
    """``(delta / interval, interval)`` of a cumulative count on one clock; ``(None, None)``
    when there is no earlier reading, the interval is too short or the count went back (a
    restart)."""
    if previous is None or previous_at is None:
        return None, None
    interval = at - previous_at
    if interval < MIN_INTERVAL_S or now < previous:
        return None, None
    return (now - previous) / interval, interval


class TickMath:
    """Keeps each source's previous reading and derives the next tick's figures from it."""

    def __init__(self) -> None:
        self.agents: dict[int, AgentReading] = {}
        self.members: dict[str, CpuReading] = {}
        self.hosts: dict[str, CpuReading] = {}
        self.spill: dict[str, float] = {}  # member: CPU-seconds moved to its next interval
        # member: (when it last changed, bytes) in, then out
        self.network: dict[str, tuple[tuple[float, int], tuple[float, int]]] = {}

    def step(self, elapsed_s: float, agents: dict[int, AgentReading | None],
             members: list[MemberSample] | None = None,
             hosts: dict[str, CpuReading | None] | None = None) -> Tick:
        """Fold one tick's readings (``None``: that source missed the tick's deadline)."""
        rates: dict[str, float | None] = dict.fromkeys(RATED, 0.0)
        latency, intended, confirm = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
        agent_cpu: dict[int, float | None] = {}
        arrived = [r for r in agents.values() if r is not None]
        for index, reading in agents.items():
            before = self.agents.get(index)
            if reading is None:
                rates = dict.fromkeys(RATED)
                agent_cpu[index] = None
                continue
            latency.merge(reading.latency)
            intended.merge(reading.intended)
            confirm.merge(reading.confirm)
            for name in RATED:
                value, _ = rate(before.counters[name] if before else None,
                                before.at if before else None, reading.counters[name],
                                reading.at)
                rates[name] = None if value is None or rates[name] is None \
                    else rates[name] + value
            cpu = None
            if before is not None and None not in (before.cpu_seconds, reading.cpu_seconds):
                cpu, _ = rate(before.cpu_seconds, before.at, reading.cpu_seconds, reading.at)
            agent_cpu[index] = None if cpu is None else 100.0 * cpu
            self.agents[index] = reading
        totals = {name: sum(r.counters[name] for r in self.agents.values())
                  for name in COUNTERS}
        live = [self.agents[i] for i in agents if i in self.agents]
        consuming = [r.consuming for r in live]
        tick = Tick(elapsed_s, totals, rates, latency,
                    agents_missing=len(agents) - len(arrived), agent_cpu_percent=agent_cpu,
                    intended=intended, confirm=confirm, sending=sum(r.sending for r in live),
                    consuming=None if None in consuming else sum(consuming),
                    queues_in_use=len({q for r in live for q in r.queues}))
        for member in members or []:
            percent, interval = self._cpu(self.members, member.name,
                                          member.cpu if member.running else None)
            tick.member_cpu_percent[member.name] = self._within_quota(
                member.name, percent, interval, member.cpu_quota_cores)
            tick.member_cpu_interval_s[member.name] = interval
            tick.member_network_mbps[member.name] = self._network(member, elapsed_s)
        for name, reading in (hosts or {}).items():
            before = self.hosts.get(name)
            percent, interval = self._cpu(self.hosts, name, reading)
            tick.host_cpu_percent[name] = percent
            tick.host_cpu_interval_s[name] = interval
            tick.host_cores_busy[name] = None if percent is None or not interval or \
                before is None or reading is None else \
                (reading.seconds - before.seconds) / interval
        return tick

    def _network(self, member: MemberSample, now: float) -> tuple[float | None, float | None]:
        """A member's client traffic in and out (Mb/s), each way since its count last changed
        (a missed reading is spanned). The broker refreshes its counts about once a second,
        not when they are read: a count that has not moved is not a second without traffic
        but one not refreshed yet, unknown until it moves (then its rate spans the seconds
        since) or stays put for :data:`IDLE_AFTER_S` (then it is 0). Unknown too for the
        member's first reading, while it is stopped, and where a count fell (a connection
        closed and took its bytes with it)."""
        figures = member.resources
        if not member.running or figures is None or figures.network_in_bytes is None \
                or figures.network_out_bytes is None:
            return None, None
        before = self.network.get(member.name)
        into, out = (_traffic(None if before is None else before[way], count, now)
                     for way, count in enumerate((figures.network_in_bytes,
                                                  figures.network_out_bytes)))
        self.network[member.name] = (into[1], out[1])
        return into[0], out[0]

    def _within_quota(self, name: str, percent: float | None, interval: float | None,
                      quota: float | None) -> float | None:
        """A capped member's CPU% over one reading's interval, with what the quota's periods
        straddling the interval's edges let through moved to the next interval. The kernel
        grants the quota per 100 ms period, so a window of one second that takes in a period
        more than it lasts reads up to ``quota * period`` seconds over the quota: no more
        CPU was used than allowed, it fell on the other side of a read. That much, at most,
        goes to the next interval (the total is kept); anything beyond it is shown as read
        (a quota not in force)."""
        if percent is None or not interval or quota is None:
            self.spill.pop(name, None)
            return percent
        busy = percent / 100 * interval + self.spill.get(name, 0.0)
        spill = min(max(0.0, busy - quota * interval), quota * CFS_PERIOD_S)
        self.spill[name] = spill
        return 100 * (busy - spill) / interval

    @staticmethod
    def _cpu(previous: dict[str, CpuReading], name: str, reading: CpuReading | None
             ) -> tuple[float | None, float | None]:
        """CPU% over the reading's own interval: of one core for members (100 = one core),
        of the whole host where the reading gives its capacity. A missing reading keeps the
        previous one, so the next rate spans the gap over its true length."""
        if reading is None:
            return None, None
        before = previous.get(name)
        previous[name] = reading
        if before is None:
            return None, None
        if reading.capacity is not None and before.capacity is not None:
            capacity = reading.capacity - before.capacity
            busy = reading.seconds - before.seconds
            if capacity <= 0 or busy < 0:
                return None, None
            return 100.0 * busy / capacity, reading.at - before.at
        value, interval = rate(before.seconds, before.at, reading.seconds, reading.at)
        return (None, None) if value is None else (100.0 * value, interval)


def quantiles(values: list[float]) -> dict[str, float | int | None]:
    """``count``, ``p50``, ``p99`` and ``max`` of ``values`` (nearest rank; ``None`` when
    there are none)."""
    ordered = sorted(values)
    if not ordered:
        return {"count": 0, "p50": None, "p99": None, "max": None}

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    return {"count": len(ordered), "p50": rank(0.50), "p99": rank(0.99), "max": ordered[-1]}


@dataclass
class Timeliness:
    """How late the ticks fired against their one-second grid, how many whole seconds were
    skipped because a tick ran over, how old the queue-depth readings were, and how much CPU
    the controller's own process used while it ticked through the load."""

    lateness_s: list[float] = field(default_factory=list)
    depth_age_s: list[float] = field(default_factory=list)
    skipped: int = 0
    cpu_s: float | None = None  # the controller process's CPU seconds over the load ...
    wall_s: float | None = None  # ... and the seconds it took (controller clock)

    def add(self, lateness_s: float, depth_age_s: float | None) -> None:
        """Note one tick."""
        self.lateness_s.append(lateness_s)
        if depth_age_s is not None:
            self.depth_age_s.append(depth_age_s)

    def spent(self, cpu_s: float, wall_s: float) -> None:
        """Note the controller process's CPU seconds over ``wall_s`` seconds of load."""
        self.cpu_s, self.wall_s = cpu_s, wall_s

    def cpu_percent(self) -> float | None:
        """The controller process's CPU over the load, in % of one core (``None``: unknown)."""
        if self.cpu_s is None or not self.wall_s or self.wall_s <= 0:
            return None
        return 100.0 * self.cpu_s / self.wall_s

    def summary(self) -> dict[str, Any]:
        """For ``run.json``: lateness and depth age as quantiles, in seconds, and the
        controller's CPU over the load."""
        return {"tick_lateness_s": quantiles(self.lateness_s), "ticks_skipped": self.skipped,
                "depth_age_s": quantiles(self.depth_age_s),
                "controller_cpu_percent": self.cpu_percent(), "load_s": self.wall_s}


def _traffic(before: tuple[float, int] | None, count: int, now: float
             ) -> tuple[float | None, tuple[float, int]]:
    """One way of a member's traffic: Mb/s since ``before`` (when the count last changed, and
    to what) and what to keep as the last change (see :meth:`TickMath._network`)."""
    if before is None:
        return None, (now, count)
    changed_at, earlier = before
    if count == earlier and now - changed_at < IDLE_AFTER_S:
        return None, before
    per_s = rate(earlier, changed_at, count, now)[0]
    return (None if per_s is None else per_s * BITS_PER_BYTE / 1e6), (now, count)
