"""AMQP 0-9-1 frames built and read by surge itself, beside pika, on the hot paths.

pika spends most of a load generator's CPU encoding three frames per publish and decoding
three objects per delivery. Here a sender's publish frames are encoded once (a template) and a
batch is that template repeated with each message's header stamped in place, handed to pika's
transport in one write. On the receiving side a decoder takes Basic.Deliver, its content header
and body frames off the byte stream and hands every other frame to pika, so connection and
channel handling (open, consume-ok, close, heartbeats) stay pika's.

Both use private pika hooks: ``Connection._adapter_emit_data`` (write bytes),
``Connection._on_data_available`` (bytes read), ``Connection._process_frame`` and the
transport's read sizes. :func:`hooks_available` checks them, and first that the installed pika
is a version they were checked against (:data:`CHECKED_PIKA`, the minor versions
``tests/unit/test_pika_hooks.py`` pins); the driver falls back to ``basic_publish`` /
``basic_consume`` otherwise, or when ``SURGE_AMQP_FAST_PATH=0`` asks it to.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections.abc import Callable
from itertools import accumulate, repeat
from operator import sub

import pika
from pika import exceptions, frame, spec

from drivers.header import HEADER_SIZE, PREFIX, stamp_fields

_FRAME_HEADER = struct.Struct(">BHI")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_DELIVER = spec.Basic.Deliver.INDEX
_FRAME_END = 0xCE
RECV_BYTES = 256 * 1024  # socket read size once our decoder parses the stream

# (buffer, offset of the body's first byte, delivery tag, redelivered)
OnDelivery = Callable[[bytes, int, int, bool], None]


CHECKED_PIKA = ("1.3", "1.4")  # minor versions whose private hooks the fast paths were checked on

log = logging.getLogger(__name__)


@functools.cache
def fast_path_refused() -> str | None:
    """Why the fast paths are off in this process (``None``: they may be used): turned off
    by ``SURGE_AMQP_FAST_PATH=0``, or a pika they were not checked against. Said once in the
    agent's log."""
    if os.environ.get("SURGE_AMQP_FAST_PATH", "1").strip() == "0":
        reason = "turned off by SURGE_AMQP_FAST_PATH=0"
    elif ".".join(pika.__version__.split(".")[:2]) not in CHECKED_PIKA:
        reason = (f"pika {pika.__version__} is not a version the fast paths were checked "
                  f"against ({', '.join(CHECKED_PIKA)})")
    else:
        return None
    log.warning("AMQP fast paths off (basic_publish / basic_consume instead): %s", reason)
    return reason


def hooks_available(connection) -> bool:
    """Whether the fast paths may be used on this pika connection: a checked pika, not turned
    off, and the connection has the private hooks they use."""
    if fast_path_refused() is not None:
        return False
    transport = getattr(connection, "_transport", None)
    return (callable(getattr(connection, "_adapter_emit_data", None))
            and callable(getattr(connection, "_process_frame", None))
            and hasattr(connection, "_on_data_available")
            and transport is not None and hasattr(transport, "_MAX_RECV_BYTES"))


class PublishTemplate:
    """The wire bytes of one Basic.Publish of a fixed-size body, for stamping in batches."""

    def __init__(self, channel_number: int, routing_key: str, size: int, persistent: bool,
                 frame_max: int):
        properties = spec.BasicProperties(delivery_mode=2 if persistent else 1)
        method = frame.Method(channel_number, spec.Basic.Publish(
            exchange="", routing_key=routing_key)).marshal()
        header = frame.Header(channel_number, size, properties).marshal()
        chunk = frame_max - spec.FRAME_HEADER_SIZE - spec.FRAME_END_SIZE
        parts = [method, header]
        for start in range(0, size, chunk):
            length = min(chunk, size - start)
            body = PREFIX + bytes(length - len(PREFIX)) if start == 0 else bytes(length)
            parts += [_FRAME_HEADER.pack(spec.FRAME_BODY, channel_number, length), body,
                      b"\xce"]
        self.message = b"".join(parts)
        self.header_offset = len(method) + len(header) + spec.FRAME_HEADER_SIZE
        self.length = len(self.message)

    def batch(self, n: int, producer_id: int, first_seq: int, send_ns: int,
              lags: tuple[int, int, float] = (0, 0, 0.0)) -> bytearray:
        """``n`` consecutive publishes with sequence numbers from ``first_seq``; ``lags`` is
        :meth:`drivers.workers.SenderRole.lags`: the header flags, the first message's schedule
        lag (us) and how much less each next one's is (they were due 1 / rate apart)."""
        buffer = bytearray(self.message * n)
        first, step, stamp = self.header_offset + len(PREFIX), self.length, stamp_fields
        flags, lag_us, less_us = lags
        each_lag = map(int, accumulate(repeat(less_us, n - 1), sub, initial=lag_us)) \
            if less_us else repeat(lag_us, n)  # the lags in C, not per message in Python
        for offset, seq, lag in zip(range(first, first + n * step, step),
                                    range(first_seq, first_seq + n), each_lag):
            stamp(buffer, offset, flags, producer_id, seq, send_ns, lag)
        return buffer


