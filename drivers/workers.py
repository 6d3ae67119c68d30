"""Worker roles (sender, receiver) and the one recorder every measurement goes through.

Roles are broker-agnostic: they build and read message bodies, keep rate schedules and count.
All role methods run on the driver's loop thread, so the counters need no locks; snapshots are
taken on that thread too (see :meth:`drivers.base.Driver.call`).
"""

from __future__ import annotations

import time
from typing import Any

from drivers.accounting import SequenceTracker
from drivers.header import HeaderError, PayloadBuilder, decode
from drivers.histogram import LatencyHistogram
from drivers.rate import RateSchedule


class Recorder:
    """The funnel for one agent's measurements: counters, latency, sequence tracking."""

    def __init__(self) -> None:
        self.sent = 0
        self.confirmed = 0
        self.nacked = 0
        self.received = 0
        self.redelivered = 0
        self.errors = 0
        self.reconnects = 0
        self.header_errors = 0
        self.connections = 0
        self.last_error = ""
        self.latency = LatencyHistogram()
        self.total_latency = LatencyHistogram()
        self.tracker = SequenceTracker()
        self.senders: list[SenderRole] = []

    def error(self, message: str) -> None:
        """Count an error and remember the latest one for the live view."""
        self.errors += 1
        self.last_error = message

    def snapshot(self) -> dict[str, Any]:
        """Cumulative counters plus the latency histogram of the interval since the last call."""
        interval = self.latency
        self.latency = LatencyHistogram()
        self.total_latency.merge(interval)
        return {
            "sent": self.sent, "confirmed": self.confirmed, "nacked": self.nacked,
            "received": self.received, "redelivered": self.redelivered,
            "duplicates": self.tracker.duplicates, "out_of_order": self.tracker.out_of_order,
            "errors": self.errors, "reconnects": self.reconnects,
            "header_errors": self.header_errors, "connections": self.connections,
            "skipped": sum(s.schedule.skipped for s in self.senders),
            "target_rate": sum(s.schedule.rate for s in self.senders if s.active),
            "last_error": self.last_error,
            "latency": interval.to_dict(),
        }

    def sent_per_producer(self) -> dict[int, int]:
        """How many messages each producer of this agent has published (its next sequence)."""
        return {s.producer_id: s.seq for s in self.senders}


class SenderRole:
    """One sender: a producer id, a rate schedule and a sequence of message bodies."""

    def __init__(self, producer_id: int, rate: float, payload: PayloadBuilder,
                 recorder: Recorder, now: float | None = None):
        self.producer_id = producer_id
        self.schedule = RateSchedule(rate, time.monotonic() if now is None else now)
        self.seq = 0
        self.active = True
        self.recorder = recorder
        self.size = payload.size
        self._build = payload.build
        recorder.senders.append(self)

    def due(self) -> int:
        """How many messages to publish now."""
        return self.schedule.due(time.monotonic()) if self.active else 0

    def delay_s(self) -> float:
        """Seconds until the next message is due (0 when some are due already)."""
        return max(0.0, self.schedule.next_due() - time.monotonic())

    def next_body(self) -> bytes:
        """The next message body; advances the sequence number."""
        seq = self.seq
        self.seq = seq + 1
        return self._build(self.producer_id, seq, time.time_ns())

    def take(self, n: int) -> int:
        """Reserve ``n`` sequence numbers for bodies a driver stamps itself; returns the first."""
        first = self.seq
        self.seq = first + n
        return first

    def set_rate(self, rate: float) -> None:
        """Change the rate live, from now on."""
        self.schedule.set_rate(rate, time.monotonic())


class ReceiverRole:
    """One receiver: reads headers, records latency and sequence numbers."""

    def __init__(self, recorder: Recorder, receiver_id: int = 0):
        self.receiver_id = receiver_id
        self.recorder = recorder
        self._track = recorder.tracker.record

    def on_body(self, body: bytes, offset: int = 0, redelivered: bool = False) -> None:
        """Account for one delivered message whose body starts at ``offset`` in ``body``."""
        recorder = self.recorder
        try:
            producer_id, seq, sent_ns = decode(body, offset)
        except HeaderError:
            recorder.header_errors += 1
            return
        recorder.latency.record((time.time_ns() - sent_ns) // 1000)
        self._track(producer_id, seq)
        recorder.received += 1
        if redelivered:
            recorder.redelivered += 1
