"""Which agent hosts which worker, and on which member and queue it starts: pure, so the rule
is tested with a table and no agent at all.

Workers go round-robin over the agents that host their kind and over the running members;
where senders and receivers share the agents, senders start where the receivers stopped (one of
each on two agents: an agent, so a core, each).
Queues are given in blocks (worker ``i`` of ``n`` takes slot ``i * count // n``), so a client
sweep adds whole queues' worth of workers. A not-fixed sender (MQ's ``bind: not-fixed``) gets
every instance of its slot and puts to each in turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drivers import protocol
from orchestrator.specs.message import MIN_MESSAGE_BYTES as HEADER_BYTES
from orchestrator.specs.message import MessageSpec
from orchestrator.specs.routing import BindingSpec
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import REPLY_EXCHANGE, QueueSpec


@dataclass(frozen=True)
class Seat:
    """Where one worker sits: ``("s", n)`` is sender n, ``("r", n)`` receiver n (from 1)."""

    worker: tuple[str, int]
    agent: int  # position of its agent in the fleet's agent list
    member: int  # index of the member it connects to


@dataclass
class Placement:
    """The configuration each agent gets, and every worker's seat (the scaler's start)."""

    configs: list[protocol.Configure]
    seats: list[Seat] = field(default_factory=list)


def place(scenario: ScenarioSpec, broker: str, settings: dict[str, Any],
          members: Sequence[Any], agent_count: int, sender_agents: Sequence[int],
          receiver_agents: Sequence[int], queue: QueueSpec, first_rate: float,
          bindings: Sequence[BindingSpec] = (), sides: Sequence[Sequence[Any]] = ()
          ) -> Placement:
    """Configurations for ``agent_count`` agents. ``members`` are the running members (each
    with ``index`` and ``endpoint``); ``sender_agents``/``receiver_agents`` are the positions of
    the agents that may host each kind; ``settings`` are the driver's own (how clients reach
    the provisioner's members); ``first_rate`` is each sender's rate at the start;
    ``bindings`` the topology's (those of a queue per receiver are each receiver's to make);
    ``sides``: the running members of linked clusters, senders on the first side's and
    receivers on the second's, replies through :data:`REPLY_EXCHANGE` (empty: one cluster)."""
    workload = scenario.workload
    sender_members = list(sides[0]) if sides else list(members)
    receiver_members = list(sides[1]) if sides else list(members)
    destination = protocol.Destination(
        endpoints=tuple(m.endpoint for m in members), queue=workload.queue,
        persistent=workload.message.persistent, confirms=workload.confirms,
        prefetch=workload.prefetch, manual_ack=workload.ack == "manual",
        reply_size=workload.reply_size or round(workload.message.mean),
        reply_timeout_s=workload.reply_timeout, unit_of_work=workload.unit_of_work,
        exchange=workload.exchange, routing_keys=tuple(workload.keys) if workload.exchange
        else (), key_order=workload.key_order, zipf_exponent=float(workload.zipf_exponent),
        confirm_window=workload.confirm_window, ack_every=workload.ack_every,
        heartbeat_s=workload.heartbeat, frame_max=workload.frame_max,
        consumer_arguments=dict(workload.consumer_arguments), global_qos=workload.global_qos,
        publish_transaction=workload.publish_transaction,
        consume_transaction=workload.consume_transaction,
        nack="" if workload.nack == "off" else workload.nack,
        polling_s=workload.polling_interval if workload.polling else None,
        consumer_rate=None if workload.consumer_rate is None else float(workload.consumer_rate),
        receiver_limit=scenario.exit.messages_per_receiver,
        reconnect_s=workload.reconnect_interval, reconnect=workload.reconnect, bind=workload.bind,
        tcp_options=dict(workload.tcp_options),
        senders_per_connection=workload.senders_per_connection,
        receivers_per_connection=workload.receivers_per_connection,
        reply_exchange=REPLY_EXCHANGE if sides and broker == "rabbitmq" else "",
        sides=tuple(tuple(m.endpoint for m in side) for side in sides))
    # publishing to an exchange, each queue is a subscription with its own copy of a message;
    # each receiver of a stream reads every message from its own offset, each receiver of a
    # queue per receiver its own queue
    stream = queue.type == "stream"
    subscriptions = bool(workload.exchange)
    senders: list[list[protocol.SenderConfig]] = [[] for _ in range(agent_count)]
    receivers: list[list[protocol.ReceiverConfig]] = [[] for _ in range(agent_count)]
    seats = []
    for i in range(workload.receivers):
        agent = receiver_agents[i % len(receiver_agents)]
        member = receiver_members[i % len(receiver_members)]
        slot = queue.slot(i, workload.receivers)
        name = queue.instance(member.index, slot)
        receivers[agent].append(protocol.ReceiverConfig(
            id=i + 1, endpoint=member.endpoint, queue=name,
            group=reader_group(name, i + 1) if queue.each_reader else name if subscriptions
            else "",
            start_delay_s=i * workload.receiver_spacing))
        seats.append(Seat(("r", i + 1), agent, member.index))
    # sharing the agents, senders go on round them from where the receivers stopped: one
    # sender and one receiver on two agents have a core each
    first = workload.receivers if list(sender_agents) == list(receiver_agents) else 0
    for i in range(workload.senders):
        agent = sender_agents[(first + i) % len(sender_agents)]
        member = sender_members[i % len(sender_members)]
        slot = queue.slot(i, workload.senders)
        target: str | list[str] = queue.instance(member.index, slot)
        if workload.bind == "not-fixed":
            target = [queue.instance(m.index, slot) for m in members] if queue.per_member \
                else queue.names
        if subscriptions:
            target = queue.instances([m.index for m in members]) or [queue.name]
        senders[agent].append(protocol.SenderConfig(
            producer_id=i + 1, rate=first_rate, endpoint=member.endpoint, queue=target,
            limit=scenario.exit.messages_per_sender, start_delay_s=workload.start_delay))
        seats.append(Seat(("s", i + 1), agent, member.index))
    if stream:  # its receivers read from an offset, and its depth is its length
        destination = dataclasses.replace(destination, stream_offset=workload.stream_offset)
    elif queue.per_receiver:  # no depth to read: each queue is named by the broker
        destination = dataclasses.replace(
            destination, queue_arguments=queue.declared_arguments, own_queues=tuple(
                protocol.QueueBinding(b.exchange, b.routing_key, dict(b.arguments))
                for b in bindings if b.queue == queue.name))
    elif workload.max_backlog is not None and workload.pattern != "request-reply":
        # the bound holds per queue instance; each sender takes its share of its queues'
        instances = len({name for agent in senders for config in agent
                         for name in ([config.queue] if isinstance(config.queue, str)
                                      else config.queue)})
        destination = dataclasses.replace(destination, backlog_per_sender=max(
            1, workload.max_backlog * instances // workload.senders))
    started = scenario.plan[0].receivers if scenario.plan else None
    configs = [protocol.Configure(
        broker=broker, pattern=workload.pattern, message=message_shape(workload.message),
        destination=destination, settings=dict(settings), in_flight=workload.in_flight,
        senders=senders[a], receivers=receivers[a], senders_paused=queue.per_receiver,
        receivers_started=started[0] if isinstance(started, list) else started)
        for a in range(agent_count)]
    return Placement(configs, seats)


def reader_group(stream: str, receiver_id: int) -> str:
    """The subscription of receiver ``receiver_id`` of ``stream``: it reads every message."""
    return f"{stream}~{receiver_id}"


def message_shape(message: MessageSpec) -> protocol.MessageShape:
    """What the agents make of every message: its size classes (payload files read here, once
    for every agent) and how each message picks one."""
    payloads = tuple(Path(f).read_bytes() for f in message.payload_files)
    sizes = tuple(HEADER_BYTES + len(p) for p in payloads) if payloads else \
        tuple(message.classes)
    return protocol.MessageShape(
        sizes=sizes, weights=() if message.size_steps else tuple(
            [1.0] * len(payloads) if payloads else message.weights),
        fill=message.body, payloads=payloads, properties=message.properties.given,
        mandatory=message.mandatory)
