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
  member, every start: :func:`mqsc`); on queue managers surge did not start, the controller
  makes them with MQSUB before any load (:func:`subscribe`).

Headers exchanges, exchange-to-exchange bindings and binding arguments have no meaning here;
the topology's validation refuses them, and keys holding ``/``, ``+`` or ``#``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drivers.mq.client import load_mqi
from drivers.mq.connect import connect
from drivers.mq.settings import MqSettings

SUB_PREFIX = "SURGE"


@dataclass(frozen=True)
class Subscription:
    """One durable subscription: its name, the topic string it matches and its queue."""

    name: str
    topic: str
    queue: str

    def mqsc(self) -> str:
        """``DEFINE SUB`` of it (the queue unquoted, as the queues' own DEFINE QLOCAL)."""
        return (f"define sub({_quoted(self.name)}) topicstr({_quoted(self.topic)}) "
                f"dest({self.queue}) replace")


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


def subscribe(mqi: Any, qm: Any, subscriptions: list[Subscription]) -> list[str]:
    """MQSUB each durable subscription on connection ``qm`` (made, or resumed as it is), its
    publications put to its queue; then MQCLOSE, keeping it. Returns the names of those whose
    queue does not exist there."""
    C = mqi.CMQC
    error_type = getattr(mqi, "Error", mqi.MQMIError)
    missing = []
    for sub in subscriptions:
        try:
            queue = mqi.Queue(qm, sub.queue, C.MQOO_OUTPUT | C.MQOO_FAIL_IF_QUIESCING)
        except error_type as error:
            if getattr(error, "reason", None) == C.MQRC_UNKNOWN_OBJECT_NAME:
                missing.append(f"{sub.name} (queue {sub.queue})")
                continue
            raise
        try:
            desc = mqi.SD()
            desc.Options = (C.MQSO_CREATE | C.MQSO_RESUME | C.MQSO_DURABLE
                            | C.MQSO_FAIL_IF_QUIESCING)
            desc.set_vs("SubName", sub.name)
            desc.set_vs("ObjectString", sub.topic)
            handle = mqi.Subscription(qm)
            handle.sub(sub_desc=desc, sub_queue=queue)
            handle.close(sub_close_options=C.MQCO_KEEP_SUB)
        finally:
            with contextlib.suppress(Exception):
                queue.close()
    return missing


def subscribe_with_mqi(endpoint: str, settings: dict[str, Any],
                       subscriptions: list[Subscription],
                       load: Callable[[], Any] = load_mqi) -> list[str]:
    """Connect to ``endpoint`` as the run's senders do (``settings``: the driver's, client
    reconnection off) and :func:`subscribe`; :class:`~drivers.mq.client.MqClientMissing`
    where this machine has no MQI library."""
    mqi = load()
    C = mqi.CMQC
    options = C.MQCNO_CLIENT_BINDING | C.MQCNO_HANDLE_SHARE_BLOCK | C.MQCNO_RECONNECT_DISABLED
    mq = MqSettings.from_json(settings)
    qm = connect(mqi, mq, endpoint, mq.appltag_sender, options)
    try:
        return subscribe(mqi, qm, subscriptions)
    finally:
        with contextlib.suppress(Exception):
            qm.disconnect()


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
