"""Exchanges, bindings and where a routing key takes a message: the topology's routing, and the
broker's routing rules (AMQP 0-9-1 direct, fanout, topic and headers exchanges, exchange to
exchange bindings) as one pure function, so the accounting knows which queues each message was
routed to without asking the broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from orchestrator.specs.base import Loc, Spec

ExchangeType = Literal["direct", "fanout", "topic", "headers"]


class ExchangeSpec(Spec):
    """An exchange the provisioner declares once the cluster is up (PerfTest's ``-e``/``-t``)."""

    name: str = Field(min_length=1, max_length=255, description="the exchange's name")
    type: ExchangeType = Field(
        "direct", description="direct: the routing key equals the binding's; fanout: every "
                              "bound queue; topic: dotted words matched with * (one word) and "
                              "# (zero or more); headers: the message's headers matched with "
                              "the binding's arguments (x-match all or any)")
    durable: bool = Field(True, description="the exchange survives a broker restart")
    auto_delete: bool = Field(False, description="the broker deletes the exchange when its last "
                                                 "binding goes")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="x-arguments, passed to the broker unchanged")


class BindingSpec(Spec):
    """A binding from an exchange to a queue (every queue of a ``%d`` pattern) or to another
    exchange."""

    exchange: str = Field(min_length=1, description="the source exchange")
    queue: str | None = Field(None, description="the destination queue, or a queue pattern of "
                                                "the topology (every queue of it is bound)")
    to_exchange: str | None = Field(None, description="the destination exchange, instead of a "
                                                      "queue")
    routing_key: str = Field("", description="the binding key (direct: equal; topic: a pattern "
                                             "of * and #; ignored by fanout and headers)")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="binding arguments; for a headers exchange the "
                                          "headers to match and x-match (all, the default, or "
                                          "any)")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """A queue or an exchange as the destination, not both."""
        if (self.queue is None) == (self.to_exchange is None):
            return [((), "give either queue or to_exchange as the binding's destination")]
        return []


def topic_matches(pattern: str, key: str) -> bool:
    """Whether a topic binding ``pattern`` matches routing ``key`` (``*``: exactly one word,
    ``#``: zero or more words; words are separated by dots)."""
    return _words_match(tuple(pattern.split(".")), tuple(key.split(".")))


@lru_cache(maxsize=65536)
def _words_match(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_words_match(rest, words[i:]) for i in range(len(words) + 1))
    return bool(words) and head in ("*", words[0]) and _words_match(rest, words[1:])


def headers_match(arguments: Mapping[str, Any], headers: Mapping[str, Any]) -> bool:
    """Whether a headers binding with ``arguments`` takes a message with ``headers``."""
    wanted = {k: v for k, v in arguments.items() if not k.startswith("x-")}
    if not wanted:
        return arguments.get("x-match", "all") in ("all", "all-with-x")
    hits = [name in headers and (value is None or headers[name] == value)
            for name, value in wanted.items()]
    return any(hits) if str(arguments.get("x-match", "all")).startswith("any") else all(hits)


def routes(exchanges: Sequence[ExchangeSpec], bindings: Sequence[BindingSpec],
           queue_names: Callable[[str], list[str]], exchange: str, routing_key: str,
           headers: Mapping[str, Any] | None = None) -> frozenset[str]:
    """The queues a message published to ``exchange`` with ``routing_key`` (and ``headers``)
    reaches: the default exchange (``""``) routes to the queue of that name; bindings to
    exchanges are followed, each exchange once. ``queue_names`` expands a binding's queue (a
    pattern) into queue names."""
    if exchange == "":
        return frozenset([routing_key])
    kinds = {e.name: e.type for e in exchanges}
    found: set[str] = set()
    seen: set[str] = set()
    todo = [exchange]
    while todo:
        name = todo.pop()
        if name in seen or name not in kinds:
            continue
        seen.add(name)
        for binding in bindings:
            if binding.exchange == name and _takes(kinds[name], binding, routing_key,
                                                   headers or {}):
                if binding.queue is not None:
                    found.update(queue_names(binding.queue))
                else:
                    todo.append(binding.to_exchange or "")
    return frozenset(found)


