"""The provisioner for a topology: by broker and placement."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.specs.topology import TopologySpec
from topologies.base import Provisioner


def provisioner_for(topology: TopologySpec, record: Callable[[object], None] | None = None
                    ) -> Provisioner:
    """RabbitMQ on loopback, on SSH hosts, through the cluster operator on Kubernetes or as it
    already runs elsewhere; over SSH an MQ uniform cluster or two queue managers joined by
    channels, MQ Native HA on Kubernetes, or MQ queue managers surge did not start; ``record``
    receives every remote command's result where there are remote commands."""
    if topology.broker == "rabbitmq" and topology.placement == "existing":
        from topologies.rabbitmq.existing import ExistingRabbitMQ
        return ExistingRabbitMQ(topology, record=record)
    if topology.broker == "rabbitmq" and topology.placement == "ssh":
        from topologies.rabbitmq.remote import SshRabbitMQ
        return SshRabbitMQ(topology, record=record)
    if topology.broker == "rabbitmq" and topology.placement == "kubernetes":
        from topologies.rabbitmq.kubernetes import RabbitKubernetesProvisioner
        return RabbitKubernetesProvisioner(topology)
    if topology.broker == "rabbitmq" and topology.placement == "local" and topology.link:
        from topologies.rabbitmq.linked import LinkedLocalRabbitMQ
        return LinkedLocalRabbitMQ(topology)
    if topology.broker == "rabbitmq" and topology.placement == "local":
        from topologies.rabbitmq.local import LocalRabbitMQ
        return LocalRabbitMQ(topology)
    if topology.placement == "existing" and topology.broker == "ibmmq":
        from topologies.mq.existing import ExistingQueueManagers
        return ExistingQueueManagers(topology, record=record)
    if topology.placement == "ssh" and topology.link:
        from topologies.mq.linked import LinkedQueueManagers
        return LinkedQueueManagers(topology, record=record)
    if topology.placement == "ssh":
        from topologies.mq.provision import UniformClusterProvisioner
        return UniformClusterProvisioner(topology, record=record)
    from topologies.mq.nativeha import NativeHaProvisioner
    return NativeHaProvisioner(topology)
