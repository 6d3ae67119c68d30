"""An HTTP server for a small JSON API that a flood of connections or a malformed request cannot
bring down, and that strangers cannot take from the clients holding its token.

:class:`GuardedServer` lets no connection have a thread before it has sent a complete request
head. One thread, the gate, accepts every connection and reads what it sends without blocking,
in a single selector loop: an idle connection costs a file descriptor and no thread. A
connection whose head is not complete within ``head_timeout_s`` (2 s) is closed (``408`` if it
sent part of one); beyond ``max_pending`` waiting at once (1,024, or a quarter of the process's
limit on open files if that is less), the oldest waiting is closed, so a flood cannot keep out
a client that sends its request at once. A complete head is then
served in a thread of one of two pools, chosen by what the head carries:

- *trusted* (``max_connections``, 64): the head carries the token (:meth:`GuardedServer.trusts`).
  Reading the body and writing the reply may take up to ``idle_timeout_s`` per read or write.
- *open* (``max_open``, 16): anything else (Prometheus' ``/metrics``, a wrong or missing token, a
  malformed request). Every read and write has ``head_timeout_s``, so a stranger holds an open
  thread for seconds at most.

Either way one request is answered per connection (HTTP/1.0; ``Connection: close`` outside the
trusted pool whatever the handler's protocol). A request beyond its pool is answered ``503`` by
the gate and closed. Why this design rather than a reserved keep-alive connection per
controller: nothing on the client side has to be kept alive or rebuilt after a network fault,
the controller's plain one-request connections are never refused for strangers' sake, and the
rule is one a reader can check (no thread before a complete head, no trusted slot without the
token) rather than one that holds only while a connection stays up.

An error on one connection is one line on stderr, not a traceback.

:class:`JsonHandler` answers every error, those of :mod:`http.server` included, as
``{"error": ...}``, reads a body only through a single well-formed ``Content-Length`` within its
limit, and accepts a bearer token only as exactly ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import io
import json
import re
import resource
import selectors
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

IDLE_TIMEOUT_S = 30.0
HEAD_TIMEOUT_S = 2.0  # a request head is a few hundred bytes: a client that means it sends it
MAX_CONNECTIONS = 64
MAX_OPEN = 16
MAX_PENDING = 1024
MAX_HEAD_BYTES = 64 * 1024  # past this the head goes to the open pool (http.server refuses it)
_ACCEPTS_PER_ROUND = 64  # a waiting connection survives a few rounds of a flood's accepts
_DIGITS = re.compile(r"[0-9]+")
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class HttpError(Exception):
    """A request answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def bearer_matches(headers: Message, token: str) -> bool:
    """Whether ``headers`` hold exactly one ``Authorization: Bearer <token>``."""
    given = headers.get_all("Authorization") or []
    return len(given) == 1 and hmac.compare_digest(given[0].encode(), f"Bearer {token}".encode())


@dataclass
class _Waiting:
    """A connection the gate holds until its head is complete."""

    address: Any
    deadline: float
    head: bytearray = field(default_factory=bytearray)


@dataclass
class _Arrival:
    """A complete head, handed with its connection to a thread of ``pool``."""

    data: bytes  # the head and whatever came after it
    trusted: bool
    pool: threading.BoundedSemaphore


