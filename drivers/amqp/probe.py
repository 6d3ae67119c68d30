"""Exact queue depths for the controller: a passive ``queue.declare`` per queue.

The broker answers a passive declare from the queue process itself, with the number of messages
ready in the queue at that moment, where the management API's figures are statistics refreshed
every few seconds. One blocking connection is kept and moved to the next member when its member
goes away; a queue that does not exist is reported as missing rather than as empty.
"""

from __future__ import annotations

import contextlib
import re
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pika
import pika.exceptions

from drivers.amqp.settings import AmqpSettings
from drivers.base import MessageTooLarge

PROBE_TIMEOUT_S = 2.0
SIZE_CHECK_KEY = "amq.surge.size-check"  # no client may declare a queue named amq.*
_LIMIT = re.compile(r"larger than (?:configured )?max size (\d+)")  # RabbitMQ's words
T = TypeVar("T")


class QueueDepthProbe:
    """Reads the ready count of each queue over one AMQP connection of its own, as the run's
    clients connect (``settings``: credentials, virtual host, TLS)."""

    def __init__(self, endpoints: list[str], queues: list[str],
                 settings: AmqpSettings | None = None):
        self.endpoints = list(endpoints)
        self.queues = list(queues)
        self.settings = settings or AmqpSettings()
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._connection: pika.BlockingConnection | None = None
        self._channel = None
        self._next = 0
        self._checked: dict[str, pika.BlockingConnection] = {}  # by :meth:`check`, per endpoint

    def check(self) -> None:
        """Before any load: every endpoint accepts the run's credentials (and, over TLS, shows
        a certificate the run trusts), and every queue exists. ``ConnectionError`` names the
        first endpoint that does not, and why; ``LookupError`` lists the missing queues.
        The endpoints are connected to at once, and the connections kept for
        :meth:`check_size` (until :meth:`close`); the first one's also reads the queues, as
        :meth:`read` would have opened it there."""
        connections = _each(self.endpoints, self._open)
        self.close()
        self._checked = dict(zip(self.endpoints, connections))
        self._connection, self._channel = connections[0], None
        self._next = 1
        missing = [q for q in self.queues if q not in self.read()[0]]
        if missing:
            raise LookupError(", ".join(missing))

    def check_size(self, size: int) -> None:
        """Before any load: every endpoint takes a message of ``size`` bytes (a RabbitMQ node
        refuses bodies over its ``max_message_size``, 128 MiB unless configured, and says so
        only by closing the channel of the publish). One message of that size is published on
        each (all at once, on a channel of its own on the connection :meth:`check` kept, else a
        new one), with confirms, to a routing key no queue can have (``amq.`` names are the
        broker's), so the broker drops it; :class:`drivers.base.MessageTooLarge` with the
        broker's limit where it is refused (the first endpoint's, in order)."""
        def publish(endpoint: str) -> None:
            kept = self._checked.pop(endpoint, None)
            connection = kept if kept is not None and kept.is_open else self._open(endpoint)
            try:
                channel = connection.channel()
                channel.confirm_delivery()
                channel.basic_publish("", SIZE_CHECK_KEY, bytes(size))
                channel.close()
            except pika.exceptions.ChannelClosedByBroker as error:
                limit = _LIMIT.search(error.reply_text or "")
                raise MessageTooLarge(endpoint, size, int(limit.group(1)) if limit else None,
                                      error.reply_text) from None
            except (pika.exceptions.AMQPError, OSError) as error:
                raise ConnectionError(f"{endpoint}: {explain(error)}") from None
            finally:
                if connection is not self._connection:
                    _close(connection)

        _each(self.endpoints, publish)

    def _open(self, endpoint: str) -> pika.BlockingConnection:
        """A connection to ``endpoint`` as the run's clients make theirs; ``ConnectionError``
        saying why not."""
        try:
            return pika.BlockingConnection(self._parameters(endpoint))
        except (pika.exceptions.AMQPError, OSError, ValueError) as error:
            raise ConnectionError(f"{endpoint}: {explain(error)}") from None

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
            try:
                self._connection = pika.BlockingConnection(self._parameters(url))
                self._channel = None
                return
            except (pika.exceptions.AMQPError, OSError, ValueError) as error:
                errors.append(f"{url}: {explain(error)}")
        raise ConnectionError("queue depth probe: no member answers (" + "; ".join(errors) + ")")

    def _parameters(self, endpoint: str) -> pika.ConnectionParameters:
        parameters = self.settings.parameters(endpoint, self._contexts)
        parameters.socket_timeout = PROBE_TIMEOUT_S
        parameters.blocked_connection_timeout = PROBE_TIMEOUT_S
        parameters.connection_attempts = 1
        return parameters

    def close(self) -> None:
        """Close the connection (a later read opens a new one), and those :meth:`check`
        kept."""
        connection, self._connection, self._channel = self._connection, None, None
        kept, self._checked = self._checked, {}
        for each in {id(c): c for c in [connection, *kept.values()] if c is not None}.values():
            _close(each)


def _each(endpoints: list[str], function: Callable[[str], T]) -> list[T]:
    """``function`` of every endpoint, all at once (each is a connection's round trips); once
    all are done, the first endpoint's error in their order is raised, the connections the
    others returned closed."""
    if len(endpoints) == 1:
        return [function(endpoints[0])]
    with ThreadPoolExecutor(len(endpoints)) as pool:
        futures = [pool.submit(function, endpoint) for endpoint in endpoints]
    failed = next((f.exception() for f in futures if f.exception() is not None), None)
    if failed is not None:
        for future in futures:
            if future.exception() is None:
                _close(future.result())
        raise failed
    return [future.result() for future in futures]


def _close(connection: pika.BlockingConnection | None) -> None:
    """Close ``connection`` (if any, and open), whatever the broker says to it."""
    if connection is not None and connection.is_open:
        with contextlib.suppress(pika.exceptions.AMQPError, OSError):
            connection.close()


def explain(error: BaseException) -> str:
    """Why a connection failed, in words: refused credentials, an untrusted certificate, or
    the network error underneath pika's wrappers."""
    if isinstance(error, (pika.exceptions.ProbableAuthenticationError,
                          pika.exceptions.AuthenticationError)):
        return "the broker refused the user and password (or the user may not use the vhost)"
    if isinstance(error, pika.exceptions.ProbableAccessDeniedError):
        return "access refused: the user may not use this virtual host"
    cause = error
    while True:  # pika wraps the socket's or TLS's own error, one or two levels deep
        inner = getattr(cause, "exception", None)
        if not isinstance(inner, BaseException) and cause.args and \
                isinstance(cause.args[0], BaseException):
            inner = cause.args[0]
        if not isinstance(inner, BaseException) or inner is cause:
            break
        cause = inner
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"TLS: the broker's certificate is not trusted ({cause.verify_message})"
    if isinstance(cause, ssl.SSLError):
        return f"TLS: {cause.reason or cause}"
    return f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
