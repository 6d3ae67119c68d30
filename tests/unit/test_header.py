import struct

import pytest

from drivers.header import (
    HEADER_SIZE,
    HEADER_SIZE_V1,
    LAG_MAX_US,
    LAG_MIN_US,
    MAGIC,
    SCHEDULED,
    VERSION,
    HeaderError,
    decode,
    encode,
)
from drivers.message import PayloadBuilder

VALID = encode(7, 42, 1_700_000_000_000_000_000)


def v1(producer_id: int, seq: int, send_ns: int) -> bytes:
    """A header as surge wrote it before version 2 (still in some queue)."""
    return struct.pack("!2sBBIQq", MAGIC, 1, 0, producer_id, seq, send_ns)


def test_header_size_is_28_and_24_in_version_1():
    assert (HEADER_SIZE, HEADER_SIZE_V1, VERSION) == (28, 24, 2)
    assert len(VALID) == HEADER_SIZE


def test_encode_layout_is_network_byte_order():
    expected = (
        b"SG\x02\x00"
        + (0x01020304).to_bytes(4, "big")
        + (0x0506).to_bytes(8, "big")
        + (-3).to_bytes(8, "big", signed=True)
        + bytes(4)
    )
    assert encode(0x01020304, 0x0506, -3) == expected
    scheduled = encode(0x01020304, 0x0506, -3, lag_us=-2)
    assert scheduled == expected[:3] + bytes([SCHEDULED]) + expected[4:24] + b"\xff\xff\xff\xfe"


@pytest.mark.parametrize(
    ("producer_id", "seq", "send_ns"),
    [
        (0, 0, 0),
        (1, 2, 3),
        (2**32 - 1, 2**64 - 1, 2**63 - 1),
        (123, 456, -(2**63)),
        (9, 10**12, 1_700_000_000_123_456_789),
    ],
)
def test_round_trip(producer_id, seq, send_ns):
    assert decode(encode(producer_id, seq, send_ns)) == (producer_id, seq, send_ns, None)
    assert decode(encode(producer_id, seq, send_ns, 1234)) == (producer_id, seq, send_ns, 1234)


@pytest.mark.parametrize(("lag_us", "carried"), [
    (0, 0), (1, 1), (-5, -5), (LAG_MAX_US, LAG_MAX_US), (LAG_MAX_US + 1, LAG_MAX_US),
    (10**15, LAG_MAX_US), (LAG_MIN_US - 7, LAG_MIN_US)])
def test_the_schedule_lag_saturates_at_the_int32_range(lag_us, carried):
    assert decode(encode(1, 2, 3, lag_us)) == (1, 2, 3, carried)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_buffers_with_trailing_payload(wrap):
    assert decode(wrap(VALID + b"payload")) == (7, 42, 1_700_000_000_000_000_000, None)


@pytest.mark.parametrize("padding", [0, 3, 100])
def test_version_1_headers_still_decode_as_unscheduled(padding):
    body = v1(7, 42, 99) + bytes(padding)
    assert decode(body) == (7, 42, 99, None)
    assert decode(b"xx" + body, 2) == (7, 42, 99, None)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "0 bytes, shorter than the 28-byte"),
        (VALID[:27], "27 bytes, shorter than the 28-byte"),
        (VALID[:24], "24 bytes, shorter than the 28-byte"),
        (v1(1, 2, 3)[:23], "23 bytes, shorter than the 28-byte"),
        (b"XG" + VALID[2:], "magic"),
        (b"sg" + VALID[2:], "magic"),
        (b"XG" + v1(1, 2, 3)[2:], "magic"),
        (MAGIC + bytes([0]) + VALID[3:], "unknown header version 0"),
        (MAGIC + bytes([VERSION + 1]) + VALID[3:], f"unknown header version {VERSION + 1}"),
    ],
)
def test_decode_rejects_invalid(body, match):
    with pytest.raises(HeaderError, match=match):
        decode(body)


def test_header_error_is_value_error():
    assert issubclass(HeaderError, ValueError)


@pytest.mark.parametrize(
    ("producer_id", "seq", "send_ns"),
    [(-1, 0, 0), (2**32, 0, 0), (0, -1, 0), (0, 2**64, 0), (0, 0, 2**63)],
)
def test_encode_rejects_out_of_range(producer_id, seq, send_ns):
    with pytest.raises(struct.error):
        encode(producer_id, seq, send_ns)


@pytest.mark.parametrize("size", [HEADER_SIZE, HEADER_SIZE + 1, 100, 4096])
def test_payload_builder_sizes(size):
    builder = PayloadBuilder(size)
    assert builder.size == size
    body = builder.build(3, 99, 12345)
    assert len(body) == size
    assert decode(body) == (3, 99, 12345, None)
    assert body[:HEADER_SIZE] == encode(3, 99, 12345)
    assert body[HEADER_SIZE:] == bytes(size - HEADER_SIZE)
    assert decode(builder.build(3, 99, 12345, 7)) == (3, 99, 12345, 7)


def test_payload_builder_bodies_differ_per_call():
    builder = PayloadBuilder(64)
    assert decode(builder.build(1, 1, 1)) == (1, 1, 1, None)
    assert decode(builder.build(2, 5, 9)) == (2, 5, 9, None)


@pytest.mark.parametrize("size", [0, 1, HEADER_SIZE - 1, -5])
def test_payload_builder_rejects_small_size(size):
    with pytest.raises(ValueError, match=f"at least its {HEADER_SIZE}-byte header"):
        PayloadBuilder(size)


def test_the_scenario_minimum_is_the_header_size():
    from orchestrator.specs.message import MIN_MESSAGE_BYTES
    assert MIN_MESSAGE_BYTES == HEADER_SIZE
