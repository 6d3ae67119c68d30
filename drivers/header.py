"""Broker-agnostic message header that starts every surge message.

Layout of version 2 (network byte order, 28 bytes)::

    magic         2s  b"SG"
    version       B   2
    flags         B   bit 0 (SCHEDULED): sent by a rate-limited sender; other bits 0
    producer_id   I   uint32
    seq           Q   uint64, per producer, starting at 0
    send_time_ns  q   int64, wall clock ns since the epoch, when the message was stamped
    lag_us        i   int32, schedule lag: send time minus the time the schedule meant the
                      message to go (intended send time), in us, saturating at the int32 range;
                      0 without SCHEDULED (an unlimited sender has no schedule)

The intended send time is ``send_time_ns - lag_us * 1000``: a receiver measures latency from
the actual send time and, for SCHEDULED messages, from the intended one as well (latency
without coordinated omission: a sender that falls behind its schedule makes its messages late,
and that delay counts). The lag is measured on the sender's monotonic clock, so it does not
depend on the wall clocks of sender and receiver agreeing.

Version 1 (24 bytes: the same without ``lag_us``, flags 0) is still decoded, as unscheduled:
messages of an older surge left in a queue read as before.
"""

from __future__ import annotations

import struct

MAGIC = b"SG"
VERSION = 2
SCHEDULED = 0x01
"""Flag: the message comes from a rate-limited sender and ``lag_us`` is its schedule lag."""
_HEADER = struct.Struct("!2sBBIQqi")
HEADER_SIZE = _HEADER.size
_HEADER_V1 = struct.Struct("!2sBBIQq")
HEADER_SIZE_V1 = _HEADER_V1.size
LAG_MIN_US, LAG_MAX_US = -(1 << 31), (1 << 31) - 1

_pack = _HEADER.pack
_unpack_from = _HEADER.unpack_from


class HeaderError(ValueError):
    """A message body does not start with a valid surge header."""


def saturate(lag_us: int) -> int:
    """``lag_us`` clamped to what the header's int32 holds."""
    return LAG_MIN_US if lag_us < LAG_MIN_US else LAG_MAX_US if lag_us > LAG_MAX_US else lag_us


def encode(producer_id: int, seq: int, send_ns: int, lag_us: int | None = None) -> bytes:
    """Return the header; ``lag_us`` ``None``: an unscheduled message. Raises struct.error if
    a field is out of its range (the lag saturates instead)."""
    if lag_us is None:
        return _pack(MAGIC, VERSION, 0, producer_id, seq, send_ns, 0)
    return _pack(MAGIC, VERSION, SCHEDULED, producer_id, seq, send_ns, saturate(lag_us))


PREFIX = MAGIC + bytes([VERSION])
"""What every header starts with: bodies pre-built with it need only :data:`stamp_fields`."""
stamp_fields = struct.Struct("!BIQqi").pack_into
"""``stamp_fields(buffer, offset, flags, producer_id, seq, send_ns, lag_us)`` writes the rest
of a header whose :data:`PREFIX` is already at ``offset - len(PREFIX)`` (for bodies pre-built
in place: one call per message); ``lag_us`` must be in the int32 range."""


def decode(body: bytes | bytearray | memoryview, offset: int = 0
           ) -> tuple[int, int, int, int | None]:
    """Return (producer_id, seq, send_ns, lag_us) from body at ``offset``; ``lag_us`` is
    ``None`` for an unscheduled message (or one of version 1). Raise HeaderError if invalid."""
    try:
        magic, version, flags, producer_id, seq, send_ns, lag_us = _unpack_from(body, offset)
    except struct.error:
        return _decode_v1(body, offset)
    if magic != MAGIC:
        raise HeaderError(f"bad header magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        return _decode_v1(body, offset)
    return producer_id, seq, send_ns, lag_us if flags & SCHEDULED else None


def _decode_v1(body: bytes | bytearray | memoryview, offset: int
               ) -> tuple[int, int, int, int | None]:
    """A version 1 header (24 bytes, no schedule lag), or the reason ``body`` has none."""
    try:
        magic, version, _flags, producer_id, seq, send_ns = _HEADER_V1.unpack_from(body, offset)
    except struct.error:
        version = VERSION
    if version == VERSION:  # too short for the version it says (or for any)
        raise HeaderError(
            f"message body is {len(body) - offset} bytes, shorter than the {HEADER_SIZE}-byte "
            "surge header")
    if magic != MAGIC:
        raise HeaderError(f"bad header magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != 1:
        raise HeaderError(f"unknown header version {version}, expected {VERSION} (or 1)")
    return producer_id, seq, send_ns, None
