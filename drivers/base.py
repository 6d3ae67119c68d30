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
from dataclasses import dataclass

from drivers.workers import ReceiverRole, SenderRole


@dataclass(frozen=True)
class Destination:
    """Where workers connect and what they address: endpoints (one per member) and a queue."""

    endpoints: tuple[str, ...]
    queue: str
    persistent: bool = False
    confirms: bool = False
    prefetch: int = 200
    manual_ack: bool = True
    reply_size: int = 0  # request-reply: bytes of each reply
    reply_timeout_s: float = 10.0  # request-reply: a request unanswered this long times out
    unit_of_work: bool = False  # request-reply: a responder's get and put in one transaction
    fast_path: bool = True  # drivers may encode/decode frames themselves where they can
    # IBM MQ (drivers.mq.driver; other drivers ignore these). Endpoints are mq://HOST(PORT)/QMNAME
    # ?channel=CHL (a client channel of its own) or a queue manager name / *GROUP looked up
    # in the CCDT; see drivers/mq.py.
    queue_manager: str = ""  # QM name or *GROUP for endpoints that name none
    channel: str = ""  # SVRCONN channel of mq://host endpoints (default SYSTEM.DEF.SVRCONN)
    ccdt_url: str = ""  # e.g. file:///nfs1/UC01.json; "" = the client's own (MQCCDTURL)
    reconnect: str = ""  # "yes" | "qmgr" | "disabled"; "" or "no": the client's DefRecon
    appltag_sender: str = "mqperf.sender"  # APPLTAG of senders and requesters (max 28)
    appltag_receiver: str = "mqperf.receiver"  # APPLTAG of receivers and responders
    reply_queue: str = ""  # request-reply: shared reply queue; "" = queue with request->reply
    tls_cipher_spec: str = ""  # e.g. ANY_TLS12_OR_HIGHER for mq://host endpoints
    tls_key_repository: str = ""  # key repository stem (MQSCO KeyRepository)


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
    def add_receiver(self, role: ReceiverRole, endpoint: str, queue: str | None = None) -> None:
        """Connect a receiver to ``endpoint`` and consume from ``queue``."""

    @abstractmethod
    def move(self, role: SenderRole | ReceiverRole, endpoint: str, queue: str | None = None
             ) -> None:
        """Move a running worker to another endpoint (and queue) without losing or duplicating
        a message: the new connection is made before the old one is let go."""

    @abstractmethod
    def set_consumer_delay(self, seconds: float) -> None:
        """Make every receiver take ``seconds`` per message from now on (0: as fast as it can),
        holding the rest of its prefetch unacknowledged meanwhile."""

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
