"""Strangers' connections to a port: opened idle, bounded in count and time, always closed.

:func:`idle_connections` opens a fixed number once; :class:`Flood` keeps that many open to
several ports for as long as it runs (a stranger whose connections are closed opens new ones),
in a thread of its own, until stopped or its time is up. ``python -m tests.flood PORTS_FILE``
runs a flood in a process of its own (so that it does not share the interpreter of what it
floods), on the ports listed in ``PORTS_FILE`` (one a line, re-read as it changes), until
terminated or its time is up; it prints how many connects it made when it ends.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def idle_connections(port: int, count: int = 500,
                     host: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    """``count`` TCP connections to ``port`` that send nothing, closed when the block ends."""
    connections: list[socket.socket] = []
    try:
        for _ in range(count):
            connections.append(socket.create_connection((host, port), timeout=5))
        yield connections
    finally:
        for connection in connections:
            connection.close()


def closed_by_peer(connections: list[socket.socket], within_s: float) -> tuple[list[bytes], int]:
    """Wait up to ``within_s`` for the peer to close each of ``connections``: what each
    received before the close, and how many are still open at the end."""
    received = {connection: b"" for connection in connections}
    with selectors.DefaultSelector() as selector:
        for connection in connections:
            connection.setblocking(False)
            selector.register(connection, selectors.EVENT_READ)
        deadline = time.monotonic() + within_s
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                connection = key.fileobj
                try:
                    chunk = connection.recv(65536)  # type: ignore[union-attr]
                except OSError:  # reset
                    chunk = b""
                if chunk:
                    received[connection] += chunk  # type: ignore[index]
                else:
                    selector.unregister(connection)
        still_open = len(selector.get_map())
    return list(received.values()), still_open


class Flood:
    """Keeps ``per_port`` idle connections open to each of the ports ``ports()`` names (it may
    name none yet), replacing those the server closes, for at most ``max_s`` seconds and at
    most ``max_connects`` connects in all."""

    def __init__(self, ports: Callable[[], list[int]], per_port: int = 500, max_s: float = 120.0,
                 max_connects: int = 200_000):
        self.ports, self.per_port, self.max_s, self.max_connects = ports, per_port, max_s, \
            max_connects
        self.connects = 0
        self.peak: dict[int, int] = {}  # the most connections open to each port at once
        self._open: dict[int, list[socket.socket]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_s
        with selectors.DefaultSelector() as selector:  # a closed connection becomes readable
            try:
                while not self._stop.is_set() and time.monotonic() < deadline:
                    for key, _ in selector.select(0):
                        self._open[key.data].remove(key.fileobj)  # type: ignore[arg-type]
                        selector.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
                    for port in self.ports():
                        self._refill(selector, port)
                    self._stop.wait(0.5)
            finally:
                for connections in self._open.values():
                    for connection in connections:
                        connection.close()

    def _refill(self, selector: selectors.BaseSelector, port: int) -> None:
        connections = self._open.setdefault(port, [])
        while len(connections) < self.per_port and self.connects < self.max_connects:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                break
            connections.append(connection)
            selector.register(connection, selectors.EVENT_READ, port)
            self.connects += 1
        self.peak[port] = max(self.peak.get(port, 0), len(connections))


def _ports_in(path: Path) -> Callable[[], list[int]]:
    def ports() -> list[int]:
        with contextlib.suppress(OSError):
            return [int(line) for line in path.read_text().split() if line.isdigit()]
        return []
    return ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("ports_file", type=Path)
    parser.add_argument("--per-port", type=int, default=500)
    parser.add_argument("--max-s", type=float, default=120.0)
    options = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Flood(_ports_in(options.ports_file), options.per_port, options.max_s) as flood:
        stop.wait(options.max_s)
    print(f"connects {flood.connects} peak {min(flood.peak.values(), default=0)}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
