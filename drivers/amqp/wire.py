"""The AMQP fast path's adapter to pika: the one module of surge that touches pika's private
names (``tests/unit/test_pika_privates.py`` holds every other module to that).

pika spends most of a load generator's CPU encoding three frames per publish and decoding
three objects per delivery. On a fast-path connection a sender's publishes are frames of
:class:`~drivers.amqp.frames.FrameEncoder`, handed to pika's transport in one write
(:func:`emit`); a receiver's stream is read by a :class:`~drivers.amqp.frames.FrameDecoder`,
which takes the deliveries and hands every other frame to pika (:func:`install_decoder`), so
connection and channel handling (open, consume-ok, close, heartbeats) stay pika's.

A fast-path connection also reads and writes its socket directly (:func:`install_direct_io`):
each write (pika's own frames too) is tried on the socket at once, where pika would register a
writability watcher, wait for the next poll and unregister it again, three system calls and a
loop turn where one ``send`` does; and each readable event reads once, called by surge's event
loop (:mod:`drivers.amqp.loop`) itself.

The private pika hooks used: ``Connection._adapter_emit_data`` and
``Connection._output_marshaled_frames`` (write bytes), ``Connection._on_data_available`` (bytes
read), ``Connection._process_frame``, ``Connection._transport``: the plaintext transport's
socket, buffered byte count and state, and its read sizes. :func:`fast_path_refused` and
:func:`missing_hooks` say whether they may be used: first that the installed pika is a version
they were checked against (:data:`CHECKED_PIKA`, the minor versions
``tests/unit/test_pika_hooks.py`` pins); the driver falls back to ``basic_publish`` /
``basic_consume`` otherwise, or when ``SURGE_AMQP_FAST_PATH=0`` asks it to.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable

import pika
from pika import exceptions, frame
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport

from drivers.amqp.frames import (
    FrameDecoder,
    FrameError,
    OnDelivery,
    OnFrame,
    declare_ok,
    publisher_confirm,
)
from drivers.amqp.loop import Loop
from results.rundir import compiled

# Socket read size once our decoder parses the stream. Python allocates the full size for each
# recv; above glibc's mmap threshold (128 KiB) that is an mmap and munmap per read, 5x the cost
# of a small read's syscall. Bulk reads cost the same per byte at 64 KiB as at 256 KiB.
RECV_BYTES = 64 * 1024
MAX_RECV_BYTES = 1024 * 1024  # reads grow to this while they come back full

_CONNECTION_HOOKS = ("_adapter_emit_data", "_output_marshaled_frames", "_process_frame",
                     "_on_data_available")
_TRANSPORT_HOOKS = ("_MAX_RECV_BYTES", "_sock", "_tx_buffered_byte_count", "_state",
                    "_STATE_ACTIVE", "_nbio", "_on_socket_readable", "_initiate_abort")

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


def missing_hooks(connection) -> list[str]:
    """The private hooks the fast path uses that this pika connection lacks (none with a
    checked pika)."""
    missing = [f"Connection.{name}" for name in _CONNECTION_HOOKS
               if not hasattr(connection, name)]
    transport = getattr(connection, "_transport", None)
    if transport is None:
        return [*missing, "Connection._transport"]
    return missing + [f"transport.{name}" for name in _TRANSPORT_HOOKS
                      if not hasattr(transport, name)]


def write_buffer_size(connection) -> int:
    """Bytes the connection's transport holds, not yet taken by the socket (0 before it has a
    transport)."""
    transport = getattr(connection, "_transport", None)
    return 0 if transport is None else transport.get_write_buffer_size()


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
    Reads: one ``recv`` per readable event, handed straight to the connection, where pika
    reads until the socket says "would block" (an exception per event) through six calls of
    its transport; the end of the stream, a socket error and anything that is not the active
    state go to pika's own reader, which tears the connection down as it always does.
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
    read = _reader_of(connection).read
    transport._nbio.set_reader(sock.fileno(), read)
    loop = getattr(transport._nbio, "_loop", None)  # pika's adapter around the event loop
    if isinstance(loop, Loop):
        loop.direct_reader(sock.fileno(), read)


def install_decoder(connection, channel_number: int, on_delivery: OnDelivery,
                    properties: bool = False, after_read: Callable[[], None] | None = None
                    ) -> FrameDecoder:
    """Read the deliveries on ``channel_number`` with a :class:`FrameDecoder` (``properties``:
    as its option says); every other frame goes to pika. The byte and frame counters pika's
    heartbeat checker reads are kept up to date. ``after_read`` is called once the deliveries
    of each socket read are handed on: what they trigger can leave in one write."""
    decoder = FrameDecoder(channel_number, on_delivery, _to_pika(connection), properties)
    _read_with(connection, decoder, after_read)
    return decoder


def install_sender_reader(connection, on_depth: Callable[[int, int], None],
                          on_confirm: Callable[[int, int, bool, bool], None]) -> None:
    """Take the answers to passive declares (:func:`~drivers.amqp.frames.passive_declare_frame`,
    written with :func:`emit`) and the publisher confirms off a connection that carries one
    sender and nothing else, so that every declare and confirm on it is the sender's: each
    Queue.DeclareOk goes to ``on_depth(channel, ready messages)`` and each Basic.Ack or
    Basic.Nack to ``on_confirm(channel, delivery tag, multiple, nack)`` before pika sees them,
    every other frame to pika. pika's own passive declare is a synchronous RPC and its confirm
    a method object and three layers of callbacks, built and parsed in Python; here each is a
    frame read."""
    to_pika = _to_pika(connection)

    def on_frame(raw: bytes) -> None:
        settled = publisher_confirm(raw)
        if settled is not None:
            on_confirm(*settled)
            return
        answer = declare_ok(raw)
        if answer is None:
            to_pika(raw)
        else:
            on_depth(*answer)

    _read_with(connection, FrameDecoder(-1, _no_delivery, on_frame), None)


def _no_delivery(*_: object) -> None:
    raise FrameError("a delivery on a connection that only publishes")


def _to_pika(connection) -> OnFrame:
    """What hands one whole frame (its bytes) to pika, which counts it itself in
    ``connection.frames_received``."""
    process_frame = connection._process_frame

    def to_pika(raw: bytes) -> None:
        _, decoded = frame.decode_frame(raw)
        if decoded is None:
            raise exceptions.InvalidFrameError("undecodable frame")
        process_frame(decoded)

    return to_pika


def _read_with(connection, decoder: FrameDecoder, after_read: Callable[[], None] | None
               ) -> None:
    """The connection's bytes read go to ``decoder`` from now on."""
    reader = _reader_of(connection)
    reader.feed, reader.after_read = decoder.feed, after_read
    connection._on_data_available = reader.take  # where pika reads (TLS) instead
    connection._transport._MAX_RECV_BYTES = RECV_BYTES


