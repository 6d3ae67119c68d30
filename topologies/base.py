"""What every provisioner offers the controller, whatever the broker and the placement."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.specs.mqtopics import Subscription
from orchestrator.specs.topology import TopologySpec


def default_state_root() -> Path:
    """Where provisioner state lives: ``$SURGE_STATE_DIR`` or ``~/.local/state/surge``."""
    return Path(os.environ.get("SURGE_STATE_DIR", Path.home() / ".local/state/surge"))


@dataclass(frozen=True)
class Member:
    """One broker member of the pool and where clients and scrapers reach it."""

    index: int
    name: str
    host: str
    port: int  # where clients connect: the AMQP listener, the MQ listener
    management_port: int
    prometheus_port: int
    running: bool = False
    pid: int | None = None
    standby: bool = False  # booted and joined, broker application stopped (a warm pool member)
    endpoint: str = ""  # what a worker connects to, as its driver reads it (the provisioner's)

    @property
    def metrics_url(self) -> str:
        """The member's Prometheus endpoint."""
        return f"http://{self.host}:{self.prometheus_port}/metrics"


@dataclass(frozen=True)
class CpuReading:
    """Cumulative CPU seconds of a member (or busy seconds of a host) at ``at``, a monotonic
    time on the clock of the host that took the reading; for hosts, ``capacity`` is the CPU
    seconds available up to ``at`` over all cores, so a busy delta over a capacity delta is a
    share of the whole host."""

    seconds: float
    at: float
    capacity: float | None = None


@dataclass(frozen=True)
class BrokerResources:
    """A member's resources as it reports them itself (``None``: unknown, never 0): memory in
    use and its high watermark (the limit above which the member's memory alarm blocks
    publishers), disk space free and its limit (below which the disk alarm does), whether each
    alarm is in effect, open file descriptors and their limit, and bytes received from and sent
    to clients (cumulative over the connections open now: it falls when one closes)."""

    memory_bytes: int | None = None
    memory_limit_bytes: int | None = None
    memory_alarm: bool | None = None
    disk_free_bytes: int | None = None
    disk_free_limit_bytes: int | None = None
    disk_alarm: bool | None = None
    fds_open: int | None = None
    fds_max: int | None = None
    network_in_bytes: int | None = None
    network_out_bytes: int | None = None

    @property
    def memory_percent_of_watermark(self) -> float | None:
        """Memory in use over the high watermark (%); ``None`` unless both are known."""
        if self.memory_bytes is None or not self.memory_limit_bytes:
            return None
        return 100.0 * self.memory_bytes / self.memory_limit_bytes


@dataclass(frozen=True)
class MemberStats:
    """A member's own figures, asked of the member itself: client connections, messages
    published into and delivered out of it (cumulative), and the CPU its runtime reports
    having used (where the provisioner cannot read the member's CPU itself)."""

    connections: int
    messages_in: int
    messages_out: int
    at: float | None = None  # when the member answered (the reader's monotonic clock)
    cpu: CpuReading | None = None
    resources: BrokerResources | None = None  # None: the source reports none


@dataclass(frozen=True)
class MemberSample:
    """What was read about one member in one tick; ``None`` is unknown (not asked, not answered
    in time, or left out by the broker), never zero. Rates are derived by the controller."""

    name: str
    running: bool
    cpu: CpuReading | None
    cpu_quota_cores: float | None
    connections: int | None = None
    messages_in: int | None = None  # published through this member, cumulative
    messages_out: int | None = None  # delivered through this member, cumulative
    cpu_age_s: float | None = None  # at most how old the CPU figure is; None: not said
    resources: BrokerResources | None = None  # None: all unknown

    def with_stats(self, stats: MemberStats | None) -> MemberSample:
        """This sample with the member's own figures (all unknown if ``stats`` is None); a CPU
        reading the provisioner took itself is kept over the member's own."""
        return replace(self, cpu=self.cpu if self.cpu is not None or stats is None else stats.cpu,
                       connections=stats.connections if stats else None,
                       messages_in=stats.messages_in if stats else None,
                       messages_out=stats.messages_out if stats else None,
                       resources=stats.resources if stats else None)


