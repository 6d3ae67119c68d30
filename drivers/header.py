"""Broker-agnostic message header that starts every surge message.

Layout (network byte order, 24 bytes)::

    magic         2s  b"SG"
    version       B   1
    flags         B   reserved, 0
    producer_id   I   uint32
    seq           Q   uint64, per producer, starting at 0
    send_time_ns  q   int64, wall clock ns since the epoch
"""

from __future__ import annotations

import struct

MAGIC = b"SG"
VERSION = 1
_HEADER = struct.Struct("!2sBBIQq")
HEADER_SIZE = _HEADER.size

_pack = _HEADER.pack
_pack_into = _HEADER.pack_into
_unpack_from = _HEADER.unpack_from


class HeaderError(ValueError):
    """A message body does not start with a valid surge header."""


def encode(producer_id: int, seq: int, send_ns: int) -> bytes:
    """Return the 24-byte header; raises struct.error if a field is out of its range."""
    return _pack(MAGIC, VERSION, 0, producer_id, seq, send_ns)


def stamp(buffer: bytearray, offset: int, producer_id: int, seq: int, send_ns: int) -> None:
    """Write a header into ``buffer`` at ``offset`` (for bodies pre-built in place)."""
    _pack_into(buffer, offset, MAGIC, VERSION, 0, producer_id, seq, send_ns)


def decode(body: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int, int]:
    """Return (producer_id, seq, send_ns) from body at ``offset``; raise HeaderError if invalid."""
    try:
        magic, version, _flags, producer_id, seq, send_ns = _unpack_from(body, offset)
    except struct.error:
        raise HeaderError(
            f"message body is {len(body) - offset} bytes, shorter than the {HEADER_SIZE}-byte "
            "surge header") from None
    if magic != MAGIC:
        raise HeaderError(f"bad header magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise HeaderError(f"unknown header version {version}, expected {VERSION}")
    return producer_id, seq, send_ns


class PayloadBuilder:
    """Builds fixed-size message bodies: a header followed by zero padding."""

    __slots__ = ("size", "_padding")

    def __init__(self, size: int) -> None:
        """Prepare bodies of exactly size bytes; size must be at least HEADER_SIZE."""
        if size < HEADER_SIZE:
            raise ValueError(f"payload size {size} is below the minimum of {HEADER_SIZE} bytes")
        self.size = size
        self._padding = bytes(size - HEADER_SIZE)

    def build(self, producer_id: int, seq: int, send_ns: int) -> bytes:
        """Return a body of self.size bytes carrying the given header fields."""
        return _pack(MAGIC, VERSION, 0, producer_id, seq, send_ns) + self._padding
