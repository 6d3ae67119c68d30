"""An HTTP server for a small JSON API that a flood of connections or a malformed request cannot
bring down.

:class:`GuardedServer` gives each connection a thread, but at most ``max_connections`` at once:
one more is answered ``503`` by the accepting thread and closed at once, without a thread of
its own. A connection whose peer sends nothing for ``idle_timeout_s`` is closed. An error on one
connection is one line on stderr, not a traceback.

:class:`JsonHandler` answers every error, those of :mod:`http.server` included, as
``{"error": ...}``, reads a body only through a single well-formed ``Content-Length`` within its
limit, and accepts a bearer token only as exactly ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

IDLE_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 64
_DIGITS = re.compile(r"[0-9]+")


class HttpError(Exception):
    """A request answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class GuardedServer(ThreadingHTTPServer):
    """A threading HTTP server with a per-connection idle timeout and a cap on connections."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the listen backlog: a burst of connects waits to be accepted

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 idle_timeout_s: float = IDLE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS):
        if not idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be above 0, got {idle_timeout_s}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.idle_timeout_s, self.max_connections = idle_timeout_s, max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """The next connection, with the idle timeout on every read and write."""
        connection, address = super().get_request()
        connection.settimeout(self.idle_timeout_s)
        return connection, address

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection in a thread of its own if a slot is free, else refuse it."""
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        """A ``503`` and close, without blocking the accepting thread: a fresh socket's send
        buffer takes the few bytes, and if it does not, the peer only sees the close."""
        body = json.dumps({"error": f"busy: {self.max_connections} connections are open, "
                                    f"try again"}).encode()
        head = (f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(head + body)
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr for a connection that failed (a peer that reset it, say)."""
        error = sys.exc_info()[1]
        peer = ":".join(str(part) for part in client_address[:2]) if client_address else "?"
        print(f"http: connection from {peer} failed: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)


class JsonHandler(BaseHTTPRequestHandler):
    """Request handler base for a JSON API: replies, errors, bodies and bearer tokens."""

    max_body_bytes = 16 * 1024 * 1024
    default_request_version = "HTTP/1.0"  # a status line even for a request line that is not HTTP

    def authorized(self, token: str) -> bool:
        """Whether the request carries exactly one ``Authorization: Bearer <token>``."""
        given = self.headers.get_all("Authorization") or []
        return len(given) == 1 and hmac.compare_digest(given[0].encode(),
                                                       f"Bearer {token}".encode())

    def read_body(self, required: bool) -> bytes:
        """The request's body, read through its ``Content-Length`` (none: no body). Raises
        :class:`HttpError` 400 for a missing (when ``required``), malformed or repeated length,
        a chunked body or one that ends early, 413 for one over ``max_body_bytes``."""
        if "Transfer-Encoding" in self.headers:
            raise HttpError(400, "Transfer-Encoding is not accepted: send a Content-Length")
        values = self.headers.get_all("Content-Length") or []
        if not values:
            if required:
                raise HttpError(400, f"{self.command} {self.path} needs a JSON body with a "
                                     f"Content-Length")
            return b""
        if len(values) > 1:
            raise HttpError(400, "more than one Content-Length")
        value = values[0].strip()
        if not _DIGITS.fullmatch(value):
            raise HttpError(400, f"Content-Length {value[:40]!r} is not a length in bytes")
        digits = value.lstrip("0") or "0"
        if len(digits) > 18 or int(digits) > self.max_body_bytes:  # int() of 18 digits is quick
            raise HttpError(413, f"a body of {digits[:40]} bytes is over the limit of "
                                 f"{self.max_body_bytes} bytes")
        length = int(digits)
        data = self.rfile.read(length)
        if len(data) < length:
            raise HttpError(400, f"the body ended after {len(data)} of {length} bytes")
        return data

    def reply_json(self, status: int, payload: Any) -> None:
        """``payload`` as JSON with ``status``."""
        self.reply(status, json.dumps(payload).encode(), "application/json")

    def reply(self, status: int, data: bytes, content_type: str) -> None:
        """``data`` with ``status`` and its length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """:mod:`http.server`'s own errors (a malformed request line, an unknown method) as
        JSON, and the connection closed after them."""
        self.close_connection = True
        self.reply_json(code, {"error": message or HTTPStatus(code).phrase})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass
