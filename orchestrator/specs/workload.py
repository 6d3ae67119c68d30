"""The workload of a scenario: who sends and receives what, through which queue or exchange,
and every client knob (confirms, acknowledgements, prefetch, heartbeats, frames, streams).
The shape of each message is :mod:`orchestrator.specs.message`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from orchestrator.specs.base import Bytes, Loc, Seconds, Spec
from orchestrator.specs.limits import Number
from orchestrator.specs.message import MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES, MessageSpec

StreamOffset = Annotated[int | str, Field(union_mode="left_to_right")]


class WorkloadSpec(Spec):
    """Who sends and receives what: the workers the agents host.

    ``point-to-point``: senders put, receivers get. ``request-reply``: senders are requesters
    (put a request, wait for the reply with the same correlation id on their own reply queue)
    and receivers are responders (get a request, put its reply, then acknowledge it).
    """

    pattern: Literal["point-to-point", "request-reply"] = Field(
        "point-to-point",
        description="point-to-point: senders to receivers through queues; request-reply: "
                    "requesters and responders, every reply matched")
    queue: str = Field(description="a queue of the topology; with a %d pattern, senders and "
                                   "receivers are spread over its queues in blocks")
    senders: int = Field(ge=1, le=10000, description="senders, or requesters")
    receivers: int = Field(ge=1, le=10000, description="receivers, or responders")
    message: MessageSpec = Field(
        default_factory=MessageSpec, description="size and persistence of every message")
    reply_size: Bytes | None = Field(None, le=MAX_MESSAGE_BYTES,
                                     description="bytes of a reply; default the request's size")
    in_flight: int = Field(1, ge=1, le=10000, description="requests a requester may have "
                                                           "waiting for replies")
    reply_timeout: Seconds = Field(10.0, gt=0, description="a request unanswered this long "
                                                           "counts as timed out")
    unit_of_work: bool = Field(False, description="a responder acknowledges the request and "
                                                  "puts the reply in one AMQP transaction "
                                                  "(MQ's syncpoint; needs ack: manual)")
    confirms: bool = Field(False, description="publisher confirms; unconfirmed messages are "
                                              "published again after a reconnect")
    prefetch: int = Field(200, ge=1, le=65535, description="unacknowledged messages per receiver")
    confirm_window: int = Field(
        2000, ge=1, le=1_000_000, description="with confirms, publishes a sender may have "
                                              "unconfirmed before it waits (PerfTest's -c)")
    ack_every: int | None = Field(
        None, ge=1, le=65535, description="with manual acks, a receiver acknowledges every this "
                                          "many deliveries at once (multiple; PerfTest's -A), "
                                          "and what is left at least every 100 ms; default "
                                          "prefetch / 4")
    heartbeat: Seconds = Field(30.0, ge=0, le=3600, description="AMQP heartbeat interval the "
                                                                "clients ask for; 0 turns it "
                                                                "off (PerfTest's -b). RabbitMQ "
                                                                "only")
    frame_max: Bytes = Field(131072, ge=4096, le=1_048_576,
                             description="largest AMQP frame the clients ask for; bodies are "
                                         "split into frames of this size (PerfTest's -M). "
                                         "RabbitMQ only")
    max_backlog: int | None = Field(
        1000, ge=1, le=10_000_000,
        description="unlimited senders (rate 0) wait while their queue holds more than this many "
                    "ready messages, so an unlimited step measures the rate the receivers keep "
                    "up with instead of how fast the queue grows; null: publish regardless. "
                    "Rate-limited senders never wait (their backlog is the finding). RabbitMQ "
                    "only")
    ack: Literal["auto", "manual"] = Field(
        "manual",
        description="manual: receivers acknowledge each message; auto: the broker counts a "
                    "message acknowledged when it delivers it")
    bind: Literal["on-open", "not-fixed"] = Field(
        "on-open", description="on-open: a sender puts every message to one queue instance "
                               "(its member's, or its slot of a pattern); not-fixed: each "
                               "message goes to the next instance in turn (document 002). On "
                               "IBM MQ senders open the queue with MQOO_BIND_ON_OPEN or "
                               "MQOO_BIND_NOT_FIXED and MQ's cluster workload balancing picks "
                               "the instance (ibmmq.cluster_queues)")
    start_delay: Seconds = Field(0.0, ge=0, description="each sender starts after a random "
                                                        "delay up to this (PerfTest's "
                                                        "--producer-random-start-delay)")
    exchange: str = Field(
        "", description="the exchange senders publish to (PerfTest's -e); empty: the default "
                        "exchange, each sender publishing to its queue by name. With an "
                        "exchange, receivers still consume from `queue`, each of its queues a "
                        "subscription that receives its own copy of what is routed to it. On "
                        "IBM MQ each message is published to topic string EXCHANGE/key/words "
                        "(the key's dots as levels)")
    routing_key: str = Field(
        "", max_length=255, description="the routing key of every message (PerfTest's -k); "
                                        "with the default exchange the queue's name is used")
    routing_keys: list[str] = Field(
        default_factory=list, max_length=100_000,
        description="several routing keys, one picked for each message by key_order (a "
                    "pattern key-%d with key_count gives key-1 .. key-<key_count>)")
    key_count: int = Field(1, ge=1, le=100_000, description="routing keys of a %d pattern in "
                                                            "routing_keys")
    key_order: Literal["random", "sequential", "zipf"] = Field(
        "random", description="how each message's routing key is picked from routing_keys: "
                              "uniformly at random, in turn, or by a Zipf distribution (the "
                              "first key the most often)")
    zipf_exponent: Number = Field(1.0, gt=0, le=10, description="key_order zipf: the "
                                                                "distribution's exponent s")

    stream_offset: StreamOffset = Field(
        "next", description="where each receiver of a stream starts reading: first (its oldest "
                            "message), last (its last chunk), next (what comes after it "
                            "subscribes), an offset (a whole number), or a time (ISO 8601, "
                            "e.g. 2026-11-26T10:00:00Z) (x-stream-offset; PerfTest's "
                            "--stream-consumer-offset). Streams only")
    consumer_arguments: dict[str, Any] = Field(
        default_factory=dict, description="arguments of every receiver's basic.consume, e.g. "
                                          "x-priority (PerfTest's -ca). RabbitMQ only")
    global_qos: bool = Field(False, description="the prefetch is the channel's, shared by its "
                                                "consumers, rather than each consumer's "
                                                "(PerfTest's -Q). RabbitMQ only")

    publish_transaction: int | None = Field(
        None, ge=1, le=1_000_000, description="senders publish in AMQP transactions of this "
                                              "many messages, each committed (PerfTest's -m); "
                                              "not with confirms. RabbitMQ only")
    consume_transaction: int | None = Field(
        None, ge=1, le=65535, description="receivers acknowledge in transactions of this many "
                                          "deliveries, each committed (PerfTest's -n). "
                                          "RabbitMQ only")
    nack: Literal["off", "requeue", "drop"] = Field(
        "off", description="receivers nack every delivery instead of acknowledging it: back "
                           "to its queue (requeue; PerfTest's -na, so it is delivered again "
                           "and again) or dropped by the broker (drop; -na -re false), "
                           "counted as rejected. RabbitMQ only")
    polling: bool = Field(False, description="receivers ask for each message (basic.get) "
                                             "instead of consuming (PerfTest's -po). RabbitMQ "
                                             "only")
    polling_interval: Seconds = Field(0.0, ge=0, le=60, description="with polling, how long a "
                                                                   "receiver waits after "
                                                                   "finding its queue empty "
                                                                   "(PerfTest's -pi)")
    consumer_rate: Number | None = Field(
        None, gt=0, le=1_000_000, description="msg/s each receiver takes at most, holding the "
                                              "rest of its prefetch (PerfTest's -R)")
    receiver_spacing: Seconds = Field(0.0, ge=0, le=3600,
                                      description="receiver i starts consuming i x this after "
                                                  "the first (PerfTest's -S: 1 s)")
    senders_per_connection: int = Field(
        1, ge=1, le=2047, description="senders of an agent that share one AMQP connection, each "
                                      "on a channel of its own (PerfTest's -X: its -x x -X "
                                      "senders in -x connections). RabbitMQ only")
    receivers_per_connection: int = Field(
        1, ge=1, le=2047, description="receivers of an agent that share one AMQP connection, "
                                      "each on a channel of its own (PerfTest's -Y). A shared "
                                      "connection's deliveries are read by pika, not the fast "
                                      "path's decoder. RabbitMQ only")
    reconnect: bool = Field(True, description="connect again when a connection is lost; false: "
                                              "the worker stops there (PerfTest's -dcr). "
                                              "RabbitMQ only")
    reconnect_interval: Seconds | None = Field(
        None, gt=0, le=300, description="a lost connection is tried again every this long "
                                        "instead of after a growing backoff (0.2 s to 5 s)")
    tcp_options: dict[Literal["TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT",
                              "TCP_USER_TIMEOUT"], int] = Field(
        default_factory=dict, description="TCP socket options of every connection (keepalive "
                                          "idle s, interval s, count; user timeout ms); "
                                          "TCP_NODELAY is always on. RabbitMQ only")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """Routing keys go with an exchange; a key pattern with a count; a stream offset is one
        surge can say."""
        found: list[tuple[Loc, str]] = []
        if self.publish_transaction and self.confirms:
            found.append((("publish_transaction",), "a channel publishes in transactions or "
                                                    "with confirms, not both (AMQP)"))
        found += [((name,), "needs ack: manual") for name in ("consume_transaction", "nack")
                  if getattr(self, name) not in (None, "off") and self.ack == "auto"]
        if (self.nack != "off" or self.polling or self.consume_transaction
                or self.publish_transaction) and self.pattern == "request-reply":
            found.append((("pattern",), "transactions, nacks and polling are for "
                                        "point-to-point workloads"))
        if isinstance(self.stream_offset, int) and self.stream_offset < 0:
            found.append((("stream_offset",), "an offset is 0 or more"))
        if isinstance(self.stream_offset, str) and \
                self.stream_offset not in ("first", "last", "next"):
            try:
                datetime.fromisoformat(self.stream_offset.replace("Z", "+00:00"))
            except ValueError:
                found.append((("stream_offset",), f"expected first, last, next, a whole number "
                                                  f"or an ISO 8601 time, got "
                                                  f"{self.stream_offset!r}"))
        if not self.exchange and (self.routing_key or self.routing_keys):
            found.append((("routing_key" if self.routing_key else "routing_keys",),
                          "routing keys need an exchange (workload.exchange); with the default "
                          "exchange each sender publishes to its queue by name"))
        if self.routing_key and self.routing_keys:
            found.append((("routing_keys",), "give routing_key (one) or routing_keys (several), "
                                             "not both"))
        patterned = any("%d" in key for key in self.routing_keys)
        if patterned != (self.key_count > 1) or (patterned and len(self.routing_keys) > 1):
            found.append((("key_count",), "a key_count above 1 goes with one routing key "
                                          "pattern holding %d, e.g. routing_keys: [key-%d]"))
        if self.exchange and self.pattern == "request-reply":
            found.append((("exchange",), "request-reply sends requests to the queue by name: "
                                         "leave exchange empty"))
        return found

    @property
    def keys(self) -> list[str]:
        """Every routing key a sender may use (the one key, or those of routing_keys)."""
        if self.key_count > 1:
            return [self.routing_keys[0].replace("%d", str(i))
                    for i in range(1, self.key_count + 1)]
        return list(self.routing_keys) or [self.routing_key]

    @field_validator("reply_size")
    @classmethod
    def _reply_fits_header(cls, size: int | None) -> int | None:
        if size is not None and size < MIN_MESSAGE_BYTES:
            raise ValueError(f"must be at least {MIN_MESSAGE_BYTES} bytes (the message header)")
        return size