@dataclass(frozen=True)
class BrokerSample:
    """One scrape of the whole cluster: its members, the CPU of the hosts they run on (SSH
    placements; empty where the members share the controller's host), and queue depths where
    the broker's own metrics give them (``None``: not from this source)."""

    members: list[MemberSample]
    queue_depths: dict[str, int] | None = None
    hosts: dict[str, CpuReading | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CommandResult:
    """What one command a provisioner ran did (on a host over SSH, or here).

    ``status`` is the exit status, or -1 when there is none (killed by a signal, timed out,
    connection lost).
    """

    host: str
    command: str
    status: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether the command exited with status 0."""
        return self.status == 0


class Provisioner:
    """Starts, observes and stops the members of one topology.

    Every provisioner inherits from this class. The core (``member`` to ``down``) is what each
    must implement; after it come the optional features, each with the behaviour of a
    placement that does not offer it, which a provisioner overrides where it does."""

    topology: TopologySpec

    def member(self, index: int) -> Member:
        """Member ``index`` of the pool as configured (whether or not it runs)."""
        raise NotImplementedError

    def up(self) -> list[Member]:
        """Start ``topology.start`` members (reusing running ones) and declare the queues."""
        raise NotImplementedError

    def status(self) -> list[Member]:
        """Every member of the pool with whether it runs now."""
        raise NotImplementedError

    def start_member(self, index: int | None = None) -> Member:
        """Start one more member of the pool (the next stopped one by default) and join it."""
        raise NotImplementedError

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Take a member out of service gracefully (back to standby in a warm pool), or kill it
        (fault injection)."""
        raise NotImplementedError

    def sample(self) -> BrokerSample:
        """Member CPU (each reading stamped when it was taken) and broker hosts' CPU, plus
        connections and messages per member where one call gives them all (else see
        :attr:`asks_members`)."""
        raise NotImplementedError

    def client_settings(self) -> dict[str, Any]:
        """How clients reach the members beyond their endpoints: the driver's own settings
        (e.g. the MQ queue manager group, channel and CCDT), sent to every agent."""
        raise NotImplementedError

    def settled_queue_depths(self) -> dict[str, int] | None:
        """Exact messages per queue, read from the queues themselves, for the final accounting;
        ``None`` where this placement has no way to read them (unknown, not empty)."""
        raise NotImplementedError

    def down(self) -> list[str]:
        """Stop everything this provisioner started and remove its state; says what it did."""
        raise NotImplementedError

    # -- optional features, with the behaviour of a placement that lacks them ----------------

    asks_members: bool = False
    """Whether members answer for themselves: the controller then asks each one on its own
    (:meth:`member_stats`), so that one slow member leaves only its own figures unknown."""

    balances_clients: bool = False
    """Whether the broker moves clients itself (an MQ uniform cluster): the scaler then sends
    no moves."""

    transit_queues: frozenset[str] = frozenset()
    """Queues holding the workload's messages on their way between linked clusters (an MQ
    transmission queue): counted with the workload's queues, never as lost."""

    def member_stats(self, member: Member) -> MemberStats | None:
        """Member ``member``'s own figures, where :attr:`asks_members`; ``None``: unknown."""
        return None

    def client_placement(self) -> dict[str, dict[str, int]] | None:
        """Where the broker says the run's clients are now, where it moves them itself
        (:attr:`balances_clients`): per running member, connections per application name;
        ``None`` where it cannot say."""
        return None

    def sides(self) -> list[list[Member]]:
        """The members by the cluster each belongs to, where the topology links several (each
        side's queues are its own, and a worker stays on its side); empty: one cluster."""
        return []

    def link_state(self) -> dict[str, Any] | None:
        """Linked clusters: each side's member names, the member the link runs in and each
        shovel's state (:class:`results.rundir.manifest.LinkRecord`); ``None``: no link."""
        return None

    def route_lines(self) -> list[str]:
        """Linked clusters: each part of the link in words, for ``surge plan``; none by
        default."""
        return []

    def unmeasured(self) -> dict[str, str]:
        """The figures this placement cannot know, each with why (they stay unknown in the
        rows, never zero); none by default."""
        return {}

    def subscriptions(self) -> list[Subscription]:
        """Subscriptions the controller makes with the run's client before any load (IBM MQ
        queue managers surge did not start: the topology's bindings); none by default."""
        return []

    def unreachable_from_controller(self) -> str | None:
        """Why the members cannot be reached from the controller's machine (the queues are
        then not checked before the load); ``None``: they can."""
        return None

    def purge_queues(self, members: list[Member], names: list[str]) -> dict[str, int] | None:
        """Remove every message in the queues ``names`` through the running ``members``;
        the messages removed per queue, or ``None`` where this broker offers no way to."""
        return None

    # faults a placement may offer (``None``: the fault is refused, said as an event)
    memory_alarm: Callable[[int, bool], None] | None = None
    """Set member ``index``'s memory alarm off (``True``) or clear it (``False``)."""
    delete_queues: Callable[[], list[str]] | None = None
    """Delete the topology's queues; returns their names (``declare_queues`` undoes it)."""
    declare_queues: Callable[[], None] | None = None
    """Declare the topology's queues again."""
    stop_vm: Callable[[int], None] | None = None
    """Stop member ``index``'s whole VM, not only its broker application."""
    set_link: Callable[[bool], None] | None = None
    """Bring a linked topology's link up (``True``) or take it down (``False``)."""
    await_quorum: Callable[..., float] | None = None
    """Wait until every quorum queue has a leader and all its members; seconds waited."""
