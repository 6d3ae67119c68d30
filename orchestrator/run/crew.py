"""The run's load agents: started, their workers placed on the running members, told each
change of rate and consumer delay, stopped at the end."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from drivers import protocol
from orchestrator.agents.client import AgentClient
from orchestrator.agents.launcher import Fleet, Launcher
from orchestrator.agents.placement import place
from orchestrator.clock import Clock, SystemClock
from orchestrator.errors import AgentError
from orchestrator.run.agentloss import AgentWatch, LostAgent
from orchestrator.scaling.scaler import Scaler
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from topologies.base import Member, Provisioner

CONSUMERS_WAIT_S = 30.0  # receivers declaring their own queues: how long senders wait for them
# ...asking every agent whether they consume after 10 ms, then twice as long each time up to
# 100 ms: the senders start within a few ms of the last receiver, with a few asks per agent
CONSUMERS_FIRST_ASK_S, CONSUMERS_ASK_S = 0.01, 0.1


class Crew:
    """The agents of one run; the lost ones (``watch``) are no longer asked anything."""

    def __init__(self, launcher: Launcher, watch: AgentWatch, event: Callable[..., None],
                 clock: Clock | None = None):
        self.launcher, self.watch, self.event = launcher, watch, event
        self.clock = clock or SystemClock()
        self.fleet = Fleet([], [], [])
        self.applied: dict[str, Any] = {}  # the last rate and delay sent
        self.begun = False  # agents set starting (:meth:`begin`) and not yet started
        self.roles: dict[str, str] = {}  # agent index -> the kinds of worker it hosts
        self.t0: float | None = None  # the load's start on ``clock`` (set by the ticker)

    @property
    def agents(self) -> list[AgentClient]:
        """Every agent (none before they start)."""
        return self.fleet.agents

    @property
    def live(self) -> list[AgentClient]:
        """The agents not lost (see :mod:`orchestrator.run.agentloss`)."""
        return self.watch.live(self.fleet.agents)

    def all(self, function: Callable[[AgentClient], Any], strict: bool = False) -> list:
        """``function`` of every live agent, at once: the answers of those it reached. An agent
        it cannot reach (:attr:`AgentError.unreachable`) is lost (:meth:`lose`) and left out,
        unless ``strict`` (before the load: a run without it is not the run asked for); any
        other failure is raised."""
        live = self.live
        with ThreadPoolExecutor(max(1, len(live))) as pool:
            calls = [pool.submit(function, agent) for agent in live]
        answers = []
        for agent, call in zip(live, calls):
            try:
                answers.append(call.result())
            except AgentError as error:
                if strict or not error.unreachable:
                    raise
                self.lose([self.watch.give_up(agent, f"a command failed: {error}",
                                              self.elapsed_s())])
        return answers

    def elapsed_s(self) -> float:
        """The run's second now: since the load started (:attr:`t0`), 0 before."""
        return 0.0 if self.t0 is None else self.clock.monotonic() - self.t0

    def lose(self, lost: list[LostAgent]) -> None:
        """Say each of the agents just ``lost`` as an ``agent_lost`` event."""
        for agent in lost:
            self.event("agent_lost", **agent.record(), explain=agent.explain())

    def begin(self, lifetime_s: float) -> None:
        """Set the agents starting where the launcher needs no wait for it (local processes):
        they start while the run prepares the rest, and :meth:`start` completes it."""
        self.begun = self.launcher.begin(lifetime_s)

    def start(self, lifetime_s: float) -> None:
        """Start the agents (they give up after ``lifetime_s``)."""
        self.begun = False  # the launcher's start stops what it began if it fails
        self.fleet = self.launcher.start(lifetime_s)
        self.event("agents_up", count=len(self.agents),
                   agents=[{"index": a.index, "host": a.host, "port": getattr(a, "port", None),
                            "pid": getattr(getattr(a, "process", None), "pid", None)}
                           for a in self.agents])

    def place(self, run_id: str, scenario: ScenarioSpec, topology: TopologySpec,
              provisioner: Provisioner, members: list[Member], queue: QueueSpec,
              first_rate: float, scaler: Scaler | None) -> None:
        """Configure the agents' workers on the running ``members``; the scaler learns where
        each worker sits."""
        agents = self.agents
        position = {id(a): i for i, a in enumerate(agents)}
        placement = place(scenario, topology.broker, provisioner.client_settings(), members,
                          len(agents), [position[id(a)] for a in self.fleet.senders],
                          [position[id(a)] for a in self.fleet.receivers], queue, first_rate,
                          topology.bindings,
                          [[m for m in side if m.running] for side in provisioner.sides()])
        if scaler:
            for seat in placement.seats:
                scaler.place(seat.worker, agents[seat.agent], seat.member)
        for agent in agents:
            config = placement.configs[position[id(agent)]]
            self.watch.hosting(agent.index, len(config.senders), len(config.receivers))
            self.roles[str(agent.index)] = " and ".join(
                kind for kind, workers in (("senders", config.senders),
                                           ("receivers", config.receivers)) if workers) or "none"
        self.all(lambda agent: agent.configure(replace(
            placement.configs[position[id(agent)]],
            labels={"run_id": run_id, "scenario": scenario.name, "agent": str(agent.index)})),
            strict=True)
        if queue.per_receiver:  # senders start paused: each receiver's queue is bound first
            self._await_consumers(scenario.workload.receivers)

    def _await_consumers(self, receivers: int) -> None:
        """Wait until ``receivers`` consume (each from the queue it declared), at most
        :data:`CONSUMERS_WAIT_S`; said as an event when they do not."""
        deadline = self.clock.monotonic() + CONSUMERS_WAIT_S
        pause = CONSUMERS_FIRST_ASK_S
        while True:
            consuming = sum(s.consuming or 0
                            for s in self.all(lambda a: a.snapshot(), strict=True))
            if consuming >= receivers:
                return
            if self.clock.monotonic() >= deadline:
                self.event("receivers_not_ready", consuming=consuming, receivers=receivers,
                           explain=f"{consuming} of {receivers} receivers consume after "
                                   f"{CONSUMERS_WAIT_S:.0f} s; senders start anyway, and what "
                                   f"they publish before a receiver's queue is bound reaches "
                                   f"no queue of that receiver")
                return
            self.clock.sleep(pause)
            pause = min(2 * pause, CONSUMERS_ASK_S)

    def apply(self, rate: protocol.Rate, delay: float, held: bool = False) -> bool:
        """Send what changed since the last call; whether the consumers' delay or hold
        changed."""
        if rate != self.applied.get("rate"):
            self.all(lambda agent: agent.set_rate(rate))
            self.applied["rate"] = rate
        consumers = protocol.ConsumerDelay(delay, held)
        if consumers == self.applied.get("consumers", protocol.ConsumerDelay(0.0)):
            return False
        self.all(lambda agent: agent.set_consumer_delay(consumers))
        self.applied["consumers"] = consumers
        return True

    def stop(self) -> None:
        """Stop every agent (said as ``agents_down``); nothing when none started."""
        if self.agents:
            said = self.launcher.stop(self.fleet)
            self.event("agents_down", agents=len(self.agents),
                       **({"deleted": said} if said else {}))

    def abandon(self) -> None:
        """Stop the agents begun and never started, without a word (none had started)."""
        if self.begun:
            self.begun = False
            self.launcher.stop(self.fleet)
