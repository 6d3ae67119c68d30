"""AMQP 0-9-1 frames built and read by surge itself, beside pika, on the hot paths.

pika spends most of a load generator's CPU encoding three frames per publish and decoding
three objects per delivery. Here a sender's publish frames are encoded once (a template) and a
batch is that template repeated with each message's header stamped in place, handed to pika's
transport in one write. On the receiving side a decoder takes Basic.Deliver, its content header
and body frames off the byte stream and hands every other frame to pika, so connection and
channel handling (open, consume-ok, close, heartbeats) stay pika's. Of a body only the first
bytes (the surge header) are looked at: the rest of a large one is skipped as it arrives.

A fast-path connection also reads and writes its socket directly (:func:`install_direct_io`):
each write (pika's own frames too) is tried on the socket at once, where pika would register a
writability watcher, wait for the next poll and unregister it again, three system calls and a
loop turn where one ``send`` does; and each readable event reads once. Receivers acknowledge
with frames of their own (:func:`ack_frame`).

They use private pika hooks: ``Connection._adapter_emit_data`` and
``Connection._output_marshaled_frames`` (write bytes),
``Connection._on_data_available`` (bytes read), ``Connection._process_frame``, the plaintext
transport's socket, buffered byte count and state, and its read sizes. :func:`hooks_available`
checks them, and first that the installed pika is a version they were checked against
(:data:`CHECKED_PIKA`, the minor versions ``tests/unit/test_pika_hooks.py`` pins); the driver
falls back to ``basic_publish`` / ``basic_consume`` otherwise, or when
``SURGE_AMQP_FAST_PATH=0`` asks it to.
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
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport

from drivers.header import HEADER_SIZE, PREFIX, stamp_fields

_FRAME_HEADER = struct.Struct(">BHI")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ACK = struct.Struct(">BHIIQBB")  # method frame: class+method, delivery tag, multiple, end
_DELIVER = spec.Basic.Deliver.INDEX
_FRAME_END = 0xCE
# Socket read size once our decoder parses the stream. Python allocates the full size for each
# recv; above glibc's mmap threshold (128 KiB) that is an mmap and munmap per read, 5x the cost
# of a small read's syscall. Bulk reads cost the same per byte at 64 KiB as at 256 KiB.
RECV_BYTES = 64 * 1024
MAX_RECV_BYTES = 1024 * 1024  # reads grow to this while they come back full

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
            and callable(getattr(connection, "_output_marshaled_frames", None))
            and callable(getattr(connection, "_process_frame", None))
            and hasattr(connection, "_on_data_available")
            and transport is not None and hasattr(transport, "_MAX_RECV_BYTES")
            and all(hasattr(transport, name) for name in (
                "_sock", "_tx_buffered_byte_count", "_state", "_STATE_ACTIVE")))


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
        self._mutable = bytearray(b"".join(parts))
        self.header_offset = len(method) + len(header) + spec.FRAME_HEADER_SIZE
        self.length = len(self._mutable)

    def batch(self, n: int, producer_id: int, first_seq: int, send_ns: int,
              lags: tuple[int, int, float] = (0, 0, 0.0)) -> bytearray:
        """``n`` consecutive publishes with sequence numbers from ``first_seq``; ``lags`` is
        :meth:`drivers.workers.SenderRole.lags`: the header flags, the first message's schedule
        lag (us) and how much less each next one's is (they were due 1 / rate apart)."""
        buffer = self._mutable * n  # one copy of n messages, stamped in place
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


