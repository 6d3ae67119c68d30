"""The run loop: provision, start agents, tick once a second through the plan, drain, account.

Everything a run starts is stopped in ``finally`` blocks; a first Ctrl-C ends the run early but
cleanly (senders stop, queues drain briefly, accounting is written), a second one forces.
"""

from __future__ import annotations

import base64
import math
import os
import platform
import secrets
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from drivers.accounting import Reconciliation, merge_exports, reconcile
from drivers.depth import depth_probe
from orchestrator.agents.local import AgentHandle, spawn_local_agents
from orchestrator.errors import AgentError, SurgeError
from orchestrator.run.collector import Collector, Failed
from orchestrator.run.exposition import ControllerMetrics
from orchestrator.run.faults import FaultInjector
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.run.sampling import AgentReading, DepthReading, Tick, TickMath, Timeliness
from orchestrator.scaling.policy import Observation
from orchestrator.scaling.scaler import Scaler
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec, TopologySpec
from results import timeline
from results.rundir.steps import StepRow, drain_row, step_rows
from results.rundir.tables import CONTROLLER_HOST, RunWriter, new_run_id
from topologies.base import BrokerSample, CpuReading, MemberSample, MemberStats
from topologies.factory import provisioner_for

CLOCK_TOLERANCE_MS = 2.0  # host clocks possibly further apart: cross-host latency is unreliable
TICK_DEADLINE_S = 0.8  # readings not in by then are missing for this second
SCRAPE_TIMEOUT_S = 5.0  # an agent's snapshot that takes longer fails (the tick has moved on)
MAX_DEPTH_AGE_S = 1.0  # an older queue or member reading makes the depth unknown
SETTLE_READS, SETTLE_PAUSE_S = 5, 0.5  # final depth: read until two reads agree
AGENT_FAILURES = 3  # consecutive failed reads that make an agent lost


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    outcome: str
    steps: list[StepRow]
    accounting: Reconciliation | None
    drain: StepRow | None = None


