"""One sample of a RabbitMQ cluster: its members' CPU, each reading stamped when taken."""

from __future__ import annotations

from collections.abc import Callable

from topologies.base import BrokerSample, CpuReading, Member, MemberSample, MemberStats


def broker_sample(members: list[Member], cpu: Callable[[Member], CpuReading | None],
                  quota_cores: float | None,
                  stats: Callable[[Member], MemberStats | None] | None = None,
                  hosts: dict[str, CpuReading | None] | None = None) -> BrokerSample:
    """Per member its CPU reading (running members only), and where ``stats`` is given (one
    call answering for every member) its connections and messages; unknown otherwise."""
    samples = []
    for member in members:
        figures = stats(member) if stats and member.running else None
        samples.append(MemberSample(
            name=member.name, running=member.running,
            cpu=cpu(member) if member.running else None, cpu_quota_cores=quota_cores,
            connections=figures.connections if figures else None,
            messages_in=figures.messages_in if figures else None,
            messages_out=figures.messages_out if figures else None,
            unacknowledged=figures.unacknowledged if figures else None))
    return BrokerSample(samples, hosts=hosts or {})