def install_direct_io(connection) -> None:
    """Plaintext connections only (a TLS transport keeps its own reads and writes); loop
    thread only.

    Writes: each is sent at once when nothing is waiting before it; what the socket does not
    take goes to pika's transport, which sends it when the socket is writable, as it does
    everything written while it waits. The frames of one pika message go as one write.
    Reads: one ``recv`` per readable event, where pika reads until the socket says "would
    block", an exception per event.
    """
    transport = connection._transport
    if type(transport) is not _AsyncPlaintextTransport:
        return
    sock, write, active = transport._sock, transport.write, transport._STATE_ACTIVE

    def write_now(data: bytes | memoryview) -> None:
        if transport._tx_buffered_byte_count == 0 and transport._state == active:
            try:
                sent = sock.send(data)
            except OSError:  # full (EAGAIN) or broken: pika's writer meets it when it tries
                sent = 0
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
        write(data)

    def output(frames: list[bytes]) -> None:
        # pika writes a message's method, header and body frames one by one: one send here
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        connection.bytes_sent += len(data)
        connection.frames_sent += len(frames)
        write_now(data)

    connection._adapter_emit_data = write_now
    connection._output_marshaled_frames = output
    transport._MAX_CONSUME_BYTES = 1  # the poll is level-triggered: the rest is read next turn


def ack_frame(channel_number: int, tag: int, multiple: bool) -> bytes:
    """The wire bytes of Basic.Ack (what pika's ``basic_ack`` sends)."""
    return _ACK.pack(spec.FRAME_METHOD, channel_number, 13, spec.Basic.Ack.INDEX, tag,
                     multiple, _FRAME_END)


def install_decoder(connection, channel_number: int, on_delivery: OnDelivery) -> None:
    """Parse deliveries on ``channel_number`` ourselves; everything else goes to pika.

    Only the first body frame of a message is looked at (the surge header lives there), so
    multi-frame bodies are never joined. Byte and frame counters that pika's heartbeat checker
    reads are kept up to date.
    """
    process_frame, transport = connection._process_frame, connection._transport
    unpack_frame, unpack_u32, unpack_u64 = (_FRAME_HEADER.unpack_from, _U32.unpack_from,
                                            _U64.unpack_from)
    leftover = b""
    tag, redelivered, remaining = 0, False, -1  # remaining: body bytes still due, -1 = none
    first_buffer, first_offset = b"", 0
    skip = 0  # bytes of a body frame (with its end marker) still to come, never looked at

    def on_data_available(data: bytes) -> None:
        nonlocal leftover, tag, redelivered, remaining, first_buffer, first_offset, skip
        _adapt_read_size(transport, len(data))
        pos = frames = 0
        if skip:
            if len(data) < skip:
                skip -= len(data)
                connection.bytes_received += len(data)
                return
            if data[skip - 1] != _FRAME_END:
                raise exceptions.InvalidFrameError("invalid frame end marker")
            pos, skip, frames = skip, 0, 1
            if remaining <= 0:
                remaining = -1
                on_delivery(first_buffer, first_offset, tag, redelivered)
        buffer = leftover + data if leftover else data
        end_of_data, held = len(buffer), len(leftover)
        while end_of_data - pos >= 7:
            kind, channel, size = unpack_frame(buffer, pos)
            end = pos + 8 + size
            if end > end_of_data:
                if kind == 3 and channel == channel_number and remaining > 0 and (
                        first_offset >= 0 or end_of_data - pos - 7 >= HEADER_SIZE):
                    # a body frame not yet whole: its first bytes (the header) are here, the
                    # rest is skipped as it comes instead of being joined to the next read
                    if first_offset < 0:
                        first_buffer, first_offset = buffer, pos + 7
                    remaining -= size
                    skip, pos = end - end_of_data, end_of_data
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
        connection.bytes_received += held + len(data) - len(leftover)
        connection.frames_received += frames

    connection._on_data_available = on_data_available
    transport._MAX_RECV_BYTES = RECV_BYTES


def _adapt_read_size(transport, got: int) -> None:
    """Read more at a time while reads come back full (large messages, a busy stream), down
    to :data:`RECV_BYTES` again once they come back a quarter full."""
    size = transport._MAX_RECV_BYTES
    if got >= size and size < MAX_RECV_BYTES:
        transport._MAX_RECV_BYTES = 2 * size
    elif got < size // 4 and size > RECV_BYTES:
        transport._MAX_RECV_BYTES = size // 2
