"""The gate of :class:`drivers.http.GuardedServer` in process, with small limits: waiting
connections beyond the cap close oldest first, heads and bodies arriving in pieces are served
whole, and the token decides the pool."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from drivers.http import GuardedServer, JsonHandler
from tests.flood import closed_by_peer, idle_connections

TOKEN = "t0ken"


class Echo(JsonHandler):
    """Answers a POST with its body's length and whether it came in the trusted pool; a GET
    to ``/wait`` holds its thread until the test releases it."""

    release = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.release.wait(10)
        self.reply_json(200, {"trusted": self.trusted})

    def do_POST(self) -> None:  # noqa: N802
        self.reply_json(200, {"length": len(self.read_body(required=True)),
                              "trusted": self.trusted})


@contextlib.contextmanager
def serving(**limits) -> Iterator[GuardedServer]:
    Echo.release.clear()
    server = GuardedServer(("127.0.0.1", 0), Echo, token=TOKEN, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        Echo.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def post(port: int, body: bytes, *, token: str | None = TOKEN, pieces: int = 1,
         pause_s: float = 0.0) -> tuple[int, dict]:
    head = (f"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n").encode()
    raw = head + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        size = -(-len(raw) // pieces)
        for start in range(0, len(raw), size):
            connection.sendall(raw[start:start + size])
            time.sleep(pause_s)
        reply = b"".join(iter(lambda: connection.recv(65536), b""))
    head_part, _, payload = reply.partition(b"\r\n\r\n")
    return int(head_part.split()[1]), json.loads(payload)


def test_beyond_the_waiting_cap_the_oldest_waiting_are_closed_and_a_client_still_gets_in():
    with serving(max_pending=8) as server, idle_connections(server.server_port, 20) as idle:
        received, still_open = closed_by_peer(idle[:12], 1.0)
        assert still_open == 0 and set(received) == {b""}  # the 12 oldest, closed at once
        assert closed_by_peer(idle[12:], 0.3)[1] == 8  # the 8 newest still wait
        assert post(server.server_port, b"{}") == (200, {"length": 2, "trusted": True})


def test_a_request_arriving_in_pieces_within_the_head_timeout_is_served_whole():
    body = json.dumps({"k": "v" * 5000}).encode()
    with serving() as server:
        assert post(server.server_port, body, pieces=7, pause_s=0.05) == \
            (200, {"length": len(body), "trusted": True})
        assert post(server.server_port, body, token="wrong") == \
            (200, {"length": len(body), "trusted": False})


def test_a_full_open_pool_refuses_strangers_and_not_the_token():
    with serving(max_open=2, max_connections=2) as server:
        held = [socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
                for _ in range(2)]
        try:
            for connection in held:  # two strangers parked in the open pool's threads
                connection.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)
            with socket.create_connection(("127.0.0.1", server.server_port), timeout=5) as third:
                third.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
                refused = b"".join(iter(lambda: third.recv(65536), b""))
            assert refused.startswith(b"HTTP/1.0 503 ")
            assert b"busy: 2 requests without a token" in refused
            assert post(server.server_port, b"{}") == (200, {"length": 2, "trusted": True})
        finally:
            Echo.release.set()
            for connection in held:
                connection.close()


def test_limits_that_would_not_serve_are_refused():
    for limits in ({"head_timeout_s": 0}, {"max_open": 0}, {"max_pending": 0}):
        with pytest.raises(ValueError, match="must be"):
            GuardedServer(("127.0.0.1", 0), Echo, **limits)
