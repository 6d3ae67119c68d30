"""AMQP connections that reconnect with backoff, rotating endpoints (:class:`Carrier`), and the
channel of each sender and receiver on one (:class:`Link`): what every link of
:class:`drivers.amqp.driver.AmqpDriver` builds on.

A carrier holds one link's channel, or several (PerfTest's ``-X``/``-Y``: that many channels per
connection). It connects when its first link asks, opens a channel for each link once open,
and when the connection is lost tells each link, then connects again once for all of them. A
link's channel closed by the broker closes the whole connection when it is the carrier's only
link (it connects again), and is opened again on its own after a backoff where others share
the connection.
"""

from __future__ import annotations

import ssl
import time
from typing import Any, Protocol

import pika

from drivers.amqp import wire as amqp_wire
from drivers.amqp.frames import Templates
from drivers.amqp.settings import AmqpSettings
from drivers.base import rotation
from drivers.message import Bodies
from drivers.protocol import Destination, MessageShape
from drivers.routing import KeyPicker
from drivers.workers import Recorder

BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class LinkHost(Protocol):
    """What a link uses of its driver (:class:`drivers.amqp.driver.AmqpDriver`): the run's
    destination and messages, the client settings, the recorder, the loop, the shared key
    picker and templates, how receivers take messages now and who flushes their acks."""

    destination: Destination
    settings: AmqpSettings
    tls_contexts: dict[str, ssl.SSLContext]
    recorder: Recorder
    ioloop: Any
    message: MessageShape
    properties: pika.BasicProperties
    key_picker: KeyPicker
    consume_arguments: dict[str, Any]
    consumer_delay_s: float
    receivers_paused: bool
    ack_flusher: Any  # drivers.amqp.receiver.AckFlusher

    def fast_path_on(self, connection: Any) -> bool:
        """Whether ``connection`` may use the fast path."""

    def templates(self, channel_number: int, frame_max: int,
                  targets: tuple[tuple[str, str], ...], bodies: Bodies) -> Templates:
        """The shared publish templates of ``targets`` on a channel."""


class Carrier:
    """One AMQP connection that reconnects with backoff, rotating endpoints from ``endpoint``,
    carrying the channels of its links."""

    def __init__(self, driver: LinkHost, endpoint: str):
        self.driver = driver
        self.endpoints = rotation(driver.destination.peers(endpoint), endpoint)
        self.attempt = 0
        self.connection: pika.SelectConnection | None = None
        self.links: list[Link] = []
        self.recorder = driver.recorder

    @property
    def active(self) -> list[Link]:
        """Its links that have not been closed."""
        return [link for link in self.links if not link.closing]

    def connect(self) -> None:
        """Open the connection (once; a link that asks later gets its channel when it is)."""
        if not self.active or (self.connection is not None and not self.connection.is_closed):
            return
        endpoint = self.endpoints[self.attempt % len(self.endpoints)]
        params = self.driver.settings.parameters(endpoint, self.driver.tls_contexts)
        destination = self.driver.destination
        params.heartbeat = int(destination.heartbeat_s)
        params.frame_max = destination.frame_max
        if destination.tcp_options:
            params.tcp_options = dict(destination.tcp_options)
        params.connection_attempts = 1
        self.connection = pika.SelectConnection(
            params, on_open_callback=self._opened, on_open_error_callback=self._failed,
            on_close_callback=self._closed, custom_ioloop=self.driver.ioloop)

    def release(self, link: Link) -> None:
        """``link`` is done: close its channel, and the connection once no link uses it."""
        connection = self.connection
        if connection is None or connection.is_closed or connection.is_closing:
            return
        if self.active:
            if link.channel is not None and link.channel.is_open:
                link.channel.close()
            else:
                link.connection = None
            return
        connection.close()

    def open_channel(self, link: Link) -> None:
        """A channel for ``link`` on the open connection."""
        link.connection = self.connection
        self.connection.channel(on_open_callback=link._channel_opened)

    def _opened(self, connection) -> None:
        self.recorder.connections += 1
        connection.add_on_connection_blocked_callback(self._blocked)
        connection.add_on_connection_unblocked_callback(lambda *_: self._unblocked())
        if self.driver.fast_path_on(connection):
            amqp_wire.install_direct_io(connection)
        for link in self.active:
            self.open_channel(link)

    def _failed(self, connection, error) -> None:
        self.recorder.error(f"connect failed: {error}")
        self._retry()

    def _blocked(self, _connection, _frame) -> None:
        """The broker holds this connection's publishes (a resource alarm)."""
        self.recorder.blocking.blocked(id(self), time.monotonic())

    def _unblocked(self) -> None:
        """The broker lets this connection publish again (or the connection is gone)."""
        self.recorder.blocking.unblocked(id(self), time.monotonic())

    def _closed(self, connection, reason) -> None:
        self.recorder.connections -= 1
        self._unblocked()
        for link in self.links:
            link._connection_closed(connection, reason)
        if self.active:
            self.recorder.error(f"connection lost: {reason}")
            self._retry()

    def _retry(self) -> None:
        if not self.active:
            return
        if not self.driver.destination.reconnect:
            self.recorder.error("connection lost: not connecting again (workload.reconnect: "
                                "false)")
            return
        self.recorder.reconnects += 1
        delay = self.driver.destination.reconnect_s or \
            BACKOFF_S[min(self.attempt, len(BACKOFF_S) - 1)]
        self.attempt += 1
        self.driver.ioloop.call_later(delay, self.connect)


