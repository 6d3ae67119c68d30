"""FrameEncoder and FrameDecoder on bytes alone: no pika, no broker. Frames are written here by
hand from the AMQP 0-9-1 layout (tests/unit/test_amqp_wire.py checks both against pika)."""

from __future__ import annotations

import random
import struct

import pytest

from drivers.amqp import frames
from drivers.amqp.frames import (
    CORRELATION_AT,
    FrameDecoder,
    FrameEncoder,
    FrameError,
    ReplyEncoder,
    Templates,
    ack_frame,
    basic_properties,
    reply_fields,
)
from drivers.header import HEADER_SIZE, SCHEDULED, decode, encode

HEARTBEAT = bytes([8, 0, 0, 0, 0, 0, 0, 0xCE])


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def short(text: str) -> bytes:
    return bytes([len(text)]) + text.encode()


def delivery(channel: int, tag: int, body: bytes, redelivered: bool = False,
             frame_max: int = 4096, properties: bytes = b"\0\0") -> bytes:
    """Basic.Deliver, its content header (with ``properties``: flags first) and body frames as
    a broker sends them."""
    method = struct.pack(">HH", 60, 60) + short("ctag-1") + struct.pack(">QB", tag, redelivered) \
        + short("") + short("perf")
    parts = [frame(1, channel, method),
             frame(2, channel, struct.pack(">HHQ", 60, 0, len(body)) + properties)]
    chunk = frame_max - 8
    parts += [frame(3, channel, body[i:i + chunk]) for i in range(0, len(body), chunk)]
    return b"".join(parts)


class Reader:
    """A decoder of channel 1 and what it gave: deliveries, frames passed on, counts."""

    def __init__(self):
        self.deliveries: list[tuple] = []
        self.passed: list[bytes] = []
        self.taken = self.frames = 0
        self.decoder = FrameDecoder(1, self.delivered, self.passed.append)

    def delivered(self, buffer, offset, tag, redelivered) -> None:
        self.deliveries.append((bytes(buffer[offset:offset + HEADER_SIZE]), tag, redelivered))

    def feed(self, *pieces: bytes) -> Reader:
        for piece in pieces:
            taken, frames = self.decoder.feed(piece)
            self.taken += taken
            self.frames += frames
        return self


def body(seq: int, size: int) -> bytes:
    return (encode(3, seq, 1000 + seq, None) + bytes(max(0, size - HEADER_SIZE)))[:size]


STREAM_BODIES = [body(0, 100), body(1, HEADER_SIZE), body(2, 0), body(3, 10_000),
                 body(4, 4088), body(5, 4089)]
OTHER = frame(1, 1, struct.pack(">HH", 60, 11))  # Basic.QosOk, for pika
STREAM = b"".join([delivery(1, 1, STREAM_BODIES[0]), HEARTBEAT, delivery(1, 2, STREAM_BODIES[1]),
                   OTHER, delivery(2, 9, body(9, 50)), delivery(1, 3, STREAM_BODIES[2], True),
                   delivery(1, 4, STREAM_BODIES[3]), delivery(1, 5, STREAM_BODIES[4]),
                   HEARTBEAT, delivery(1, 6, STREAM_BODIES[5])])
EXPECTED = [(body(k, HEADER_SIZE) if len(b) else bytes(HEADER_SIZE), k + 1, k == 2)
            for k, b in enumerate(STREAM_BODIES)]  # a zero-length body reads as zeros
# frames of channel 1's deliveries: 6 methods, 6 headers, bodies of 1, 1, 0, 3, 1, 2 frames
OWN_FRAMES = 6 + 6 + 1 + 1 + 0 + 3 + 1 + 2


def check(reader: Reader) -> None:
    assert reader.deliveries == EXPECTED
    other_channel = delivery(2, 9, body(9, 50))
    assert b"".join(reader.passed) == HEARTBEAT + OTHER + other_channel + HEARTBEAT
    assert reader.passed[:2] == [HEARTBEAT, OTHER]  # whole frames, in stream order
    assert reader.taken == len(STREAM) and reader.frames == OWN_FRAMES


def test_a_stream_in_one_read():
    check(Reader().feed(STREAM))


def test_a_stream_a_byte_at_a_time():
    check(Reader().feed(*(STREAM[i:i + 1] for i in range(len(STREAM)))))


