"""A topology's exchanges and bindings as IBM MQ subscriptions (the mapping:
:mod:`drivers.mq.topics`): the MQSC every provisioned queue manager runs, and the MQSUB the
controller makes on queue managers surge did not start."""

from __future__ import annotations

from drivers.mq.topics import Subscription, subscription_name, subscription_topic
from orchestrator.specs.topology import TopologySpec


def subscriptions(topology: TopologySpec) -> list[Subscription]:
    """One durable subscription per binding and bound queue, in the topology's order."""
    kinds = {e.name: e.type for e in topology.exchanges}
    return [Subscription(subscription_name(b.exchange, i, queue),
                         subscription_topic(kinds.get(b.exchange, "direct"), b.exchange,
                                            b.routing_key), queue)
            for i, b in enumerate(topology.bindings, 1) if b.queue is not None
            for queue in topology.queue_names(b.queue)]


def mqsc_lines(topology: TopologySpec) -> list[str]:
    """``DEFINE SUB`` of every subscription, after the queues they put to."""
    subs = subscriptions(topology)
    return ["* Subscriptions: the topology's bindings", *(s.mqsc() for s in subs)] if subs else []
