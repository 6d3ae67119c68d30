"""One sample of a RabbitMQ cluster, its members read concurrently and each stamped."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from topologies.base import BrokerSample, CpuReading, Member, MemberSample
from topologies.rabbitmq.prometheus import NodeStats, node_stats


def prometheus_stats(member: Member) -> NodeStats | None:
    """A running member's figures from its own Prometheus endpoint (``None``: no answer)."""
    return node_stats(member.metrics_url)


def broker_sample(members: list[Member], cpu: Callable[[Member], CpuReading | None],
                  quota_cores: float | None,
                  stats: Callable[[Member], NodeStats | None] = prometheus_stats,
                  hosts: dict[str, CpuReading | None] | None = None) -> BrokerSample:
    """Per member its CPU reading (running members only) and its connections and messages
    from ``stats``, asked of all running members at once; a member that does not answer is
    unknown for this sample. Queue depths are left to the controller's own probe."""
    running = [m for m in members if m.running]
    with ThreadPoolExecutor(max(1, len(running))) as pool:
        answers = dict(zip((m.name for m in running), pool.map(stats, running)))
    samples = []
    for member in members:
        figures = answers.get(member.name)
        samples.append(MemberSample(
            name=member.name, running=member.running,
            cpu=cpu(member) if member.running else None, cpu_quota_cores=quota_cores,
            connections=figures.connections if figures else None,
            messages_in=figures.received if figures else None,
            messages_out=figures.delivered if figures else None,
            unacknowledged=figures.unacknowledged if figures else None))
    return BrokerSample(samples, hosts=hosts or {})