def _takes(kind: str, binding: BindingSpec, key: str, headers: Mapping[str, Any]) -> bool:
    if kind == "fanout":
        return True
    if kind == "direct":
        return binding.routing_key == key
    if kind == "topic":
        return topic_matches(binding.routing_key, key)
    return headers_match(binding.arguments, headers)


def routing_problems(exchanges: Sequence[ExchangeSpec], bindings: Sequence[BindingSpec],
                     queues: Iterable[str]) -> list[tuple[Loc, str]]:
    """Bindings name exchanges and queues the topology declares; names are not repeated."""
    found: list[tuple[Loc, str]] = []
    names = [e.name for e in exchanges]
    for i, name in enumerate(names):
        if name in names[:i]:
            found.append((("exchanges", i, "name"), f"exchange {name!r} is declared twice"))
        if name.startswith("amq."):
            found.append((("exchanges", i, "name"), f"{name!r}: names starting amq. are the "
                                                    f"broker's own"))
    known_queues = set(queues)
    for i, binding in enumerate(bindings):
        if binding.exchange not in names:
            found.append((("bindings", i, "exchange"), f"{binding.exchange!r} is not an exchange "
                                                       f"of this topology (exchanges: "
                                                       f"{', '.join(names) or 'none'})"))
        if binding.to_exchange is not None and binding.to_exchange not in names:
            found.append((("bindings", i, "to_exchange"),
                          f"{binding.to_exchange!r} is not an exchange of this topology"))
        if binding.queue is not None and binding.queue not in known_queues:
            listed = ", ".join(sorted(known_queues)[:20]) or "none"
            found.append((("bindings", i, "queue"), f"{binding.queue!r} is not a queue of this "
                                                    f"topology (queues: {listed})"))
    return found


def mq_key_fits(key: str, topic_binding: bool = False) -> bool:
    """Whether routing ``key`` can be topic levels on IBM MQ: no ``/`` (a level separator) nor
    ``+`` (MQ's one-level wildcard), and ``#`` only as a whole word of a topic binding."""
    words = key.split(".")
    return not any(c in key for c in "/+") and \
        all("#" not in word or (topic_binding and word == "#") for word in words)


def mq_routing_problems(exchanges: Sequence[ExchangeSpec], bindings: Sequence[BindingSpec]
                        ) -> list[tuple[Loc, str]]:
    """What IBM MQ's topics cannot do of a topology's routing: exchanges become topic trees and
    bindings durable subscriptions (:mod:`orchestrator.specs.mqtopics`), so headers exchanges,
    exchange arguments and auto-delete, exchange-to-exchange bindings, binding arguments and
    keys :func:`mq_key_fits` refuses are refused."""
    found: list[tuple[Loc, str]] = []
    kinds = {e.name: e.type for e in exchanges}
    for i, exchange in enumerate(exchanges):
        if exchange.type == "headers":
            found.append((("exchanges", i, "type"), "IBM MQ routes by topic string: a headers "
                                                    "exchange has no equivalent (direct, "
                                                    "topic or fanout)"))
        for field, given in (("arguments", exchange.arguments),
                             ("auto_delete", exchange.auto_delete),
                             ("durable", not exchange.durable)):
            if given:
                found.append((("exchanges", i, field), "RabbitMQ only: on IBM MQ an exchange "
                                                       "is a topic tree; leave it out"))
        if not mq_key_fits(exchange.name):
            found.append((("exchanges", i, "name"), f"{exchange.name!r}: on IBM MQ the name is "
                                                    f"a topic string's first level, without / "
                                                    f"+ #"))
    for i, binding in enumerate(bindings):
        if binding.to_exchange is not None:
            found.append((("bindings", i, "to_exchange"), "IBM MQ subscribes queues to topics: "
                                                          "bind a queue, not an exchange"))
        if binding.arguments:
            found.append((("bindings", i, "arguments"), "RabbitMQ only: IBM MQ subscriptions "
                                                        "match the topic string alone"))
        if not mq_key_fits(binding.routing_key, kinds.get(binding.exchange) == "topic"):
            found.append((("bindings", i, "routing_key"), mq_key_problem(binding.routing_key)))
    return found


def mq_key_problem(key: str) -> str:
    """Why routing ``key`` cannot be a topic string's levels on IBM MQ."""
    return (f"{key!r}: on IBM MQ a key's words become topic levels; / and + cannot be in it, "
            f"nor # but as a whole word of a topic binding")
