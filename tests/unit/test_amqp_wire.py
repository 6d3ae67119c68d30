"""The hand-made AMQP frames against pika's own encoder and decoder."""

import random

import pytest
from pika import frame, spec

from drivers import protocol
from drivers.amqp.driver import AmqpDriver
from drivers.amqp.frames import (
    CORRELATION_AT,
    FrameEncoder,
    ReplyEncoder,
    Templates,
    basic_properties,
    declare_ok,
    passive_declare_frame,
    publisher_confirm,
    reply_fields,
)
from drivers.amqp.wire import (
    MAX_RECV_BYTES,
    RECV_BYTES,
    fast_path_refused,
    install_decoder,
    install_sender_reader,
)
from drivers.header import SCHEDULED, decode, encode
from drivers.message import PayloadBuilder
from drivers.workers import Recorder, RequesterRole


def decode_all(data: bytes) -> list:
    frames, pos = [], 0
    while pos < len(data):
        consumed, value = frame.decode_frame(data[pos:])
        frames.append(value)
        pos += consumed
    return frames


def test_template_batch_is_what_pika_would_send():
    template = FrameEncoder(1, "perf", 2048, persistent=True, frame_max=131072)
    frames = decode_all(bytes(template.batch(3, producer_id=7, first_seq=10, send_ns=99)))
    assert len(frames) == 9
    for k in range(3):
        method, header, body = frames[3 * k: 3 * k + 3]
        assert isinstance(method.method, spec.Basic.Publish)
        assert method.method.routing_key == "perf" and method.channel_number == 1
        assert header.body_size == 2048 and header.properties.delivery_mode == 2
        assert len(body.fragment) == 2048
        assert decode(body.fragment) == (7, 10 + k, 99, None)


def test_a_scheduled_batch_carries_each_message_s_own_lag():
    template = FrameEncoder(1, "perf", 100, persistent=False, frame_max=131072)
    frames = decode_all(bytes(template.batch(4, 7, 0, 99, (SCHEDULED, 30_000, 10_000.0))))
    bodies = [f.fragment for f in frames if isinstance(f, frame.Body)]
    assert [decode(b) for b in bodies] == [(7, k, 99, 30_000 - 10_000 * k) for k in range(4)]


def test_large_bodies_are_split_like_pika_splits_them():
    template = FrameEncoder(2, "q", 300_000, persistent=False, frame_max=131072)
    frames = decode_all(bytes(template.batch(1, 1, 0, 5)))
    bodies = [f for f in frames if isinstance(f, frame.Body)]
    assert sum(len(b.fragment) for b in bodies) == 300_000 and len(bodies) == 3
    assert decode(bodies[0].fragment) == (1, 0, 5, None)


class StreamEnd:
    """Just what the decoder touches on a connection: counters, _process_frame, transport."""

    class Transport:
        _MAX_RECV_BYTES = 4096
        _MAX_CONSUME_BYTES = 1024

    def __init__(self):
        self.bytes_received = 0
        self.frames_received = 0
        self.passed = []
        self._transport = self.Transport()
        self._on_data_available = None

    def _process_frame(self, value):
        self.frames_received += 1
        self.passed.append(value)


def delivery(channel: int, tag: int, body: bytes, redelivered=False,
             properties: spec.BasicProperties | None = None) -> bytes:
    deliver = spec.Basic.Deliver(consumer_tag="ctag-1", delivery_tag=tag,
                                 redelivered=redelivered, exchange="", routing_key="perf")
    parts = [frame.Method(channel, deliver).marshal(),
             frame.Header(channel, len(body), properties or spec.BasicProperties()).marshal()]
    for start in range(0, len(body), 131064):
        parts.append(frame.Body(channel, body[start:start + 131064]).marshal())
    return b"".join(parts)


