"""The run loop: provision, start agents, tick once a second through the plan, drain, account.

The loop owns no resource of its own kind: the provisioner (brokers), the launcher (agents),
the clock, the host's CPU reading and the queue-depth probe are collaborators, real by default
and replaced in tests by in-memory ones (``tests/unit/test_controller.py`` runs whole plans on
a fake clock). Everything a run starts is stopped in ``finally`` blocks; with
:func:`stop_on_signals`, a first Ctrl-C, SIGTERM or SIGHUP ends the run early but cleanly
(senders stop, queues drain briefly, accounting is written), a second one forces.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from drivers import protocol
from drivers.accounting import Reconciliation
from drivers.depth import depth_probe, preflight
from orchestrator.agents.client import AgentClient
from orchestrator.agents.launcher import Fleet, Launcher, launcher_for
from orchestrator.agents.placement import place
from orchestrator.clock import SYSTEM_CLOCK, Clock
from orchestrator.errors import Problem, SpecError, SurgeError
from orchestrator.run import rows
from orchestrator.run.accounting import account
from orchestrator.run.agentloss import AgentWatch
from orchestrator.run.collector import Collector, Failed
from orchestrator.run.depth import ProbeFactory, QueueDepth
from orchestrator.run.discovery import (
    SD_RUN_FILE,
    claim,
    default_sd_dir,
    remove_service_discovery,
    sweep,
    target,
    write_service_discovery,
)
from orchestrator.run.exposition import ControllerMetrics
from orchestrator.run.fastpath import fast_path_fields
from orchestrator.run.faults import FaultInjector
from orchestrator.run.hostinfo import host_cpu, host_facts, versions
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.run.losses import MemberWatch, OwnStops
from orchestrator.run.rundir import open_run_dir
from orchestrator.run.sampling import AgentReading, Tick, TickMath, Timeliness
from orchestrator.run.schedule import FixedSchedule, History, Schedule
from orchestrator.scaling.policy import Observation
from orchestrator.scaling.scaler import Scaler
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec, TopologySpec
from orchestrator.web.feed import Board, RunFeed
from orchestrator.web.server import LINGER_S, WebServer, parse_address
from results import timeline
from results.rundir.locks import CONTROLLER_LOCK, FileLock
from results.rundir.manifest import (
    Accounting,
    Clocks,
    HostFacts,
    Interruption,
    Prometheus,
    Reuse,
    RunManifest,
    Sampling,
)
from results.rundir.steps import StepRow, drain_row, step_rows
from results.rundir.tables import CONTROLLER_HOST, RunDirFailed, RunWriter, new_run_id
from topologies import lease
from topologies.base import BrokerSample, CpuReading, Member, MemberSample, Provisioner
from topologies.factory import provisioner_for
from topologies.rabbitmq.queues import placements

TICK_DEADLINE_S = 0.8  # readings not in by then are missing for this second
SCRAPE_TIMEOUT_S = 5.0  # an agent's snapshot that takes longer fails (the tick has moved on)
AGENT_FAILURES = 3  # consecutive failed reads that make an agent lost
EXTRA_LIFETIME_S = 3600.0  # agents outlive the plan by this much before they give up
SHOWN_EVENTS = frozenset((
    "provision", "members_up", "agents_up", "step", "accounting", "teardown", "scale_decision",
    "scale_failed", "member_started", "rebalanced", "member_draining", "member_stopped",
    "error", "clocks", "queues_unchecked", "probe", "capacity", "web", "agent_lost",
    "member_lost", "member_back"))


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: Path
    outcome: str
    steps: list[StepRow]
    accounting: Reconciliation | None
    drain: StepRow | None = None


class Controller:
    """Drives one scenario on one topology and records it into a run directory.

    ``provisioner``, ``launcher``, ``clock``, ``host_cpu``, ``probes`` (queue depths) and
    ``preflights`` (the check before any load) default to the real ones for the topology and
    scenario. ``reuse``: run on members that a run which died left running (refused
    otherwise), and stop them at the end unless ``keep_topology``."""

    def __init__(self, scenario: ScenarioSpec, topology: TopologySpec, runs_dir: Path,
                 live: bool = True, keep_topology: bool = False, metrics_port: int = 0,
                 run_id: str | None = None, *, provisioner: Provisioner | None = None,
                 launcher: Launcher | None = None, clock: Clock = SYSTEM_CLOCK,
                 host_cpu: Callable[[], CpuReading] = host_cpu,
                 probes: ProbeFactory = depth_probe, preflights: ProbeFactory = preflight,
                 background: bool = True, sd_dir: Path | None = None,
                 process_cpu: Callable[[], float] = time.process_time,
                 schedule: Schedule | None = None, web: str | None = None,
                 board: Board | None = None, reuse: bool = False):
        self.scenario, self.topology = scenario, topology
        self.run_id = run_id or new_run_id(scenario.name)
        self.runs_dir, self.run_dir = runs_dir, runs_dir / self.run_id
        self.writer: RunWriter  # opened by run(), once the topology is held
        self.view = LiveView(enabled=live)
        self.keep_topology, self.metrics_port, self.reuse = keep_topology, metrics_port, reuse
        self.interruption: Interruption | None = None  # why the run ended early, when it did
        self.clock, self.host_cpu = clock, host_cpu
        self.process_cpu = process_cpu  # this process's CPU seconds (the controller's cost)
        self.sd_dir = sd_dir or default_sd_dir()  # Prometheus' file_sd targets of live runs
        self.token = secrets.token_urlsafe(24)
        self.provisioner = OwnStops(provisioner or provisioner_for(
            topology, record=self._remote_command))
        self.losses = MemberWatch(self.provisioner, self._event)
        self.launcher = launcher or launcher_for(scenario, topology, self.run_id, self.token,
                                                 self.run_dir, self._remote_command)
        if schedule is None and not scenario.plan:
            raise SpecError(scenario.name, [Problem(
                "plan", "no steps to run: a scenario without a plan is for surge capacity")])
        self.schedule = schedule or FixedSchedule(plans.expand(scenario.plan))
        self.schedule.attach(self._event)
        self.delays = plans.delay_phases(scenario.consumer_profile)
        self.applied: dict[str, Any] = {}
        self.fleet = Fleet([], [], [])
        self.stop_requested = threading.Event()
        self.state = ViewState(scenario=scenario.name, run_id=self.run_id,
                               steps=len(self.schedule.phases),
                               planned_s=self.schedule.planned_s)
        self.history = History()
        self.ticks = self.history.ticks
        self.member_rows = self.history.member_rows
        self.host_rows = self.history.host_rows
        # the live page: its own server on ``web`` (HOST:PORT), or a campaign's ``board``
        self.feed = RunFeed(self.run_id, scenario.name, self.schedule.planned_s, self.ticks,
                            self.member_rows, self.schedule.phases, run_dir=self.run_dir)
        self.web, self.board = web, board
        self.page: WebServer | None = None
        self.manifest = RunManifest.begin(
            self.run_id, _utc(clock.time()), scenario, topology, self.schedule.phases, versions(),
            HostFacts(**host_facts()))
        self.math = TickMath()
        self.lateness = Timeliness()
        self.broker: BrokerSample | None = None  # the latest sample that arrived
        self.tick_broker: BrokerSample | None = None  # this tick's sample (None: missed)
        self.tick_members: list[MemberSample] = []  # this tick's view of each member
        self.agent_watch = AgentWatch(AGENT_FAILURES)
        self.queue_spec = topology.queue(scenario.workload.queue)
        self.depth = QueueDepth(topology.broker, self.queue_spec, self.provisioner, clock, probes,
                                preflights)
        scaling = scenario.scaling
        self.scaler = Scaler(
            scaling, self.provisioner, self.queue_spec,
            pool=min(scaling.pool or topology.members, topology.members),
            minimum=topology.start, event=self._event, ready=self.depth.ready_in, clock=clock,
            background=background) if scaling else None
        self.faults = FaultInjector(scenario.faults, self.schedule.phases, self.provisioner,
                                    self._event, self.stop_requested, clock)

    @property
    def agents(self) -> list[AgentClient]:
        """The run's agents (none before they start)."""
        return self.fleet.agents

    @property
    def live_agents(self) -> list[AgentClient]:
        """The agents not lost (see :mod:`orchestrator.run.agentloss`)."""
        return self.agent_watch.live(self.fleet.agents)

    def request_stop(self, why: str = "stopped by Ctrl-C") -> None:
        """End the load early: senders stop, queues drain, accounting is written."""
        if not self.stop_requested.is_set():
            self.interruption = Interruption(reason=why)
        self.stop_requested.set()

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Run the scenario to the end (or to a stop); always leaves a readable run directory.

        The topology is held for the run (:mod:`topologies.lease`) and the run directory by its
        controller (:data:`~results.rundir.locks.CONTROLLER_LOCK`) before anything starts."""
        with lease.holding(self.topology.name, "run", self.run_id, str(self.run_dir)) as held, \
                contextlib.ExitStack() as claims:
            settled = lease.settle_previous(held.previous) if held.previous else None
            reused = self._members_running()
            self.writer = open_run_dir(self.runs_dir, self.run_dir)
            claims.callback(self.writer.close)
            run_lock, _ = FileLock.take(self.run_dir / CONTROLLER_LOCK, {"kind": "run",
                                                                         "id": self.run_id})
            claims.callback(run_lock.release, remove=True)
            claims.callback(claim(self.sd_dir, self.run_id).release, remove=True)
            if settled:
                self._event("previous_holder_died", holder=lease.describe(held.previous),
                            explain=settled)
            if removed := sweep(self.sd_dir):
                self._event("stale_discovery_removed", runs=removed)
            if reused is not None:
                self.manifest = self.manifest.replace(reused=reused)
                self._event("members_reused", members=reused.members,
                            explain=f"{len(reused.members)} members already running: "
                                    f"{reused.why}")
            return self._run(started_topology=reused is None or lease.foreign_owner(
                reused.started_by))

    def _members_running(self) -> Reuse | None:
        """The members already running, and who started them (``None``: none runs). They are
        used where ``surge up``, this process or a run that kept them started them; members
        that a run which died started are refused unless ``reuse``."""
        running = [m.name for m in self.provisioner.status() if m.running]
        if not running:
            return None
        owner = lease.members_owner(self.topology.name)
        foreign = lease.foreign_owner(owner)
        if foreign and not self.reuse:
            raise lease.TopologyBusy(
                f"{len(running)} members of {self.topology.name} still run that "
                f"{lease.describe(owner)} started and did not end: stop them with surge down, "
                f"or run on them with --reuse (they are stopped at the end unless --keep)")
        why = (f"started by {lease.describe(owner)}, which died; reused as asked (--reuse), "
               f"the messages it left in the workload's queues removed first"
               if foreign else f"started by {lease.describe(owner)}"
               if owner else "already running, not started by a surge run")
        return Reuse(members=running, started_by=owner or {}, why=why)

    def _purge_left(self, running: list[Member]) -> None:
        """Remove what a run that died left in the workload's queues (its messages would count
        as this run's); said as an event, or that it could not be done."""
        api = getattr(self.provisioner, "management", None)
        names = [name for _, name, _ in placements([self.queue_spec],
                                                   [m.index for m in running])]
        try:
            purged = {name: api(running).purge(name) for name in names} if api else None
        except SurgeError as error:
            purged, why = None, str(error)
        else:
            why = "this broker offers no way to purge queues" if api is None else ""
        self._event("queues_purged", purged=purged, explain=f"removed {sum(purged.values())} "
                    f"messages left in {', '.join(names)}" if purged is not None else
                    f"messages left in {', '.join(names)} were NOT removed ({why}): they may "
                    f"count as this run's")

    def _run(self, started_topology: bool) -> RunResult:
        outcome, accounting, steps, drain = "failed", None, [], None
        metrics = None
        self._write_manifest(outcome="running")
        try:
            with self.view:
                if started_topology:
                    lease.record_members(self.topology.name, {
                        "kind": "run", "id": self.run_id, "directory": str(self.run_dir),
                        "pid": os.getpid()})
                metrics = ControllerMetrics(self.metrics_port, say=self.view.say)
                self.state.metrics_url = metrics.url
                self._serve_page()
                self._event("provision", topology=self.topology.name,
                            members=f"{self.topology.start} of {self.topology.members}")
                with self.view.waiting(self.state, f"provisioning {self.topology.name}: "
                                                   f"{self.topology.start} of "
                                                   f"{self.topology.members} members"):
                    members = self.provisioner.up()
                self._event("members_up", members=[m.name for m in members if m.running])
                if self.manifest.reused and started_topology:
                    self._purge_left([m for m in members if m.running])
                self._note_unmeasured()
                with self.view.waiting(self.state, "checking queues, starting agents"):
                    self._check_queues([m for m in members if m.running])
                    self._start_agents([m for m in members if m.running])
                self._announce(metrics)
                self._tick_through_plan(metrics)
                accounting = self._finish(metrics)
                outcome = "interrupted" if self.stop_requested.is_set() else "completed"
                phases = [asdict(p) for p in self.schedule.phases]
                steps = step_rows(phases, self.ticks, self.member_rows,
                                  self.scenario.measure.settle, self.host_rows)
                self.feed.steps[:] = [asdict(step) for step in steps]
                drain = drain_row(phases, self.ticks, self.member_rows, self.host_rows)
                if drain is not None:
                    self.manifest = self.manifest.replace(drain=drain)
                if self.scenario.faults or self.losses.count:
                    self.manifest = self.manifest.replace(faults=timeline.fault_recoveries(
                        timeline.read_events(self.run_dir), self.ticks))
        except KeyboardInterrupt:
            outcome = "aborted"
            raise
        except SurgeError as error:
            if isinstance(error, RunDirFailed):
                self.interruption = Interruption(reason=str(error))
            self._event("error", error=str(error))
            raise
        finally:
            self._stop_agents()
            remove_service_discovery(self.sd_dir, self.run_id)
            if metrics:
                metrics.close()
            self.feed.outcome = self.feed.label = outcome
            if self.page:
                self.page.board.linger(LINGER_S)
                self.page.close()
            if started_topology:
                self._release_members()
            self._write_manifest(outcome=outcome, accounting=accounting, steps=steps)
        return RunResult(self.run_dir, outcome, steps, accounting, drain)

    def _release_members(self) -> None:
        """Stop the members this run started (or took over), or hand them over as kept."""
        if self.keep_topology:
            owner = lease.members_owner(self.topology.name) or {}
            lease.record_members(self.topology.name, {**owner, "kept": True})
            return
        self._event("teardown", said=self.provisioner.down())
        lease.record_members(self.topology.name, None)

    def _serve_page(self) -> None:
        """Show the run on the campaign's board, or on a page of its own at ``web``."""
        board = self.board
        if board is None and self.web:
            host, port = parse_address(self.web)
            board = Board()
            self.page = WebServer(board, host, port, token=self.token)
            self.state.web_url = self.page.url
            self._event("web", url=self.page.url.split("?")[0],
                        explain=f"live page: {self.page.url}")
        if board is not None:
            board.run = self.feed
            board.ended_shown.clear()

    # -- agents -----------------------------------------------------------------------------

    def _start_agents(self, members) -> None:
        """Start the agents, configure their workers on the running members, start step 1."""
        self.fleet = self.launcher.start(self.state.planned_s + EXTRA_LIFETIME_S)
        position = {id(a): i for i, a in enumerate(self.agents)}
        self._event("agents_up", count=len(self.agents),
                    agents=[{"index": a.index, "host": a.host, "port": getattr(a, "port", None),
                             "pid": getattr(getattr(a, "process", None), "pid", None)}
                            for a in self.agents])
        if self.fleet.clocks is not None:
            self._record_clocks(self.fleet.clocks)
        first = self.schedule.phase_at(0.0, self.history)
        placement = place(self.scenario, self.topology.broker,
                          self.provisioner.client_settings(), members, len(self.agents),
                          [position[id(a)] for a in self.fleet.senders],
                          [position[id(a)] for a in self.fleet.receivers],
                          self.queue_spec, first.rate_at(0.0))
        if self.scaler:
            for seat in placement.seats:
                self.scaler.place(seat.worker, self.agents[seat.agent], seat.member)
        for agent in self.agents:
            config = placement.configs[position[id(agent)]]
            self.agent_watch.hosting(agent.index, len(config.senders), len(config.receivers))
        self._all(lambda agent: agent.configure(replace(
            placement.configs[position[id(agent)]],
            labels={"run_id": self.run_id, "scenario": self.scenario.name,
                    "agent": str(agent.index)})))
        self.state.step = 1
        self._apply(0.0, first)
        self._step_event(first, 0.0)

    def _announce(self, metrics: ControllerMetrics) -> None:
        """List the controller's and agents' /metrics for Prometheus (file_sd) while the run
        goes, and in run.json."""
        agents = [target(a.host, a.port) for a in self.agents if getattr(a, "port", None)]
        brokers = {m.name: target(m.host, m.prometheus_port) for m in self.provisioner.status()
                   if m.prometheus_port}
        def write(where: Path | None) -> Path:
            return write_service_discovery(self.sd_dir, self.run_id, self.scenario.name,
                                           metrics.address, agents, brokers, where)
        write(self.run_dir / SD_RUN_FILE)  # the run directory's record
        path = write(None)  # the machine's directory of live runs
        self.manifest = self.manifest.replace(prometheus=Prometheus(
            controller=metrics.address, agents=agents, sd_file=str(path)))

    def _note_unmeasured(self) -> None:
        """Say, in the events and run.json, which figures this placement cannot know and why
        (they stay unknown in the rows, never zero)."""
        unmeasured = getattr(self.provisioner, "unmeasured", dict)()
        if unmeasured:
            self._event("unmeasured", figures=unmeasured)
            self.manifest = self.manifest.replace(unmeasured=unmeasured)

    def _check_queues(self, running: list[Member]) -> None:
        """Before any load, check the clients' connections and the workload's queues; where
        that cannot be done from here, say so (a shown event) rather than pass in silence."""
        why = self.depth.check(running, self.scenario.workload)
        if why:
            self._event("queues_unchecked", reason=why,
                        explain=f"the workload's queues and the clients' connections were NOT "
                                f"checked before the load: {why}")

    def _record_clocks(self, clocks: dict[str, Any]) -> None:
        self.manifest = self.manifest.replace(clocks=Clocks.model_validate(clocks))
        bound, reliable = clocks["latency_error_bound_ms"], clocks["latency_reliable"]
        self._event("clocks", hosts=clocks["hosts"], latency_error_bound_ms=bound,
                    latency_reliable=reliable,
                    explain=f"host clocks agree within {bound:.1f} ms" if reliable else
                    f"host clocks may differ by {bound:.1f} ms: latency across hosts is "
                    f"unreliable")

    def _all(self, function: Callable[[AgentClient], Any]) -> list:
        """``function`` of every live agent, at once."""
        live = self.live_agents
        with ThreadPoolExecutor(max(1, len(live))) as pool:
            return list(pool.map(function, live))

    def _stop_agents(self) -> None:
        if self.agents:
            said = self.launcher.stop(self.fleet)
            self._event("agents_down", agents=len(self.agents),
                        **({"deleted": said} if said else {}))

    # -- ticking ----------------------------------------------------------------------------

    def _tick_through_plan(self, metrics: ControllerMetrics) -> None:
        """Tick once a second through the plan, noting the controller's own CPU over it."""
        cpu_at = self.process_cpu()
        self.t0 = self.clock.monotonic()
        try:
            self._tick_load(metrics)
        finally:
            self.lateness.spent(self.process_cpu() - cpu_at, self.clock.monotonic() - self.t0)

    def _tick_load(self, metrics: ControllerMetrics) -> None:
        self.sampler = self._sampler()
        self.sampler.start()
        self._fold(self.sampler.collect(self.t0 + TICK_DEADLINE_S))  # first readings: no rates
        current = self.schedule.phase_at(0.0, self.history)
        planned = self.t0
        while not self.stop_requested.is_set():
            planned = self._next_tick(planned)
            started = self.clock.monotonic()
            self.sampler.start()
            elapsed = started - self.t0
            phase = self.schedule.phase_at(elapsed, self.history)
            if phase is None:
                break
            self.faults.tick(elapsed)
            self._apply(elapsed, phase)
            if phase.index != current.index:
                self._step_done(current)
                current = phase
                self._step_event(phase, elapsed)
            self._record(planned, started, current, metrics,
                         "paused" if current.index == 0 else "running")
            if self._exit_reached(elapsed):
                break

    def _next_tick(self, previous: float, draining: bool = False) -> float:
        """Sleep until the next whole second after ``previous`` on the run's grid (a stop
        request wakes the load part at once, never the drain, whose ticks keep their pace); a
        tick that is more than a second late skips the seconds it missed rather than firing at
        once."""
        planned = previous + 1.0
        now = self.clock.monotonic()
        if now > planned + 1.0:
            missed = int(now - planned)
            self.lateness.skipped += missed
            planned += missed
        self.clock.sleep(planned - self.clock.monotonic(),
                         None if draining else self.stop_requested)
        return planned

    def _sampler(self) -> Collector:
        """Every source of one tick, read at once: each agent, the broker, each member's own
        figures where members answer for themselves, the queues' depth (exact, from the queues
        themselves where the broker allows it) and this host's CPU."""
        sources: dict[str, Any] = {f"agent:{agent.index}": lambda agent=agent: self._read(agent)
                                   for agent in self.agents}
        sources["broker"] = self.provisioner.sample
        member_stats = getattr(self.provisioner, "member_stats", None)
        if member_stats is not None:
            sources.update({f"stats:{i}": lambda i=i: member_stats(self.provisioner.member(i))
                            for i in range(self.topology.members)})
        sources["host"] = self.host_cpu
        depth = self.depth.open(self.topology.members)
        if depth is not None:
            sources["depth"] = depth
        return Collector(sources, clock=self.clock.monotonic)

    def _read(self, agent: AgentClient) -> AgentReading | None:
        """One agent's snapshot as a reading, remembered as its last good one (a lost agent is
        not asked)."""
        if agent.index in self.agent_watch.lost:
            return None
        snapshot = agent.snapshot(timeout_s=SCRAPE_TIMEOUT_S)
        seen = self.clock.monotonic()
        self.agent_watch.seen(agent.index, snapshot, seen - getattr(self, "t0", seen))
        return AgentReading.from_snapshot(agent.index, snapshot, seen)

    def _fold(self, results: dict[str, Any]) -> Tick:
        """Turn one tick's collected results into figures (missing and failed reads as
        ``None``; lost agents left out, their last counters kept), keeping the broker sample
        and depth that arrived for the rows."""
        for lost in self.agent_watch.observe(self.live_agents, results,
                                             self.clock.monotonic() - self.t0):
            self._event("agent_lost", **lost.record(), explain=lost.explain())
        agents = {a.index: _ok(results.get(f"agent:{a.index}")) for a in self.live_agents}
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
        depth gets this tick's readings."""
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
        self.depth.fold(_ok(results.get("depth")), members,
                        {name: s for name, s in stats.items() if s is not None})
        return [m.with_stats(stats.get(m.name)) for m in members] if own else members

    def _step_event(self, phase: plans.Phase, elapsed: float) -> None:
        """The ``step`` event of a phase that starts (or ``pause`` for one without load)."""
        if phase.index == 0:
            self._event("pause", elapsed_s=round(elapsed, 3))
            return
        self.state.steps = max(self.state.steps, len(self.schedule.phases))
        self._event("step", step=phase.index, rate_per_sender=phase.rate_per_sender,
                    senders=self._active(phase), target_rate=self._target(phase, elapsed))

    def _step_done(self, phase: plans.Phase) -> None:
        """The row of a step that just ended, for the page's step table (once per step)."""
        if phase.index > 0:
            self.feed.steps.extend(asdict(row) for row in step_rows(
                [asdict(phase)], self.ticks, self.member_rows, self.scenario.measure.settle,
                self.host_rows))

    def _active(self, phase: plans.Phase) -> int:
        """Senders publishing in ``phase``."""
        return self.scenario.workload.senders if phase.senders is None else phase.senders

    def _target(self, phase: plans.Phase, elapsed: float) -> float:
        """The total rate the plan (times any publish spike) asks for at ``elapsed``."""
        return phase.rate_at(elapsed) * self.faults.spike_factor() * self._active(phase)

    def _apply(self, elapsed: float, phase: plans.Phase) -> None:
        """Send the agents what changed since the last tick: rate, active senders, and the
        consumers' processing time (profile or slowdown)."""
        rate = protocol.Rate(round(phase.rate_at(elapsed) * self.faults.spike_factor(), 3),
                             phase.senders)
        if rate != self.applied.get("rate"):
            self._all(lambda agent: agent.set_rate(rate))
            self.applied["rate"] = rate
        delay = self.faults.consumer_delay_s()
        delay = plans.value_at(self.delays, elapsed) if delay is None else delay
        if delay != self.applied.get("delay", 0.0):
            self._all(lambda agent: agent.set_consumer_delay(protocol.ConsumerDelay(delay)))
            self.applied["delay"] = delay
            self.state.last_event = f"consumer delay {delay * 1000:g} ms"

    def _exit_reached(self, elapsed: float) -> bool:
        """Whether an exit condition ends the load part early."""
        last = self.ticks[-1]
        exit_ = self.scenario.exit
        if self.agent_watch.lost and (exit_.agent_lost or not self.live_agents):
            self._event("exit", reason="an agent was lost" if self.live_agents else
                        "every agent was lost", elapsed_s=elapsed)
            return True
        if exit_.messages_per_sender and \
                last["senders_done"] >= self.scenario.workload.senders:
            self._event("exit", reason="every sender sent its messages", elapsed_s=elapsed)
            return True
        final = self.schedule.phases[-1]
        if exit_.queue_empty and last["queue_depth"] == 0 and \
                elapsed > final.start_s + self.scenario.measure.settle:
            self._event("exit", reason="queues empty", elapsed_s=elapsed)
            return True
        return False

    def _record(self, planned: float, started: float, phase: plans.Phase | None,
                metrics: ControllerMetrics, label: str) -> Tick:
        """Collect the tick's readings (until its deadline), write its rows, update the views
        and feed the scaler."""
        tick = self._fold(self.sampler.collect(planned + TICK_DEADLINE_S))
        elapsed, lateness = started - self.t0, started - planned
        target = self._target(phase, elapsed) if phase else 0.0
        self.losses.observe(self.tick_broker, elapsed)
        running = sum(1 for m in self.broker.members if m.running) if self.broker else 0
        depth, age = self.depth.now(self.tick_broker, self.tick_members)
        self.lateness.add(lateness, age)
        stamped = rows.stamp(self.clock.time(), elapsed, phase.index if phase else 0)
        row = rows.tick_row(stamped, tick, lateness_s=lateness, target_rate=target,
                            members_running=running, queue_depth=depth, depth_age_s=age,
                            read_span_s=self._read_span(),
                            broker_missing=self.tick_broker is None,
                            agents_lost=len(self.agent_watch.lost))
        self.ticks.append(row)
        self.writer.row("ticks", row)
        tick_members = rows.member_rows(stamped, self.tick_members, tick)
        for member_row in tick_members:
            self.member_rows.append(member_row)
            self.writer.row("members", member_row)
        for host_row in rows.host_rows(stamped, tick):
            self.host_rows.append(host_row)
            self.writer.row("hosts", host_row)
        generator = []
        for agent_row in rows.agent_rows(stamped, self.math.agents, started, tick):
            self.writer.row("agents", agent_row)
            if agent_row["cpu_percent"] is not None:
                generator.append(agent_row["cpu_percent"])
        if generator:
            self.history.generator_cpu.append((elapsed, sum(generator)))
        self._show(row, tick, label)
        metrics.update(self.state, tick, tick_members)
        if self.scaler and phase is not None and None not in (row["send_rate"],
                                                              row["receive_rate"]):
            self.scaler.observe(self._observation(row, tick, elapsed, target, depth),
                                running=[i for i, m in enumerate(self.broker.members)
                                         if m.running])
        return tick

    def _observation(self, row: dict[str, Any], tick: Tick, elapsed: float, target: float,
                     depth: int | None) -> Observation:
        """What the scaling policy sees of one tick: each running member's CPU as a share of
        its quota, ``None`` where it is unknown this second (it stays in, unknown)."""
        running = [m for m in self.broker.members if m.running]
        cpu = [tick.member_cpu_percent.get(m.name) for m in running]
        return Observation(
            elapsed_s=elapsed, target_rate=target,
            achieved_rate=min(row["send_rate"], row["receive_rate"]),
            member_cpu=tuple(None if c is None else c / 100 / (m.cpu_quota_cores or 1.0)
                             for m, c in zip(running, cpu, strict=True)),
            members=tuple(m.name for m in running),
            queue_depth=depth, p99_s=None if row["latency_p99_ms"] is None
            else row["latency_p99_ms"] / 1000)

    def _read_span(self) -> float | None:
        """Seconds between the first and the last of this tick's agent and depth readings
        (controller clock): how far apart in time the figures of one row were taken."""
        times = [r.seen for r in self.math.agents.values()]
        depth_at = self.depth.fresh_at()
        if depth_at is not None:
            times.append(depth_at)
        return max(times) - min(times) if times else None

    def _show(self, row: dict, tick: Tick, label: str) -> None:
        """The live view's state from one tick row, and the view redrawn."""
        self.state.__dict__.update(
            step=row["phase"] or self.state.step, elapsed_s=row["elapsed_s"],
            target_rate=row["target_rate"], send_rate=row["send_rate"],
            measured_target=self.ticks[-2]["target_rate"] if len(self.ticks) > 1 else None,
            receive_rate=row["receive_rate"], members_running=row["members_running"],
            queue_depth=row["queue_depth"], p50_ms=row["latency_p50_ms"],
            p99_ms=row["latency_p99_ms"], backlog=row["backlog"],
            errors=row["errors"], reconnects=row["reconnects"], phase=label,
            blocked=row["blocked"], blocked_s=row["blocked_s"],
            missing=row["agents_missing"] + (1 if row["broker_missing"] else 0),
            member_cpu={m.name: tick.member_cpu_percent.get(m.name) if m.running else None
                        for m in (self.broker.members if self.broker else [])})
        self.feed.label = label
        self.state.received_history.append(row["receive_rate"])
        errors = [r.last_error for r in self.math.agents.values() if r.last_error]
        if errors and row["errors"]:
            self.state.last_event = f"last error: {errors[-1]}"
        self.view.update(self.state)

    # -- the end ----------------------------------------------------------------------------

    def _finish(self, metrics: ControllerMetrics) -> Reconciliation:
        """Stop the senders, keep ticking (phase 0, "draining") until every message sent was
        received and the queues are empty or ``measure.drain`` passes, then stop receiving."""
        if self.scaler:
            self.scaler.wait()
        self.faults.wait()
        self._event("senders_stop")
        self._all(lambda agent: agent.stop_senders())
        stopped = self.clock.monotonic()
        deadline = stopped + self.scenario.measure.drain
        planned = max(self.t0 + math.floor(stopped - self.t0), self.t0)
        depth = None
        while self.clock.monotonic() < deadline:
            planned = self._next_tick(planned, draining=True)
            tick = self._record(planned, self.clock.monotonic(), None, metrics, "draining")
            depth = self.ticks[-1]["queue_depth"]
            live = [self.math.agents.get(a.index) for a in self.live_agents]
            settled = all(r is not None and r.seen > stopped for r in live)
            empty = depth == 0 or (depth is None and not self.depth.readable(self.broker))
            caught_up = tick.totals["received"] >= tick.totals["sent"] or self.agent_watch.lost
            if settled and caught_up and empty:
                break
            if self.stop_requested.is_set() and self.clock.monotonic() > stopped + 5:
                break
        self._event("drained", queue_depth=depth)
        self._all(lambda agent: agent.stop_receivers())
        self.sampler.close()
        try:
            return self._account()
        finally:
            self.depth.close()

    def _account(self) -> Reconciliation:
        reports = self._all(lambda agent: agent.accounting())
        snapshots = self._all(lambda agent: agent.snapshot())
        settled = self.depth.settled()
        queued = None if settled is None else self.depth.total(settled)
        done = account(reports, snapshots, self.scenario, queued,
                       list(self.agent_watch.lost.values()))
        self._event("accounting", **asdict(done.result), explain=done.result.explain(),
                    producers_missing={k: v for k, v in done.missing.items() if v},
                    **done.extras)
        lost = [agent.record() for agent in self.agent_watch.lost.values()]
        self.manifest = self.manifest.replace(accounting_details=done.extras,
                                              **({"agents_lost": lost} if lost else {}))
        self.feed.accounting = {**asdict(done.result), "explain": done.result.explain()}
        return done.result

    # -- records ----------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> None:
        record = self.writer.event(kind, **fields)
        self.feed.event(record)
        if kind in SHOWN_EVENTS:
            text = record.get("explain") or "; ".join(
                ", ".join(map(str, v)) if isinstance(v, list) else f"{k}={v}"
                for k, v in fields.items() if k != "agents")
            self.state.last_event = f"{kind}: {text}"
            wall = datetime.fromtimestamp(self.clock.time()).strftime("%H:%M:%S")
            self.view.say(f"[dim]{wall}[/] {kind}: {text}", event=kind)

    def _remote_command(self, result) -> None:
        """Keep every command a provisioner ran on a host, with its exit status and output."""
        self.writer.event("remote_command", host=result.host, command=result.command,
                          status=result.status, seconds=round(result.seconds, 3),
                          stdout=result.stdout[-2000:], stderr=result.stderr[-2000:])

    def _write_manifest(self, outcome: str, accounting: Reconciliation | None = None,
                        steps: list[StepRow] | None = None) -> None:
        changes: dict[str, Any] = {"outcome": outcome}
        if outcome != "running":
            changes["ended_at"] = _utc(self.clock.time())
            if self.interruption is not None:
                last = self.ticks[-1]["elapsed_s"] if self.ticks else None
                changes["interruption"] = self.interruption.model_copy(
                    update={"last_second_s": last})
        if accounting is not None:
            changes["accounting"] = Accounting(**asdict(accounting),
                                               explain=accounting.explain())
        if steps:
            changes["steps"] = steps
        if self.lateness.lateness_s:
            changes["sampling"] = Sampling.model_validate(
                {**self.lateness.summary(), "deadline_s": TICK_DEADLINE_S})
        changes.update(phases=self.schedule.phases, **self.schedule.manifest_fields(),
                       **fast_path_fields(self.agent_watch.snapshots()))
        self.manifest = self.manifest.replace(**changes)
        self.writer.write_manifest(self.manifest)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What a person, ``timeout``, systemd, Kubernetes or a CI runner sends to stop a command."""


@contextlib.contextmanager
def on_stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for each of :data:`STOP_SIGNALS` meanwhile (only the main thread can set
    one; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def signal_name(number: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name."""
    return "Ctrl-C" if number == signal.SIGINT else signal.Signals(number).name


@contextlib.contextmanager
def stop_on_signals(controller: Controller) -> Iterator[None]:
    """While a run goes (in the main thread), a first stop signal (Ctrl-C, SIGTERM, SIGHUP)
    asks it to stop cleanly (senders stop, a short drain, the accounting, teardown) and a
    second raises ``KeyboardInterrupt``."""
    def interrupt(signum, frame) -> None:
        if controller.stop_requested.is_set():
            raise KeyboardInterrupt
        controller.request_stop(f"stopped by {signal_name(signum)}")
        controller.view.say(f"[yellow]stopping ({signal_name(signum)}): senders stop, queues "
                            f"drain; again to force[/]")

    with on_stop_signals(interrupt):
        yield


def _utc(wall_s: float) -> datetime:
    return datetime.fromtimestamp(wall_s, timezone.utc)


def _ok(result: Any) -> Any:
    """A collected result, or ``None`` for a read that failed or has not arrived."""
    return None if result is None or isinstance(result, Failed) else result
