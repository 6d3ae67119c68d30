"""The controller-agent protocol: every message, its path, and the protocol version.

An agent serves one small HTTP/JSON API (:mod:`drivers.agent`); the controller calls it through
:class:`orchestrator.agents.client.AgentClient`. Both sides use only the messages below, so a
renamed field fails in one place, and a version skew (an agent on a load host started from
another release of surge) is refused when the agent says hello, before any load is sent.

====================  ===========================  ============================
call                  request                      reply
====================  ===========================  ============================
``POST /configure``   :class:`Configure`           :class:`Configured`
``POST /rate``        :class:`Rate`                :class:`RateApplied`
``POST /consumer_delay`` :class:`ConsumerDelay`    :class:`Done`
``POST /move``        :class:`Move`                :class:`Moved`
``GET /snapshot``     (none)                       :class:`Snapshot`
``GET /accounting``   (none)                       :class:`Accounting`
``GET /clock``        (none)                       :class:`Clock`
``POST /stop_senders`` (none)                      :class:`Done`
``POST /stop_receivers`` (none)                    :class:`Done`
``POST /shutdown``    (none)                       :class:`Done`
``GET /metrics``      (none, no token)             Prometheus text
====================  ===========================  ============================

Every call but ``/metrics`` carries exactly ``Authorization: Bearer <token>``, and a request
body up to :data:`MAX_MESSAGE_BYTES` with its ``Content-Length``. On start the agent
prints one :class:`Hello` line on stdout (where it listens); ``GET /hello`` answers the same for
agents whose output the controller cannot read (pods).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

PROTOCOL_VERSION = 13
"""Bumped whenever a message or path changes meaning; controller and agent must agree."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest request body an agent reads. A :class:`Configure` of 10,000 workers is about
2 MB; not-fixed senders carry every queue name of their pattern (1,000 senders of 1,000 queues:
about 20 MB)."""


class ProtocolError(ValueError):
    """A message that does not match its declaration (unknown, missing or mistyped field)."""


@dataclass(frozen=True)
class Hello:
    """The agent's first line on stdout: where it listens and which protocol it speaks."""

    port: int
    pid: int
    protocol: int


@dataclass(frozen=True)
class SenderConfig:
    """One sender (or requester) of an agent: its producer id, first rate, connection."""

    producer_id: int
    rate: float
    endpoint: str
    queue: str | list[str] | None = None  # None: the destination's; several: each message
    # goes to the next in turn (MQ's bind not-fixed). Publishing to an exchange: the queues
    # its messages are routed to, whose depth an unlimited sender's backlog gate reads
    limit: int | None = None  # messages after which it stops (exit.messages_per_sender)
    start_delay_s: float = 0.0  # it starts after a random delay up to this


@dataclass(frozen=True)
class ReceiverConfig:
    """One receiver (or responder) of an agent."""

    id: int
    endpoint: str
    queue: str | None = None  # None: the destination's
    group: str = ""  # its subscription: receivers of one group share each message's one copy
    start_delay_s: float = 0.0  # it starts consuming this long after it is configured


@dataclass(frozen=True)
class QueueBinding:
    """A binding a receiver makes for the queue it declared: exchange, key, arguments."""

    exchange: str
    routing_key: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Destination:
    """What every worker of a run addresses, whatever the broker: endpoints (one per member),
    the queue, and how messages are sent and acknowledged. Broker-specific connection
    settings travel beside it in :attr:`Configure.settings`, read by the driver."""

    endpoints: tuple[str, ...]
    queue: str
    persistent: bool = False
    confirms: bool = False
    prefetch: int = 200
    backlog_per_sender: int | None = None  # an unlimited sender's share of its queues' bound
    manual_ack: bool = True
    reply_size: int = 0  # request-reply: bytes of each reply
    reply_timeout_s: float = 10.0  # request-reply: a request unanswered this long times out
    unit_of_work: bool = False  # request-reply: a responder's get and put in one transaction
    fast_path: bool = True  # drivers may encode/decode frames themselves where they can
    exchange: str = ""  # "": the default exchange, each sender publishing to its queue by name
    routing_keys: tuple[str, ...] = ()  # with an exchange; each message takes one of them
    key_order: str = "random"  # drivers.routing.ORDERS
    zipf_exponent: float = 1.0
    confirm_window: int = 2000  # with confirms, publishes in flight per sender before it waits
    ack_every: int | None = None  # manual acks every N deliveries; None: prefetch // 4
    heartbeat_s: float = 30.0  # AMQP heartbeat; 0 turns it off
    frame_max: int = 131072  # AMQP frame size the client asks for (bytes)
    stream_offset: int | str | None = None  # a stream's receivers: x-stream-offset (first,
    # last, next, an offset, an ISO 8601 time); None: the queue is not a stream
    consumer_arguments: dict[str, Any] = field(default_factory=dict)  # of basic.consume
    global_qos: bool = False  # the prefetch is the channel's, not each consumer's
    publish_transaction: int | None = None  # senders commit a transaction every N publishes
    consume_transaction: int | None = None  # receivers commit their acks every N deliveries
    nack: str = ""  # "": acknowledge; "requeue" or "drop": nack every delivery instead
    polling_s: float | None = None  # receivers basic.get, waiting this long on an empty queue
    consumer_rate: float | None = None  # msg/s each receiver takes at most
    receiver_limit: int | None = None  # each receiver stops after this many messages
    reconnect_s: float | None = None  # a fixed reconnect interval instead of the backoff
    reconnect: bool = True  # False: a worker whose connection is lost stops (PerfTest's -dcr)
    bind: str = "on-open"  # IBM MQ senders: MQOO_BIND_ON_OPEN, or "not-fixed" (per message)
    tcp_options: dict[str, int] = field(default_factory=dict)  # TCP_KEEPIDLE, ...
    senders_per_connection: int = 1  # an agent's senders share connections, a channel each
    receivers_per_connection: int = 1
    own_queues: tuple[QueueBinding, ...] | None = None  # each receiver declares a queue of
    # its own (server-named, exclusive, auto-delete) with these bindings; None: it consumes
    # the queue it is given
    queue_arguments: dict[str, Any] = field(default_factory=dict)  # of a receiver's own queue
    reply_exchange: str = ""  # request-reply: servers publish each reply there, keyed by its
    # reply-to; "": the default exchange, straight to the requester's queue
    sides: tuple[tuple[str, ...], ...] = ()  # linked clusters: each side's endpoints

    def peers(self, endpoint: str) -> tuple[str, ...]:
        """The endpoints a worker connected to ``endpoint`` may move to: its side's, where
        clusters are linked (the other side has other queues), else every one."""
        return next((side for side in self.sides if endpoint in side), self.endpoints)