@pytest.mark.parametrize("seed, longest_read", [(5, 9000), (6, 9000), (7, 300_000), (8, 40)])
def test_decoder_reads_deliveries_split_anywhere_and_passes_other_frames_on(seed, longest_read):
    bodies = [encode(3, seq, 1000 + seq, seq or None) + bytes(size) for seq, size in
              enumerate([0, 2000, 1_000_000, 10])]
    stream = b"".join([
        delivery(1, 1, bodies[0]), frame.Heartbeat().marshal(), delivery(1, 2, bodies[1]),
        frame.Method(1, spec.Basic.QosOk()).marshal(), delivery(1, 3, bodies[2], True),
        delivery(1, 4, bodies[3])])
    got = []
    connection = StreamEnd()
    install_decoder(connection, 1, lambda buf, off, tag, red: got.append(
        (decode(buf, off), tag, red)))
    rng = random.Random(seed)
    pos = 0
    while pos < len(stream):
        step = rng.randint(1, longest_read)
        connection._on_data_available(stream[pos:pos + step])
        pos += step
    assert got == [((3, k, 1000 + k, k or None), k + 1, k == 2) for k in range(4)]
    assert [type(f).__name__ for f in connection.passed] == ["Heartbeat", "Method"]
    assert connection.bytes_received == len(stream)
    assert connection.frames_received == 2 + 3 * 4 + 7  # the 1 MB body is 8 frames


def test_reads_grow_while_they_come_back_full_and_shrink_when_they_do_not():
    connection = StreamEnd()
    install_decoder(connection, 1, lambda *_: None)
    transport = connection._transport
    assert transport._MAX_RECV_BYTES == RECV_BYTES
    sizes = []
    for _ in range(6):  # each read a frame that fills it (not one the decoder takes)
        size = transport._MAX_RECV_BYTES
        connection._on_data_available(frame.Body(2, bytes(size - 8)).marshal())
        sizes.append(transport._MAX_RECV_BYTES)
    assert sizes == [2 * RECV_BYTES, 4 * RECV_BYTES, 8 * RECV_BYTES, 16 * RECV_BYTES,
                     MAX_RECV_BYTES, MAX_RECV_BYTES]
    for _ in range(10):
        connection._on_data_available(frame.Heartbeat().marshal())
    assert transport._MAX_RECV_BYTES == RECV_BYTES


@pytest.mark.parametrize("persistent", [True, False])
def test_encoder_bytes_are_pika_s_bytes(persistent):
    encoder = FrameEncoder(2, "perf", 300_000, persistent, frame_max=131072)
    expected = frame.Method(2, spec.Basic.Publish(exchange="", routing_key="perf")).marshal() \
        + frame.Header(2, 300_000, spec.BasicProperties(
            delivery_mode=2 if persistent else 1)).marshal()
    assert bytes(encoder.batch(1, 1, 0, 5))[:len(expected)] == expected


@pytest.fixture
def fast_path_env(monkeypatch):
    """SURGE_AMQP_FAST_PATH as each test sets it, read afresh."""
    monkeypatch.delenv("SURGE_AMQP_FAST_PATH", raising=False)
    fast_path_refused.cache_clear()
    yield monkeypatch
    fast_path_refused.cache_clear()


def amqp_driver(**destination) -> AmqpDriver:
    return AmqpDriver(protocol.Destination(("amqp://127.0.0.1:5672",), "q", **destination),
                      Recorder())


def test_an_agent_s_snapshot_says_the_fast_path_is_on(fast_path_env):
    snapshot = amqp_driver().recorder.snapshot()
    assert snapshot.fast_path == protocol.FastPath(on=True, why="")
    assert protocol.decode(protocol.Snapshot, protocol.encode(snapshot)) == snapshot


@pytest.mark.parametrize("variable, destination, why", [
    ("0", {}, "turned off by SURGE_AMQP_FAST_PATH=0"),
    (None, {"fast_path": False}, "turned off for this run"),
])
def test_an_agent_s_snapshot_says_why_the_fast_path_is_off(fast_path_env, variable, destination,
                                                           why):
    if variable is not None:
        fast_path_env.setenv("SURGE_AMQP_FAST_PATH", variable)
    driver = amqp_driver(**destination)
    assert driver.recorder.snapshot().fast_path == protocol.FastPath(on=False, why=why)
    assert not driver.fast_path_on(StreamEnd())


def test_a_connection_without_the_hooks_turns_the_fast_path_off_and_says_which(fast_path_env):
    driver = amqp_driver()
    assert not driver.fast_path_on(StreamEnd())  # no _adapter_emit_data, a transport without _sock
    state = driver.recorder.snapshot().fast_path
    assert not state.on and state.why.startswith("pika connection without Connection.")
    assert "Connection._adapter_emit_data" in state.why and "transport._sock" in state.why
    assert "Connection._process_frame" not in state.why


def test_a_broken_stream_is_pika_s_invalid_frame_error():
    from pika.exceptions import InvalidFrameError
    connection = StreamEnd()
    install_decoder(connection, 1, lambda *_: None)
    with pytest.raises(InvalidFrameError, match="end marker"):
        connection._on_data_available(frame.Heartbeat().marshal()[:-1] + b"\0")