class Controller:
    """Drives one scenario on one topology and records it into a run directory."""

    def __init__(self, scenario: ScenarioSpec, topology: TopologySpec, runs_dir: Path,
                 live: bool = True, keep_topology: bool = False, metrics_port: int = 0,
                 run_id: str | None = None):
        self.scenario = scenario
        self.topology = topology
        self.run_id = run_id or new_run_id(scenario.name)
        self.run_dir = runs_dir / self.run_id
        self.writer = RunWriter(self.run_dir)
        self.view = LiveView(enabled=live)
        self.keep_topology = keep_topology
        self.metrics_port = metrics_port
        self.provisioner = provisioner_for(topology, record=self._remote_command)
        self.phases = plans.expand(scenario.plan)
        self.delays = plans.delay_phases(scenario.consumer_profile)
        self.applied: dict[str, Any] = {}
        self.agents: list[AgentHandle] = []
        self.sessions: list = []  # SSH sessions to load hosts, closed after the agents
        self.token = secrets.token_urlsafe(24)
        self.stop_requested = threading.Event()
        self.state = ViewState(scenario=scenario.name, run_id=self.run_id,
                               steps=len(self.phases), planned_s=plans.duration(self.phases))
        self.ticks: list[dict] = []
        self.member_rows: list[dict] = []
        self.host_rows: list[dict] = []
        self.manifest: dict[str, Any] = {}
        self.math = TickMath()
        self.lateness = Timeliness()
        self.broker: BrokerSample | None = None
        self.depth: DepthReading | None = None
        self.tick_broker: BrokerSample | None = None  # this tick's sample (None: missed)
        self.tick_members: list[MemberSample] = []  # this tick's view of each member
        self.agent_failures: dict[int, int] = {}
        self.member_stats: dict[str, MemberStats] = {}  # each member's latest own figures
        self.depth_probe = None
        self.queue_spec = topology.queue(scenario.workload.queue)
        scaling = scenario.scaling
        self.scaler = Scaler(
            scaling, self.provisioner, self.queue_spec,
            pool=min(scaling.pool or topology.members, topology.members),
            minimum=topology.start, event=self._event, ready=self._ready_in) if scaling else None
        self.faults = FaultInjector(scenario.faults, self.phases, self.provisioner, self._event,
                                    self.stop_requested)

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Run the scenario to the end (or to Ctrl-C); always leaves a readable run directory."""
        previous = signal.signal(signal.SIGINT, self._interrupt) \
            if threading.current_thread() is threading.main_thread() else None
        outcome, accounting, steps, drain = "failed", None, [], None
        started_topology = not any(m.running for m in self.provisioner.status())
        metrics = None
        self._write_manifest(outcome="running")
        try:
            with self.view:
                metrics = ControllerMetrics(self.metrics_port)
                self.state.metrics_url = metrics.url
                self._event("provision", topology=self.topology.name,
                            members=f"{self.topology.start} of {self.topology.members}")
                members = self.provisioner.up()
                self._event("members_up", members=[m.name for m in members if m.running])
                self._start_agents([m for m in members if m.running])
                self._tick_through_plan(metrics)
                accounting = self._finish(metrics)
                outcome = "interrupted" if self.stop_requested.is_set() else "completed"
                phases = [asdict(p) for p in self.phases]
                steps = step_rows(phases, self.ticks, self.member_rows,
                                  self.scenario.measure.settle, self.host_rows)
                drain = drain_row(phases, self.ticks, self.member_rows, self.host_rows)
                if drain is not None:
                    self.manifest["drain"] = asdict(drain)
                if self.scenario.faults:
                    self.manifest["faults"] = timeline.fault_recoveries(
                        timeline.read_events(self.run_dir), self.ticks)
        except KeyboardInterrupt:
            outcome = "aborted"
            raise
        except SurgeError as error:
            self._event("error", error=str(error))
            raise
        finally:
            self._stop_agents()
            if metrics:
                metrics.close()
            if started_topology and not self.keep_topology:
                self._event("teardown", said=self.provisioner.down())
            self.writer.flush()
            self._write_manifest(outcome=outcome, accounting=accounting, steps=steps)
            self.writer.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return RunResult(self.run_dir, outcome, steps, accounting, drain)

    def _interrupt(self, signum, frame) -> None:
        if self.stop_requested.is_set():
            raise KeyboardInterrupt
        self.stop_requested.set()
        self.view.say("[yellow]stopping: senders stop, queues drain; Ctrl-C again to force[/]")

    # -- agents -----------------------------------------------------------------------------

    def _start_agents(self, members) -> None:
        workload = self.scenario.workload
        placement = self.scenario.agents_on
        if placement.senders:
            by_role = self._spawn_remote_agents(placement.senders, placement.receivers)
        elif placement.pods:
            from orchestrator.agents.pods import start_agent_pods
            self.agents = start_agent_pods(placement.pods, self.topology, self.run_id,
                                           self.token, self.state.planned_s + 3600)
            by_role = {"s": self.agents, "r": self.agents}
        else:
            count = self.scenario.agents or os.cpu_count() or 1
            count = max(1, min(count, workload.senders + workload.receivers))
            self.agents = spawn_local_agents(count, self.run_dir / "agents",
                                             max_lifetime_s=self.state.planned_s + 3600)
            by_role = {"s": self.agents, "r": self.agents}
        self._event("agents_up", count=len(self.agents),
                    agents=[{"index": a.index, "host": a.host, "port": a.port,
                             "pid": a.process.pid if a.process else None}
                            for a in self.agents])
        endpoints = [m.endpoint for m in members]
        queue = self.queue_spec
        first = self.phases[0]
        configs = [{"broker": self.topology.broker, "pattern": workload.pattern,
                    "message_size": workload.message.size, "in_flight": workload.in_flight,
                    "destination": {"endpoints": endpoints, "queue": workload.queue,
                                    "persistent": workload.message.persistent,
                                    "confirms": workload.confirms, "prefetch": workload.prefetch,
                                    "manual_ack": workload.ack == "manual",
                                    "reply_size": workload.reply_size or workload.message.size,
                                    "reply_timeout_s": workload.reply_timeout,
                                    "unit_of_work": workload.unit_of_work,
                                    **_mq_destination(self.topology)},
                    "senders": [], "receivers": []} for _ in self.agents]
        for kind, total in (("r", workload.receivers), ("s", workload.senders)):
            for i in range(total):
                hosting = by_role[kind]
                agent, member = hosting[i % len(hosting)], members[i % len(members)]
                slot = i * queue.count // total  # blocks: a sweep adds whole queues' workers
                worker = {"endpoint": member.endpoint, "queue": queue.instance(member.index, slot)}
                if kind == "s" and workload.bind == "not-fixed":
                    worker["queue"] = [queue.instance(m.index, slot)
                                       for m in members] if queue.per_member else queue.names
                if kind == "s":
                    worker.update(producer_id=i + 1, rate=first.rate_at(0.0),
                                  limit=self.scenario.exit.messages_per_sender,
                                  start_delay_s=workload.start_delay)
                else:
                    worker.update(id=i + 1)
                configs[agent.index]["senders" if kind == "s" else "receivers"].append(worker)
                if self.scaler:
                    self.scaler.place((kind, i + 1), agent, member.index)
        self._all(lambda agent: agent.call("POST", "/configure", configs[agent.index]))
        self.state.step = 1
        self._apply(0.0, first)
        self._event("step", step=1, rate_per_sender=first.rate_per_sender,
                    senders=self._active(first), target_rate=self._target(first, 0.0))

    def _spawn_remote_agents(self, sender_hosts: list[str], receiver_hosts: list[str]
                             ) -> dict[str, list[AgentHandle]]:
        """Start agents on the load hosts over SSH; senders' agents on their hosts, receivers'
        on theirs. Measures each host's clock against ours: latency between two hosts is only
        as good as their clocks agree, and the run says so."""
        from orchestrator.agents.ssh import clock_offset, spawn_ssh_agents
        from topologies.ssh import SshSession
        hosts = {h.name: h for h in self.topology.hosts}
        by_host: dict[str, list[AgentHandle]] = {}
        clocks = {}
        for name in dict.fromkeys(sender_hosts + receiver_hosts):
            host = hosts[name]
            session = SshSession(host.target, host.ssh, record=self._remote_command)
            self.sessions.append(session)
            by_host[name] = spawn_ssh_agents(session, host, len(self.agents), self.token,
                                             self.state.planned_s + 3600)
            self.agents += by_host[name]
            offset, uncertainty = clock_offset(by_host[name][0])
            clocks[name] = {"offset_ms": round(offset, 3), "uncertainty_ms": round(uncertainty, 3)}
        spread = max(c["offset_ms"] for c in clocks.values()) - \
            min(c["offset_ms"] for c in clocks.values())
        worst = max(c["uncertainty_ms"] for c in clocks.values())
        bound = 0.0 if len(clocks) == 1 else spread + 2 * worst
        reliable = bound <= CLOCK_TOLERANCE_MS
        self.manifest["clocks"] = {"hosts": clocks, "latency_error_bound_ms": round(bound, 3),
                                   "latency_reliable": reliable}
        self._event("clocks", hosts=clocks, latency_error_bound_ms=round(bound, 3),
                    latency_reliable=reliable,
                    explain=f"host clocks agree within {bound:.1f} ms" if reliable else
                    f"host clocks may differ by {bound:.1f} ms: latency across hosts is "
                    f"unreliable")
        return {"s": [a for n in sender_hosts for a in by_host[n]],
                "r": [a for n in receiver_hosts for a in by_host[n]]}

    def _all(self, function) -> list:
        with ThreadPoolExecutor(max(1, len(self.agents))) as pool:
            return list(pool.map(function, self.agents))

    def _stop_agents(self) -> None:
        if self.agents and self.scenario.agents_on.pods:
            from orchestrator.agents.pods import stop_agent_pods
            said = stop_agent_pods(self.agents, self.topology, self.run_id)
            self._event("agents_down", agents=len(self.agents), deleted=said)
        elif self.agents:
            self._all(lambda agent: agent.stop())
            self._event("agents_down", agents=len(self.agents))
        for session in self.sessions:
            session.close()

    # -- ticking ----------------------------------------------------------------------------

    def _tick_through_plan(self, metrics: ControllerMetrics) -> None:
        self.t0 = time.monotonic()
        self.sampler = self._sampler()
        self.sampler.start()
        self._fold(self.sampler.collect(self.t0 + TICK_DEADLINE_S))  # first readings: no rates
        current = self.phases[0]
        planned = self.t0
        while not self.stop_requested.is_set():
            planned = self._next_tick(planned)
            started = time.monotonic()
            self.sampler.start()
            elapsed = started - self.t0
            phase = plans.phase_at(self.phases, elapsed)
            if phase is None:
                break
            self.faults.tick(elapsed)
            self._apply(elapsed, phase)
            if phase.index != current.index:
                current = phase
                self._event("step", step=phase.index, rate_per_sender=phase.rate_per_sender,
                            senders=self._active(phase), target_rate=self._target(phase, elapsed))
            self._record(planned, started, current, metrics, "running")
            if self._exit_reached(elapsed):
                break

    def _next_tick(self, previous: float) -> float:
        """Sleep until the next whole second after ``previous`` on the run's grid; a tick that
        is more than a second late skips the seconds it missed rather than firing at once."""
        planned = previous + 1.0
        now = time.monotonic()
        if now > planned + 1.0:
            missed = int(now - planned)
            self.lateness.skipped += missed
            planned += missed
        _sleep_until(planned, self.stop_requested)
        return planned

    def _sampler(self) -> Collector:
        """Every source of one tick, read at once: each agent, the broker, the queues' depth
        (exact, from the queues themselves where the broker allows it) and this host's CPU."""
        sources: dict[str, Any] = {
            f"agent:{agent.index}": lambda agent=agent: AgentReading.from_snapshot(
                agent.index, agent.call("GET", "/snapshot", timeout_s=SCRAPE_TIMEOUT_S),
                time.monotonic())
            for agent in self.agents}
        sources["broker"] = self.provisioner.sample
        member_stats = getattr(self.provisioner, "member_stats", None)
        if member_stats is not None:
            sources.update({f"stats:{i}": lambda i=i: member_stats(self.provisioner.member(i))
                            for i in range(self.topology.members)})
        sources["host"] = _host_cpu
        self.depth_probe = depth_probe(self.topology.broker, [
            m.endpoint for m in self.provisioner.status()],
            self.queue_spec.instances(range(self.topology.members)))
        if self.depth_probe is not None:
            sources["depth"] = lambda: DepthReading(*self.depth_probe.read())
        return Collector(sources)

    def _fold(self, results: dict[str, Any]) -> Tick:
        """Turn one tick's collected results into figures (missing and failed reads as
        ``None``), keeping the broker sample and depth that arrived for the rows."""
        agents = {a.index: _ok(results.get(f"agent:{a.index}")) for a in self.agents}
        self._check_agents_alive(results)
        broker = _ok(results.get("broker"))
        self.tick_broker = broker
        if broker is not None:
            self.broker = broker
        self.tick_members = self._members_now(broker, results)
        self.depth = _ok(results.get("depth")) or self.depth
        host = _ok(results.get("host"))
        hosts = {CONTROLLER_HOST: host, **(broker.hosts if broker else {})}
        return self.math.step(time.monotonic() - self.t0, agents, self.tick_members, hosts)

    def _check_agents_alive(self, results: dict[str, Any]) -> None:
        """An agent whose reads fail (refused, reset: not merely slow) ``AGENT_FAILURES`` ticks
        in a row is lost: the run ends with an error naming it rather than measuring on
        without its workers."""
        for agent in self.agents:
            result = results.get(f"agent:{agent.index}")
            if isinstance(result, Failed):
                self.agent_failures[agent.index] = self.agent_failures.get(agent.index, 0) + 1
                if self.agent_failures[agent.index] >= AGENT_FAILURES:
                    raise AgentError(f"agent {agent.index} on {agent.host} lost: its last "
                                     f"{AGENT_FAILURES} reads failed ({result.error})")
            elif result is not None:
                self.agent_failures.pop(agent.index, None)

    def _members_now(self, broker: BrokerSample | None, results: dict[str, Any]
                     ) -> list[MemberSample]:
        """Each member as this tick saw it: from this tick's broker sample (or, if it missed,
        the last one's running flags with every figure unknown), with the figures each member
        gave of itself this tick where the provisioner asks members one by one."""
        if broker is not None:
            members = broker.members
        elif self.broker is not None:
            members = [MemberSample(m.name, m.running, None, m.cpu_quota_cores)
                       for m in self.broker.members]
        else:
            return []
        if not any(key.startswith("stats:") for key in self.sampler.sources):
            return members
        out = []
        for index, member in enumerate(members):
            stats = _ok(results.get(f"stats:{index}")) if member.running else None
            if stats is not None:
                self.member_stats[member.name] = stats
            out.append(member.with_stats(stats))
        return out

    def _active(self, phase: plans.Phase) -> int:
        """Senders publishing in ``phase``."""
        return phase.senders or self.scenario.workload.senders

    def _target(self, phase: plans.Phase, elapsed: float) -> float:
        """The total rate the plan (times any publish spike) asks for at ``elapsed``."""
        return phase.rate_at(elapsed) * self.faults.spike_factor() * self._active(phase)

    def _apply(self, elapsed: float, phase: plans.Phase) -> None:
        """Send the agents what changed since the last tick: rate, active senders, and the
        consumers' processing time (profile or slowdown)."""
        rate = {"rate_per_sender": round(phase.rate_at(elapsed) * self.faults.spike_factor(), 3),
                "active": phase.senders}
        if rate != self.applied.get("rate"):
            self._all(lambda agent: agent.call("POST", "/rate", rate))
            self.applied["rate"] = rate
        delay = self.faults.consumer_delay_s()
        delay = plans.value_at(self.delays, elapsed) if delay is None else delay
        if delay != self.applied.get("delay", 0.0):
            body = {"seconds": delay}
            self._all(lambda agent: agent.call("POST", "/consumer_delay", body))
            self.applied["delay"] = delay
            self.state.last_event = f"consumer delay {delay * 1000:g} ms"

    def _exit_reached(self, elapsed: float) -> bool:
        """Whether an exit condition ends the load part early."""
        last = self.ticks[-1]
        exit_ = self.scenario.exit
        if exit_.messages_per_sender and \
                last["senders_done"] >= self.scenario.workload.senders:
            self._event("exit", reason="every sender sent its messages", elapsed_s=elapsed)
            return True
        final = self.phases[-1]
        if exit_.queue_empty and last["queue_depth"] == 0 and \
                elapsed > final.start_s + self.scenario.measure.settle:
            self._event("exit", reason="queues empty", elapsed_s=elapsed)
            return True
        return False

    def _record(self, planned: float, started: float, phase: plans.Phase | None,
                metrics: ControllerMetrics, label: str) -> Tick:
        """Collect the tick's readings (until its deadline), write its rows, update the views
        and feed the scaler."""
        results = self.sampler.collect(planned + TICK_DEADLINE_S)
        tick = self._fold(results)
        now, elapsed = time.time(), started - self.t0
        lateness = started - planned
        target = self._target(phase, elapsed) if phase else 0.0
        broker = self.tick_broker
        running = sum(1 for m in self.broker.members if m.running) if self.broker else 0
        depth, age = self._queue_depth_now()
        self.lateness.add(lateness, age)
        latency = tick.latency
        buckets = latency.to_sparse()
        totals, rates = tick.totals, tick.rates
        stamp = {"t": now, "elapsed_s": elapsed, "phase": phase.index if phase else 0}
        row = {**stamp, "lateness_s": lateness, "target_rate": target,
               "send_rate": rates["sent"], "receive_rate": rates["received"],
               "confirm_rate": rates["confirmed"], "skip_rate": rates["skipped"],
               **{k: totals[k] for k in ("sent", "received", "confirmed", "nacked", "skipped",
                                         "errors", "reconnects", "connections", "held",
                                         "senders_done")},
               "members_running": running, "queue_depth": depth, "depth_age_s": age,
               "backlog": totals["sent"] - totals["received"],
               "agents_missing": tick.agents_missing, "read_span_s": self._read_span(),
               "broker_missing": broker is None,
               "latency_p50_ms": latency.percentile(50) / 1000 if latency.count else None,
               "latency_p99_ms": latency.percentile(99) / 1000 if latency.count else None,
               "host_cpu_percent": tick.host_cpu_percent.get(CONTROLLER_HOST),
               "latency_buckets": list(buckets), "latency_counts": list(buckets.values())}
        self.ticks.append(row)
        self.writer.row("ticks", row)
        for member in self.tick_members:
            member_row = {**stamp, "member": member.name, "running": member.running,
                          "cpu_percent": tick.member_cpu_percent.get(member.name),
                          "cpu_interval_s": tick.member_cpu_interval_s.get(member.name),
                          "cpu_quota_cores": member.cpu_quota_cores,
                          "connections": member.connections, "messages_in": member.messages_in,
                          "messages_out": member.messages_out}
            self.member_rows.append(member_row)
            self.writer.row("members", member_row)
        for host, percent in tick.host_cpu_percent.items():
            host_row = {**stamp, "host": host, "cpu_percent": percent,
                        "cpu_interval_s": tick.host_cpu_interval_s.get(host)}
            self.host_rows.append(host_row)
            self.writer.row("hosts", host_row)
        for index, reading in self.math.agents.items():
            if reading.seen < started:  # this agent missed the tick: no new row
                continue
            self.writer.row("agents", {
                **stamp, "agent": index, "monotonic_s": reading.at,
                **{k: reading.counters[k] for k in ("sent", "received", "errors", "reconnects",
                                                    "skipped")},
                "cpu_percent": tick.agent_cpu_percent.get(index),
                "cpu_seconds": reading.cpu_seconds,
                "latency_buckets": list(reading.latency.to_sparse()),
                "latency_counts": list(reading.latency.to_sparse().values())})
        self._show(row, tick, label)
        metrics.update(self.scenario.name, self.state)
        if self.scaler and phase is not None and None not in (row["send_rate"],
                                                              row["receive_rate"]):
            self.scaler.observe(Observation(
                elapsed_s=elapsed, target_rate=target,
                achieved_rate=min(row["send_rate"], row["receive_rate"]),
                member_cpu=tuple(
                    tick.member_cpu_percent[m.name] / 100 / (m.cpu_quota_cores or 1.0)
                    for m in self.broker.members
                    if m.running and tick.member_cpu_percent.get(m.name) is not None),
                queue_depth=depth, p99_s=None if row["latency_p99_ms"] is None
                else row["latency_p99_ms"] / 1000),
                running=[i for i, m in enumerate(self.broker.members) if m.running])
        return tick

    def _ready_in(self, queue: str) -> int | None:
        """Messages ready in one queue now, from the queue itself over a connection of its own
        (the scaler asks from its thread while the tick reads the others); ``None``: unknown."""
        running = [m.endpoint for m in self.provisioner.status() if m.running]
        probe = depth_probe(self.topology.broker, running, [queue])
        if probe is None:
            depths = self.provisioner.settled_queue_depths()
            return None if depths is None else depths.get(queue, 0)
        try:
            return probe.read()[0].get(queue)
        except ConnectionError:
            return None
        finally:
            probe.close()

    def _depth_readable(self) -> bool:
        """Whether this run can read queue depths at all (a probe, or the broker's metrics)."""
        return self.depth_probe is not None or (
            self.broker is not None and self.broker.queue_depths is not None)

    def _read_span(self) -> float | None:
        """Seconds between the first and the last of this tick's agent and depth readings
        (controller clock): how far apart in time the figures of one row were taken."""
        times = [r.seen for r in self.math.agents.values()]
        if self.depth is not None and time.monotonic() - self.depth.at <= MAX_DEPTH_AGE_S:
            times.append(self.depth.at)
        return max(times) - min(times) if times else None

    def _queue_depth_now(self) -> tuple[int | None, float | None]:
        """Messages in the workload's queues as RabbitMQ counts them, ready plus unacknowledged,
        and the age of the older of the two readings, in seconds: the ready count read from the
        queues themselves, the deliveries awaiting an ack from each serving member's own
        counters. Each is the latest reading of its source if that is at most
        ``MAX_DEPTH_AGE_S`` old (a member at its CPU quota may answer a little late); otherwise
        the depth is unknown (``None``)."""
        now = time.monotonic()
        if self.depth_probe is None:
            depths = self.tick_broker.queue_depths if self.tick_broker else None
            return (None, None) if depths is None else (self._queue_depth(depths), None)
        if self.depth is None or now - self.depth.at > MAX_DEPTH_AGE_S:
            return None, None
        ready = sum(n for name, n in self.depth.ready.items() if self.queue_spec.owns(name))
        serving = [m.name for m in self.tick_members if m.running]
        stats = [self.member_stats.get(name) for name in serving]
        if not stats or any(s is None or s.unacknowledged is None or s.at is None
                            or now - s.at > MAX_DEPTH_AGE_S for s in stats):
            return None, None
        oldest = min([self.depth.at] + [s.at for s in stats])
        return ready + sum(s.unacknowledged for s in stats), now - oldest

    def _show(self, row: dict, tick: Tick, label: str) -> None:
        """The live view's state from one tick row, and the view redrawn."""
        self.state.__dict__.update(
            step=row["phase"] or self.state.step, elapsed_s=row["elapsed_s"],
            target_rate=row["target_rate"], send_rate=row["send_rate"],
            receive_rate=row["receive_rate"], members_running=row["members_running"],
            queue_depth=row["queue_depth"], p99_ms=row["latency_p99_ms"],
            errors=row["errors"], reconnects=row["reconnects"], phase=label,
            missing=row["agents_missing"] + (1 if row["broker_missing"] else 0),
            member_cpu={m.name: tick.member_cpu_percent.get(m.name) if m.running else None
                        for m in (self.broker.members if self.broker else [])})
        errors = [r.last_error for r in self.math.agents.values() if r.last_error]
        if errors and row["errors"]:
            self.state.last_event = f"last error: {errors[-1]}"
        self.view.update(self.state)

    # -- the end ----------------------------------------------------------------------------

    def _queue_depth(self, depths: dict[str, int]) -> int:
        """Messages in the workload queue, over all its per-member instances."""
        return sum(n for name, n in depths.items() if self.queue_spec.owns(name))

    def _finish(self, metrics: ControllerMetrics) -> Reconciliation:
        """Stop the senders, keep ticking (phase 0, "draining") until every message sent was
        received and the queues are empty or ``measure.drain`` passes, then stop receiving."""
        if self.scaler:
            self.scaler.wait()
        self.faults.wait()
        self._event("senders_stop")
        self._all(lambda agent: agent.call("POST", "/stop_senders", {}, timeout_s=60))
        stopped = time.monotonic()
        deadline = stopped + self.scenario.measure.drain
        planned = max(self.t0 + math.floor(stopped - self.t0), self.t0)
        depth = None
        while time.monotonic() < deadline:
            planned = self._next_tick(planned)
            tick = self._record(planned, time.monotonic(), None, metrics, "draining")
            depth = self.ticks[-1]["queue_depth"]
            settled = all(r.seen > stopped for r in self.math.agents.values())
            empty = depth == 0 or (depth is None and not self._depth_readable())
            if settled and tick.totals["received"] >= tick.totals["sent"] and empty:
                break
            if self.stop_requested.is_set() and time.monotonic() > stopped + 5:
                break
        self._event("drained", queue_depth=depth)
        self._all(lambda agent: agent.call("POST", "/stop_receivers", {}, timeout_s=60))
        self.sampler.close()
        try:
            return self._account()
        finally:
            if self.depth_probe is not None:
                self.depth_probe.close()

    def _settled_depths(self) -> dict[str, int] | None:
        """Messages per queue once the receivers are gone (each delivery they had not
        acknowledged is back in its queue): the ready counts read from the queues themselves,
        again until two reads agree, or the provisioner's own reading where there is no probe.
        (``rabbitmqctl list_queues`` was seen to lag here: 24 and 34 messages of a quorum queue
        reported right after the queue itself said it was empty.)"""
        if self.depth_probe is None:
            return self.provisioner.settled_queue_depths()
        previous = None
        for _ in range(SETTLE_READS):
            try:
                ready, _ = self.depth_probe.read()
            except ConnectionError:
                return self.provisioner.settled_queue_depths()
            if ready == previous:
                break
            previous = ready
            time.sleep(SETTLE_PAUSE_S)
        return previous

    def _account(self) -> Reconciliation:
        reports = self._all(lambda agent: agent.call("GET", "/accounting"))
        exports = [{int(k): base64.b64decode(v) for k, v in r["bitmaps"].items()}
                   for r in reports]
        merged = merge_exports(exports)
        sent_per_producer = {int(k): v for r in reports for k, v in r["sent"].items()}
        snapshots = self._all(lambda agent: agent.call("GET", "/snapshot"))
        local_duplicates = sum(s["duplicates"] for s in snapshots)
        settled = self._settled_depths()
        queued = None if settled is None else self._queue_depth(settled)
        confirms = self.scenario.workload.confirms
        nacked = sum(s["nacked"] for s in snapshots)
        result = reconcile(
            sent=sum(sent_per_producer.values()),
            confirmed=sum(s["confirmed"] for s in snapshots) if confirms else None,
            nacked=nacked - sum(s.get("nacks_republished", 0) for s in snapshots),
            received_unique=merged.unique,
            duplicates=local_duplicates + merged.cross_duplicates,
            still_queued=queued)
        missing = {pid: merged.missing(pid, n) for pid, n in sent_per_producer.items()}
        extras = {k: sum(s.get(k, 0) for s in snapshots)
                  for k in ("out_of_order", "redelivered", "republished")}
        extras["nacked_total"] = nacked
        extras["nacked_then_republished"] = sum(s.get("nacks_republished", 0) for s in snapshots)
        extras["skipped_sends"] = sum(s.get("skipped", 0) for s in snapshots)
        if self.scenario.workload.pattern == "request-reply":
            extras.update({k: sum(s.get(k, 0) for s in snapshots)
                           for k in ("served", "unmatched", "timeouts")},
                          round_trips=sum(s["received"] for s in snapshots))
        self._event("accounting", **asdict(result), explain=result.explain(),
                    producers_missing={k: v for k, v in missing.items() if v}, **extras)
        self.manifest["accounting_details"] = extras
        return result

    # -- records ----------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> None:
        record = self.writer.event(kind, **fields)
        if kind in ("provision", "members_up", "agents_up", "step", "accounting", "teardown",
                    "scale_decision", "scale_failed", "member_started", "rebalanced",
                    "member_draining", "member_stopped", "error", "clocks"):
            text = record.get("explain") or "; ".join(
                ", ".join(map(str, v)) if isinstance(v, list) else f"{k}={v}"
                for k, v in fields.items() if k != "agents")
            self.state.last_event = f"{kind}: {text}"
            self.view.say(f"[dim]{time.strftime('%H:%M:%S')}[/] {kind}: {text}")

    def _remote_command(self, result) -> None:
        """Keep every command a provisioner ran on a host, with its exit status and output."""
        self.writer.event("remote_command", host=result.host, command=result.command,
                          status=result.status, seconds=round(result.seconds, 3),
                          stdout=result.stdout[-2000:], stderr=result.stderr[-2000:])

    def _write_manifest(self, outcome: str, accounting: Reconciliation | None = None,
                        steps: list[StepRow] | None = None) -> None:
        if not self.manifest:
            self.manifest = {
                "run_id": self.run_id,
                "started_at": datetime.now(timezone.utc).isoformat(),
                "scenario": self.scenario.model_dump(mode="json"),
                "topology": self.topology.model_dump(mode="json"),
                "phases": [asdict(p) for p in self.phases],
                "versions": _versions(),
                "host": {"hostname": socket.gethostname(), "cpus": os.cpu_count(),
                         "memory_bytes": psutil.virtual_memory().total,
                         "kernel": platform.release(), "python": platform.python_version()},
            }
        self.manifest.update(outcome=outcome)
        if outcome != "running":
            self.manifest["ended_at"] = datetime.now(timezone.utc).isoformat()
        if accounting is not None:
            self.manifest["accounting"] = {**asdict(accounting), "explain": accounting.explain()}
        if steps:
            self.manifest["steps"] = [{**asdict(s), "ratio": s.ratio} for s in steps]
        if self.lateness.lateness_s:
            self.manifest["sampling"] = {**self.lateness.summary(),
                                         "deadline_s": TICK_DEADLINE_S}
        self.writer.write_manifest(self.manifest)


def _mq_destination(topology: TopologySpec) -> dict[str, Any]:
    """The MQ driver's connection settings from an ``ibmmq`` topology (none for others)."""
    mq = topology.ibmmq
    if mq is None:
        return {}
    ccdt = f"file://{mq.files_dir.rstrip('/')}/{mq.ccdt_file}" if topology.placement == "ssh" \
        else ""
    return {"queue_manager": f"*{mq.qm_group}", "channel": mq.channel, "ccdt_url": ccdt,
            "reconnect": mq.reconnect, "appltag_sender": mq.appltag_sender,
            "appltag_receiver": mq.appltag_receiver}


def _sleep_until(deadline: float, stop: threading.Event) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        stop.wait(delay)


def _ok(result: Any) -> Any:
    """A collected result, or ``None`` for a read that failed or has not arrived."""
    return None if result is None or isinstance(result, Failed) else result


def _host_cpu() -> CpuReading:
    """This host's busy and total CPU seconds over all cores, now."""
    times = psutil.cpu_times()
    total = sum(times)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return CpuReading(total - idle, time.monotonic(), total)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for name in ("surge", "pika", "pyarrow", "pydantic"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    return out