@dataclass(frozen=True)
class MessageShape:
    """What follows every message's header, and how each message picks it: one body per size
    class (or payload), picked per message in proportion to ``weights``, or, with no weights,
    the class the plan sets live (:attr:`Rate.size_class`); AMQP properties and flags."""

    sizes: tuple[int, ...] = (2048,)  # bytes of each class's messages, header included
    weights: tuple[float, ...] = (1.0,)  # (): one class at a time, set by Rate.size_class
    fill: str = "zeros"  # zeros | random | json: what follows the header
    payloads: tuple[bytes, ...] = ()  # instead of fill: each class's bytes after the header
    properties: dict[str, Any] = field(default_factory=dict)  # AMQP basic properties
    mandatory: bool = False  # unroutable messages are returned to their sender


@dataclass(frozen=True)
class Configure:
    """Create the agent's driver and workers; receivers connect before senders start."""

    broker: str  # "rabbitmq" | "ibmmq"
    pattern: str  # "send-receive" | "request-reply"
    message: MessageShape
    destination: Destination
    settings: dict[str, Any] = field(default_factory=dict)  # the driver's own, see each driver
    in_flight: int = 1  # request-reply: requests outstanding per requester
    senders: list[SenderConfig] = field(default_factory=list)
    receivers: list[ReceiverConfig] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # its /metrics: run_id, scenario, agent
    senders_paused: bool = False  # senders wait for the first Rate (receivers' own queues first)
    receivers_started: int | None = None  # receivers 1..N connect now, the rest at the Rate
    # that starts them; None: all now


@dataclass(frozen=True)
class Configured:
    """How many workers the agent now hosts."""

    senders: int
    receivers: int


@dataclass(frozen=True)
class Rate:
    """A live change without reconnecting: producers 1..``active`` publish at
    ``rate_per_sender`` msg/s, the others pause (``active`` None: all publish); messages take
    size class ``size_class`` where sizes follow the plan; receivers up to ``receivers`` are
    started if they wait."""

    rate_per_sender: float
    active: int | None = None
    size_class: int = 0  # the message size class in force (MessageShape without weights)
    receivers: int | None = None  # receivers 1..N started (they stay); None: no change


@dataclass(frozen=True)
class RateApplied:
    """Senders of this agent publishing after a :class:`Rate`."""

    active: int


@dataclass(frozen=True)
class ConsumerDelay:
    """Each receiver's processing time per message from now on (0: as fast as it can); while
    ``paused``, receivers take nothing (a backlog builds)."""

    seconds: float
    paused: bool = False


@dataclass(frozen=True)
class Move:
    """Move senders and receivers (by id) to another endpoint and queue, make before break."""

    endpoint: str
    senders: list[int] = field(default_factory=list)
    receivers: list[int] = field(default_factory=list)
    queue: str | None = None


@dataclass(frozen=True)
class Moved:
    """Workers moved."""

    moved: int


@dataclass(frozen=True)
class Done:
    """A call that has nothing to report but that it finished."""

    done: bool = True


@dataclass(frozen=True)
class Clock:
    """The agent host's wall clock, in ns since the epoch (for clock offsets between hosts)."""

    ns: int


@dataclass(frozen=True)
class FastPath:
    """Whether an agent's driver encodes and decodes frames itself (the AMQP driver's fast
    path), and if not, why not."""

    on: bool
    why: str = ""  # off: why (turned off, a pika it was not checked against, ...)