@pytest.mark.parametrize("seed", range(6))
def test_a_stream_split_anywhere(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(1, 60)))
    check(Reader().feed(*(STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)]))))


def test_every_split_in_two_of_a_delivery_and_a_heartbeat():
    stream = delivery(1, 7, body(7, 300)) + HEARTBEAT
    for cut in range(len(stream) + 1):
        reader = Reader().feed(stream[:cut], stream[cut:])
        assert reader.deliveries == [(body(7, HEADER_SIZE), 7, False)], cut
        assert reader.passed == [HEARTBEAT] and reader.taken == len(stream), cut


def test_a_frame_not_yet_whole_is_held_until_its_end_comes():
    stream = delivery(1, 1, body(1, 100))
    reader = Reader().feed(stream[:-1])
    assert reader.deliveries == [] and reader.taken < len(stream)
    reader.feed(stream[-1:])
    assert reader.deliveries == [(body(1, HEADER_SIZE), 1, False)]
    assert reader.taken == len(stream) and reader.frames == 3


def test_the_rest_of_a_large_body_is_skipped_not_held():
    big = delivery(1, 1, body(1, 1_000_000), frame_max=131072)
    first_read = big.index(body(1, HEADER_SIZE)) + HEADER_SIZE  # the header, not the body
    reader = Reader().feed(big[:first_read])
    assert reader.decoder.leftover == b"" and reader.decoder.skip > 0
    reader.feed(*(big[i:i + 65536] for i in range(first_read, len(big), 65536)))
    assert reader.deliveries == [(body(1, HEADER_SIZE), 1, False)]
    assert reader.taken == len(big) and reader.frames == 2 + 8


@pytest.mark.parametrize("stream", [
    HEARTBEAT[:-1] + b"\x00",  # a frame passed on
    delivery(1, 1, body(1, 100))[:-1] + b"\x00",  # a body frame
])
def test_a_wrong_end_marker_is_refused(stream):
    with pytest.raises(FrameError, match="end marker"):
        Reader().feed(stream)


def test_a_wrong_end_marker_after_a_skipped_body_is_refused():
    big = delivery(1, 1, body(1, 200_000), frame_max=262144)
    reader = Reader().feed(big[:100])
    with pytest.raises(FrameError):
        reader.feed(big[100:-1] + b"\x00")


def test_a_publish_is_method_header_and_body_frames():
    encoder = FrameEncoder(3, "perf", 100, persistent=True, frame_max=4096)
    method = frame(1, 3, struct.pack(">HHH", 60, 40, 0) + short("") + short("perf") + b"\0")
    header = frame(2, 3, struct.pack(">HHQHB", 60, 0, 100, 0x1000, 2))
    batch = bytes(encoder.batch(2, producer_id=7, first_seq=5, send_ns=99))
    one = method + header + frame(3, 3, body_of(7, 5, 99, 100))
    assert encoder.length == len(one) and batch == one + method + header + frame(
        3, 3, body_of(7, 6, 99, 100))
    assert decode(batch, encoder.header_offset + encoder.length) == (7, 6, 99, None)


def body_of(producer: int, seq: int, send_ns: int, size: int) -> bytes:
    return encode(producer, seq, send_ns, None) + bytes(size - HEADER_SIZE)


@pytest.mark.parametrize("size, frames", [(4088, 1), (4089, 2), (3 * 4088, 3), (HEADER_SIZE, 1)])
def test_bodies_are_cut_at_frame_max(size, frames):
    encoder = FrameEncoder(1, "q", size, persistent=False, frame_max=4096)
    data = bytes(encoder.batch(1, 1, 0, 0))
    pos, sizes = 0, []
    while pos < len(data):
        kind, _, length = struct.unpack_from(">BHI", data, pos)
        assert data[pos + 7 + length] == 0xCE
        if kind == 3:
            sizes.append(length)
        pos += 8 + length
    assert len(sizes) == frames and sum(sizes) == size and max(sizes) <= 4088
    assert data[data.index(b"\x00\x3c\x00\x00") + 12:][:3] == b"\x10\x00\x01"  # transient


def test_a_batch_stamps_each_message_s_sequence_and_lag():
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096)
    batch = encoder.batch(3, 2, 10, 500, (SCHEDULED, 3000, 1000.0))
    assert [decode(batch, encoder.header_offset + k * encoder.length) for k in range(3)] == [
        (2, 10 + k, 500, 3000 - 1000 * k) for k in range(3)]


