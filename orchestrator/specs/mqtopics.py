"""A topology's exchanges and bindings on IBM MQ: topic strings and durable subscriptions.

The scenario words are the same on both brokers; on MQ they mean publish/subscribe:

- An exchange ``X`` is the root of a topic tree: a message published with routing key
  ``eu.orders`` goes to topic string ``X/eu/orders`` (dots become levels); with no key, to
  ``X``.
- A binding of ``X`` to queue ``Q`` is a durable subscription whose destination is ``Q``:
  direct, the key's own topic string; topic, the key with ``*`` as MQ's one-level ``+`` and
  ``#`` as ``#`` (zero or more levels, as in AMQP); fanout, ``X/#`` (every key, and none).
  A queue pattern's binding is one subscription per queue.
- Provisioned queue managers get the subscriptions in their MQSC (``DEFINE SUB``, every
  member, every start: :func:`mqsc_lines`); on queue managers surge did not start, the
  controller makes them with MQSUB before any load (:mod:`drivers.mq.preflight`).

Headers exchanges, exchange-to-exchange bindings and binding arguments have no meaning here;
:func:`orchestrator.specs.routing.mq_routing_problems` refuses them, and keys holding ``/``,
``+`` or ``#``. Pure functions without pydantic: the MQ driver uses :func:`topic_string`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.specs.topology import TopologySpec

SUB_PREFIX = "SURGE"
_UNQUOTED = re.compile(r"[A-Z0-9._/%]+")  # what MQSC reads unquoted and unchanged


@dataclass(frozen=True)
class Subscription:
    """One durable subscription: its name, the topic string it matches and its queue."""

    name: str
    topic: str
    queue: str

    def mqsc(self) -> str:
        """``DEFINE SUB`` of it, every name quoted (:func:`mqsc_name`)."""
        return (f"define sub({mqsc_string(self.name)}) topicstr({mqsc_string(self.topic)}) "
                f"dest({mqsc_name(self.queue)}) replace")


def topic_string(exchange: str, routing_key: str) -> str:
    """Where a message published to ``exchange`` with ``routing_key`` goes."""
    return f"{exchange}/{routing_key.replace('.', '/')}" if routing_key else exchange


def subscription_topic(kind: str, exchange: str, binding_key: str) -> str:
    """The topic string a binding of ``kind`` with ``binding_key`` subscribes to."""
    if kind == "fanout":
        return f"{exchange}/#"
    if kind == "topic":
        levels = ["+" if word == "*" else word for word in binding_key.split(".")]
        return f"{exchange}/{'/'.join(levels)}" if binding_key else exchange
    return topic_string(exchange, binding_key)


def subscription_name(exchange: str, number: int, queue: str) -> str:
    """``SURGE.<exchange>.<n>.<queue>``: one name per binding and queue, the same each run."""
    return f"{SUB_PREFIX}.{exchange}.{number}.{queue}"


def subscriptions(topology: TopologySpec) -> list[Subscription]:
    """One durable subscription per binding and bound queue, in the topology's order."""
    kinds = {e.name: e.type for e in topology.exchanges}
    return [Subscription(subscription_name(b.exchange, i, queue),
                         subscription_topic(kinds.get(b.exchange, "direct"), b.exchange,
                                            b.routing_key), queue)
            for i, b in enumerate(topology.bindings, 1) if b.queue is not None
            for queue in topology.queue_names(b.queue)]


def mqsc_lines(topology: TopologySpec) -> list[str]:
    """``DEFINE SUB`` of every subscription, to follow the queues they put to."""
    subs = subscriptions(topology)
    return ["* Subscriptions: the topology's bindings", *(s.mqsc() for s in subs)] if subs else []


def mqsc_string(text: str) -> str:
    """A string for MQSC, quoted (a quote inside doubled)."""
    return "'" + text.replace("'", "''") + "'"


def mqsc_name(name: str) -> str:
    """An object name for MQSC: as it is where MQSC would read it unchanged (upper case, no
    character that needs quoting), else quoted. MQSC folds an unquoted name to upper case and
    the MQI opens names exactly as given, so a queue ``request`` defined unquoted would be
    ``REQUEST``, never found by a worker opening ``request``."""
    return name if _UNQUOTED.fullmatch(name) else mqsc_string(name)