def _reader_of(connection) -> PyReader:
    """The :class:`Reader` of ``connection``, made the first time it is asked for (and kept
    on the connection as ``surge_reader``). Only :func:`install_direct_io` reads with it, on
    a plaintext transport; the decoder alone needs no socket."""
    reader = getattr(connection, "surge_reader", None)
    if reader is None:
        transport = connection._transport
        reader = connection.surge_reader = Reader(
            connection, transport, getattr(transport, "_sock", None),
            (_STATE, getattr(transport, "_STATE_ACTIVE", None), _SIZE),
            connection._on_data_available, getattr(transport, "_on_socket_readable", None),
            getattr(transport, "_initiate_abort", None), exceptions.InvalidFrameError)
    return reader


class PyReader:
    """What a fast-path connection does with its socket: :meth:`read`, once per readable
    event, one ``recv`` of ``transport``'s read size; :meth:`take`, the bytes read (by it or by
    pika's reader), to the decoder once there is one (``feed``, ``after_read``: see
    :func:`install_decoder`), else to pika's ``on_data``. The read size grows while reads come
    back full (large messages, a busy stream), up to :data:`MAX_RECV_BYTES`, and shrinks to
    :data:`RECV_BYTES` again once they come back a quarter full. The end of the stream, a
    socket error and any state of ``transport`` but ``active`` go to ``pika_reader``, which
    tears the connection down as it always does; an error in handling the bytes is logged and
    ``abort`` ed, as pika's reader does. ``names``: the transport's (state attribute, its
    active value, read size attribute), pika's names kept in this module alone.

    The pure-Python reference of the compiled core (``drivers/_speedups.pyx``); :data:`Reader`
    is whichever runs (:mod:`results.rundir.compiled`)."""

    def __init__(self, connection, transport, sock, names: tuple[str, object, str],
                 on_data: Callable[[bytes], None], pika_reader: Callable[[], None],
                 abort: Callable[[BaseException], None], invalid_frame: type[Exception]
                 ) -> None:
        self.connection, self.transport, self.sock = connection, transport, sock
        self.state_attr, self.active, self.size_attr = names
        self.on_data, self.pika_reader, self.abort = on_data, pika_reader, abort
        self.invalid_frame = invalid_frame
        self.feed: Callable[[bytes], tuple[int, int]] | None = None
        self.after_read: Callable[[], None] | None = None

    def read(self) -> None:
        """One readable event."""
        transport = self.transport
        if getattr(transport, self.state_attr) != self.active:
            return self.pika_reader()
        try:
            data = self.sock.recv(getattr(transport, self.size_attr))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return self.pika_reader()
        if not data:
            return self.pika_reader()
        try:
            self.take(data)
        except Exception as error:  # noqa: BLE001 - as pika's reader: logged, then torn down
            log.exception("reading the connection failed: %r", error)
            self.abort(error)
        return None

    def take(self, data: bytes) -> None:
        """Bytes read from the socket."""
        feed = self.feed
        if feed is None:
            return self.on_data(data)
        transport, name = self.transport, self.size_attr
        got, size = len(data), getattr(transport, name)
        if got >= size and size < MAX_RECV_BYTES:
            setattr(transport, name, 2 * size)
        elif got < size // 4 and size > RECV_BYTES:
            setattr(transport, name, size // 2)
        try:
            taken, frames = feed(data)
        except FrameError as error:
            raise self.invalid_frame(str(error)) from None
        connection = self.connection
        connection.bytes_received += taken
        connection.frames_received += frames
        if self.after_read is not None:
            self.after_read()
        return None


_STATE, _SIZE = "_state", "_MAX_RECV_BYTES"
_compiled = compiled.load("drivers._speedups")
Reader: type[PyReader] = PyReader if _compiled is None else _compiled.Reader