def test_a_batch_buffer_is_stamped_again_only_once_nothing_views_it(monkeypatch):
    monkeypatch.setattr(frames, "SPARE_FROM_BYTES", 0)
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096)
    first = encoder.batch(3, 2, 10, 500)
    held = encoder.batch(2, 2, 13, 600)  # the first batch is still viewed: a buffer of its own
    assert decode(first, encoder.header_offset) == (2, 10, 500, None)
    assert decode(held, encoder.header_offset) == (2, 13, 600, None)
    address = first.obj
    first.release()  # as the transport drops a batch it has sent
    again = encoder.batch(2, 2, 15, 700)
    assert again.obj is address  # the spare is stamped, not copied again
    assert bytes(again) == bytes(FrameEncoder(1, "q", 64, persistent=False,
                                              frame_max=4096).batch(2, 2, 15, 700))
    assert decode(held, encoder.header_offset + encoder.length) == (2, 14, 600, None)


def test_the_oldest_spare_is_reused_first_and_a_free_one_too_small_is_let_go(monkeypatch):
    monkeypatch.setattr(frames, "SPARE_FROM_BYTES", 0)
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096)
    small = encoder.batch(1, 1, 0, 0)
    small_buffer = small.obj
    small.release()
    large = encoder.batch(3, 1, 1, 0)  # the free spare holds one message: let go, one made
    assert large.obj is not small_buffer and list(encoder._spares) == [large.obj]
    older = large.obj
    large.release()
    newer = encoder.batch(2, 1, 4, 0)
    assert newer.obj is older  # the oldest spare, free again


def test_a_small_batch_is_a_copy_of_its_own():
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096)
    first = encoder.batch(2, 1, 0, 0)
    first_buffer = first.obj
    first.release()
    assert encoder.batch(2, 1, 2, 0).obj is not first_buffer and not encoder._spares


def test_an_encoder_keeps_spare_batches_up_to_a_bound(monkeypatch):
    encoder = FrameEncoder(1, "q", 1000, persistent=False, frame_max=4096)
    monkeypatch.setattr(frames, "SPARE_BYTES", 3 * encoder.length)
    monkeypatch.setattr(frames, "SPARE_FROM_BYTES", 0)
    views = [encoder.batch(1, 1, k, 0) for k in range(5)]  # all held: five buffers made
    assert len({id(view.obj) for view in views}) == 5
    assert [decode(view, encoder.header_offset)[1] for view in views] == [0, 1, 2, 3, 4]
    assert len(encoder._spares) == 3


def test_a_routing_key_longer_than_a_short_string_is_refused():
    with pytest.raises(ValueError, match="routing key .* at most 255 bytes"):
        FrameEncoder(1, "q" * 256, 64, persistent=False, frame_max=4096)


def test_a_body_smaller_than_the_header_is_refused():
    with pytest.raises(ValueError, match=f"at least its {HEADER_SIZE}-byte header"):
        FrameEncoder(1, "q", HEADER_SIZE - 1, persistent=False, frame_max=4096)


def test_an_ack_frame():
    assert ack_frame(5, 258, True) == frame(1, 5, struct.pack(">HHQB", 60, 80, 258, 1))
    assert ack_frame(1, 1, False)[-2:] == b"\x00\xce"


