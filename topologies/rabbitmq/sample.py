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
    samples = [MemberSample(member.name, member.running,
                            cpu(member) if member.running else None, quota_cores).with_stats(
                                stats(member) if stats and member.running else None)
               for member in members]
    return BrokerSample(samples, hosts=hosts or {})