def _default_pending() -> int:
    """:data:`MAX_PENDING`, or a quarter of the soft limit on open files if that is less: the
    rest is for the process's own connections (a broker's, say)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_PENDING if soft == resource.RLIM_INFINITY else max(16, min(MAX_PENDING,
                                                                          soft // 4))


class GuardedServer(HTTPServer):
    """An HTTP server whose gate reads request heads without a thread each and serves them in a
    trusted and an open pool of threads (see the module's docstring). Subclasses say what makes
    a head trusted by overriding :meth:`trusts`; by default, a bearer ``token``."""

    request_queue_size = 1024  # the listen backlog: a burst of connects waits for the gate

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 token: str | None = None, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, head_timeout_s: float = HEAD_TIMEOUT_S,
                 max_open: int = MAX_OPEN, max_pending: int | None = None):
        for name, value in (("idle_timeout_s", idle_timeout_s),
                            ("head_timeout_s", head_timeout_s)):
            if not value > 0:
                raise ValueError(f"{name} must be above 0, got {value}")
        if max_pending is None:
            max_pending = _default_pending()
        for name, count in (("max_connections", max_connections), ("max_open", max_open),
                            ("max_pending", max_pending)):
            if count < 1:
                raise ValueError(f"{name} must be at least 1, got {count}")
        self.token, self.idle_timeout_s = token, idle_timeout_s
        self.head_timeout_s = min(head_timeout_s, idle_timeout_s)
        self.max_connections, self.max_open, self.max_pending = max_connections, max_open, \
            max_pending
        self._pools = {True: threading.BoundedSemaphore(max_connections),
                       False: threading.BoundedSemaphore(max_open)}
        self._waiting: dict[socket.socket, _Waiting] = {}  # in the order they arrived
        self._arrivals: dict[socket.socket, _Arrival] = {}
        self._stop, self._stopped = threading.Event(), threading.Event()
        self._stopped.set()
        super().__init__(address, handler)

    def trusts(self, target: str, headers: Message) -> bool:
        """Whether a request for ``target`` with ``headers`` is served in the trusted pool."""
        return self.token is not None and bearer_matches(headers, self.token)

    def arrival(self, connection: socket.socket) -> _Arrival:
        """What the gate read from ``connection`` and which pool serves it."""
        return self._arrivals[connection]

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """The gate: accept, read heads, hand complete ones over, until :meth:`shutdown`."""
        self._stopped.clear()
        self.socket.setblocking(False)
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.socket, selectors.EVENT_READ)
                while not self._stop.is_set():
                    ready = selector.select(self._wait(poll_interval))
                    for key, _ in ready:  # heads first: a flood's accepts cannot evict them
                        if key.fileobj is not self.socket:
                            self._read_safely(selector, key.fileobj)  # type: ignore[arg-type]
                    if any(key.fileobj is self.socket for key, _ in ready):
                        self._accept(selector)
                    self._expire(selector, time.monotonic())
                for connection in list(self._waiting):
                    self._drop(selector, connection)
        finally:
            self._stop.clear()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop the gate and wait for it (threads serving a request finish on their own)."""
        self._stop.set()
        self._stopped.wait()

    def _wait(self, poll_interval: float) -> float:
        if not self._waiting:
            return poll_interval
        first = next(iter(self._waiting.values()))
        return min(poll_interval, max(0.0, first.deadline - time.monotonic()))

    def _accept(self, selector: selectors.BaseSelector) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                connection, address = self.socket.accept()
            except BlockingIOError:
                return
            except OSError:  # out of descriptors, say: make room and let the peer retry
                if self._waiting:
                    self._drop(selector, next(iter(self._waiting)))
                else:
                    time.sleep(0.05)
                return
            if len(self._waiting) >= self.max_pending:
                self._drop(selector, next(iter(self._waiting)))
            connection.setblocking(False)
            self._waiting[connection] = _Waiting(address, time.monotonic() + self.head_timeout_s)
            selector.register(connection, selectors.EVENT_READ)

    def _read_safely(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        """:meth:`_read`, and a connection it fails on closed: the gate never stops for one."""
        waiting = self._waiting.get(connection)
        try:
            self._read(selector, connection)
        except Exception:  # noqa: BLE001 - one line on stderr, the gate goes on
            self.handle_error(connection, waiting.address if waiting else None)
            if connection in self._waiting:
                self._drop(selector, connection)
            else:
                connection.close()

    def _read(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        waiting = self._waiting[connection]
        try:
            chunk = connection.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(selector, connection)
            return
        seen = len(waiting.head)
        waiting.head += chunk
        if _HEAD_END.search(waiting.head, max(0, seen - 3)) or len(waiting.head) >= MAX_HEAD_BYTES:
            selector.unregister(connection)
            del self._waiting[connection]
            self._dispatch(connection, waiting)

    def _expire(self, selector: selectors.BaseSelector, now: float) -> None:
        while self._waiting:
            connection, waiting = next(iter(self._waiting.items()))
            if waiting.deadline > now:
                return
            self._drop(selector, connection, 408 if waiting.head else None,
                       f"no complete request within {self.head_timeout_s:g} s")

    def _drop(self, selector: selectors.BaseSelector, connection: socket.socket,
              status: int | None = None, message: str = "") -> None:
        selector.unregister(connection)
        del self._waiting[connection]
        if status is None:
            connection.close()
        else:
            self._refuse(connection, status, message)

    def _dispatch(self, connection: socket.socket, waiting: _Waiting) -> None:
        """Serve a complete head in a thread of its pool, or refuse it if the pool is full."""
        data = bytes(waiting.head)
        trusted = self._trusted_head(data)
        pool = self._pools[trusted]
        if not pool.acquire(blocking=False):
            self._refuse(connection, 503, f"busy: {self.max_connections} connections are open, "
                                          f"try again" if trusted else
                                          f"busy: {self.max_open} requests without a token are "
                                          f"being served, try again")
            return
        connection.settimeout(self.idle_timeout_s if trusted else self.head_timeout_s)
        self._arrivals[connection] = _Arrival(data, trusted, pool)
        try:
            threading.Thread(target=self._serve, args=(connection, waiting.address),
                             name="http", daemon=True).start()
        except RuntimeError:  # no thread to be had: as if the pool were full
            del self._arrivals[connection]
            pool.release()
            self._refuse(connection, 503, "busy: no thread free, try again")

    def _trusted_head(self, data: bytes) -> bool:
        end = _HEAD_END.search(data)
        if end is None:
            return False
        line, _, rest = data[:end.end()].partition(b"\n")
        words = line.decode("latin-1").split()
        try:
            headers = http.client.parse_headers(io.BytesIO(rest))
        except (http.client.HTTPException, ValueError):
            return False
        return len(words) == 3 and self.trusts(words[1], headers)

    def _serve(self, connection: socket.socket, address: Any) -> None:
        try:
            self.finish_request(connection, address)
        except Exception:  # noqa: BLE001 - one line on stderr, as socketserver would print
            self.handle_error(connection, address)
        finally:
            self._arrivals.pop(connection).pool.release()
            self.shutdown_request(connection)

    def _refuse(self, connection: socket.socket, status: int, message: str) -> None:
        """``status`` and close, without blocking the gate: a socket's send buffer takes the
        few bytes, and if it does not, the peer only sees the close."""
        body = json.dumps({"error": message}).encode()
        head = (f"HTTP/1.0 {status} {HTTPStatus(status).phrase}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n").encode()
        with contextlib.suppress(OSError):
            connection.setblocking(False)
            connection.send(head + body)
        self.shutdown_request(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr for a connection that failed (a peer that reset it, say)."""
        error = sys.exc_info()[1]
        peer = ":".join(str(part) for part in client_address[:2]) if client_address else "?"
        print(f"http: connection from {peer} failed: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)


class _Prefixed(io.RawIOBase):
    """A connection's input with what the gate already read from it put back in front."""

    def __init__(self, data: bytes, rest: Any):
        super().__init__()
        self._data, self._rest = data, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._data:
            return self._rest.readinto(buffer)
        count = min(len(buffer), len(self._data))
        buffer[:count] = self._data[:count]
        self._data = self._data[count:]
        return count

    def close(self) -> None:
        self._rest.close()
        super().close()


class JsonHandler(BaseHTTPRequestHandler):
    """Request handler base for a JSON API: replies, errors, bodies and bearer tokens."""

    max_body_bytes = 16 * 1024 * 1024
    default_request_version = "HTTP/1.0"  # a status line even for a request line that is not HTTP
    server: GuardedServer
    trusted = False  # served in the trusted pool (see the module docstring)

    def setup(self) -> None:
        """Read the request from what the gate read first, then from the connection."""
        super().setup()
        arrival = self.server.arrival(self.request)
        self.trusted = arrival.trusted
        self.rfile.close()
        self.rfile = io.BufferedReader(_Prefixed(arrival.data,
                                                 self.connection.makefile("rb", buffering=0)))

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line; a connection outside the trusted pool is closed after it."""
        super().send_response(code, message)
        if not self.trusted:
            self.send_header("Connection", "close")

    def authorized(self, token: str) -> bool:
        """Whether the request carries exactly one ``Authorization: Bearer <token>``."""
        return bearer_matches(self.headers, token)

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
