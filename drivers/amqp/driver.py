"""The AMQP 0-9-1 driver (pika): every connection of an agent on one event loop
(:mod:`drivers.amqp.loop`).

One loop thread hosts all senders and receivers, so rate changes and snapshots need no locks.
Senders publish on timers that follow their rate schedule; receivers consume with a prefetch and
acknowledge in batches (``multiple=True``). A dropped connection is retried with backoff, moving
to the next endpoint, and counted instead of ending the worker; with publisher confirms, what
was not confirmed on the lost connection is published again on the next one. A consumer the
broker cancels (its queue deleted) is counted and consumes again, with backoff until its queue
is back; a connection the broker blocks (a resource alarm) is recorded while it is blocked.

A nack makes a sender publish the nacked messages again on a new channel, after a backoff that
grows while nothing is confirmed. Never on the channel that nacked them: RabbitMQ (3.10 at
least) keeps, per channel, the quorum queue member it first tried; a channel that first
published while that member was down nacks every later publish too, whoever leads the queue
since. A new channel starts from the queue's current leader.

Requesters declare their own exclusive, auto-delete reply queue and match replies by
correlation id; responders put each reply on the request's ``reply_to`` before acknowledging
the request (through ``Destination.reply_exchange`` where a link carries replies back to the
requesters' cluster). On the fast path (a connection of their own, no transactions, consumer
rate or limit), requests are stamped from templates in batches, correlation ids included, and a
responder writes the replies and acks of one socket read's requests at once. A consumer
processing time (``set_consumer_delay``) makes each receiver
handle one message per delay, holding the rest of its prefetch unacknowledged, as a slow
application does.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pika

from drivers.amqp import wire as amqp_wire
from drivers.amqp.frames import Templates
from drivers.amqp.link import Carrier
from drivers.amqp.loop import Loop
from drivers.amqp.receiver import AckFlusher, ReceiverLink, stream_offset
from drivers.amqp.sender import RequesterLink, SenderLink
from drivers.amqp.settings import AmqpSettings
from drivers.base import Driver
from drivers.message import Bodies
from drivers.protocol import Configure, Destination, FastPath, MessageShape
from drivers.routing import KeyPicker
from drivers.workers import ReceiverRole, RequesterRole, SenderRole


def driver_for(config: Configure, recorder) -> AmqpDriver:
    """The driver a ``/configure`` asks for (the agent's way in, :data:`drivers.agent.DRIVERS`)."""
    return AmqpDriver(config.destination, recorder, AmqpSettings.from_json(config.settings),
                      config.message)


class AmqpDriver(Driver):
    """Senders and receivers over pika, all on one loop thread."""

    def __init__(self, destination: Destination, recorder, settings: AmqpSettings | None = None,
                 message: MessageShape | None = None):
        self.destination = destination
        self.message = message or MessageShape()
        self.properties = pika.BasicProperties(
            delivery_mode=2 if destination.persistent else 1, **self.message.properties)
        self._templates: dict[tuple, Templates] = {}
        self.consume_arguments = dict(destination.consumer_arguments)
        if destination.stream_offset is not None:
            self.consume_arguments["x-stream-offset"] = stream_offset(destination.stream_offset)
        self.settings = settings or AmqpSettings()
        self.tls_contexts: dict[str, ssl.SSLContext] = {}
        for endpoint in destination.endpoints:  # bad endpoints or TLS material fail here
            self.settings.parameters(endpoint, self.tls_contexts)
        self.queue = destination.queue
        self.recorder = recorder
        refused = "turned off for this run" if not destination.fast_path \
            else amqp_wire.fast_path_refused()
        recorder.fast_path = FastPath(on=refused is None, why=refused or "")
        self.consumer_delay_s = 0.0
        self.receivers_paused = False  # a backlog being built: receivers hold what they get
        recorder.consuming = 0
        # one for every sender: a Zipf picker's table of many keys is megabytes
        self.key_picker = KeyPicker(len(destination.routing_keys) or 1, destination.key_order,
                                    destination.zipf_exponent)
        self.ioloop = Loop()
        self.senders: list[SenderLink] = []
        self._carriers: dict[tuple[str, str], Carrier] = {}  # the connection each kind fills
        self.receivers: list[ReceiverLink] = []
        self.ack_flusher = AckFlusher(self.ioloop)
        self.thread = threading.Thread(target=self.ioloop.start, name="amqp-loop", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def templates(self, channel_number: int, frame_max: int,
                  targets: tuple[tuple[str, str], ...], bodies: Bodies) -> Templates:
        """The publish templates of ``targets`` (exchange, routing key) on a channel in the
        size classes of ``bodies``; made once and shared by every sender of this agent (a
        batch copies them before stamping)."""
        key = (channel_number, frame_max, targets, id(bodies))
        if key not in self._templates:
            self._templates[key] = Templates(
                channel_number, frame_max, list(targets), list(bodies.sizes),
                list(bodies.fillers), self.destination.persistent,
                b"".join(self.properties.encode()), self.message.mandatory)
        return self._templates[key]

    def fast_path_on(self, connection) -> bool:
        """Whether ``connection`` may use the fast path (loop thread only). It is off for the
        whole agent, as its snapshots say, once a connection lacks a pika hook it needs."""
        if not self.recorder.fast_path.on:
            return False
        missing = amqp_wire.missing_hooks(connection)
        if missing:
            self.recorder.fast_path = FastPath(
                on=False, why=f"pika connection without {', '.join(missing)}")
        return not missing

    def add_sender(self, role: SenderRole, endpoint: str, queue: str | list[str] | None = None,
                   share: bool = True) -> None:
        """A sender link; ``share``: on a connection with up to
        ``Destination.senders_per_connection`` - 1 other senders to ``endpoint``."""
        kind = RequesterLink if isinstance(role, RequesterRole) else SenderLink
        carrier = self._carrier("s", endpoint, self.destination.senders_per_connection, share)
        link = kind(self, role, endpoint, queue or self.queue, carrier)
        self.senders.append(link)
        self.call(link.connect)

    def add_receiver(self, role: ReceiverRole, endpoint: str, queue: str | None = None,
                     start_delay_s: float = 0.0, share: bool = True) -> None:
        """A receiver link (sharing a connection as :meth:`add_sender` does), consuming after
        ``start_delay_s``."""
        carrier = self._carrier("r", endpoint, self.destination.receivers_per_connection, share)
        link = ReceiverLink(self, role, endpoint, queue or self.queue, carrier)
        self.receivers.append(link)
        if start_delay_s > 0:
            self.call(lambda: self.ioloop.call_later(start_delay_s, link.connect))
        else:
            self.call(link.connect)

    def _carrier(self, kind: str, endpoint: str, per_connection: int, share: bool
                 ) -> Carrier | None:
        """The connection a new link of ``kind`` to ``endpoint`` shares, while it has room
        (``None``: one of its own)."""
        if per_connection <= 1 or not share:
            return None
        carrier = self._carriers.get((kind, endpoint))
        if carrier is None or len(carrier.links) >= per_connection:
            carrier = self._carriers[(kind, endpoint)] = Carrier(self, endpoint)
        return carrier

    def move(self, role: SenderRole | ReceiverRole, endpoint: str, queue: str | None = None
             ) -> None:
        def swap() -> None:
            links = self.senders if isinstance(role, SenderRole) else self.receivers
            target = queue
            for link in links:
                if link.role is role and not link.closing:
                    target = target or link.queue
                    link.retire()
            if isinstance(role, SenderRole):  # a moved worker: a connection of its own
                self.add_sender(role, endpoint, target, share=False)
            else:
                self.add_receiver(role, endpoint, target, share=False)
        self.call(swap)

    def wake_senders(self) -> None:
        self.call(lambda: [link.wake() for link in self.senders])

    def set_consumer_delay(self, seconds: float, paused: bool = False) -> None:
        def apply() -> None:
            resumed = self.receivers_paused and not paused
            self.consumer_delay_s, self.receivers_paused = seconds, paused
            for link in self.receivers:
                if resumed and link.pending_timer is not None:
                    self.ioloop.remove_timeout(link.pending_timer)
                    link.pending_timer, link.busy_until = None, 0.0
                if link.pending and link.pending_timer is None and not paused:
                    link.pending_timer = self.ioloop.call_later(0, link._work_pending)
                link.rewire()
        self.call(apply)

    def call(self, function: Callable[[], object], timeout_s: float = 10.0) -> object:
        if threading.current_thread() is self.thread or not self.thread.is_alive():
            return function()
        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(error)

        self.ioloop.add_callback_threadsafe(run)
        return future.result(timeout_s)

    def stop_senders(self, timeout_s: float = 10.0) -> None:
        """Stop publishing and wait for confirms; connections stay open until :meth:`stop`,
        because closing a channel can drop publishes the broker has not enqueued yet."""
        self.call(lambda: [link.stop() for link in self.senders])
        self._wait(lambda: all(link.unconfirmed <= 0 or link.closed for link in self.senders),
                   timeout_s)

    def stop_receivers(self, timeout_s: float = 10.0) -> None:
        self.call(lambda: [link.retire() for link in self.receivers if not link.closing])
        self._wait(lambda: all(link.closed for link in self.receivers), timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        if not self.thread.is_alive():
            return
        self.stop_senders(timeout_s)

        def close_all() -> None:
            for link in self.receivers:
                link.flush()
            for link in self.senders + self.receivers:
                link.close()

        self.call(close_all)
        self._wait(lambda: all(link.closed for link in self.senders + self.receivers), timeout_s)
        self.ioloop.stop()
        self.thread.join(timeout_s)
        if not self.thread.is_alive():
            self.ioloop.close()

    def _wait(self, condition: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.call(condition):
            time.sleep(0.02)
