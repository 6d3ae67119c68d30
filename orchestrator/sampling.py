"""Turning cumulative counters from agents and members into one tick's rates and rows.

Pure: :class:`TickMath` keeps the previous sample and derives per-second figures from the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drivers.histogram import LatencyHistogram
from topologies.base import BrokerSample

COUNTERS = ("sent", "received", "confirmed", "errors", "reconnects", "connections")


@dataclass
class Tick:
    """What one second looked like, across every agent and member."""

    elapsed_s: float
    dt_s: float
    totals: dict[str, int]
    rates: dict[str, float]
    latency: LatencyHistogram
    member_cpu_percent: dict[str, float | None] = field(default_factory=dict)
    agent_cpu_percent: dict[int, float] = field(default_factory=dict)


class TickMath:
    """Derives per-second rates from successive cumulative samples."""

    def __init__(self) -> None:
        self.previous_totals: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.previous_elapsed: float | None = None
        self.previous_member_cpu: dict[str, float] = {}
        self.previous_agent_cpu: dict[int, float] = {}

    def step(self, elapsed_s: float, snapshots: list[dict], broker: BrokerSample,
             agent_cpu_seconds: dict[int, float]) -> Tick:
        """Fold one round of scrapes into a :class:`Tick`."""
        totals = {name: sum(int(s.get(name, 0)) for s in snapshots) for name in COUNTERS}
        dt = elapsed_s - self.previous_elapsed if self.previous_elapsed is not None else 1.0
        dt = max(dt, 1e-3)
        rates = {name: (totals[name] - self.previous_totals[name]) / dt
                 for name in ("sent", "received", "confirmed")}
        latency = LatencyHistogram()
        for snapshot in snapshots:
            if snapshot.get("latency"):
                latency.merge(LatencyHistogram.from_dict(snapshot["latency"]))
        member_cpu: dict[str, float | None] = {}
        for member in broker.members:
            now = member.cpu_seconds
            before = self.previous_member_cpu.get(member.name)
            member_cpu[member.name] = (100.0 * (now - before) / dt
                                       if now is not None and before is not None
                                       and now >= before else None)
            if now is not None:
                self.previous_member_cpu[member.name] = now
            else:
                self.previous_member_cpu.pop(member.name, None)
        agent_cpu = {index: 100.0 * (seconds - self.previous_agent_cpu.get(index, seconds)) / dt
                     for index, seconds in agent_cpu_seconds.items()}
        self.previous_agent_cpu = dict(agent_cpu_seconds)
        self.previous_totals = totals
        self.previous_elapsed = elapsed_s
        return Tick(elapsed_s, dt, totals, rates, latency, member_cpu, agent_cpu)
