"""Worker roles (sender, receiver, requester, responder) and the one recorder every
measurement goes through.

Roles are broker-agnostic: they build and read message bodies, keep rate schedules and count.
All role methods run on the driver's loop thread, so the counters need no locks; snapshots are
taken on that thread too (see :meth:`drivers.base.Driver.call`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping

from drivers.accounting import SequenceTracker
from drivers.header import SCHEDULED, HeaderError, decode, saturate
from drivers.message import PayloadBuilder
from drivers.protocol import FastPath, Snapshot
from drivers.rate import RateSchedule, unlimited_batch
from results.rundir import compiled
from results.rundir.histogram import LatencyHistogram

DESTINATION_SEQUENCE = 24  # destinations kept in put order (document 002's sequence)


class RecorderCounts:
    """The counts and histograms of a :class:`Recorder` that each delivery changes
    (``received``, ``redelivered``, ``served``, ``header_errors``, ``unacked``, ``latency``,
    ``intended_latency``). The pure-Python reference of the compiled base
    (``drivers/_speedups.pyx``), where they are fields the receiving path reaches without a
    Python attribute lookup; here, plain attributes :class:`Recorder` sets."""


_compiled = compiled.load("drivers._speedups")
_RecorderCounts: type[RecorderCounts] = RecorderCounts if _compiled is None \
    else _compiled.RecorderCounts


class Recorder(_RecorderCounts):  # type: ignore[valid-type,misc]
    """The funnel for one agent's measurements: counters, latency, sequence tracking."""

    def __init__(self) -> None:
        self.sent = 0
        self.confirmed = 0
        self.nacked = 0  # messages the broker nacked, each counted at its first nack only
        self.nacks_repeated = 0  # nacks of messages nacked before (published again, nacked again)
        self.nacks_republished = 0  # publishes again of messages whose last publish was nacked
        self.received = 0
        self.redelivered = 0
        self.errors = 0
        self.reconnects = 0
        self.header_errors = 0
        self.connections = 0
        self.republished = 0
        self.served = 0
        self.unmatched = 0
        self.timeouts = 0
        self.held = 0  # deliveries a slowed receiver holds, not yet handled (nor counted)
        self.unacked = 0  # deliveries receivers handled whose (batched) ack is not sent yet
        self.cancels = 0  # consumers the broker cancelled
        self.returned = 0  # mandatory messages the broker returned (no queue took them)
        self.requeued = 0  # deliveries nacked back to their queue
        self.rejected = 0  # deliveries nacked without requeue
        self.committed = 0  # publishes of committed transactions
        self.receivers_done = 0  # receivers that took their limit of messages
        self.consuming: int | None = None  # receivers consuming now, where the driver counts
        self._consumers: dict[int, int] = {}  # per receiver (by id), its links consuming now
        self.fast_path: FastPath | None = None  # set by a driver that has one
        # messages put per destination, where the broker says (IBM MQ: the queue manager each
        # put resolved to), and the first DESTINATION_SEQUENCE of them in put order
        self.destinations: Counter[str] = Counter()
        self.destination_sequence: list[str] = []
        self.blocking = Blocking()
        self.last_error = ""
        self.latency = LatencyHistogram()
        self.total_latency = LatencyHistogram()
        # from each message's intended send time (rate-limited senders only)
        self.intended_latency = LatencyHistogram()
        self.total_intended_latency = LatencyHistogram()
        self.confirm_latency = LatencyHistogram()  # publish to confirm (senders with confirms)
        self.total_confirm_latency = LatencyHistogram()
        self.trackers: dict[str, SequenceTracker] = {"": SequenceTracker()}  # per group
        self.senders: list[SenderRole] = []

    @property
    def tracker(self) -> SequenceTracker:
        """The sequence tracker of receivers that compete for one copy of each message."""
        return self.trackers[""]

    def tracker_for(self, group: str, stream: bool = False) -> SequenceTracker:
        """The sequence tracker of the receivers of subscription ``group`` (a stream's
        reader, if ``stream``)."""
        if group not in self.trackers:
            self.trackers[group] = SequenceTracker(stream)
        return self.trackers[group]

    def exports(self) -> dict[str, dict[int, bytes]]:
        """Every group's exported bitmaps."""
        return {group: tracker.export() for group, tracker in self.trackers.items()}

    def consumer(self, role: object, now: bool) -> None:
        """One of ``role``'s links started (``now``) or stopped consuming. ``consuming`` counts
        the receivers with at least one: a receiver moved make-before-break (its new link
        consuming before the old one stops) is one receiver."""
        links = self._consumers.get(id(role), 0) + (1 if now else -1)
        if links > 0:
            self._consumers[id(role)] = links
        else:
            self._consumers.pop(id(role), None)
        self.consuming = len(self._consumers)

    def destined(self, counts: Mapping[str, int], in_order: list[str]) -> None:
        """Count puts by where each went (``in_order``: the first of them, in put order)."""
        self.destinations.update(counts)
        room = DESTINATION_SEQUENCE - len(self.destination_sequence)
        if room > 0:
            self.destination_sequence += in_order[:room]

    def error(self, message: str) -> None:
        """Count an error and remember the latest one for the live view."""
        self.errors += 1
        self.last_error = message

    def snapshot(self) -> Snapshot:
        """Cumulative counters plus the latency histograms (actual, intended, confirm) of the
        interval since the last call, stamped with this process's monotonic clock and its CPU
        time at that instant."""
        interval, intended, confirm = self.latency, self.intended_latency, self.confirm_latency
        self.latency, self.intended_latency = LatencyHistogram(), LatencyHistogram()
        self.confirm_latency = LatencyHistogram()
        self.total_latency.merge(interval)
        self.total_intended_latency.merge(intended)
        self.total_confirm_latency.merge(confirm)
        publishing = [s for s in self.senders if s.publishing]
        return Snapshot(
            monotonic_s=time.monotonic(), cpu_seconds=time.process_time(),
            sent=self.sent, confirmed=self.confirmed, nacked=self.nacked,
            nacks_republished=self.nacks_republished, nacks_repeated=self.nacks_repeated,
            held=self.held, unacked=self.unacked,
            received=self.received, redelivered=self.redelivered,
            duplicates=sum(t.duplicates for t in self.trackers.values()),
            out_of_order=sum(t.out_of_order for t in self.trackers.values()),
            rereads=sum(t.rereads for t in self.trackers.values()), returned=self.returned,
            requeued=self.requeued, rejected=self.rejected, committed=self.committed,
            receivers_done=self.receivers_done,
            errors=self.errors, reconnects=self.reconnects, header_errors=self.header_errors,
            connections=self.connections, republished=self.republished, served=self.served,
            unmatched=self.unmatched, timeouts=self.timeouts,
            senders_done=sum(1 for s in self.senders if s.done),
            sending=len(publishing),
            sending_queues=sorted({q for s in publishing for q in s.queues}),
            skipped=sum(s.schedule.skipped for s in self.senders),
            target_rate=sum(s.schedule.rate for s in self.senders if s.active and not s.paused),
            cancels=self.cancels, consuming=self.consuming, blocked=len(self.blocking.links),
            blocked_s=self.blocking.seconds(time.monotonic()),
            last_error=self.last_error or "", latency=interval.to_dict(),
            intended_latency=intended.to_dict(), confirm_latency=confirm.to_dict(),
            fast_path=self.fast_path, hot_path=compiled.state(),
            destinations=dict(self.destinations),
            destination_sequence=list(self.destination_sequence))

    def sent_per_producer(self) -> dict[int, int]:
        """How many messages each producer of this agent has published (its next sequence)."""
        return {s.producer_id: s.seq for s in self.senders}


