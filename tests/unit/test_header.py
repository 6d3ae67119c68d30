import struct

import pytest

from drivers.header import (
    HEADER_SIZE,
    MAGIC,
    VERSION,
    HeaderError,
    PayloadBuilder,
    decode,
    encode,
)

VALID = encode(7, 42, 1_700_000_000_000_000_000)


def test_header_size_is_24():
    assert HEADER_SIZE == 24
    assert len(VALID) == HEADER_SIZE


def test_encode_layout_is_network_byte_order():
    expected = (
        b"SG\x01\x00"
        + (0x01020304).to_bytes(4, "big")
        + (0x0506).to_bytes(8, "big")
        + (-3).to_bytes(8, "big", signed=True)
    )
    assert encode(0x01020304, 0x0506, -3) == expected


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
    assert decode(encode(producer_id, seq, send_ns)) == (producer_id, seq, send_ns)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_buffers_with_trailing_payload(wrap):
    assert decode(wrap(VALID + b"payload")) == (7, 42, 1_700_000_000_000_000_000)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "0 bytes, shorter than the 24-byte"),
        (VALID[:23], "23 bytes, shorter than the 24-byte"),
        (b"XG" + VALID[2:], "magic"),
        (b"sg" + VALID[2:], "magic"),
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
    assert decode(body) == (3, 99, 12345)
    assert body[:HEADER_SIZE] == encode(3, 99, 12345)
    assert body[HEADER_SIZE:] == bytes(size - HEADER_SIZE)


def test_payload_builder_bodies_differ_per_call():
    builder = PayloadBuilder(64)
    assert decode(builder.build(1, 1, 1)) == (1, 1, 1)
    assert decode(builder.build(2, 5, 9)) == (2, 5, 9)


@pytest.mark.parametrize("size", [0, 1, HEADER_SIZE - 1, -5])
def test_payload_builder_rejects_small_size(size):
    with pytest.raises(ValueError, match=f"minimum of {HEADER_SIZE}"):
        PayloadBuilder(size)