@dataclass(frozen=True)
class Snapshot:
    """An agent's cumulative counters now, and the latency histograms of the interval since its
    previous snapshot (from the actual send time, and from the intended one for messages of
    rate-limited senders), stamped with the agent's own monotonic clock and process CPU
    time."""

    monotonic_s: float
    cpu_seconds: float | None = None
    sent: int = 0
    confirmed: int = 0
    nacked: int = 0  # messages nacked, each once (at its first nack)
    nacks_republished: int = 0  # publishes again of messages whose last publish was nacked
    nacks_repeated: int = 0  # nacks of messages nacked before
    held: int = 0  # deliveries slowed or paused receivers hold, not yet handled
    # deliveries receivers handled whose acknowledgement is not sent yet (acks go in batches):
    # with ``held``, what the broker counts as delivered to this agent and unacknowledged
    unacked: int = 0
    received: int = 0
    redelivered: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    errors: int = 0
    reconnects: int = 0
    header_errors: int = 0
    connections: int = 0
    republished: int = 0
    served: int = 0
    unmatched: int = 0
    timeouts: int = 0
    senders_done: int = 0
    skipped: int = 0
    target_rate: float = 0.0
    returned: int = 0  # mandatory messages the broker returned (no queue took them)
    requeued: int = 0  # deliveries receivers nacked back to their queue
    rejected: int = 0  # deliveries receivers nacked without requeue (the broker drops them)
    committed: int = 0  # publishes of committed transactions
    receivers_done: int = 0  # receivers that took their messages_per_receiver
    rereads: int = 0  # stream messages a receiver read again (from its offset, reconnected)
    cancels: int = 0  # consumers the broker cancelled (a queue deleted, a leader lost)
    consuming: int | None = None  # receivers consuming now (None: the driver does not say)
    sending: int = 0  # senders (requesters) publishing now: not stopped, paused or done
    sending_queues: list[str] = field(default_factory=list)  # the queues they publish to
    blocked: int = 0  # connections the broker blocks now (a resource alarm)
    blocked_s: float = 0.0  # seconds during which at least one of them was blocked
    last_error: str = ""
    latency: dict[str, Any] = field(default_factory=dict)  # LatencyHistogram.to_dict()
    # the same from the intended send time (empty from an agent that does not measure it)
    intended_latency: dict[str, Any] = field(default_factory=dict)
    # publisher confirms: from publish to the broker's confirm (empty without confirms)
    confirm_latency: dict[str, Any] = field(default_factory=dict)
    fast_path: FastPath | None = None  # None: the driver has no fast path (MQ)
    # results.rundir.compiled.state(): "compiled", or "pure (why)"; empty from an older agent
    hot_path: str = ""
    # messages put per destination where the broker says (IBM MQ: the queue manager each put
    # resolved to; empty elsewhere), and the first of them in put order
    destinations: dict[str, int] = field(default_factory=dict)
    destination_sequence: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Accounting:
    """What each producer of the agent sent (its next sequence number) and, per subscription
    group of its receivers (``""``: all of them compete for one copy of each message) and per
    producer, the bitmap of sequence numbers they got."""

    sent: dict[int, int]
    bitmaps: dict[str, dict[int, bytes]]


M = TypeVar("M")


def encode(message: Any) -> dict[str, Any]:
    """A message as the JSON object that goes on the wire."""
    return _plain(message)


def dumps(message: Any) -> bytes:
    """A message as JSON bytes."""
    return json.dumps(encode(message)).encode()


def decode(kind: type[M], data: Any) -> M:
    """A message of ``kind`` from its JSON object; :class:`ProtocolError` names the first field
    that is unknown, missing or of the wrong type."""
    return _build(kind, data, kind.__name__)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """A message class's field types, evaluated once (messages arrive every second)."""
    return typing.get_type_hints(kind)


def _build(kind: Any, data: Any, where: str) -> Any:
    hints = _hints(kind)
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProtocolError(f"{where}: unknown field {unknown[0]!r}")
    values = {}
    for f in dataclasses.fields(kind):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"{where}: missing field {f.name!r}")
            continue
        values[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
    return kind(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(option, value, where)
            except ProtocolError as error:
                problems.append(str(error))
        raise ProtocolError(problems[-1] if problems else f"{where}: unexpected null")
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list, got {type(value).__name__}")
        items = [_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(value).__name__}")
        key_kind, value_kind = args
        return {_key(key_kind, k, where): _convert(value_kind, v, f"{where}[{k}]")
                for k, v in value.items()}
    return _scalar(hint, value, where)


def _key(kind: Any, key: str, where: str) -> Any:
    if kind is int:
        try:
            return int(key)
        except ValueError:
            raise ProtocolError(f"{where}: expected integer keys, got {key!r}") from None
    return key


def _scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is Any:
        return value
    if hint is bytes:
        try:
            return base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            raise ProtocolError(f"{where}: expected base64 bytes") from None
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and type(value) is hint:
        return value
    raise ProtocolError(f"{where}: expected {getattr(hint, '__name__', hint)}, "
                        f"got {type(value).__name__} {value!r}")