class Blocking:
    """Which connections the broker blocks now (``connection.blocked``: a memory or disk alarm
    holds their publishes) and for how many seconds at least one of them was: while blocked,
    senders fall behind their schedule because the broker holds them, not because the load
    generator is slow."""

    def __init__(self) -> None:
        self.links: set[int] = set()
        self._since: float | None = None
        self._done_s = 0.0

    def blocked(self, link: int, now: float) -> None:
        """Connection ``link`` (any id) was blocked at ``now`` (monotonic seconds)."""
        if not self.links:
            self._since = now
        self.links.add(link)

    def unblocked(self, link: int, now: float) -> None:
        """Connection ``link`` was unblocked (or closed) at ``now``."""
        if link not in self.links:
            return
        self.links.discard(link)
        if not self.links and self._since is not None:
            self._done_s += now - self._since
            self._since = None

    def seconds(self, now: float) -> float:
        """Seconds up to ``now`` during which at least one connection was blocked."""
        return self._done_s + (now - self._since if self._since is not None else 0.0)


class SenderRole:
    """One sender: a producer id, a rate schedule and a sequence of message bodies.

    ``active`` ends with the run (or ``limit`` messages); ``paused`` is a client-count sweep
    holding this sender back for a while.

    A rate-limited sender stamps every message with its schedule lag: how long after its
    intended send time (the schedule's, on the monotonic clock) it was stamped. The messages of
    the latest batch (:meth:`take`) are placed ``1 / rate`` apart, ending at the time the last
    of them was due; an earlier message sent again (a republish) is placed by the same rule,
    counting back from that batch.
    """

    def __init__(self, producer_id: int, rate: float, payload: PayloadBuilder,
                 recorder: Recorder, now: float | None = None, limit: int | None = None):
        self.producer_id = producer_id
        self.schedule = RateSchedule(rate, time.monotonic() if now is None else now,
                                     batch=unlimited_batch(payload.size))
        self.seq = 0
        self.active = True
        self.paused = False
        self.limit = limit
        self.queues: tuple[str, ...] = ()  # where it publishes (set by the agent)
        self.recorder = recorder
        self.size = payload.size
        self.bodies = payload.bodies
        self._build = payload.build
        # the latest batch on the schedule: its first seq, when that one was due, the spacing
        # (0.0: unscheduled, an unlimited sender)
        self._first_seq, self._first_due, self._interval = 0, 0.0, 0.0
        recorder.senders.append(self)

    @property
    def done(self) -> bool:
        """Whether this sender has sent all it was asked to (``limit``)."""
        return self.limit is not None and self.seq >= self.limit

    @property
    def publishing(self) -> bool:
        """Whether this sender takes part in the load now: not stopped, paused or done."""
        return self.active and not self.paused and not self.done

    def due(self) -> int:
        """How many messages to publish now."""
        if not self.active or self.paused:
            return 0
        n = self.schedule.due(time.monotonic())
        return n if self.limit is None else min(n, self.limit - self.seq)

    def body(self, seq: int) -> bytes:
        """The body of message ``seq`` (again, for a republish), stamped now."""
        if not self._interval:
            return self._build(self.producer_id, seq, time.time_ns())
        lag_us = self.lags(seq)[1]
        return self._build(self.producer_id, seq, time.time_ns(), lag_us)

    def lags(self, first_seq: int) -> tuple[int, int, float]:
        """For stamping messages from ``first_seq`` now: the header flags, the schedule lag of
        ``first_seq`` (us, saturated) and how much less each next message's lag is (us);
        ``(0, 0, 0.0)`` when unscheduled."""
        interval = self._interval
        if not interval:
            return 0, 0, 0.0
        due = self._first_due + (first_seq - self._first_seq) * interval
        return SCHEDULED, saturate(int((time.monotonic() - due) * 1e6)), interval * 1e6

    def _place(self, seq: int, due: float) -> None:
        """Message ``seq`` was due at ``due`` (monotonic s), the next ones 1 / rate apart."""
        rate = self.schedule.rate
        self._first_seq, self._first_due, self._interval = seq, due, 1.0 / rate if rate else 0.0

    def pause(self, paused: bool) -> None:
        """Hold this sender back, or let it go again from now (nothing owed for the pause)."""
        if self.paused and not paused:
            self.schedule.set_rate(self.schedule.rate, time.monotonic(), restart=True)
        self.paused = paused

    def delay_s(self) -> float:
        """Seconds until the next message is due (0 when some are due already)."""
        return max(0.0, self.schedule.next_due() - time.monotonic())

    def next_body(self) -> bytes:
        """The next message body; advances the sequence number."""
        seq = self.seq
        self.seq = seq + 1
        return self.body(seq)

    def take(self, n: int) -> int:
        """Reserve ``n`` sequence numbers for the messages :meth:`due` handed out; returns the
        first. They are the latest due: the last was due at the schedule's ``last_due``."""
        first = self.seq
        self.seq = first + n
        schedule = self.schedule
        if schedule.rate:
            self._place(first, schedule.last_due - (n - 1) / schedule.rate)
        else:
            self._interval = 0.0
        return first

    def set_rate(self, rate: float) -> None:
        """Change the rate live, from now on."""
        self.schedule.set_rate(rate, time.monotonic())


