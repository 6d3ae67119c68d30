"""One AMQP connection with one channel that reconnects with backoff, rotating endpoints: what
every sender and receiver link of :class:`drivers.amqp.driver.AmqpDriver` builds on."""

from __future__ import annotations

import ssl
import time
from typing import Any, Protocol

import pika

from drivers.amqp import wire as amqp_wire
from drivers.amqp.frames import FrameEncoder
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
    picker and templates, and how receivers take messages now."""

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

    def fast_path_on(self, connection: Any) -> bool:
        """Whether ``connection`` may use the fast path."""

    def templates(self, channel_number: int, frame_max: int,
                  targets: tuple[tuple[str, str], ...], bodies: Bodies) -> list[FrameEncoder]:
        """The shared publish templates of ``targets`` on a channel."""


class Link:
    """One connection with one channel that reconnects with backoff, rotating endpoints."""

    def __init__(self, driver: LinkHost, endpoint: str, queue: str):
        self.driver = driver
        self.queue = queue
        self.endpoints = rotation(driver.destination.endpoints, endpoint)
        self.attempt = 0
        self.connection: pika.SelectConnection | None = None
        self.channel = None
        self.closing = False
        self.recorder = driver.recorder

    def connect(self) -> None:
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
            on_close_callback=self._connection_closed, custom_ioloop=self.driver.ioloop)

    def close(self) -> None:
        self.closing = True
        if self.connection and not (self.connection.is_closed or self.connection.is_closing):
            self.connection.close()

    @property
    def closed(self) -> bool:
        return self.connection is None or self.connection.is_closed

    def _opened(self, connection) -> None:
        self.recorder.connections += 1
        connection.add_on_connection_blocked_callback(self._blocked)
        connection.add_on_connection_unblocked_callback(lambda *_: self._unblocked())
        if self.driver.fast_path_on(connection):
            amqp_wire.install_direct_io(connection)
        connection.channel(on_open_callback=self._channel_opened)

    def _channel_opened(self, channel) -> None:
        self.attempt = 0
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        self.ready(channel)

    def ready(self, channel) -> None:
        """Called with an open channel; roles start work here."""

    def _channel_closed(self, channel, reason) -> None:
        self.channel = None
        if not self.closing:
            self.recorder.error(f"channel closed: {reason}")
            if self.connection and self.connection.is_open:
                self.connection.close()

    def _failed(self, connection, error) -> None:
        self.recorder.error(f"connect failed: {error}")
        self._retry()

    def _blocked(self, _connection, _frame) -> None:
        """The broker holds this connection's publishes (a resource alarm)."""
        self.recorder.blocking.blocked(id(self), time.monotonic())

    def _unblocked(self) -> None:
        """The broker lets this connection publish again (or the connection is gone)."""
        self.recorder.blocking.unblocked(id(self), time.monotonic())

    def _connection_closed(self, connection, reason) -> None:
        self.channel = None
        self.recorder.connections -= 1
        self._unblocked()
        if not self.closing:
            self.recorder.error(f"connection lost: {reason}")
            self._retry()

    def _retry(self) -> None:
        if self.closing:
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
