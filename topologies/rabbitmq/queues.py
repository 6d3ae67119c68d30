"""Which member leads which queue, the arguments each queue is declared with, and the order of
declaring queues, exchanges and bindings: the one rule every RabbitMQ provisioner (local, SSH,
Kubernetes, Ansible, existing) follows.

A per-member queue has an instance on every member, led by that member; a pattern's queues
(``pairs-%d``) are led by the members in turn. A queue declared through a member's API is led
by that member (quorum queues: ``x-queue-leader-locator: client-local``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from orchestrator.specs.topology import QueueSpec, TopologySpec


def placements(queues: Sequence[QueueSpec], members: Sequence[int]
               ) -> list[tuple[QueueSpec, str, int]]:
    """Every queue to declare: its spec, its name, and the index of the member to lead it."""
    out = []
    for queue in queues:
        if queue.per_receiver:
            continue  # each receiver declares its own
        if queue.per_member:
            out += [(queue, queue.instance(index), index) for index in members]
        else:
            out += [(queue, name, members[i % len(members)]) for i, name in enumerate(queue.names)]
    return out


def arguments(queue: QueueSpec) -> dict[str, Any]:
    """The queue's x-arguments (:attr:`QueueSpec.declared_arguments`) and, for a quorum queue
    or a stream, its leader on the member it is declared through."""
    out = queue.declared_arguments
    if queue.type in ("quorum", "stream"):
        out.setdefault("x-queue-leader-locator", "client-local")
    return out


def declare(topology: TopologySpec, members: Sequence[int], api: Callable[[int], Any]) -> None:
    """Declare the topology's queues (each through ``api(index)`` of the member to lead it),
    then its exchanges and bindings (through the first member's; they are cluster-wide).
    Idempotent: a scale-out declares again for its new member."""
    for queue, name, index in placements(topology.queues, members):
        api(index).declare_queue(queue, name)
    if not topology.exchanges or not members:
        return
    first = api(members[0])
    for exchange in topology.exchanges:
        first.declare_exchange(exchange)
    mine = {q.name for q in topology.queues if q.per_receiver}  # receivers bind their own
    for binding in topology.bindings:
        if binding.queue in mine:
            continue
        targets = [binding.to_exchange] if binding.to_exchange is not None \
            else topology.queue_names(binding.queue or "")
        for target in targets:
            first.bind(binding, target)
