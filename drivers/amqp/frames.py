"""AMQP 0-9-1 frames surge encodes and decodes itself on the hot paths: plain code over bytes.

:class:`FrameEncoder` builds the wire bytes of a sender's publishes (a template encoded once, a
batch being that template repeated with each message's header stamped in place; a requester's
also with its correlation id's sequence digits stamped) and of a receiver's Basic.Ack;
:class:`ReplyEncoder` those of a responder's replies. :class:`FrameDecoder` takes
Basic.Deliver, its content header and body frames of one channel off a byte stream and hands
every other frame on, whole and undecoded; :func:`reply_fields` reads a delivery's
correlation id and reply-to. None of them knows pika: :mod:`drivers.amqp.wire` connects them
to pika's connections.

Frame layout (AMQP 0-9-1, 4.2.3): type (1 octet), channel (2), payload size (4), payload,
end marker 0xCE. Of a delivered body only the first bytes (the surge header) are looked at:
the rest of a large one is skipped as it arrives, never joined.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable
from itertools import accumulate, count, repeat
from operator import sub

from drivers.header import HEADER_SIZE, PREFIX, stamp_fields
from results.rundir import compiled

FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_OVERHEAD = 8  # type, channel, size before the payload; the end marker after it
BASIC = 60  # class id of Basic
PUBLISH, DELIVER, ACK, NACK = 40, 60, 80, 120  # method ids of Basic
QUEUE, DECLARE, DECLARE_OK = 50, 10, 11  # class id of Queue, method ids of Queue
# content header property flags of Basic (AMQP 0-9-1, 4.2.5.2), the properties in this order
CONTENT_TYPE_FLAG, CONTENT_ENCODING_FLAG, HEADERS_FLAG = 0x8000, 0x4000, 0x2000
DELIVERY_MODE_FLAG, PRIORITY_FLAG, CORRELATION_ID_FLAG, REPLY_TO_FLAG = \
    0x1000, 0x0800, 0x0400, 0x0200
SEQUENCE_DIGITS = 16  # a stamped sequence number in properties: lowercase hex, zero-padded
CORRELATION_AT = 4  # in basic_properties(): after flags, delivery mode, the id's length

_FRAME_HEADER = struct.Struct(">BHI")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_ACK = struct.Struct(">BHIHHQBB")  # method frame: class, method, delivery tag, multiple, end
_CONTENT_SIZE = struct.Struct(">HHQ")  # content header: class, weight, body size
_DELIVERY_MODE = struct.Struct(">HB")  # properties: only the delivery-mode flag, and the mode
_PROPERTIES_AT = 19  # in a content header frame: type, channel, size, class, weight, body size
_DELIVER_INDEX = BASIC << 16 | DELIVER
_DECLARE_OK_INDEX = QUEUE << 16 | DECLARE_OK
_ACK_INDEX, _NACK_INDEX = BASIC << 16 | ACK, BASIC << 16 | NACK
_CHANNEL = struct.Struct(">H")
_END = bytes([FRAME_END])

# (buffer, offset of the body's first byte, delivery tag, redelivered); a decoder made with
# ``properties=True`` adds a fifth argument, the content header's property bytes
OnDelivery = Callable[..., None]
# the bytes of one whole frame that is not the decoder's (type, channel, size, payload, end)
OnFrame = Callable[[bytes], None]


class FrameError(ValueError):
    """Bytes that are not AMQP frames (a wrong end marker)."""


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return _FRAME_HEADER.pack(kind, channel, len(payload)) + payload + bytes([FRAME_END])


def _short_string(value: str, what: str) -> bytes:
    return _short(value.encode(), what)


def basic_properties(delivery_mode: int, correlation_id: bytes | None = None,
                     reply_to: bytes | None = None) -> bytes:
    """The property flags and properties of a content header with ``delivery_mode`` and, where
    given, ``correlation_id`` (from :data:`CORRELATION_AT` in them) and ``reply_to``."""
    flags = DELIVERY_MODE_FLAG | (CORRELATION_ID_FLAG if correlation_id is not None else 0) \
        | (REPLY_TO_FLAG if reply_to is not None else 0)
    return _DELIVERY_MODE.pack(flags, delivery_mode) \
        + (_short(correlation_id, "correlation id") if correlation_id is not None else b"") \
        + (_short(reply_to, "reply-to") if reply_to is not None else b"")


def _short(data: bytes, what: str) -> bytes:
    if len(data) > 255:
        raise ValueError(f"{what} {data[:40]!r}...: AMQP short strings hold at most 255 bytes,"
                         f" this one is {len(data)}")
    return bytes([len(data)]) + data


def reply_fields(properties: bytes) -> tuple[bytes | None, bytes | None]:
    """The correlation id and reply-to (``None`` where absent) of content header
    ``properties``: property flags first, as :class:`FrameDecoder` hands them on. The
    properties before them are stepped over by their flags, in their order: content-type,
    content-encoding (short strings), headers (a table: its size, 4 octets, first),
    delivery-mode, priority (an octet each). :class:`FrameError` if they are cut short."""
    try:
        flags = properties[0] << 8 | properties[1]
        pos, more = 2, flags
        while more & 1:  # another flags word follows (never for Basic: 14 flags fit in one)
            more = properties[pos] << 8 | properties[pos + 1]
            pos += 2
        if flags & 0xE000:
            if flags & CONTENT_TYPE_FLAG:
                pos += 1 + properties[pos]
            if flags & CONTENT_ENCODING_FLAG:
                pos += 1 + properties[pos]
            if flags & HEADERS_FLAG:
                pos += 4 + _U32.unpack_from(properties, pos)[0]
        pos += (flags >> 12 & 1) + (flags >> 11 & 1)  # delivery-mode, priority
        correlation = reply_to = None
        if flags & CORRELATION_ID_FLAG:
            end = pos + 1 + properties[pos]
            correlation, pos = properties[pos + 1:end], end
        if flags & REPLY_TO_FLAG:
            end = pos + 1 + properties[pos]
            reply_to, pos = properties[pos + 1:end], end
    except (IndexError, struct.error):
        pos = len(properties) + 1
    if pos > len(properties):
        raise FrameError("content header properties cut short")
    return correlation, reply_to


def ack_frame(channel_number: int, tag: int, multiple: bool) -> bytes:
    """The wire bytes of Basic.Ack of ``tag`` (and every earlier one, if ``multiple``)."""
    return _ACK.pack(FRAME_METHOD, channel_number, 13, BASIC, ACK, tag, multiple, FRAME_END)


def passive_declare_frame(channel_number: int, queue: str) -> bytes:
    """The Queue.Declare method frame that asks whether ``queue`` exists (passive), and how
    many messages are ready in it: the broker answers with Queue.DeclareOk
    (:func:`declare_ok`), or closes the channel if there is no such queue."""
    return _frame(FRAME_METHOD, channel_number, struct.pack(">HHH", QUEUE, DECLARE, 0)
                  + _short_string(queue, "queue") + bytes([1]) + _U32.pack(0))


def declare_ok(frame: bytes) -> tuple[int, int] | None:
    """The channel and ready message count of a whole frame (as :class:`FrameDecoder` hands
    them on) if it is a Queue.DeclareOk, else ``None``."""
    if frame[0] != FRAME_METHOD or len(frame) < 12 or \
            _U32.unpack_from(frame, 7)[0] != _DECLARE_OK_INDEX:
        return None
    return _CHANNEL.unpack_from(frame, 1)[0], _U32.unpack_from(frame, 12 + frame[11])[0]


def publisher_confirm(frame: bytes) -> tuple[int, int, bool, bool] | None:
    """The channel, delivery tag, multiple flag and whether it is a nack, of a whole frame (as
    :class:`FrameDecoder` hands them on) if it is a Basic.Ack or a Basic.Nack, else ``None``."""
    if frame[0] != FRAME_METHOD or len(frame) < 21:
        return None
    index = _U32.unpack_from(frame, 7)[0]
    if index != _ACK_INDEX and index != _NACK_INDEX:
        return None
    return _CHANNEL.unpack_from(frame, 1)[0], _U64.unpack_from(frame, 11)[0], \
        bool(frame[19] & 1), index == _NACK_INDEX


def publish_frame(channel_number: int, exchange: str, routing_key: str,
                  mandatory: bool = False) -> bytes:
    """The Basic.Publish method frame to ``exchange`` with ``routing_key``."""
    return _frame(FRAME_METHOD, channel_number, struct.pack(">HHH", BASIC, PUBLISH, 0)
                  + _short_string(exchange, "exchange")
                  + _short_string(routing_key, "routing key") + bytes([mandatory]))


def content_frames(channel_number: int, size: int, persistent: bool, frame_max: int,
                   filler: bytes | None = None, properties: bytes | None = None
                   ) -> tuple[bytes, int]:
    """The content header and body frames of a ``size``-byte message (the surge header, then
    ``filler``, default zeros), and where in them the surge header starts."""
    if size < HEADER_SIZE:
        raise ValueError(f"message size {size}: a surge message holds at least its "
                         f"{HEADER_SIZE}-byte header")
    filler = bytes(size - HEADER_SIZE) if filler is None else filler
    if HEADER_SIZE + len(filler) != size:
        raise ValueError(f"message size {size}: {len(filler)} bytes follow the header")
    if properties is None:
        properties = _DELIVERY_MODE.pack(DELIVERY_MODE_FLAG, 2 if persistent else 1)
    header = _frame(FRAME_HEADER, channel_number, _CONTENT_SIZE.pack(BASIC, 0, size) + properties)
    body = PREFIX + bytes(HEADER_SIZE - len(PREFIX)) + filler
    chunk = frame_max - FRAME_OVERHEAD
    frames = [_frame(FRAME_BODY, channel_number, body[start:start + chunk])
              for start in range(0, size, chunk)]
    return header + b"".join(frames), len(header) + FRAME_OVERHEAD - 1


class FrameEncoder:
    """The wire bytes of one Basic.Publish (to ``exchange``, the default one if empty, with
    routing key ``routing_key``, ``mandatory`` or not) of a ``size``-byte body: method, content
    header and body frames of at most ``frame_max`` bytes each. The body is the surge header
    (stamped per message) followed by ``filler`` (default zeros); the content header carries
    ``properties``, their AMQP encoding (property flags first; default: only the delivery
    mode, ``persistent`` or not). With ``sequence_at``, each message's sequence number is also
    stamped into its properties, from that offset in them: :data:`SEQUENCE_DIGITS` lowercase
    hex digits (the end of a requester's correlation id). :meth:`batch` stamps copies of it;
    :class:`Templates` interleaves several."""

    def __init__(self, channel_number: int, routing_key: str, size: int, persistent: bool,
                 frame_max: int, exchange: str = "", filler: bytes | None = None,
                 properties: bytes | None = None, mandatory: bool = False,
                 sequence_at: int | None = None):
        method = publish_frame(channel_number, exchange, routing_key, mandatory)
        content, header_at = content_frames(channel_number, size, persistent, frame_max,
                                            filler, properties)
        self._join(method, content, header_at, _sequence_offset(method, sequence_at))

    @classmethod
    def joined(cls, method: bytes, content: bytes, header_at: int,
               sequence_at: int | None = None) -> FrameEncoder:
        """The publish of a method frame and content frames already encoded (``header_at``:
        where the surge header starts in ``content``; ``sequence_at``: as for a new one)."""
        encoder = cls.__new__(cls)
        encoder._join(method, content, header_at, _sequence_offset(method, sequence_at))
        return encoder

    def _join(self, method: bytes, content: bytes, header_at: int, sequence_offset: int
              ) -> None:
        self._mutable = bytearray(method + content)
        self.header_offset = len(method) + header_at
        """Where the first message's surge header starts."""
        self.sequence_offset = sequence_offset
        """Where its sequence digits start in its properties (-1: none are stamped)."""
        self.length = len(self._mutable)
        """Bytes of one publish."""
        self._spares: deque[bytearray] = deque()  # batch buffers, oldest first

    def batch(self, n: int, producer_id: int, first_seq: int, send_ns: int,
              lags: tuple[int, int, float] = (0, 0, 0.0)) -> memoryview:
        """``n`` consecutive publishes with sequence numbers from ``first_seq``; ``lags`` is
        :meth:`drivers.workers.SenderRole.lags`: the header flags, the first message's schedule
        lag (us) and how much less each next one's is (they were due 1 / rate apart).

        A view of a new buffer; from :data:`SPARE_FROM_BYTES` on, of a buffer of this
        encoder's, stamped again for a later batch once nothing views it any more (the
        transport has sent it, the caller dropped it)."""
        need = n * self.length
        buffer = self._buffer(n, need) if need >= SPARE_FROM_BYTES else self._mutable * n
        stamp_run(buffer, self.header_offset + len(PREFIX), self.length, n, producer_id,
                  first_seq, send_ns, lags)
        if self.sequence_offset >= 0:
            at, step = self.sequence_offset, self.length
            stamp_sequences(buffer, range(at, at + n * step, step), first_seq)
        return memoryview(buffer)[:need]

    def _buffer(self, n: int, need: int) -> bytearray:
        """A buffer of at least ``need`` bytes (``n`` copies of the template) that nothing
        views: the oldest spare, or a new one, kept as a spare while the spares hold at most
        :data:`SPARE_BYTES`. Only the headers differ from batch to batch: a reused buffer is
        stamped, not copied, and its memory is not faulted in again (a fresh one of a large
        batch is, page by page). The transport sends batches in order, so the oldest spare is
        the first one free: only it is looked at; a free one too small is let go."""
        spares = self._spares
        while spares and not _viewed(spares[0]):
            buffer = spares.popleft()
            if len(buffer) >= need:
                spares.append(buffer)
                return buffer
        buffer = self._mutable * n
        if need + sum(map(len, spares)) <= SPARE_BYTES:
            spares.append(buffer)
        return buffer


SPARE_BYTES = 8 * 1024 * 1024  # batch buffers an encoder keeps for reuse, at most
# Batches from this size on are stamped in spare buffers; a smaller one is copied afresh, as
# the allocator's memory is likely still in the cache where a spare that waited behind others
# in the transport's buffer is not (measured: 4+4 senders of 2 KiB, 135 KiB batches, spent
# 9 % more CPU per message with spares; 64 KiB and 1 MiB messages a fifth to a third less).
SPARE_FROM_BYTES = 256 * 1024


def _viewed(buffer: bytearray) -> bool:
    """Whether a view of ``buffer`` is alive (a bytearray with one cannot change its size)."""
    try:
        buffer.append(0)
    except BufferError:
        return True
    del buffer[-1]
    return False


def stamp_run(buffer: bytearray, first: int, step: int, n: int, producer_id: int,
              first_seq: int, send_ns: int, lags: tuple[int, int, float]) -> None:
    """Stamp the headers of ``n`` messages ``step`` bytes apart in ``buffer``, the first one's
    fields (after its :data:`~drivers.header.PREFIX`) at ``first``: sequence numbers from
    ``first_seq``, schedule lags as :func:`_each_lag` gives them."""
    stamp, flags = stamp_fields, lags[0]
    for offset, seq, lag in zip(range(first, first + n * step, step),
                                range(first_seq, first_seq + n), _each_lag(lags, n)):
        stamp(buffer, offset, flags, producer_id, seq, send_ns, lag)


def _sequence_offset(method: bytes, sequence_at: int | None) -> int:
    """Where, in a publish of ``method``, digits stamped at ``sequence_at`` in the content
    header's properties start (-1: none)."""
    return -1 if sequence_at is None else len(method) + _PROPERTIES_AT + sequence_at


def stamp_sequences(buffer: bytearray, offsets: Iterable[int], first_seq: int) -> None:
    """Message ``k``'s sequence number ``first_seq + k`` in :data:`SEQUENCE_DIGITS` lowercase
    hex digits at ``offsets[k]``."""
    for offset, seq in zip(offsets, count(first_seq)):
        buffer[offset:offset + SEQUENCE_DIGITS] = b"%016x" % seq


def _each_lag(lags: tuple[int, int, float], n: int):
    """The schedule lag (us) of each of ``n`` consecutive messages: the first one's, each
    next one ``less_us`` less (they were due 1 / rate apart); computed in C, not per message
    in Python."""
    _, lag_us, less_us = lags
    return map(int, accumulate(repeat(less_us, n - 1), sub, initial=lag_us)) if less_us \
        else repeat(lag_us, n)


class Templates:
    """The publishes of every target (an exchange and routing key) in every size class, kept
    as parts: a method frame per target and the content frames per size class, joined per
    message, so that 100 keys of 16 sizes are 116 parts rather than 1,600 whole messages no
    cache holds. Template ``t * classes + c`` is target ``t`` in class ``c``; :meth:`encoder`
    gives one whole (made when first asked), :meth:`mixed` interleaves them."""

    def __init__(self, channel_number: int, frame_max: int, targets: list[tuple[str, str]],
                 sizes: list[int], fillers: list[bytes], persistent: bool,
                 properties: bytes | None = None, mandatory: bool = False,
                 sequence_at: int | None = None):
        methods = [publish_frame(channel_number, exchange, key, mandatory)
                   for exchange, key in targets]
        contents = [content_frames(channel_number, size, persistent, frame_max, filler,
                                   properties) for size, filler in zip(sizes, fillers)]
        self.methods = [m for m in methods for _ in contents]  # per template, by reference
        self.contents = [c for _ in methods for c, _ in contents]
        self.content_header_at = [at for _ in methods for _, at in contents]
        self.lengths = [len(m) + len(c) for m in methods for c, _ in contents]
        self.header_at = [len(m) + at for m in methods for _, at in contents]
        self.sequence_at = sequence_at  # as FrameEncoder's, the same in every template
        self.sequence_offsets = [_sequence_offset(m, sequence_at) for m in self.methods]
        self._encoders: dict[int, FrameEncoder] = {}

    def __len__(self) -> int:
        return len(self.lengths)

    def encoder(self, template: int) -> FrameEncoder:
        """Template ``template`` whole, for a batch that takes it alone."""
        if template not in self._encoders:
            self._encoders[template] = FrameEncoder.joined(
                self.methods[template], self.contents[template],
                self.content_header_at[template], self.sequence_at)
        return self._encoders[template]

    def mixed(self, picks: list[int], producer_id: int, first_seq: int, send_ns: int,
              lags: tuple[int, int, float] = (0, 0, 0.0)) -> bytearray:
        """Consecutive publishes from ``first_seq``, message ``i`` through template
        ``picks[i]``, stamped as :meth:`FrameEncoder.batch` stamps."""
        n = len(picks)
        parts: list[bytes] = [b""] * (2 * n)
        parts[0::2] = [self.methods[i] for i in picks]
        parts[1::2] = [self.contents[i] for i in picks]
        buffer = bytearray().join(parts)
        stamp_picks(buffer, picks, self.lengths, self.header_at, producer_id, first_seq, send_ns,
                    lags)
        if self.sequence_at is not None:
            offsets, lengths = self.sequence_offsets, self.lengths
            starts = accumulate((lengths[i] for i in picks[:-1]), initial=0)
            stamp_sequences(buffer, [start + offsets[i] for start, i in zip(starts, picks)],
                            first_seq)
        return buffer


def stamp_picks(buffer: bytearray, picks: list[int], lengths: list[int], header_at: list[int],
                producer_id: int, first_seq: int, send_ns: int,
                lags: tuple[int, int, float]) -> None:
    """Stamp the headers of consecutive messages in ``buffer``, message ``i`` through template
    ``picks[i]`` (``lengths`` bytes long, its header at ``header_at``), as :func:`stamp_run`
    stamps them."""
    n = len(picks)
    starts = accumulate((lengths[i] for i in picks[:-1]), initial=0)
    stamp, flags, prefix = stamp_fields, lags[0], len(PREFIX)
    for start, i, seq, lag in zip(starts, picks, range(first_seq, first_seq + n),
                                  _each_lag(lags, n)):
        stamp(buffer, start + header_at[i] + prefix, flags, producer_id, seq, send_ns, lag)


class ReplyEncoder:
    """The wire bytes of a responder's replies on channel ``channel_number``: each a
    Basic.Publish to ``exchange`` with the request's reply-to as routing key, a content header
    with ``delivery_mode`` and the request's correlation id, and a body of the request's surge
    header followed by ``filler``, in body frames of at most ``frame_max`` bytes."""

    MAX_KEYS = 4096  # method frames kept, one per reply-to (a requester's queue)

    def __init__(self, channel_number: int, exchange: str, delivery_mode: int, filler: bytes,
                 frame_max: int):
        self.channel_number = channel_number
        self.exchange = exchange
        size = HEADER_SIZE + len(filler)
        # the content header, but for its size and the correlation id at its end
        self._header = _CONTENT_SIZE.pack(BASIC, 0, size) + _DELIVERY_MODE.pack(
            DELIVERY_MODE_FLAG | CORRELATION_ID_FLAG, delivery_mode)
        self._uncorrelated = _frame(FRAME_HEADER, channel_number, _CONTENT_SIZE.pack(
            BASIC, 0, size) + _DELIVERY_MODE.pack(DELIVERY_MODE_FLAG, delivery_mode))
        chunk = frame_max - FRAME_OVERHEAD
        body = bytes(HEADER_SIZE) + filler
        frames = b"".join(_frame(FRAME_BODY, channel_number, body[start:start + chunk])
                          for start in range(0, size, chunk))
        self._body_head, self._body_tail = frames[:7], frames[7 + HEADER_SIZE:]
        self._publish = struct.pack(">HHH", BASIC, PUBLISH, 0) + _short_string(exchange,
                                                                               "exchange")
        self._methods: dict[bytes, bytes] = {}

    def reply(self, reply_to: bytes, correlation_id: bytes | None, header: bytes) -> bytes:
        """The publish of the reply to ``reply_to`` of a request with ``correlation_id``
        (``None``: without one) whose surge header is ``header``."""
        method = self._methods.get(reply_to)
        if method is None:
            if len(self._methods) >= self.MAX_KEYS:
                self._methods.clear()
            method = self._methods[reply_to] = _frame(
                FRAME_METHOD, self.channel_number,
                self._publish + bytes((len(reply_to),)) + reply_to + b"\0")
        if correlation_id is None:
            content_header = self._uncorrelated
        else:
            n = len(correlation_id)
            if n > 255:
                raise ValueError(f"correlation id of {n} bytes: at most 255")
            content_header = _FRAME_HEADER.pack(FRAME_HEADER, self.channel_number,
                                                len(self._header) + 1 + n) \
                + self._header + bytes((n,)) + correlation_id + _END
        return b"".join((method, content_header, self._body_head, header, self._body_tail))


class FrameDecoder:
    """Reads the deliveries of channel ``channel_number`` off a byte stream fed in pieces of
    any size; every other frame (other channels, other methods, heartbeats) goes whole to
    ``on_frame``, in stream order.

    A delivery is Basic.Deliver, a content header and body frames; ``on_delivery`` gets it once
    its last body byte has arrived, with the buffer holding its first body frame and where that
    body starts there (a zero-length body: :data:`~drivers.header.HEADER_SIZE` zero bytes),
    its delivery tag and redelivered flag: ``on_delivery(buffer, offset, tag, redelivered)``.
    Only the first body frame is kept, and of a frame not yet whole only once its first
    ``HEADER_SIZE`` bytes are in; the rest is counted as it comes and never joined.

    With ``properties`` (request/reply: a reply's correlation id, a request's reply-to), it
    also hands on the delivery's content header properties: ``on_delivery(buffer, offset,
    tag, redelivered, properties)``, ``properties`` a ``bytes`` copy of the content header's
    payload after class id, weight and body size (the property flags, then the properties
    they announce, as the broker sent them; :func:`reply_fields` reads two of them). Without,
    nothing of the header but the body size is read.
    """

    __slots__ = ("channel_number", "on_delivery", "on_frame", "with_properties", "properties",
                 "leftover", "tag", "redelivered", "remaining", "first_buffer", "first_offset",
                 "skip")

    def __init__(self, channel_number: int, on_delivery: OnDelivery, on_frame: OnFrame,
                 properties: bool = False):
        self.channel_number = channel_number
        self.on_delivery = on_delivery
        self.on_frame = on_frame
        self.with_properties = properties
        self.properties = b""  # of the delivery being read (with_properties only)
        self.leftover = b""  # the start of a frame not yet whole
        self.tag = 0  # of the delivery being read
        self.redelivered = False
        self.remaining = -1  # body bytes of that delivery still due; -1: none being read
        self.first_buffer, self.first_offset = b"", 0  # its first body frame; -1: none yet
        self.skip = 0  # bytes of a body frame (with its end marker) still to come, unread

    def feed(self, data: bytes) -> tuple[int, int]:
        """Read ``data``, the next bytes of the stream. Returns how many bytes it took in (all
        but those of a frame not yet whole, which it holds until its end comes) and how many
        frames it read itself (not those handed to ``on_frame``). :class:`FrameError` if the
        stream is not frames."""
        # the state in locals while the loop runs: attribute reads cost more than local ones
        channel_number, on_delivery = self.channel_number, self.on_delivery
        unpack_frame, unpack_u32, unpack_u64 = (_FRAME_HEADER.unpack_from, _U32.unpack_from,
                                                _U64.unpack_from)
        tag, redelivered, remaining = self.tag, self.redelivered, self.remaining
        first_buffer, first_offset, skip = self.first_buffer, self.first_offset, self.skip
        keep, properties = self.with_properties, self.properties
        pos = frames = 0
        if skip:
            if len(data) < skip:
                self.skip = skip - len(data)
                return len(data), 0
            if data[skip - 1] != FRAME_END:
                raise FrameError("invalid frame end marker")
            pos, skip, frames = skip, 0, 1
            self.skip = 0
            if remaining <= 0:
                remaining = -1
                if keep:
                    on_delivery(first_buffer, first_offset, tag, redelivered, properties)
                else:
                    on_delivery(first_buffer, first_offset, tag, redelivered)
        leftover = self.leftover
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
            if buffer[end - 1] != FRAME_END:
                raise FrameError("invalid frame end marker")
            if channel == channel_number:
                if kind == 3 and remaining > 0:
                    frames += 1
                    if first_offset < 0:
                        first_buffer, first_offset = buffer, pos + 7
                    remaining -= size
                    if remaining <= 0:
                        remaining = -1
                        if keep:
                            on_delivery(first_buffer, first_offset, tag, redelivered, properties)
                        else:
                            on_delivery(first_buffer, first_offset, tag, redelivered)
                    pos = end
                    continue
                if kind == 2 and remaining == 0:
                    frames += 1
                    remaining = unpack_u64(buffer, pos + 11)[0]
                    first_offset = -1
                    if keep:  # after class id, weight and body size: flags, properties
                        properties = buffer[pos + 19:end - 1]
                    if remaining == 0:
                        remaining = -1
                        if keep:
                            on_delivery(b"\0" * HEADER_SIZE, 0, tag, redelivered, properties)
                        else:
                            on_delivery(b"\0" * HEADER_SIZE, 0, tag, redelivered)
                    pos = end
                    continue
                if kind == 1 and unpack_u32(buffer, pos + 7)[0] == _DELIVER_INDEX:
                    frames += 1
                    tag_at = pos + 12 + buffer[pos + 11]
                    tag = unpack_u64(buffer, tag_at)[0]
                    redelivered = bool(buffer[tag_at + 8] & 1)
                    remaining = 0
                    pos = end
                    continue
            self.on_frame(buffer[pos:end])
            pos = end
        self.leftover = buffer[pos:] if pos < end_of_data else b""
        self.tag, self.redelivered, self.remaining = tag, redelivered, remaining
        self.first_buffer, self.first_offset, self.skip = first_buffer, first_offset, skip
        self.properties = properties
        return held + len(data) - len(self.leftover), frames


PyFrameDecoder, py_stamp_run, py_stamp_picks, py_stamp_sequences = \
    FrameDecoder, stamp_run, stamp_picks, stamp_sequences
"""The pure-Python reference of what may run compiled (``drivers/_speedups.pyx``)."""
_compiled = compiled.load("drivers._speedups")
if _compiled is not None:
    FrameDecoder = _compiled.FrameDecoder  # type: ignore[misc]
    stamp_run, stamp_picks = _compiled.stamp_run, _compiled.stamp_picks
    stamp_sequences = _compiled.stamp_sequences