def test_the_frames_module_imports_no_pika():
    import ast
    from pathlib import Path

    import drivers.amqp.frames as frames
    tree = ast.parse(Path(frames.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name and name.split(".")[0] == "pika"}
    assert "drivers.header" in imported  # the scan sees the imports


# -- the decoder's properties option, and the properties it hands on ------------------------

CORRELATED = basic_properties(1, b"00000007:0000000000000001", b"amq.gen-reply")
# content-type, content-encoding, headers {"k": "v"}, delivery-mode, priority, correlation id,
# reply-to, expiration: every property reply_fields steps over, and one after
TABLE = short("k") + b"S" + struct.pack(">I", 1) + b"v"
EVERY_KIND = struct.pack(">H", 0xFF00) + short("text/plain") + short("gzip") \
    + struct.pack(">I", len(TABLE)) + TABLE + bytes([2, 9]) + short("c-1") + short("r-1") \
    + short("60000")
PROPERTIES = [b"\0\0", CORRELATED, EVERY_KIND, CORRELATED, basic_properties(2, b"", b"q"),
              CORRELATED]
PROPERTY_BODIES = [body(0, 100), body(1, 10_000), body(2, 0), body(3, 4088), body(4, 4089),
                   body(5, HEADER_SIZE)]
PROPERTY_STREAM = b"".join([
    delivery(1, 1, PROPERTY_BODIES[0], properties=PROPERTIES[0]), HEARTBEAT,
    delivery(1, 2, PROPERTY_BODIES[1], properties=PROPERTIES[1]),
    delivery(2, 9, body(9, 50), properties=CORRELATED), OTHER,
    delivery(1, 3, PROPERTY_BODIES[2], True, properties=PROPERTIES[2]),
    delivery(1, 4, PROPERTY_BODIES[3], properties=PROPERTIES[3]),
    delivery(1, 5, PROPERTY_BODIES[4], properties=PROPERTIES[4]), HEARTBEAT,
    delivery(1, 6, PROPERTY_BODIES[5], properties=PROPERTIES[5])])
# the callback's arguments, the buffer read at the offset it gives
PROPERTY_EXPECTED = [(body(k, HEADER_SIZE) if len(b) else bytes(HEADER_SIZE), k + 1, k == 2,
                      PROPERTIES[k]) for k, b in enumerate(PROPERTY_BODIES)]


class PropertiesReader(Reader):
    """A decoder of channel 1 with the properties option."""

    def __init__(self):
        super().__init__()
        self.decoder = FrameDecoder(1, self.delivered, self.passed.append, properties=True)

    def delivered(self, buffer, offset, tag, redelivered, properties) -> None:
        assert type(properties) is bytes
        self.deliveries.append((bytes(buffer[offset:offset + HEADER_SIZE]), tag, redelivered,
                                properties))


def check_properties(reader: Reader) -> None:
    assert reader.deliveries == PROPERTY_EXPECTED
    assert reader.passed == [HEARTBEAT, *split_frames(delivery(2, 9, body(9, 50),
                                                               properties=CORRELATED)),
                             OTHER, HEARTBEAT]
    assert reader.taken == len(PROPERTY_STREAM)
    assert reader.frames == 6 + 6 + 1 + 3 + 0 + 1 + 2 + 1


def split_frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        end = pos + 8 + struct.unpack_from(">I", data, pos + 3)[0]
        out.append(data[pos:end])
        pos = end
    return out


def test_with_properties_each_delivery_comes_with_its_content_header_s_properties():
    check_properties(PropertiesReader().feed(PROPERTY_STREAM))


def test_with_properties_a_stream_a_byte_at_a_time():
    check_properties(PropertiesReader().feed(
        *(PROPERTY_STREAM[i:i + 1] for i in range(len(PROPERTY_STREAM)))))


def test_with_properties_every_split_in_two():
    for cut in range(len(PROPERTY_STREAM) + 1):
        reader = PropertiesReader().feed(PROPERTY_STREAM[:cut], PROPERTY_STREAM[cut:])
        assert reader.deliveries == PROPERTY_EXPECTED, cut


@pytest.mark.parametrize("seed", range(4))
def test_with_properties_a_stream_split_anywhere(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(PROPERTY_STREAM)), rng.randint(1, 80)))
    check_properties(PropertiesReader().feed(
        *(PROPERTY_STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(PROPERTY_STREAM)]))))


def test_without_the_option_the_same_stream_gives_four_arguments_as_before():
    reader = Reader().feed(PROPERTY_STREAM)
    assert reader.deliveries == [expected[:3] for expected in PROPERTY_EXPECTED]


def test_the_properties_of_a_large_body_s_delivery_survive_the_skipped_rest():
    big = delivery(1, 1, body(1, 1_000_000), frame_max=131072, properties=CORRELATED)
    reader = PropertiesReader()
    reader.feed(*(big[i:i + 65536] for i in range(0, len(big), 65536)))
    assert reader.deliveries == [(body(1, HEADER_SIZE), 1, False, CORRELATED)]


