"""Requesters and responders on the AMQP fast path, on a stand-in connection: what one socket
read's deliveries trigger leaves in one write (a responder's replies, each before the ack of
its request; a requester's requests the replies made room for), every request's correlation id
its own, every reply matched; the cases that stay on pika's path do."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pika import frame, spec

from drivers import protocol
from drivers.amqp.driver import AmqpDriver
from drivers.amqp.receiver import ReceiverLink
from drivers.amqp.sender import RequesterLink
from drivers.header import decode, encode
from drivers.message import PayloadBuilder
from drivers.workers import Recorder, RequesterRole, ResponderRole
from tests.unit.test_amqp_wire import decode_all

ENDPOINT = "amqp://127.0.0.1:5672"


class Connection:
    """What the fast path touches on a pika connection: its hooks, counters and transport;
    every write kept."""

    class Transport:
        _MAX_RECV_BYTES = 4096
        _sock = None
        _tx_buffered_byte_count = 0
        _state = _STATE_ACTIVE = 1
        _nbio = _on_socket_readable = _initiate_abort = None  # the direct reads' hooks

        def get_write_buffer_size(self) -> int:
            return 0

    def __init__(self):
        self.params = SimpleNamespace(frame_max=131072)
        self.bytes_received = self.frames_received = 0
        self._transport = self.Transport()
        self._on_data_available = None
        self._output_marshaled_frames = None
        self.writes: list[bytes] = []
        self.passed: list = []
        self.is_open, self.is_closed = True, False

    def _adapter_emit_data(self, data) -> None:
        self.writes.append(bytes(data))

    def _process_frame(self, value) -> None:
        self.passed.append(value)


class Channel:
    """A channel that answers at once and records what pika would have been asked."""

    channel_number = 1
    is_open = True

    def __init__(self):
        self.asked: list[str] = []

    def __getattr__(self, name):  # basic_qos, add_on_close_callback, tx_select, ...
        return lambda *args, **kwargs: self.asked.append(name)

    def queue_declare(self, queue, callback=None, **_):
        callback(SimpleNamespace(method=SimpleNamespace(queue="amq.gen-reply")))

    def basic_consume(self, queue, on_message, **_):
        self.asked.append(f"basic_consume {queue}")
        return "ctag-1"


def driver(**destination) -> AmqpDriver:
    return AmqpDriver(protocol.Destination((ENDPOINT,), "requests", **destination), Recorder(),
                      message=protocol.MessageShape(sizes=(100,)))


def opened(link, connection: Connection | None = None):
    """``link`` on an open channel of ``connection``; returns both."""
    connection = connection or Connection()
    channel = Channel()
    link.connection = connection
    link._channel_opened(channel)
    return connection, channel


def delivery(tag: int, body: bytes, properties: spec.BasicProperties) -> bytes:
    deliver = spec.Basic.Deliver(consumer_tag="ctag-1", delivery_tag=tag, exchange="",
                                 routing_key="q")
    return frame.Method(1, deliver).marshal() + frame.Header(1, len(body), properties).marshal() \
        + frame.Body(1, body).marshal()


def request(tag: int, seq: int, reply_to: str | None = "amq.gen-r") -> bytes:
    return delivery(tag, encode(4, seq, 1000, None) + bytes(72), spec.BasicProperties(
        delivery_mode=1, correlation_id=f"00000004:{seq:016x}", reply_to=reply_to))


def test_a_responder_writes_one_read_s_replies_and_acks_at_once_replies_first():
    amqp = driver(ack_every=2, reply_size=50)
    assert amqp.ioloop._linger_ns > 0
    link = ReceiverLink(amqp, ResponderRole(amqp.recorder), ENDPOINT, "requests")
    assert amqp.ioloop._linger_ns == 0  # a reply is part of a round trip: never held back
    connection, _ = opened(link)
    assert link.decoding and link.replies is not None
    connection._on_data_available(request(1, 10) + request(2, 11) + request(3, 12, None)
                                  + request(4, 13) + request(5, 14))
    assert len(connection.writes) == 1
    sent = decode_all(connection.writes[0])
    kinds = [type(f.method).__name__ if isinstance(f, frame.Method) else type(f).__name__
             for f in sent]
    # request 3 has no reply-to: no reply; each ack follows the replies of what it acks
    reply = ["Publish", "Header", "Body"]
    assert kinds == reply * 2 + ["Ack"] + reply + ["Ack"] + reply
    assert [(f.method.delivery_tag, f.method.multiple) for f in sent
            if isinstance(f, frame.Method) and isinstance(f.method, spec.Basic.Ack)] == [
        (2, True), (4, True)]
    assert {f.method.routing_key for f in sent if isinstance(f, frame.Method)
            and isinstance(f.method, spec.Basic.Publish)} == {"amq.gen-r"}
    headers = [f for f in sent if isinstance(f, frame.Header)]
    assert [h.properties.correlation_id for h in headers] == [
        f"00000004:{seq:016x}" for seq in (10, 11, 13, 14)]
    assert all(h.body_size == 50 for h in headers)
    assert [decode(f.fragment)[:2] for f in sent if isinstance(f, frame.Body)] == [
        (4, 10), (4, 11), (4, 13), (4, 14)]
    assert amqp.recorder.served == 5
    link.flush()  # the ack of the rest: a write of its own
    assert len(connection.writes) == 2
    (ack,) = decode_all(connection.writes[1])
    assert ack.method.delivery_tag == 5 and ack.method.multiple


def test_a_held_request_is_answered_when_it_is_handled():
    amqp = driver(ack_every=1)
    link = ReceiverLink(amqp, ResponderRole(amqp.recorder), ENDPOINT, "requests")
    connection, _ = opened(link)
    amqp.consumer_delay_s = 0.5  # set_consumer_delay's effect, without the loop thread
    connection._on_data_available(request(1, 0))
    assert connection.writes == [] and len(link.pending) == 1
    link._work_pending()
    assert [type(f).__name__ for f in decode_all(connection.writes[0])] == [
        "Method", "Header", "Body", "Method"]


@pytest.mark.parametrize("destination", [
    {"unit_of_work": True}, {"consumer_rate": 10.0}, {"receiver_limit": 5}, {"nack": "drop"},
    {"consume_transaction": 10},
])
def test_a_responder_in_transactions_at_a_rate_or_up_to_a_limit_replies_through_pika(
        destination):
    amqp = driver(**destination)
    link = ReceiverLink(amqp, ResponderRole(amqp.recorder), ENDPOINT, "requests")
    connection, _ = opened(link)
    assert not link.decoding and link.replies is None
    assert connection._on_data_available is None  # pika's own reader stays


def test_responders_sharing_a_connection_reply_through_pika():
    amqp = driver(receivers_per_connection=2)
    first = ReceiverLink(amqp, ResponderRole(amqp.recorder), ENDPOINT, "requests")
    ReceiverLink(amqp, ResponderRole(amqp.recorder), ENDPOINT, "requests", first.carrier)
    opened(first)
    assert not first.decoding and first.replies is None


def reply(correlation: str) -> bytes:
    return delivery(1, encode(4, 0, 1000, None), spec.BasicProperties(
        delivery_mode=1, correlation_id=correlation))


def test_a_requester_sends_its_window_in_one_write_and_what_each_read_frees_in_one_more():
    amqp = driver()
    role = RequesterRole(4, 0.0, PayloadBuilder(100), amqp.recorder, in_flight=3)
    link = RequesterLink(amqp, role, ENDPOINT, "requests")
    assert amqp.ioloop._linger_ns == 0
    connection, channel = opened(link)
    assert "basic_consume amq.gen-reply" in channel.asked
    assert len(connection.writes) == 1
    sent = decode_all(connection.writes[0])
    headers = [f.properties for f in sent if isinstance(f, frame.Header)]
    assert [(h.correlation_id, h.reply_to) for h in headers] == [
        (role.correlation(seq), "amq.gen-reply") for seq in range(3)]
    assert [f.method.routing_key for f in sent if isinstance(f, frame.Method)] == ["requests"] * 3
    connection._on_data_available(reply(role.correlation(0)) + reply(role.correlation(2))
                                  + reply(role.correlation(99)))
    recorder = amqp.recorder
    assert (recorder.received, recorder.unmatched, recorder.latency.count) == (2, 1, 2)
    assert len(connection.writes) == 2  # the two freed places, in one write
    again = [f.properties.correlation_id for f in decode_all(connection.writes[1])
             if isinstance(f, frame.Header)]
    assert again == [role.correlation(3), role.correlation(4)]
    assert list(role.waiting) == [role.correlation(seq) for seq in (1, 3, 4)]
    assert recorder.sent == 5 and link.published == 5


def test_requesters_sharing_a_connection_publish_and_consume_through_pika():
    amqp = driver(senders_per_connection=2)
    roles = [RequesterRole(i, 0.0, PayloadBuilder(100), amqp.recorder, in_flight=2)
             for i in range(2)]
    first = RequesterLink(amqp, roles[0], ENDPOINT, "requests")
    RequesterLink(amqp, roles[1], ENDPOINT, "requests", first.carrier)
    connection, channel = opened(first)
    assert first.templates is None and connection._on_data_available is None
    assert channel.asked.count("basic_publish") == 2 and connection.writes == []