# -- the backlog gate's depth readings: passive declares both ways ----------------------------

@pytest.mark.parametrize("queue", ["q", "perf-test.quorum", "ü" * 60])
def test_a_passive_declare_is_pika_s_and_its_answer_reads_as_pika_reads_it(queue):
    assert passive_declare_frame(7, queue) == frame.Method(
        7, spec.Queue.Declare(queue=queue, passive=True)).marshal()
    answer = frame.Method(3, spec.Queue.DeclareOk(queue=queue, message_count=4_000_000_123,
                                                  consumer_count=9)).marshal()
    assert declare_ok(answer) == (3, 4_000_000_123)


@pytest.mark.parametrize("other", [
    frame.Heartbeat().marshal(),
    frame.Method(1, spec.Basic.Ack(delivery_tag=12, multiple=True)).marshal(),
    frame.Method(1, spec.Queue.DeclareOk("x", 1, 1)).marshal()[:11],  # cut short
    frame.Method(1, spec.Queue.BindOk()).marshal(),
    frame.Header(1, 10, spec.BasicProperties()).marshal(),
])
def test_no_other_frame_reads_as_a_declare_s_answer(other):
    assert declare_ok(other) is None


@pytest.mark.parametrize(("method", "expected"), [
    (spec.Basic.Ack(delivery_tag=12, multiple=True), (9, 12, True, False)),
    (spec.Basic.Ack(delivery_tag=2**64 - 1), (9, 2**64 - 1, False, False)),
    (spec.Basic.Nack(delivery_tag=7, multiple=True, requeue=False), (9, 7, True, True)),
    (spec.Basic.Nack(delivery_tag=7, multiple=False, requeue=True), (9, 7, False, True)),
])
def test_a_publisher_confirm_reads_as_pika_wrote_it(method, expected):
    assert publisher_confirm(frame.Method(9, method).marshal()) == expected


@pytest.mark.parametrize("other", [
    frame.Heartbeat().marshal(),
    frame.Method(1, spec.Queue.DeclareOk("x", 1, 1)).marshal(),
    frame.Method(1, spec.Basic.Ack(delivery_tag=12)).marshal()[:20],  # cut short
    frame.Method(1, spec.Basic.Reject(delivery_tag=3)).marshal(),
    frame.Method(1, spec.Basic.Recover()).marshal(),
    frame.Header(1, 10, spec.BasicProperties()).marshal(),
])
def test_no_other_frame_reads_as_a_confirm(other):
    assert publisher_confirm(other) is None


def test_a_sender_reader_takes_declare_answers_and_confirms_and_hands_pika_the_rest():
    answers = [frame.Method(5, spec.Queue.DeclareOk(queue=f"q{k}", message_count=k * 1000,
                                                    consumer_count=1)).marshal()
               for k in range(3)]
    confirms = [frame.Method(5, spec.Basic.Ack(delivery_tag=4, multiple=True)).marshal(),
                frame.Method(5, spec.Basic.Nack(delivery_tag=6)).marshal(), b""]
    others = [frame.Heartbeat().marshal(), frame.Method(5, spec.Basic.Cancel("c")).marshal(),
              frame.Method(5, spec.Channel.Close(404, "NOT_FOUND", 50, 10)).marshal()]
    stream = b"".join(a + c + o for a, c, o in zip(answers, confirms, others))
    for cut in range(1, len(stream)):
        depths: list[tuple[int, int]] = []
        settled: list[tuple[int, int, bool, bool]] = []
        connection = StreamEnd()
        install_sender_reader(connection, lambda *answer, into=depths: into.append(answer),
                              lambda *confirm, into=settled: into.append(confirm))
        connection._on_data_available(stream[:cut])
        connection._on_data_available(stream[cut:])
        assert depths == [(5, 0), (5, 1000), (5, 2000)]
        assert settled == [(5, 4, True, False), (5, 6, False, True)]
        assert [type(f.method if hasattr(f, "method") else f) for f in connection.passed] == \
            [frame.Heartbeat, spec.Basic.Cancel, spec.Channel.Close]


# -- request/reply: properties, requests and replies against pika's ---------------------------

