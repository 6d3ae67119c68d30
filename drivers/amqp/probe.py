"""Exact queue depths for the controller: a passive ``queue.declare`` per queue.

The broker answers a passive declare from the queue process itself, with the number of messages
ready in the queue at that moment, where the management API's figures are statistics refreshed
every few seconds. One blocking connection is kept and moved to the next member when its member
goes away; a queue that does not exist is reported as missing rather than as empty.
"""

from __future__ import annotations

import contextlib
import time

import pika
import pika.exceptions

PROBE_TIMEOUT_S = 2.0


class QueueDepthProbe:
    """Reads the ready count of each queue over one AMQP connection of its own."""

    def __init__(self, endpoints: list[str], queues: list[str]):
        self.endpoints = list(endpoints)
        self.queues = list(queues)
        self._connection: pika.BlockingConnection | None = None
        self._channel = None
        self._next = 0

    def read(self) -> tuple[dict[str, int], float]:
        """``({queue: ready messages}, monotonic time of the reads' midpoint)``; queues the
        broker does not know are left out. Raises ``ConnectionError`` if no member answers."""
        start = time.monotonic()
        ready: dict[str, int] = {}
        for queue in self.queues:
            channel = self._ensure_channel()
            try:
                frame = channel.queue_declare(queue, passive=True)
                ready[queue] = int(frame.method.message_count)
            except pika.exceptions.ChannelClosedByBroker:
                self._channel = None  # 404: no such queue; the channel is gone with it
            except (pika.exceptions.AMQPError, OSError) as error:
                self.close()
                raise ConnectionError(f"queue depth probe: {error!r}") from None
        return ready, (start + time.monotonic()) / 2

    def _ensure_channel(self):
        if self._connection is None or not self._connection.is_open:
            self._connect()
        if self._channel is None or not self._channel.is_open:
            self._channel = self._connection.channel()
        return self._channel

    def _connect(self) -> None:
        errors = []
        for _ in range(len(self.endpoints)):
            url = self.endpoints[self._next % len(self.endpoints)]
            self._next += 1
            parameters = pika.URLParameters(url)
            parameters.socket_timeout = PROBE_TIMEOUT_S
            parameters.blocked_connection_timeout = PROBE_TIMEOUT_S
            parameters.connection_attempts = 1
            try:
                self._connection = pika.BlockingConnection(parameters)
                self._channel = None
                return
            except (pika.exceptions.AMQPError, OSError) as error:
                errors.append(f"{parameters.host}:{parameters.port}: {error!r}")
        raise ConnectionError("queue depth probe: no member answers (" + "; ".join(errors) + ")")

    def close(self) -> None:
        """Close the connection (a later read opens a new one)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError, OSError):
                connection.close()