class Link:
    """One sender's or receiver's channel on a :class:`Carrier` (one of its own unless
    ``carrier`` is given: a connection shared with other links)."""

    resets_backoff = True  # an open channel starts the carrier's backoff again

    def __init__(self, driver: LinkHost, endpoint: str, queue: str,
                 carrier: Carrier | None = None):
        self.driver = driver
        self.queue = queue
        self.carrier = carrier or Carrier(driver, endpoint)
        self.carrier.links.append(self)
        self.connection: pika.SelectConnection | None = None
        self.channel = None
        self.closing = False
        self.recorder = driver.recorder

    def connect(self) -> None:
        """Get a channel: at once where the carrier's connection is open, else once it is."""
        connection = self.carrier.connection
        if connection is not None and connection.is_open:
            self.carrier.open_channel(self)
        else:
            self.carrier.connect()

    def close(self) -> None:
        self.closing = True
        self.carrier.release(self)

    @property
    def closed(self) -> bool:
        return self.connection is None or self.connection.is_closed

    def _channel_opened(self, channel) -> None:
        if self.closing:
            channel.close()
            return
        if self.resets_backoff:
            self.carrier.attempt = 0
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        self.ready(channel)

    def ready(self, channel) -> None:
        """Called with an open channel; roles start work here."""

    def _channel_closed(self, channel, reason) -> None:
        self.channel = None
        if self.closing:
            if self.carrier.active:  # the connection goes on for the others
                self.connection = None
            return
        self.recorder.error(f"channel closed: {reason}")
        connection = self.connection
        if connection is None or not connection.is_open:
            return
        if len(self.carrier.active) == 1:
            connection.close()  # connect again
            return
        self.recorder.reconnects += 1
        delay = BACKOFF_S[min(self.carrier.attempt, len(BACKOFF_S) - 1)]
        self.carrier.attempt += 1
        self.driver.ioloop.call_later(delay, self._reopen)

    def _reopen(self) -> None:
        connection = self.carrier.connection
        if not self.closing and self.channel is None and connection is not None and \
                connection.is_open:
            self.carrier.open_channel(self)

    def _connection_closed(self, connection, reason) -> None:
        """The carrier's connection is gone (it connects again for the links still open)."""
        self.channel = None
