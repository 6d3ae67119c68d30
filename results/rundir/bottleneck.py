"""What saturated in a step, named from the figures surge records for it.

Document 003 names its limits by hand ("limited by our 10GbE workload network at nearly 27,000
round trips/sec", "the QM CPU is no longer the limiting factor"); here each step row names its
own, in the order a reader checks them:

1. publishers blocked by the broker (a memory or disk alarm: flow control held them), with
   the members whose alarm was on and for how long;
2. a member at its CPU quota (its mean CPU at least :data:`AT_QUOTA` of the cores it may use);
3. the load generator: an agent at :data:`AGENT_BUSY` % of a core or more (an agent's publish
   and consume loop runs on one interpreter thread, so one core is its ceiling);
4. the network: a member's client traffic in or out at :data:`AT_LINK` of its link's
   bandwidth or more (where the topology gives it, ``network_mbps``);
5. receivers busy: the step's messages were received at less than :data:`RECEIVERS_BEHIND` of
   the rate they were sent and the queues hold that backlog (consumer-bound); where they do
   not (their depth stays under half of it), the backlog is held before them: the broker's
   intake is behind (flow control), not the receivers;
6. a whole host busy: a broker host (SSH placements), or the controller's host, at
   :data:`HOST_BUSY` % of all its cores or more (where the load generator and the members
   share a machine, neither may be at its own limit while the machine is at its).

Several may hold at once; all are named, in that order. "none visible" is said when none
holds: then the limit, if the target was missed, is something surge does not measure (the
disk, the broker's internal work, a network whose bandwidth the topology does not give). A
figure a row does not have (a run recorded before it was kept) never names a limit.
"""

from __future__ import annotations

from typing import Protocol

AT_QUOTA = 0.9  # of a member's CPU quota
AGENT_BUSY = 90.0  # % of one core
AT_LINK = 0.9  # of a member's network link, each way
RECEIVERS_BEHIND = 0.95  # received over sent
HOST_BUSY = 90.0  # % of all a host's cores
NONE_VISIBLE = "none visible"


class StepFigures(Protocol):
    """What the rules read of a step row (:class:`~results.rundir.steps.StepRow`)."""

    label: str
    seconds: int
    max_backlog: int | None
    sent_rate: float | None
    received_rate: float | None
    cpu_percent: dict[str, float]
    cpu_quota_cores: dict[str, float]
    agents_cpu_percent: dict[str, float]
    blocked_s: float
    host_cpu_percent: float | None
    hosts_cpu_percent: dict[str, float]
    memory_alarm_seconds: dict[str, int]
    disk_alarm_seconds: dict[str, int]
    network_in_mbps: dict[str, float]
    network_out_mbps: dict[str, float]
    network_link_mbps: dict[str, float]


def limits(row: StepFigures) -> list[str]:
    """Every limit the row's figures show, most telling first (see the module's list)."""
    found = []
    alarms = [f"{kind} alarm on {_short(member)} {seconds} s"
              for kind, per_member in (("memory", row.memory_alarm_seconds),
                                       ("disk", row.disk_alarm_seconds))
              for member, seconds in sorted(per_member.items()) if seconds]
    if row.blocked_s > 0 or alarms:
        found.append(f"publishers blocked by the broker for {row.blocked_s:,.0f} agent-seconds"
                     + (f" ({', '.join(alarms)})" if alarms else ""))
    for member, cores in sorted(row.cpu_quota_cores.items()):
        cpu = row.cpu_percent.get(member)
        if cores and cpu is not None and cpu >= AT_QUOTA * cores * 100:
            found.append(f"member {_short(member)} at its CPU quota ({cpu:.0f}% of "
                         f"{cores * 100:.0f}%)")
    for agent, cpu in sorted(row.agents_cpu_percent.items()):
        if cpu >= AGENT_BUSY:
            found.append(f"load generator: agent {agent} at {cpu:.0f}% of a core")
    for member, link in sorted(row.network_link_mbps.items()):
        for way, traffic in (("in", row.network_in_mbps), ("out", row.network_out_mbps)):
            mbps = traffic.get(member)
            if link and mbps is not None and mbps >= AT_LINK * link:
                found.append(f"network: member {_short(member)} {way} at {mbps:,.1f} of "
                             f"{link:,.0f} Mb/s")
    if row.sent_rate and row.received_rate is not None \
            and row.received_rate < RECEIVERS_BEHIND * row.sent_rate:
        rates = f"{row.received_rate:,.0f} of {row.sent_rate:,.0f} sent per second received"
        grown = (row.sent_rate - row.received_rate) * row.seconds
        found.append(f"receivers behind: {rates} (queues growing)"
                     if row.max_backlog is not None and row.max_backlog >= grown / 2 else
                     f"broker intake behind: {rates}, the backlog held before the queues "
                     f"(their depth stayed under {row.max_backlog or 0:,})")
    for host, cpu in sorted(row.hosts_cpu_percent.items()):
        if cpu >= HOST_BUSY:
            found.append(f"broker host {host} at {cpu:.0f}% of its cores")
    if row.host_cpu_percent is not None and row.host_cpu_percent >= HOST_BUSY:
        found.append(f"this host at {row.host_cpu_percent:.0f}% of its cores (the load "
                     f"generator's{'' if row.hosts_cpu_percent else ' and the members'})")
    return found


def bottleneck(row: StepFigures) -> str:
    """The row's limits as one line, or :data:`NONE_VISIBLE`."""
    return "; ".join(limits(row)) or NONE_VISIBLE


def _short(member: str) -> str:
    """A member's name without its host (``surge-local-1-0@localhost`` -> ``surge-local-1-0``)."""
    return member.split("@")[0]


def bottleneck_lines(rows: list[StepFigures]) -> list[str]:
    """``step 1: ...`` for each row: what saturated in it."""
    return [f"step {row.label}: {bottleneck(row)}" for row in rows]
