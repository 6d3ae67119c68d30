"""The broker-agnostic driver interface.

A driver owns the transport and its execution model (an event loop for AMQP, threads for MQ).
It hosts *roles* from :mod:`drivers.workers`, which hold everything that is not broker-specific:
rate schedules, message headers, sequence numbers. Drivers only move bytes: they ask a sender
role what is due (``due``, ``next_body`` or ``take``), hand each delivery to a receiver role
(``on_body``), and count confirms, errors and reconnects in the one ``Recorder``. Broker words
(exchange, channel, CCDT) stay inside each driver.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from drivers.workers import ReceiverRole, SenderRole


class Unchecked(Exception):
    """The controller's check before any load (:func:`drivers.depth.preflight`) cannot be made
    from its machine: the client library is missing there, or what the clients connect through
    is not there; the message says why."""


class MessageTooLarge(Exception):
    """A broker member refuses messages of the run's size: ``limit`` is its largest (``None``:
    it did not say), ``said`` its own words."""

    def __init__(self, endpoint: str, size: int, limit: int | None, said: str = ""):
        self.endpoint, self.size, self.limit, self.said = endpoint, size, limit, said
        super().__init__(f"{endpoint} refuses a message of {size:,} bytes"
                         + (f" (its max_message_size is {limit:,} bytes)" if limit is not None
                            else f": {said}"))


class Driver(ABC):
    """Hosts sender and receiver roles against one broker destination."""

    @abstractmethod
    def start(self) -> None:
        """Start the driver's loop or threads; returns at once."""

    @abstractmethod
    def add_sender(self, role: SenderRole, endpoint: str, queue: str | list[str] | None = None
                   ) -> None:
        """Connect a sender to ``endpoint`` and publish whatever its schedule says is due to
        ``queue`` (default: the destination's); given several queues, each message goes to
        the next one in turn (MQ's bind not-fixed)."""

    @abstractmethod
    def add_receiver(self, role: ReceiverRole, endpoint: str, queue: str | None = None,
                     start_delay_s: float = 0.0) -> None:
        """Connect a receiver to ``endpoint`` and consume from ``queue`` (``start_delay_s``
        from now)."""

    @abstractmethod
    def move(self, role: SenderRole | ReceiverRole, endpoint: str, queue: str | None = None
             ) -> None:
        """Move a running worker to another endpoint (and queue) without losing or duplicating
        a message: the new connection is made before the old one is let go."""

    @abstractmethod
    def set_consumer_delay(self, seconds: float, paused: bool = False) -> None:
        """Make every receiver take ``seconds`` per message from now on (0: as fast as it can),
        holding the rest of its prefetch unacknowledged meanwhile; ``paused``: none at all
        (what is delivered is held, unacknowledged, until they resume)."""

    @abstractmethod
    def wake_senders(self) -> None:
        """Have every sender look at its schedule now rather than when it planned to (after a
        rate or pause change; a slow sender may have planned seconds ahead)."""

    @abstractmethod
    def call(self, function: Callable[[], object], timeout_s: float = 10.0) -> object:
        """Run ``function`` where the roles live (the loop thread) and return its result."""

    @abstractmethod
    def stop_senders(self, timeout_s: float = 10.0) -> None:
        """Stop publishing, wait for outstanding confirms, close sender connections."""

    @abstractmethod
    def stop_receivers(self, timeout_s: float = 10.0) -> None:
        """Stop consuming: cancel, take and acknowledge what is in flight, close; afterwards
        every message is either recorded as received or back in its queue."""

    @abstractmethod
    def stop(self, timeout_s: float = 10.0) -> None:
        """Acknowledge what was received, close every connection and end the loop."""


def rotation(endpoints: tuple[str, ...], first: str) -> list[str]:
    """Endpoints in the order a worker tries them, starting with its own."""
    items = list(endpoints)
    if first not in items:
        return [first, *items]
    start = items.index(first)
    return items[start:] + items[:start]