def emit(connection, data: bytes | bytearray) -> None:
    """Queue already-framed bytes on the connection's transport (loop thread only).

    As a memoryview: after a partial send pika keeps ``chunk[sent:]``, which copies what is
    left of a bytes object each time (quadratic in a large batch) and of a view copies nothing.
    """
    connection._adapter_emit_data(memoryview(data))


def install_decoder(connection, channel_number: int, on_delivery: OnDelivery) -> None:
    """Parse deliveries on ``channel_number`` ourselves; everything else goes to pika.

    Only the first body frame of a message is looked at (the surge header lives there), so
    multi-frame bodies are never joined. Byte and frame counters that pika's heartbeat checker
    reads are kept up to date.
    """
    process_frame = connection._process_frame
    unpack_frame, unpack_u32, unpack_u64 = (_FRAME_HEADER.unpack_from, _U32.unpack_from,
                                            _U64.unpack_from)
    leftover = b""
    tag, redelivered, remaining = 0, False, -1  # remaining: body bytes still due, -1 = none
    first_buffer, first_offset = b"", 0

    def on_data_available(data: bytes) -> None:
        nonlocal leftover, tag, redelivered, remaining, first_buffer, first_offset
        buffer = leftover + data if leftover else data
        end_of_data, pos, frames = len(buffer), 0, 0
        while end_of_data - pos >= 7:
            kind, channel, size = unpack_frame(buffer, pos)
            end = pos + 8 + size
            if end > end_of_data:
                break
            if buffer[end - 1] != _FRAME_END:
                raise exceptions.InvalidFrameError("invalid frame end marker")
            frames += 1
            if channel == channel_number:
                if kind == 3 and remaining > 0:
                    if first_offset < 0:
                        first_buffer, first_offset = buffer, pos + 7
                    remaining -= size
                    if remaining <= 0:
                        remaining = -1
                        on_delivery(first_buffer, first_offset, tag, redelivered)
                    pos = end
                    continue
                if kind == 2 and remaining == 0:
                    remaining = unpack_u64(buffer, pos + 11)[0]
                    first_offset = -1
                    if remaining == 0:
                        remaining = -1
                        on_delivery(b"\0" * HEADER_SIZE, 0, tag, redelivered)
                    pos = end
                    continue
                if kind == 1 and unpack_u32(buffer, pos + 7)[0] == _DELIVER:
                    tag_at = pos + 12 + buffer[pos + 11]
                    tag = unpack_u64(buffer, tag_at)[0]
                    redelivered = bool(buffer[tag_at + 8] & 1)
                    remaining = 0
                    pos = end
                    continue
            frames -= 1  # pika counts the frames it processes itself
            _, decoded = frame.decode_frame(buffer[pos:end])
            pos = end
            if decoded is None:
                raise exceptions.InvalidFrameError("undecodable frame")
            process_frame(decoded)
        leftover = buffer[pos:] if pos < end_of_data else b""
        connection.bytes_received += pos
        connection.frames_received += frames

    connection._on_data_available = on_data_available
    transport = connection._transport
    transport._MAX_RECV_BYTES = RECV_BYTES
    transport._MAX_CONSUME_BYTES = 4 * RECV_BYTES
