"""The run loop: provision, start agents, tick once a second through the plan, drain, account.

The loop owns no resource of its own kind: the provisioner (brokers), the launcher (agents),
the clock, the host's CPU reading and the queue-depth probe are collaborators, real by default
and replaced in tests by in-memory ones (``tests/unit/test_controller.py`` runs whole plans on
a fake clock). Each second is one :class:`~orchestrator.run.listeners.TickRecord` handed to
the listeners registered at setup; setup is an :class:`~contextlib.ExitStack` on which
everything a run starts registers its own stop, undone in reverse order (the final run.json
last but for the run directory's locks). With :func:`stop_on_signals`, a first Ctrl-C,
SIGTERM or SIGHUP ends the run early but cleanly (senders stop, queues drain briefly,
accounting is written), a second one forces.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from drivers.accounting import Reconciliation
from drivers.depth import depth_probe, preflight
from orchestrator.agents.launcher import Launcher, agent_lifetime_s, launcher_for
from orchestrator.clock import SYSTEM_CLOCK, Clock
from orchestrator.errors import SurgeError
from orchestrator.run import ending, holding
from orchestrator.run.accounting import copies_each
from orchestrator.run.agentloss import AgentWatch
from orchestrator.run.crew import Crew
from orchestrator.run.depth import ProbeFactory, QueueDepth
from orchestrator.run.discovery import (
    announce,
    claim,
    default_sd_dir,
    remove_service_discovery,
    sweep,
    write_service_discovery,
)
from orchestrator.run.events import SHOWN_EVENTS, RunEvents
from orchestrator.run.exposition import ControllerMetrics, MetricsFeed
from orchestrator.run.fastpath import fast_path_fields
from orchestrator.run.faults import FaultInjector
from orchestrator.run.hostinfo import host_cpu, host_facts, versions
from orchestrator.run.listeners import Listeners, TickRecord
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.run.losses import MemberWatch, OwnStops
from orchestrator.run.page import end_page, serve_page
from orchestrator.run.recording import AgentErrors, RunDirRows
from orchestrator.run.rundir import open_run_dir
from orchestrator.run.sampling import Tick, destinations
from orchestrator.run.scalerfeed import ScalerFeed, observation, scaler_for
from orchestrator.run.schedule import FixedSchedule, History, Schedule
from orchestrator.run.showing import ViewFeed
from orchestrator.run.signals import STOP_SIGNALS, on_stop_signals, signal_name, stop_on_signals
from orchestrator.run.steering import Steering
from orchestrator.run.ticker import TICK_DEADLINE_S, Ticker
from orchestrator.scaling.policy import Observation
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from orchestrator.web.feed import Board, RunFeed
from orchestrator.web.server import WebServer
from results import timeline
from results.rundir.locks import CONTROLLER_LOCK, FileLock
from results.rundir.manifest import HostFacts, Interruption, RunManifest
from results.rundir.runid import new_run_id
from results.rundir.steps import StepRow, terms_of
from results.rundir.tables import RunDirFailed, load_arrow
from topologies import lease
from topologies.base import BrokerSample, CpuReading, Member, Provisioner
from topologies.factory import provisioner_for

__all__ = ["SHOWN_EVENTS", "STOP_SIGNALS", "TICK_DEADLINE_S", "Controller", "RunResult",
           "on_stop_signals", "signal_name", "stop_on_signals"]

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
        self.scenario, self.topology, self.clock = scenario, topology, clock
        self.run_id = run_id or new_run_id(scenario.name)
        self.runs_dir, self.run_dir = runs_dir, runs_dir / self.run_id
        self.view = LiveView(enabled=live)
        self.keep_topology, self.metrics_port, self.reuse = keep_topology, metrics_port, reuse
        self.interruption: Interruption | None = None  # why the run ended early, when it did
        self.process_cpu = process_cpu  # this process's CPU seconds (the controller's cost)
        self.sd_dir = sd_dir or default_sd_dir()  # Prometheus' file_sd targets of live runs
        self.token = secrets.token_urlsafe(24)
        said = lambda result: self._event.remote_command(result)  # noqa: E731
        self.provisioner = OwnStops(provisioner or provisioner_for(topology, record=said))
        launcher = launcher or launcher_for(scenario, topology, self.run_id, self.token,
                                            self.run_dir, said)
        self.schedule = schedule or FixedSchedule(plans.expand(scenario.plan))
        self.stop_requested = threading.Event()
        terms = terms_of(scenario.workload.pattern)
        self.state = ViewState(scenario=scenario.name, run_id=self.run_id,
                               steps=len(self.schedule.phases),
                               planned_s=self.schedule.planned_s, terms=terms)
        self.history = History()
        self.ticks, self.member_rows = self.history.ticks, self.history.member_rows
        # the live page: its own server on ``web`` (HOST:PORT), or a campaign's ``board``
        self.feed = RunFeed(self.run_id, scenario.name, self.schedule.planned_s, self.ticks,
                            self.member_rows, self.schedule.phases, run_dir=self.run_dir,
                            terms=asdict(terms))
        self.web, self.board = web, board
        self.page: WebServer | None = None  # the page of its own, while it is served
        self._event = RunEvents(self.feed, self.state, self.view, clock)
        self.schedule.attach(self._event)
        self.losses = MemberWatch(self.provisioner, self._event)
        self.manifest = RunManifest.begin(
            self.run_id, ending.utc(clock.time()), scenario, topology, self.schedule.phases,
            versions(), HostFacts(**host_facts()))
        self.crew = Crew(launcher, AgentWatch(AGENT_FAILURES, scenario.workload.confirms),
                         self._event, clock)
        self.queue_spec = topology.queue(scenario.workload.queue)
        self.depth = QueueDepth(topology.broker, self.queue_spec, self.provisioner, clock, probes,
                                preflights)
        self.scaler = scaler_for(scenario, topology, self.provisioner, self.queue_spec,
                                 self.depth.ready_in, self._event, clock, background,
                                 self.crew.watch.lost)
        self.faults = FaultInjector(scenario.faults, self.schedule.phases, self.provisioner,
                                    self._event, self.stop_requested, clock)
        self.schedule.attach_faults(self.faults)
        self.steering = Steering(scenario, self.schedule, self.faults, self.crew, self.state,
                                 self.feed, self.history, self._event)
        self.ticker = Ticker(self.provisioner, topology.members, self.crew, self.depth, clock,
                             host_cpu, self._event, copies_each(scenario, topology),
                             topology.network_mbps)
        self.listeners = Listeners()  # what follows each second, registered at setup
        self.outcome, self.steps, self.drain = "failed", [], None
        self.accounting: Reconciliation | None = None

    @property
    def broker(self) -> BrokerSample | None:
        """The latest broker sample that arrived."""
        return self.ticker.broker

    @broker.setter
    def broker(self, sample: BrokerSample | None) -> None:
        self.ticker.broker = sample

    def request_stop(self, why: str = "stopped by Ctrl-C") -> None:
        """End the load early: senders stop, queues drain, accounting is written."""
        if not self.stop_requested.is_set():
            self.interruption = Interruption(reason=why)
        self.stop_requested.set()

    def run(self) -> RunResult:
        """Run the scenario to the end (or to a stop); always leaves a readable run directory.

        The topology is held for the run (:mod:`topologies.lease`) and the run directory by its
        controller (:data:`~results.rundir.locks.CONTROLLER_LOCK`) before anything starts."""
        with contextlib.ExitStack() as setup:
            held = setup.enter_context(lease.holding(self.topology.name, "run", self.run_id,
                                                     str(self.run_dir)))
            settled = lease.settle_previous(held.previous) if held.previous else None
            reused = holding.members_running(self.provisioner, self.topology.name, self.reuse)
            self.writer = open_run_dir(self.runs_dir, self.run_dir)
            self._event.open(self.writer)
            setup.callback(self.writer.close)
            run_lock, _ = FileLock.take(self.run_dir / CONTROLLER_LOCK, {"kind": "run",
                                                                         "id": self.run_id})
            setup.callback(run_lock.release, remove=True)
            setup.callback(claim(self.sd_dir, self.run_id).release, remove=True)
            self.manifest = holding.say_found(held.previous, settled, sweep(self.sd_dir), reused,
                                              self.manifest, self._event)
            self._write_manifest("running")
            setup.callback(self._write_manifest)  # the last word, once all else has stopped
            try:
                self._start(setup, started=reused is None or lease.foreign_owner(
                    reused.started_by))
                self._load()
            except KeyboardInterrupt:
                self.outcome = "aborted"
                raise
            except SurgeError as error:
                if isinstance(error, RunDirFailed):
                    self.interruption = Interruption(reason=str(error))
                self._event("error", error=str(error))
                raise
        return RunResult(self.run_dir, self.outcome, self.steps, self.accounting, self.drain)

    def _start(self, setup: contextlib.ExitStack, started: bool) -> None:
        """Start everything the load needs, each with its stop on ``setup``: the members (when
        this run starts them), the view, /metrics, the page, the agents, the discovery file."""
        if started:
            lease.record_members(self.topology.name, {
                "kind": "run", "id": self.run_id, "directory": str(self.run_dir),
                "pid": os.getpid()})
            setup.callback(holding.release_members, self.provisioner, self.topology.name,
                           self.keep_topology, self._event)
        # Local agents' processes take longest to start: they start now, beside what follows
        # (a failure before they are started stops them without a word).
        setup.callback(self.crew.abandon)
        self.crew.begin(agent_lifetime_s(self.state.planned_s))
        setup.enter_context(self.view)
        metrics = ControllerMetrics(self.metrics_port, say=self.view.say)
        setup.callback(metrics.close)
        self.state.metrics_url = metrics.url
        # Prometheus takes up to 5 s to act on a new targets file: the controller is listed
        # before provisioning so the first seconds of load are scraped too.
        setup.callback(remove_service_discovery, self.sd_dir, self.run_id)
        write_service_discovery(self.sd_dir, self.run_id, self.scenario.name, metrics.address,
                                [])
        self.page = serve_page(self.feed, self.board, self.web, self.token, self._event)
        setup.callback(lambda: end_page(self.feed, self.page, self.outcome))
        self.state.web_url = self.page.url if self.page else self.state.web_url
        for listener in (self.losses, self.history, self.steering.backlogs, RunDirRows(self.writer),
                         AgentErrors(self._event),
                         ViewFeed(self.state, self.view, self.feed, self.ticks),
                         MetricsFeed(metrics, self.state),
                         *([ScalerFeed(self.scaler)] if self.scaler else [])):
            self.listeners.add(listener)
        topology = self.topology
        self._event("provision", topology=topology.name,
                    members=f"{topology.start} of {topology.members}")
        with self.view.waiting(self.state, f"provisioning {topology.name}: {topology.start} "
                                           f"of {topology.members} members"):
            running = [m for m in self.provisioner.up() if m.running]
        self._event("members_up", members=[m.name for m in running])
        if self.manifest.reused and started:
            holding.purge_left(self.provisioner, self.queue_spec, running, self._event)
        self.manifest = holding.note_unmeasured(self.provisioner, self.manifest, self._event)
        self.manifest = holding.note_link(self.provisioner, self.manifest, self._event)
        setup.callback(self.crew.stop)
        with self.view.waiting(self.state, "checking queues, starting agents"):
            self.manifest = holding.check_queues(self.depth, running, self.scenario.workload,
                                                 self.manifest, self._event)
            self._start_agents(running)
        self.manifest = self.manifest.replace(prometheus=announce(
            self.sd_dir, self.run_id, self.scenario.name, metrics.address, self.crew.agents,
            self.provisioner.status(), self.run_dir))
        # The load runs: the Parquet writer is loaded beside the first second rather than
        # before the first publish, and before the run directory's first part is written.
        loading = threading.Thread(target=load_arrow, name="load-arrow", daemon=True)
        loading.start()
        setup.callback(loading.join)

    def _start_agents(self, running: list[Member]) -> None:
        """Start the agents, configure their workers on the running members, start step 1."""
        self.crew.start(agent_lifetime_s(self.state.planned_s))
        if self.crew.fleet.clocks is not None:
            self.manifest = holding.record_clocks(self.crew.fleet.clocks, self.manifest,
                                                  self._event)
        first = self.schedule.phase_at(0.0, self.history)
        self.crew.place(self.run_id, self.scenario, self.topology, self.provisioner, running,
                        self.queue_spec, first.rate_at(0.0), self.scaler)
        self.manifest = self.manifest.replace(agent_roles=self.crew.roles)
        self.state.step = 1
        self.steering.apply(0.0, first)
        self.steering.started(first, 0.0)

    def _load(self) -> None:
        """Tick once a second through the plan (noting the controller's own CPU over it),
        drain, account, and work out the steps."""
        cpu_at = self.process_cpu()
        try:
            self._tick_load()
        finally:
            self.ticker.lateness.spent(self.process_cpu() - cpu_at,
                                       self.clock.monotonic() - self.ticker.t0)
        self.accounting = self._finish()
        self.outcome = "interrupted" if self.stop_requested.is_set() else "completed"
        self.steps, self.drain = ending.step_table(self.schedule.phases, self.history,
                                                   self.scenario.measure.settle)
        self.feed.steps[:] = [step.as_json() for step in self.steps]
        self.manifest = self.manifest.replace(**({"drain": self.drain} if self.drain else {}), **(
            {"faults": timeline.fault_recoveries(timeline.read_events(self.run_dir), self.ticks)}
            if self.scenario.faults or self.losses.count else {}),
            backlogs=self.steering.backlogs.results(), **destinations(self.ticker.math.agents))

    def _tick_load(self) -> None:
        """The load part: a tick a second until the plan ends, an exit condition or a stop."""
        self.ticker.start()
        current = self.schedule.phase_at(0.0, self.history)
        planned = self.ticker.t0
        while not self.stop_requested.is_set():
            planned = self.ticker.next_tick(planned, self.stop_requested)
            started = self.clock.monotonic()
            elapsed = started - self.ticker.t0
            phase = self.schedule.phase_at(elapsed, self.history)
            if phase is None:  # no reads started: the drain's first tick asks after the stop
                break
            self.ticker.sampler.start()
            self.faults.tick(elapsed)
            self.steering.apply(elapsed, phase)
            if phase.index != current.index:
                self.steering.ended(current)
                current = phase
                self.steering.started(phase, elapsed)
            self._record(planned, started, current, "paused" if current.index == 0 else "running")
            why = ending.exit_reason(self.scenario, self.schedule.phases[-1], self.ticks[-1],
                                     elapsed, self.crew)
            if why:
                self._event("exit", reason=why, elapsed_s=elapsed)
                break

    def _record(self, planned: float, started: float, phase: plans.Phase | None,
                label: str) -> TickRecord:
        """Collect the tick's readings (until its deadline) and hand them to the listeners."""
        record = self.ticker.record(planned, started, phase, label, self.steering.target)
        self.listeners.tick(record)
        return record

    def _observation(self, row: dict[str, Any], tick: Tick, elapsed: float, target: float,
                     depth: int | None) -> Observation:
        """What the scaling policy sees of one tick (:func:`scalerfeed.observation`)."""
        return observation(self.broker, row, tick, elapsed, target, depth)

    def _finish(self) -> Reconciliation:
        """Stop the senders, drain (ticks of phase 0, "draining"), stop receiving, and account
        for every message (:func:`ending.finish`)."""
        if self.scaler:
            self.scaler.wait()
        self.faults.wait()
        done = ending.finish(self.ticker, self.crew, self.depth, self.scenario,
                             self.stop_requested, self._event,
                             lambda planned, at: self._record(planned, at, None, "draining"),
                             self.topology)
        lost = [agent.record() for agent in self.crew.watch.lost.values()]
        self.manifest = self.manifest.replace(accounting_details=done.extras,
                                              **({"agents_lost": lost} if lost else {}))
        self.feed.accounting = {**asdict(done.result), "explain": done.result.explain()}
        return done.result

    def _write_manifest(self, outcome: str | None = None) -> None:
        """run.json as it stands: ``running``, or (by default) the run's outcome."""
        self.manifest = self.manifest.replace(
            **ending.closing(outcome or self.outcome, self.clock.time(), self.interruption,
                             self.ticks, self.accounting, self.steps, self.ticker.lateness),
            phases=self.schedule.phases, **self.schedule.manifest_fields(),
            **fast_path_fields(self.crew.watch.snapshots()))
        self.writer.write_manifest(self.manifest)