@pytest.mark.parametrize("properties, fields", [
    (b"\0\0", (None, None)),
    (basic_properties(2), (None, None)),
    (CORRELATED, (b"00000007:0000000000000001", b"amq.gen-reply")),
    (basic_properties(1, None, b"r"), (None, b"r")),
    (basic_properties(1, b"c"), (b"c", None)),
    (basic_properties(1, b"", b""), (b"", b"")),
    (EVERY_KIND, (b"c-1", b"r-1")),
    (struct.pack(">H", 0x8600) + short("t") + short("c") + short("r"), (b"c", b"r")),
    (struct.pack(">H", 0x2600) + struct.pack(">I", 0) + short("c") + short("r"), (b"c", b"r")),
    (struct.pack(">H", 0x0A00) + bytes([5]) + short("r"), (None, b"r")),
    # a second flags word follows the first when its last bit is set
    (struct.pack(">HH", 0x0601, 0) + short("c") + short("r"), (b"c", b"r")),
])
def test_reply_fields_step_over_the_properties_before_them_by_their_flags(properties, fields):
    assert reply_fields(properties) == fields


@pytest.mark.parametrize("properties", [
    CORRELATED[:-1], CORRELATED[:CORRELATION_AT], EVERY_KIND[:20], b"\x06\x00", b"\x20\x00\x00",
])
def test_properties_cut_short_are_refused(properties):
    with pytest.raises(FrameError, match="cut short"):
        reply_fields(properties)


def test_a_requester_s_batch_stamps_each_correlation_id_s_sequence_digits():
    correlation = b"00000007:" + b"0" * 16
    properties = basic_properties(1, correlation, b"amq.gen-1")
    encoder = FrameEncoder(1, "q", 64, persistent=False, frame_max=4096, properties=properties,
                           sequence_at=CORRELATION_AT + 9)
    batch = bytes(encoder.batch(3, 7, 254, 99))
    messages = [batch[k * encoder.length:(k + 1) * encoder.length] for k in range(3)]
    for k, message in enumerate(messages):
        header = split_frames(message)[1]
        assert reply_fields(header[19:-1]) == (b"00000007:%016x" % (254 + k), b"amq.gen-1")
        assert decode(message, encoder.header_offset) == (7, 254 + k, 99, None)


def test_mixed_templates_stamp_the_sequence_digits_of_each_size():
    correlation = b"0000000a:" + b"0" * 16
    templates = Templates(1, 4096, [("", "q")], [64, 5000], [bytes(36), bytes(4972)], False,
                          basic_properties(1, correlation, b"r"),
                          sequence_at=CORRELATION_AT + 9)
    frames = split_frames(bytes(templates.mixed([1, 0, 1], 10, 16, 5)))
    headers = [f for f in frames if f[0] == 2]
    assert [reply_fields(h[19:-1])[0] for h in headers] == [
        b"0000000a:%016x" % seq for seq in (16, 17, 18)]
    assert [decode(f, 7)[:2] for f in frames if f[0] == 3 and f[7:9] == b"SG"] == [
        (10, 16), (10, 17), (10, 18)]


@pytest.mark.parametrize("size, frames", [(HEADER_SIZE, 1), (100, 1), (4088, 1), (9000, 3)])
def test_a_reply_is_the_request_s_header_to_its_reply_to_with_its_correlation_id(size, frames):
    filler = (bytes(range(256)) * 40)[:size - HEADER_SIZE]
    replies = ReplyEncoder(2, "replies", 1, filler, frame_max=4096)
    request = body(3, HEADER_SIZE)
    sent = split_frames(replies.reply(b"amq.gen-r", b"c-7", request))
    assert sent[0] == frame(1, 2, struct.pack(">HHH", 60, 40, 0) + short("replies")
                            + short("amq.gen-r") + b"\0")
    assert sent[1] == frame(2, 2, struct.pack(">HHQ", 60, 0, size) + basic_properties(1, b"c-7"))
    assert b"".join(f[7:-1] for f in sent[2:]) == request + filler
    assert len(sent) == 2 + frames and all(len(f) <= 4096 for f in sent)


def test_a_request_without_a_correlation_id_gets_a_reply_without_one():
    replies = ReplyEncoder(1, "", 2, b"", 4096)
    header = split_frames(replies.reply(b"q", None, body(1, HEADER_SIZE)))[1]
    assert header == frame(2, 1, struct.pack(">HHQ", 60, 0, HEADER_SIZE) + basic_properties(2))
