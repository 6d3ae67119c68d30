"""One interface for starting a run's agents, wherever they run: on this machine, on load
hosts over SSH, or as pods. The run loop asks :func:`launcher_for` and never which kind it got.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.agents.client import AgentClient, AgentHandle
from orchestrator.specs import plan as plans
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.secrets import secret_variables
from orchestrator.specs.topology import TopologySpec

CLOCK_TOLERANCE_MS = 2.0  # host clocks possibly further apart: cross-host latency is unreliable
EXTRA_LIFETIME_S = 3600.0  # agents outlive the plan by this much before they give up


def agent_lifetime_s(planned_s: float) -> float:
    """The longest a run's agents live: the load's planned seconds (``planned_s``) and
    :data:`EXTRA_LIFETIME_S` more, after which each exits by itself."""
    return planned_s + EXTRA_LIFETIME_S


@dataclass
class Fleet:
    """A run's agents: all of them, those that host senders and those that host receivers
    (the same agents unless load hosts split them), and what was learnt starting them."""

    agents: list[AgentClient]
    senders: list[AgentClient]
    receivers: list[AgentClient]
    clocks: dict[str, Any] | None = None  # load hosts' clock offsets (run.json ``clocks``)
    said: list[str] = field(default_factory=list)  # what stopping them did, for the record


class Launcher(Protocol):
    """Starts and stops the agents of one run."""

    def begin(self, lifetime_s: float) -> bool:
        """Set the agents starting where that needs no wait (local processes), so that they
        start while the run prepares the rest; :meth:`start` completes it. Whether anything was
        begun: then :meth:`stop` also stops what was begun and never started."""

    def start(self, lifetime_s: float) -> Fleet:
        """Start the agents; each exits by itself after ``lifetime_s`` or with the controller."""

    def stop(self, fleet: Fleet) -> list[str]:
        """Stop every agent of ``fleet`` (and whatever carried them); what was done, in words."""


class LocalLauncher:
    """Agents as subprocesses on loopback: one per core unless the scenario says how many,
    never more than the workers they host. ``apart``: the first half of the agents host the
    senders and the rest the receivers (linked clusters: the requesters' CPU and the servers'
    measured apart), where there are two or more. ``broker``: the driver the agents load while
    the run prepares."""

    def __init__(self, count: int, log_dir: Path, hide: frozenset[str] = frozenset(),
                 apart: bool = False, broker: str | None = None):
        self.count, self.log_dir, self.hide, self.apart = count, log_dir, hide, apart
        self.broker = broker
        self.starting: Any = None  # the processes begun, not yet started (LocalStart)

    def begin(self, lifetime_s: float) -> bool:
        """Start the agents' processes (without the environment variables in ``hide``:
        secrets), without waiting for them; nothing more if they are begun already."""
        from orchestrator.agents.local import LocalStart
        if self.starting is None:
            self.starting = LocalStart(self.count, self.log_dir, lifetime_s, self.hide,
                                       self.broker)
        return True

    def start(self, lifetime_s: float) -> Fleet:
        """The agents, once each has said its first line (begun here if not yet)."""
        self.begin(lifetime_s)
        starting, self.starting = self.starting, None
        agents = starting.wait()
        if self.apart and len(agents) > 1:
            half = len(agents) // 2
            return Fleet(agents, agents[:half], agents[half:])
        return Fleet(agents, agents, agents)

    def stop(self, fleet: Fleet) -> list[str]:
        """Stop each agent's process (its process group, if it lingers), and those begun and
        never started."""
        self.abandon()
        _stop_all(fleet.agents)
        return []

    def abandon(self) -> None:
        """Kill the agents begun and never started, and forget them (their empty logs and the
        directories made for them); nothing once they have started."""
        if self.starting is not None:
            self.starting.abandon(forget=True)
            self.starting = None


class SshLauncher:
    """Agents on load hosts over SSH (document 000: senders on one host, receivers on
    another). Measures each host's clock against this one: latency between two hosts is only
    as good as their clocks agree, and the run says so."""

    def __init__(self, topology: TopologySpec, sender_hosts: list[str],
                 receiver_hosts: list[str], token: str, record: Callable[[Any], None]):
        self.topology, self.token, self.record = topology, token, record
        self.sender_hosts, self.receiver_hosts = sender_hosts, receiver_hosts
        self.sessions: list[Any] = []

    def begin(self, lifetime_s: float) -> bool:
        """Nothing: the sessions are opened and the agents started by :meth:`start`."""
        return False

    def start(self, lifetime_s: float) -> Fleet:
        """Open a session per host, start its agents, read its clock."""
        from orchestrator.agents.ssh import clock_offset, spawn_ssh_agents
        from topologies.ssh import SshSession
        hosts = {h.name: h for h in self.topology.hosts}
        by_host: dict[str, list[AgentHandle]] = {}
        agents: list[AgentHandle] = []
        clocks = {}
        try:
            for name in dict.fromkeys(self.sender_hosts + self.receiver_hosts):
                host = hosts[name]
                session = SshSession(host.target, host.ssh, record=self.record)
                self.sessions.append(session)
                by_host[name] = spawn_ssh_agents(session, host, len(agents), self.token,
                                                 lifetime_s)
                agents += by_host[name]
                offset, uncertainty = clock_offset(by_host[name][0])
                clocks[name] = {"offset_ms": round(offset, 3),
                                "uncertainty_ms": round(uncertainty, 3)}
        except BaseException:
            self.stop(Fleet(agents, [], []))
            raise
        return Fleet(agents, [a for n in self.sender_hosts for a in by_host[n]],
                     [a for n in self.receiver_hosts for a in by_host[n]], clock_agreement(clocks))

    def stop(self, fleet: Fleet) -> list[str]:
        """Stop the agents, then close the sessions that carried them."""
        _stop_all(fleet.agents)
        for session in self.sessions:
            session.close()
        return []


class PodLauncher:
    """Agents as pods of an Indexed Job in the topology's namespace."""

    def __init__(self, count: int, topology: TopologySpec, run_id: str, token: str):
        self.count, self.topology, self.run_id, self.token = count, topology, run_id, token

    def begin(self, lifetime_s: float) -> bool:
        """Nothing: the Job is applied by :meth:`start`."""
        return False

    def start(self, lifetime_s: float) -> Fleet:
        """Apply the Job and wait for its pods; refuse agents of another protocol version."""
        from orchestrator.agents.client import check_protocol
        from orchestrator.agents.pods import start_agent_pods
        agents = start_agent_pods(self.count, self.topology, self.run_id, self.token,
                                  lifetime_s)
        fleet = Fleet(agents, agents, agents)
        try:
            for agent in agents:
                check_protocol(agent)
        except BaseException:
            self.stop(fleet)
            raise
        return fleet

    def stop(self, fleet: Fleet) -> list[str]:
        """Ask the agents to stop and delete the run's Kubernetes objects."""
        from orchestrator.agents.pods import stop_agent_pods
        return stop_agent_pods(fleet.agents, self.topology, self.run_id)


