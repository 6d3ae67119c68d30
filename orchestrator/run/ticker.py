"""One second of a run read: every source asked at once (each agent, the broker, each member
where members answer for themselves, the queues' depth, this host's CPU) until the tick's
deadline, folded into figures and rows as one :class:`~orchestrator.run.listeners.TickRecord`.
Also the run's grid of seconds: when the next tick is due, and how late each one was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.agents.client import AgentClient
from orchestrator.clock import Clock
from orchestrator.run import rows
from orchestrator.run.collector import Collector, Failed
from orchestrator.run.crew import Crew
from orchestrator.run.depth import QueueDepth
from orchestrator.run.listeners import TickRecord
from orchestrator.run.sampling import AgentReading, Tick, TickMath, Timeliness
from orchestrator.specs import plan as plans
from results.rundir.tables import CONTROLLER_HOST
from topologies.base import BrokerSample, CpuReading, MemberSample, Provisioner

TICK_DEADLINE_S = 0.8  # readings not in by then are missing for this second
SCRAPE_TIMEOUT_S = 5.0  # an agent's snapshot that takes longer fails (the tick has moved on)


class Ticker:
    """Reads the run's sources once a tick; ``t0`` is the load's start (controller clock)."""

    def __init__(self, provisioner: Provisioner, members: int, crew: Crew, depth: QueueDepth,
                 clock: Clock, host_cpu: Callable[[], CpuReading], event: Callable[..., None],
                 copies: int | None = 1, network_link_mbps: float | None = None):
        self.provisioner, self.members, self.crew, self.depth = provisioner, members, crew, depth
        self.copies = copies  # queues each message reaches (None: not the same for all)
        self.network_link_mbps = network_link_mbps  # each member's link, each way (Mb/s)
        self.clock, self.host_cpu, self.event = clock, host_cpu, event
        self.math = TickMath()
        self.lateness = Timeliness()
        self.broker: BrokerSample | None = None  # the latest sample that arrived
        self.tick_broker: BrokerSample | None = None  # this tick's sample (None: missed)
        self.tick_members: list[MemberSample] = []  # this tick's view of each member
        self.t0 = 0.0
        self.sampler: Collector

    def start(self) -> None:
        """Start the clock of the load and take the first readings (no rates yet)."""
        self.t0 = self.crew.t0 = self.clock.monotonic()
        self.sampler = self._sampler()
        self.sampler.start()
        self._fold(self.sampler.collect(self.t0 + TICK_DEADLINE_S))

    def record(self, planned: float, started: float, phase: plans.Phase | None, label: str,
               target: Callable[[plans.Phase, float], float]) -> TickRecord:
        """Collect the tick's readings (until its deadline) into one record; ``target`` is
        the total rate asked for in ``phase`` at a second of the load."""
        tick = self._fold(self.sampler.collect(planned + TICK_DEADLINE_S))
        elapsed, lateness = started - self.t0, started - planned
        rate = target(phase, elapsed) if phase else 0.0
        running = sum(1 for m in self.broker.members if m.running) if self.broker else 0
        depth, age = self.depth.now(self.tick_broker,
                                    [self.math.agents.get(a.index) for a in self.crew.live])
        self.lateness.add(lateness, age)
        stamped = rows.stamp(self.clock.time(), elapsed, phase.index if phase else 0)
        row = rows.tick_row(stamped, tick, lateness_s=lateness, target_rate=rate,
                            members_running=running, queue_depth=depth, depth_age_s=age,
                            read_span_s=self._read_span(),
                            broker_missing=self.tick_broker is None,
                            agents_lost=len(self.crew.watch.lost), copies=self.copies)
        return TickRecord(
            elapsed, phase, label, tick, row,
            rows.member_rows(stamped, self.tick_members, tick, self.network_link_mbps),
            rows.host_rows(stamped, tick),
            rows.agent_rows(stamped, self.math.agents, started, tick), self.tick_broker,
            self.broker, {i: r.last_error for i, r in self.math.agents.items() if r.last_error})

    def next_tick(self, previous: float, stop: Any | None) -> float:
        """Sleep until the next whole second after ``previous`` on the run's grid (``stop``,
        an event, wakes it at once); a tick that is more than a second late skips the seconds
        it missed rather than firing at once."""
        planned = previous + 1.0
        now = self.clock.monotonic()
        if now > planned + 1.0:
            missed = int(now - planned)
            self.lateness.skipped += missed
            planned += missed
        self.clock.sleep(planned - self.clock.monotonic(), stop)
        return planned

    def _read_span(self) -> float | None:
        """Seconds between the first and the last of this tick's agent and depth readings
        (controller clock): how far apart in time the figures of one row were taken."""
        times = [r.seen for r in self.math.agents.values()]
        depth_at = self.depth.fresh_at()
        if depth_at is not None:
            times.append(depth_at)
        return max(times) - min(times) if times else None

    def _sampler(self) -> Collector:
        """Every source of one tick, read at once: each agent, the broker, each member's own
        figures where members answer for themselves, the queues' depth (exact, from the queues
        themselves where the broker allows it) and this host's CPU."""
        sources: dict[str, Any] = {f"agent:{agent.index}": lambda agent=agent: self._read(agent)
                                   for agent in self.crew.agents}
        sources["broker"] = self.provisioner.sample
        if self.provisioner.asks_members:
            stats = self.provisioner.member_stats
            sources.update({f"stats:{i}": lambda i=i: stats(self.provisioner.member(i))
                            for i in range(self.members)})
        sources["host"] = self.host_cpu
        depth = self.depth.open(self.members)
        if depth is not None:
            sources["depth"] = depth
        return Collector(sources, clock=self.clock.monotonic)

    def _read(self, agent: AgentClient) -> AgentReading | None:
        """One agent's snapshot as a reading, remembered as its last good one (a lost agent is
        not asked)."""
        if agent.index in self.crew.watch.lost:
            return None
        asked = self.clock.monotonic()
        snapshot = agent.snapshot(timeout_s=SCRAPE_TIMEOUT_S)
        seen = self.clock.monotonic()
        self.crew.watch.seen(agent.index, snapshot, seen - self.t0)
        return AgentReading.from_snapshot(agent.index, snapshot, seen, asked)

    def _fold(self, results: dict[str, Any]) -> Tick:
        """Turn one tick's collected results into figures (missing and failed reads as
        ``None``; lost agents left out, their last counters kept), keeping the broker sample
        and depth that arrived for the rows."""
        self.crew.lose(self.crew.watch.observe(self.crew.live, results, self.crew.elapsed_s()))
        agents = {a.index: _ok(results.get(f"agent:{a.index}")) for a in self.crew.live}
        broker = _ok(results.get("broker"))
        self.tick_broker = broker
        if broker is not None:
            self.broker = broker
        self.tick_members = self._members_now(broker, results)
        host = _ok(results.get("host"))
        hosts = {CONTROLLER_HOST: host, **(broker.hosts if broker else {})}
        return self.math.step(self.clock.monotonic() - self.t0, agents, self.tick_members,
                              hosts)

    def _members_now(self, broker: BrokerSample | None, results: dict[str, Any]
                     ) -> list[MemberSample]:
        """Each member as this tick saw it: from this tick's broker sample (or, if it missed,
        the last one's running flags with every figure unknown), with the figures each member
        gave of itself this tick where the provisioner asks members one by one; the queue
        depth gets this tick's queue reading."""
        if broker is not None:
            members = broker.members
        elif self.broker is not None:
            members = [MemberSample(m.name, m.running, None, m.cpu_quota_cores)
                       for m in self.broker.members]
        else:
            members = []
        own = any(key.startswith("stats:") for key in self.sampler.sources)
        stats = {m.name: _ok(results.get(f"stats:{i}")) if m.running else None
                 for i, m in enumerate(members)} if own else {}
        self.depth.fold(_ok(results.get("depth")))
        return [m.with_stats(stats.get(m.name)) for m in members] if own else members


def _ok(result: Any) -> Any:
    """A collected result, or ``None`` for a read that failed or has not arrived."""
    return None if result is None or isinstance(result, Failed) else result
