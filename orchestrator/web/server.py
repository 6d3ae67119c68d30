"""The page's HTTP server: the static page, and the board as JSON for it to poll.

Loopback by default. On any other address every request for data (``/api/``, ``/analysis/``)
must carry the token (``?token=`` as in the printed URL, or ``Authorization: Bearer``); the
page and its scripts hold no data and are served to anyone.

The server is a :class:`~drivers.http.GuardedServer`: a connection that sends no complete
request within 2 s is closed without ever having had a thread, and requests with the token are
served in a pool that requests without it cannot fill. The page runs in threads of the
controller's process, so a flood of idle connections to it costs the run nothing but a file
descriptor each for 2 s. A query value that is not a count is answered 400 with a JSON error.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import mimetypes
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from email.message import Message
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from drivers.http import GuardedServer, HttpError, JsonHandler, bearer_matches
from orchestrator.errors import SurgeError
from orchestrator.web.feed import Board

STATIC = resources.files("orchestrator.web") / "static"
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}


_COUNT = re.compile(r"[0-9]{1,18}")  # int() of 18 ASCII digits is quick and never refused
LINGER_S = 3.0  # a watched page gets this long to fetch the end before the server stops


class WebAddressError(SurgeError):
    """``--web`` is not ``HOST:PORT``, or that address cannot be bound."""

    exit_code = 2


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too; ``PORT`` alone means loopback) as a host and port."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
        if not 0 <= number <= 65535:
            raise ValueError
    except ValueError:
        raise WebAddressError(f"--web {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080 "
                              f"(port 0 for any free one)") from None
    return host, number


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebServer:
    """Serves ``board`` on ``host:port`` in a thread of its own until :meth:`close`; off
    loopback (or ``guarded``) data is served only to requests with ``token``."""

    def __init__(self, board: Board, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, guarded: bool | None = None):
        self.board = board
        guarded = not is_loopback(host) if guarded is None else guarded  # tests guard loopback
        self.token = token if guarded else None
        if guarded and not token:
            raise WebAddressError(f"--web {host}:{port}: a page off loopback needs a token")
        handler = type("BoundHandler", (_Handler,), {"server_board": board,
                                                    "server_token": self.token})
        try:
            self.httpd = _PageServer((host, port), handler, token=self.token)
        except OSError as error:
            raise WebAddressError(f"--web {host}:{port}: cannot listen there "
                                  f"({error.strerror})") from None
        self.port = self.httpd.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/" + (f"?token={token}" if self.token else "")
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="web",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def serving(board: Board, address: str | None, say: Callable[[str], None]
            ) -> Iterator[WebServer | None]:
    """``board``'s page on ``address`` (``HOST:PORT``; None: no page) while the block runs,
    with a token of its own off loopback; ``say`` gets its URL."""
    if not address:
        yield None
        return
    host, port = parse_address(address)
    with WebServer(board, host, port, token=secrets.token_urlsafe(24)) as server:
        say(f"page: {server.url}")
        yield server
        board.linger(LINGER_S)


class _PageServer(GuardedServer):
    """Trusts a request with the token in its query as well as one with it as a bearer."""

    def trusts(self, target: str, headers: Message) -> bool:
        """Whether the request for ``target`` with ``headers`` carries the page's token."""
        if self.token is None:
            return False
        try:
            query = _query(target)
        except HttpError:
            return False
        return _matches(query.get("token", ""), self.token) or bearer_matches(headers,
                                                                               self.token)


class _Handler(JsonHandler):
    server_board: Board
    server_token: str | None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        try:
            url = urlsplit(self.path)
            query = _query(self.path)
            if url.path in ("/", "/index.html"):
                self._static("index.html")
            elif url.path.startswith("/static/"):
                self._static(url.path.removeprefix("/static/"))
            elif url.path == "/api/board":
                self._check(query)
                document = self.server_board.view(
                    _count(query, "ticks"), _count(query, "members"), _count(query, "events"),
                    query.get("run"))  # events may hold what JSON has no type for: as text
                self.reply(200, json.dumps(document, default=str).encode(), "application/json")
            elif url.path.startswith("/analysis/"):
                self._check(query)
                self._analysis(url.path.removeprefix("/analysis/"))
            else:
                raise HttpError(404, f"no {url.path} here")
        except HttpError as error:
            self.reply_json(error.status, {"error": error.message})

    def _check(self, query: dict[str, str]) -> None:
        token = self.server_token
        if token is None:
            return
        if not (_matches(query.get("token", ""), token) or self.authorized(token)):
            raise HttpError(401, "this page needs the token of the URL surge printed")

    def _static(self, name: str) -> None:
        entry = STATIC / name
        if "/" in name or name.startswith(".") or not entry.is_file():
            raise HttpError(404, f"no {name} here")
        self.reply(200, entry.read_bytes(), _TYPES.get(Path(name).suffix, "text/plain"))

    def _analysis(self, name: str) -> None:
        run = self.server_board.run
        if run is None or run.run_dir is None or name not in run.analysis:
            raise HttpError(404, f"no analysis file {name} here")
        path = run.run_dir / "analysis" / name
        kind = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "text/plain"
        self.reply(200, path.read_bytes(), kind)


def _query(target: str) -> dict[str, str]:
    """The last value of each field of ``target``'s query; 400 for one that is no URL."""
    try:
        return {k: v[-1] for k, v in parse_qs(urlsplit(target).query).items()}
    except ValueError as error:
        raise HttpError(400, f"{target[:60]!r} is not a URL: {error}") from None


def _matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _count(query: dict[str, str], name: str) -> int:
    """The count ``name`` of ``query`` (0 if absent): ASCII digits, at most 18 of them."""
    value = query.get(name, "0")
    if not _COUNT.fullmatch(value):
        raise HttpError(400, f"{name}={value[:20]!r}: expected a count (0 to "
                             f"999999999999999999)")
    return int(value)
