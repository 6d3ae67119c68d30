"""Direct socket I/O (``wire.install_direct_io``) on pika's real plaintext transport, on surge's
event loop and on pika's IOLoop,
over a socket pair: what the socket takes leaves at once, the rest follows in order, and a
readable event reads once; and the receivers' own Basic.Ack frames."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

import pytest
from pika import frame, spec
from pika.adapters.select_connection import IOLoop
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport
from pika.adapters.utils.selector_ioloop_adapter import SelectorIOServicesAdapter

from drivers.amqp.frames import ack_frame
from drivers.amqp.loop import Loop
from drivers.amqp.wire import install_direct_io


@pytest.fixture(params=[Loop, IOLoop], ids=["surge-loop", "pika-ioloop"])
def wired(request):
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    ours.setblocking(False)
    peer.setblocking(False)
    loop = request.param()
    received: list[bytes] = []
    transport = _AsyncPlaintextTransport(ours, SimpleNamespace(data_received=received.append),
                                         nbio=SelectorIOServicesAdapter(loop))
    transport.received = received
    connection = SimpleNamespace(_transport=transport, _adapter_emit_data=transport.write,
                                 bytes_sent=0, frames_sent=0, _on_data_available=received.append)
    install_direct_io(connection)
    yield connection, transport, loop, peer
    loop.close()
    ours.close()
    peer.close()


def drain(peer: socket.socket, loop: IOLoop, expected: int) -> bytes:
    """Read the peer while the loop, on its own thread, sends what the transport holds."""
    thread = threading.Thread(target=loop.start)
    thread.start()
    got = bytearray()
    try:
        peer.settimeout(5)
        while len(got) < expected:
            chunk = peer.recv(1 << 20)
            if not chunk:
                break
            got += chunk
    finally:
        loop.add_callback_threadsafe(loop.stop)
        thread.join(5)
    return bytes(got)


def test_a_write_the_socket_takes_leaves_at_once_without_a_writer(wired):
    connection, transport, loop, peer = wired
    connection._adapter_emit_data(b"frame-1")
    assert transport.get_write_buffer_size() == 0
    assert peer.recv(100) == b"frame-1"  # nothing was left for a loop turn


def test_what_the_socket_refuses_is_buffered_and_later_writes_keep_their_order(wired):
    connection, transport, loop, peer = wired
    big = bytes(range(256)) * 8192  # 2 MiB: far more than the socket buffers
    connection._adapter_emit_data(memoryview(big))
    held = transport.get_write_buffer_size()
    assert 0 < held < len(big)
    connection._adapter_emit_data(b"after")  # must queue behind, not jump ahead
    assert transport.get_write_buffer_size() == held + 5
    assert drain(peer, loop, len(big) + 5) == big + b"after"
    assert transport.get_write_buffer_size() == 0


def test_a_tls_transport_keeps_pika_s_own_write():
    transport = object()  # not the plaintext transport
    write = object()
    connection = SimpleNamespace(_transport=transport, _adapter_emit_data=write)
    install_direct_io(connection)
    assert connection._adapter_emit_data is write


def test_a_message_s_frames_leave_in_one_write_and_are_counted(wired, monkeypatch):
    connection, transport, loop, peer = wired
    sends = []
    real_send = transport._sock.send
    monkeypatch.setattr(transport, "_sock", SimpleNamespace(
        send=lambda data: sends.append(bytes(data)) or real_send(data),
        fileno=transport._sock.fileno, recv=transport._sock.recv))
    install_direct_io(connection)  # again, over the counting socket
    connection._output_marshaled_frames([b"method", b"header", b"body"])
    assert sends == [b"methodheaderbody"]
    assert (connection.bytes_sent, connection.frames_sent) == (16, 3)
    assert peer.recv(100) == b"methodheaderbody"


def test_a_readable_event_reads_once_and_leaves_the_rest_for_the_next(wired):
    connection, transport, loop, peer = wired
    transport._MAX_RECV_BYTES = 10
    peer.sendall(b"x" * 25)
    transport._on_socket_readable()
    assert transport.received == [b"x" * 10]  # no second recv to learn it would block
    transport._on_socket_readable()
    transport._on_socket_readable()
    assert b"".join(transport.received) == b"x" * 25


@pytest.mark.parametrize("tag, multiple", [(1, True), (2**40 + 3, False)])
def test_ack_frames_are_what_pika_sends(tag, multiple):
    ours = frame.Method(5, spec.Basic.Ack(delivery_tag=tag, multiple=multiple)).marshal()
    assert ack_frame(5, tag, multiple) == ours


def reader_of(transport):
    """What the loop calls when the transport's socket is readable."""
    return transport._nbio._watchers[transport._sock.fileno()].reader


def test_a_readable_event_goes_straight_to_the_connection(wired):
    connection, transport, loop, peer = wired
    transport._MAX_RECV_BYTES = 10
    peer.sendall(b"y" * 15)
    read = reader_of(transport)
    read()
    assert transport.received == [b"y" * 10]
    read()
    read()  # nothing left: "would block" ends it quietly
    assert transport.received == [b"y" * 10, b"y" * 5]


def test_the_end_of_the_stream_goes_to_pika_s_reader(wired, monkeypatch):
    connection, transport, loop, peer = wired
    ended = []
    monkeypatch.setattr(transport._protocol, "eof_received", lambda: ended.append(1) or False,
                        raising=False)
    aborted = []
    monkeypatch.setattr(transport, "_initiate_abort", aborted.append)
    peer.close()
    reader_of(transport)()
    assert ended == [1] and aborted == [None]  # pika's own handling: closed, not kept open