def launcher_for(scenario: ScenarioSpec, topology: TopologySpec, run_id: str, token: str,
                 run_dir: Path, record: Callable[[Any], None]) -> Launcher:
    """Where the scenario's ``agents_on`` puts its agents."""
    placement = scenario.agents_on
    if placement.senders:
        return SshLauncher(topology, placement.senders, placement.receivers, token, record)
    if placement.pods:
        return PodLauncher(placement.pods, topology, run_id, token)
    return _local_launcher(scenario, topology, run_dir)


def begin_local(scenario: ScenarioSpec, topology: TopologySpec, run_dir: Path
                ) -> LocalLauncher | None:
    """The launcher of a run's agents, begun now (:meth:`LocalLauncher.begin`), where they run
    on this machine: a run then loads the rest of itself while its agents start. ``None`` where
    they run elsewhere or cannot begin here (``run_dir`` cannot be made, say): the run then
    begins them itself, and says why where that fails too. Whoever begins them calls
    :meth:`LocalLauncher.abandon` once the run is over."""
    if scenario.agents_on.senders or scenario.agents_on.pods:
        return None
    launcher = _local_launcher(scenario, topology, run_dir)
    try:
        launcher.begin(agent_lifetime_s(plans.duration(plans.expand(scenario.plan))))
    except OSError:
        return None
    return launcher


def _local_launcher(scenario: ScenarioSpec, topology: TopologySpec, run_dir: Path
                    ) -> LocalLauncher:
    """Agents on this machine: one per core unless the scenario says how many, never more than
    its workers."""
    workload = scenario.workload
    count = scenario.agents or os.cpu_count() or 1
    return LocalLauncher(max(1, min(count, workload.senders + workload.receivers)),
                         run_dir / "agents", frozenset(secret_variables(topology)),
                         apart=topology.link is not None and min(workload.senders,
                                                                 workload.receivers) > 0,
                         broker=topology.broker)


def clock_agreement(clocks: dict[str, dict[str, float]]) -> dict[str, Any]:
    """How far apart the load hosts' clocks may be (the spread of their offsets plus twice the
    worst uncertainty) and whether cross-host latency can be trusted at that."""
    spread = max(c["offset_ms"] for c in clocks.values()) - \
        min(c["offset_ms"] for c in clocks.values())
    worst = max(c["uncertainty_ms"] for c in clocks.values())
    bound = 0.0 if len(clocks) == 1 else spread + 2 * worst
    return {"hosts": clocks, "latency_error_bound_ms": round(bound, 3),
            "latency_reliable": bound <= CLOCK_TOLERANCE_MS}


def _stop_all(agents: list[AgentClient]) -> None:
    from concurrent.futures import ThreadPoolExecutor
    if agents:
        with ThreadPoolExecutor(len(agents)) as pool:
            list(pool.map(lambda agent: agent.stop(), agents))