class RequesterRole(SenderRole):
    """A sender whose messages are requests: it keeps each one until the reply with the same
    correlation id comes back, and records the round trip (2 puts + 2 gets) as its latency;
    rate-limited, also from the request's intended send time. The requests owed are the
    latest due (the oldest are dropped when more are owed than the window allows), and the
    oldest of them goes first.

    A request's correlation id has a fixed width: the producer id in 8 and the sequence number
    in 16 lowercase hex digits, ``0000000a:00000000000000ff`` (:meth:`correlation`), so that a
    sender may stamp each request's last 16 digits into a template in place."""

    def __init__(self, producer_id: int, rate: float, payload: PayloadBuilder,
                 recorder: Recorder, in_flight: int = 1, now: float | None = None,
                 limit: int | None = None):
        super().__init__(producer_id, rate, payload, recorder, now, limit)
        self.in_flight = in_flight
        # correlation id -> (send time, intended send time or None if unscheduled), monotonic ns
        self.waiting: dict[str, tuple[int, int | None]] = {}
        self.owed = 0
        self.correlation_prefix = f"{producer_id:08x}:"
        """What every correlation id of this requester starts with."""

    def correlation(self, seq: int) -> str:
        """The correlation id of request ``seq``."""
        return f"{self.correlation_prefix}{seq:016x}"

    def room(self) -> int:
        """How many requests may be sent now: due ones, within the in-flight window."""
        if not self.active or self.paused:
            return 0
        if self.schedule.rate == 0:
            self.owed = self.in_flight  # closed loop: as fast as replies come back
        else:
            self.owed = min(self.owed + self.due(), max(self.in_flight, int(self.schedule.rate)))
        room = min(self.owed, self.in_flight - len(self.waiting))
        if self.limit is not None:
            room = min(room, self.limit - self.seq)
        return max(0, room)

    def lost_connection(self) -> None:
        """Requests waiting on a connection that is gone will get no reply: time them out."""
        self.recorder.timeouts += len(self.waiting)
        self.waiting.clear()

    def request(self) -> tuple[str, bytes]:
        """The next request's correlation id and body."""
        seq = self.take_requests(1)
        return self.correlation(seq), self.body(seq)

    def take_requests(self, n: int) -> int:
        """Send the next ``n`` requests (:meth:`room` says how many may go): they wait for
        their replies from now. Returns the first one's sequence number; their bodies are
        stamped with :meth:`lags` of it, their correlation ids are :meth:`correlation` of it
        and the next ones."""
        first = self.seq
        if self.limit is not None and first + n > self.limit:
            raise ValueError("requester is past its message limit")
        self.seq = first + n
        self.owed -= n
        waiting, prefix, now_ns = self.waiting, self.correlation_prefix, time.monotonic_ns()
        schedule = self.schedule
        if not schedule.rate:
            for seq in range(first, first + n):
                waiting[f"{prefix}{seq:016x}"] = (now_ns, None)
            return first
        # the oldest owed goes first: the last of them was due when the schedule's last was
        self._place(first, schedule.last_due - (self.owed + n - 1) / schedule.rate)
        due, interval = self._first_due, self._interval
        for k, seq in enumerate(range(first, first + n)):
            waiting[f"{prefix}{seq:016x}"] = (now_ns, int((due + k * interval) * 1e9))
        return first

    def on_reply(self, correlation: str | None) -> None:
        """Match a reply to its request; a reply nobody waits for is counted as unmatched."""
        sent = self.waiting.pop(correlation or "", None)
        recorder = self.recorder
        if sent is None:
            recorder.unmatched += 1
            return
        now_ns = time.monotonic_ns()
        recorder.latency.record((now_ns - sent[0]) // 1000)
        if sent[1] is not None:
            recorder.intended_latency.record((now_ns - sent[1]) // 1000)
        recorder.received += 1

    def expire(self, timeout_s: float) -> None:
        """Give up on requests unanswered for ``timeout_s``; they count as timeouts."""
        limit = time.monotonic_ns() - int(timeout_s * 1e9)
        late = [c for c, (sent, _) in self.waiting.items() if sent < limit]
        for correlation in late:
            del self.waiting[correlation]
        self.recorder.timeouts += len(late)


class ReceiverCore:
    """What each delivery runs through: its header read, its sequence number tracked
    (``tracker``), its latency recorded in ``recorder`` and counted. The pure-Python reference
    of the compiled core (``drivers/_speedups.pyx``); :class:`ReceiverRole` is built on
    whichever runs (:mod:`results.rundir.compiled`)."""

    serves_requests = False  # a responder: requests are counted as served, not received
    recorder: Recorder
    tracker: SequenceTracker
    stream: bool

    def on_body(self, body: bytes, offset: int = 0, redelivered: bool = False) -> None:
        """Account for one delivered message whose body starts at ``offset`` in ``body``."""
        recorder = self.recorder
        try:
            producer_id, seq, sent_ns, lag_us = decode(body, offset)
        except HeaderError:
            recorder.header_errors += 1
            return
        if not self.tracker.record(producer_id, seq) and self.stream:
            return
        if self.serves_requests:
            recorder.served += 1
        else:
            latency_us = (time.time_ns() - sent_ns) // 1000
            recorder.latency.record(latency_us)
            if lag_us is not None:
                recorder.intended_latency.record(latency_us + lag_us)
            recorder.received += 1
        if redelivered:
            recorder.redelivered += 1


_ReceiverCore: type[ReceiverCore] = ReceiverCore if _compiled is None else _compiled.ReceiverCore


class ReceiverRole(_ReceiverCore):  # type: ignore[valid-type,misc]
    """One receiver: reads headers, records latency (from the actual send time, and from the
    intended one for messages of rate-limited senders) and sequence numbers."""

    def __init__(self, recorder: Recorder, receiver_id: int = 0, group: str = "",
                 stream: bool = False):
        self.receiver_id = receiver_id
        self.recorder = recorder
        self.stream = stream  # it reads a stream: a message read again is a re-read
        self.group = group
        self.tracker = recorder.tracker_for(group, stream)

    def moved_to(self, queue: str) -> None:
        """It consumes from ``queue`` from now on: a receiver of a subscription (its group
        the queue's name) counts what it gets there in that queue's subscription."""
        if self.group and not self.stream and self.group != queue:
            self.group = queue
            self.tracker = self.recorder.tracker_for(queue)


class ResponderRole(ReceiverRole):
    """A receiver of requests: tracks their sequence numbers (for loss accounting) and counts
    them as served; the round trip is measured by the requester."""

    serves_requests = True