PIKA_PROPERTIES = [
    spec.BasicProperties(),
    spec.BasicProperties(delivery_mode=1, correlation_id="00000007:00000000000000ff",
                         reply_to="amq.gen-JzTY20BRgKO-HjmUJj0wLg"),
    spec.BasicProperties(content_type="application/json", content_encoding="utf-8",
                         headers={"x-a": 1, "x-b": "two", "x-c": {"d": [1, 2]}},
                         delivery_mode=2, priority=5, correlation_id="c", reply_to="r",
                         expiration="1000", message_id="m", timestamp=17, type="t",
                         user_id="u", app_id="a"),
    spec.BasicProperties(headers={}, reply_to="only-reply-to"),
    spec.BasicProperties(priority=0, correlation_id=""),
]


def pika_encoded(properties: spec.BasicProperties) -> bytes:
    return b"".join(properties.encode())


@pytest.mark.parametrize("properties", PIKA_PROPERTIES)
def test_reply_fields_read_what_pika_encoded(properties):
    def raw(value):
        return None if value is None else value.encode()
    assert reply_fields(pika_encoded(properties)) == (raw(properties.correlation_id),
                                                      raw(properties.reply_to))


@pytest.mark.parametrize("mode, correlation, reply_to", [
    (1, None, None), (2, "c-1", None), (1, None, "r"), (1, "00000007:0000000000000000", "amq.q")])
def test_basic_properties_are_pika_s(mode, correlation, reply_to):
    assert basic_properties(mode, correlation and correlation.encode(),
                            reply_to and reply_to.encode()) == pika_encoded(
        spec.BasicProperties(delivery_mode=mode, correlation_id=correlation, reply_to=reply_to))


def test_a_requester_s_requests_carry_its_correlation_ids_and_reply_queue():
    role = RequesterRole(7, 0.0, PayloadBuilder(100), Recorder(), in_flight=3)
    correlation = role.correlation(0).encode()
    templates = Templates(1, 131072, [("", "requests")], [100], [bytes(72)], False,
                          basic_properties(1, correlation, b"amq.gen-reply"),
                          sequence_at=CORRELATION_AT + len(correlation) - 16)
    first = role.take_requests(role.room())
    frames = decode_all(bytes(templates.encoder(0).batch(3, 7, first, 99)))
    headers = [f.properties for f in frames if isinstance(f, frame.Header)]
    assert [(h.correlation_id, h.reply_to, h.delivery_mode) for h in headers] == [
        (role.correlation(seq), "amq.gen-reply", 1) for seq in range(3)]
    assert list(role.waiting) == [h.correlation_id for h in headers]
    assert [decode(f.fragment)[:2] for f in frames if isinstance(f, frame.Body)] == [
        (7, seq) for seq in range(3)]


@pytest.mark.parametrize("size", [28, 2048, 300_000])
def test_a_reply_is_what_pika_would_send(size):
    filler = bytes(range(256)) * (size // 256) + bytes(size % 256)
    filler = filler[:size - 28]
    header = encode(3, 5, 77, None)
    replies = ReplyEncoder(4, "surge.replies", 2, filler, frame_max=131072)
    sent = replies.reply(b"amq.gen-r", b"00000003:0000000000000005", header)
    expected = frame.Method(4, spec.Basic.Publish(exchange="surge.replies",
                                                  routing_key="amq.gen-r")).marshal() \
        + frame.Header(4, size, spec.BasicProperties(
            delivery_mode=2, correlation_id="00000003:0000000000000005")).marshal()
    body = header + filler
    for start in range(0, size, 131064):
        expected += frame.Body(4, body[start:start + 131064]).marshal()
    assert sent == expected


def test_with_properties_and_after_read_each_read_s_deliveries_come_first():
    requests = [spec.BasicProperties(correlation_id=f"c-{k}", reply_to="r", delivery_mode=1)
                for k in range(3)]
    stream = b"".join(delivery(1, k + 1, encode(3, k, 1000, None) + bytes(100), False,
                               requests[k]) for k in range(3))
    events = []
    connection = StreamEnd()
    install_decoder(connection, 1, lambda buf, off, tag, red, properties: events.append(
        (decode(buf, off)[1], tag, reply_fields(properties))), properties=True,
        after_read=lambda: events.append("read"))
    cut = len(stream) // 2  # the second delivery ends in the second read
    connection._on_data_available(stream[:cut])
    connection._on_data_available(stream[cut:])
    assert events == [(0, 1, (b"c-0", b"r")), "read",
                      (1, 2, (b"c-1", b"r")), (2, 3, (b"c-2", b"r")), "read"]
