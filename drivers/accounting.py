"""Loss and duplicate accounting for competing consumers.

Several receivers (possibly in different processes) share a queue, so each sees only part of
each producer's sequence. Each receiving process keeps a SequenceTracker; at the end their
bitmaps are exported, ORed together by merge_exports() and compared with what was sent.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from results.rundir import compiled

ExportedBitmaps = dict[int, bytes]
"""producer_id -> zlib-compressed bitmap, bit n (little-endian bit order) set if seq n was seen."""

_INITIAL_BYTES = 1024


class _Producer:
    __slots__ = ("bits", "high")

    def __init__(self) -> None:
        self.bits = bytearray(_INITIAL_BYTES)
        self.high = -1


class TrackerCore:
    """What each delivery runs through: the bitmaps per producer, the counters and
    :meth:`record`. The pure-Python reference of the compiled core (``drivers/_speedups.pyx``);
    :class:`SequenceTracker` is built on whichever runs (:mod:`results.rundir.compiled`)."""

    __slots__ = ("_producers", "received", "duplicates", "out_of_order", "rereads", "stream")

    def record(self, producer_id: int, seq: int) -> bool:
        """Record one delivery; seq must be >= 0 (it is unsigned in the header). Whether it
        is the first of that message here (a stream's re-read is not counted received)."""
        state = self._producers.get(producer_id)
        if state is None:
            state = self._producers[producer_id] = _Producer()
        bits = state.bits
        i = seq >> 3
        if i >= len(bits):
            bits += bytes(max(i + 1, 2 * len(bits)) - len(bits))
        mask = 1 << (seq & 7)
        if bits[i] & mask:
            if self.stream:
                self.rereads += 1
                return False
            self.received += 1
            self.duplicates += 1
            return False
        self.received += 1
        bits[i] |= mask
        if seq < state.high:
            self.out_of_order += 1
        else:
            state.high = seq
        return True


_compiled = compiled.load("drivers._speedups")
_Core: type[TrackerCore] = TrackerCore if _compiled is None else _compiled.TrackerCore


class SequenceTracker(_Core):  # type: ignore[valid-type,misc]
    """Records which (producer_id, seq) pairs one receiving process has seen.

    Counters: received (every record, duplicates included), duplicates (seq already seen by this
    tracker) and out_of_order (first sighting of a seq lower than the highest seen so far from
    that producer; duplicates are not also counted here). A stream's tracker counts a seq seen
    again as a re-read instead: a stream keeps its messages, and a consumer that subscribes
    again from its offset reads them again.
    """

    __slots__ = ()

    def __init__(self, stream: bool = False) -> None:
        """Create an empty tracker (of a stream's reader, if ``stream``)."""
        self._producers: dict = {}
        self.received = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.rereads = 0
        self.stream = stream

    @property
    def unique(self) -> int:
        """Distinct (producer_id, seq) pairs seen by this tracker."""
        return self.received - self.duplicates

    def export(self) -> ExportedBitmaps:
        """Return each producer's bitmap, trailing zero bytes dropped, zlib-compressed."""
        return {pid: zlib.compress(p.bits.rstrip(b"\x00")) for pid, p in self._producers.items()}


@dataclass(frozen=True)
class MergedCounts:
    """Union of several trackers' bitmaps."""

    unique: int
    """Distinct (producer_id, seq) pairs seen by any tracker."""
    cross_duplicates: int
    """Sightings of a seq by more than one tracker (sum of popcounts minus union popcount)."""
    per_producer_unique: dict[int, int]
    bitmaps: dict[int, int] = field(default_factory=dict, repr=False)
    """producer_id -> merged bitmap as an int, bit n set if seq n was seen."""

    def missing(self, producer_id: int, sent: int) -> int:
        """Return how many of seqs 0..sent-1 of producer_id no tracker saw."""
        if sent <= 0:
            return 0
        bits = self.bitmaps.get(producer_id, 0)
        return sent - (bits & ((1 << sent) - 1)).bit_count()


def merge_exports(exports: Iterable[Mapping[int, bytes]]) -> MergedCounts:
    """OR the exported bitmaps of several trackers together and count the result."""
    merged: dict[int, int] = {}
    total = 0
    for export in exports:
        for pid, blob in export.items():
            bits = int.from_bytes(zlib.decompress(blob), "little")
            total += bits.bit_count()
            merged[pid] = merged.get(pid, 0) | bits
    per_producer = {pid: bits.bit_count() for pid, bits in merged.items()}
    unique = sum(per_producer.values())
    return MergedCounts(
        unique=unique,
        cross_duplicates=total - unique,
        per_producer_unique=per_producer,
        bitmaps=merged,
    )


@dataclass(frozen=True)
class Reconciliation:
    """End-of-run balance: sent = received + still_queued + lost, lost ideally ==
    not_republished (the messages whose last publish the broker nacked and that were never
    published again). ``still_queued`` is ``None`` where the queues could not be read; then
    ``lost`` is unknown too, never guessed."""

    sent: int
    confirmed: int | None
    nacked: int
    """Messages the broker nacked, each counted once however often it was published again."""
    received: int
    """Unique messages received."""
    duplicates: int
    still_queued: int | None
    lost: int | None
    """sent - received - still_queued, floored at 0."""
    unexplained: int | None
    """|sent - not_republished - received - still_queued|: messages the counts cannot account
    for."""
    balanced: bool
    not_republished: int = 0
    """Of the nacked messages, those not published again after their last nack."""
    unknown: int | None = None
    """Where a load agent was lost: messages whose fate it took with it (what it sent or
    received after its last reading), unknown rather than lost; else ``None``."""
    published: int | None = None
    """Messages published where each was copied to several subscriptions (then ``sent``,
    ``received``, ``still_queued`` and ``lost`` count copies); else ``None``."""
    subscriptions: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per subscription queue: copies routed to it, received, duplicates, queued, lost."""

    def explain(self) -> str:
        """One line saying whether the books balance and, if not, where they don't."""
        line = self._explain()
        if self.published is None:
            return line
        return f"published {self.published} messages as {self.sent} copies to subscriptions: " \
               + line

    def _explain(self) -> str:
        if self.unknown is not None:
            if not self.unknown:
                gap = "nothing missing in what the agents reported"
            elif self.received + (self.still_queued or 0) > self.sent:
                gap = (f"{self.unknown} more received or queued than the readings show sent "
                       f"(sent by a lost agent after its last reading)")
            else:
                gap = f"{self.unknown} unknown, not lost"
            return (f"sent {self.sent}, received {self.received}, queued {self.still_queued} "
                    f"({self._nacks()}): {gap}; a lost agent's sends and receipts after its "
                    f"last reading are not known"
                    + (f"; {self.duplicates} duplicate deliveries" if self.duplicates else ""))
        if self.still_queued is None:
            duplicates = f"; {self.duplicates} duplicate deliveries" if self.duplicates else ""
            return (f"sent {self.sent}, received {self.received}, {self._nacks()}; still "
                    f"queued unknown (the queues could not be read), so loss is unknown"
                    f"{duplicates}")
        surplus = self.received + self.still_queued > self.sent
        if surplus:
            head = (
                f"sent {self.sent} < received {self.received} + queued {self.still_queued}"
                f" ({self._nacks()})"
            )
        else:
            head = (
                f"sent {self.sent} = received {self.received} + queued {self.still_queued}"
                f" + lost {self.lost} ({self._nacks()})"
            )
        problems = []
        if surplus:
            problems.append(
                f"{self.unexplained} more messages received or queued than sent and not nacked"
            )
        elif self.lost > self.not_republished:
            problems.append(f"{self.unexplained} messages unaccounted for")
        elif self.lost < self.not_republished:
            problems.append(f"{self.unexplained} nacked messages were received or queued anyway")
        if self.duplicates:
            problems.append(f"{self.duplicates} duplicate deliveries")
        if self.confirmed is not None:
            unsettled = self.sent - self.confirmed - self.not_republished
            if unsettled > 0:
                problems.append(f"{unsettled} sends neither confirmed nor nacked")
            elif unsettled < 0:
                problems.append(f"confirms + nacks exceed sends by {-unsettled}")
        return f"{head}: {'; '.join(problems) if problems else 'balanced'}"

    def _nacks(self) -> str:
        return f"nacked {self.nacked}, not republished {self.not_republished}"


def reconcile(
    sent: int,
    confirmed: int | None,
    nacked: int,
    received_unique: int,
    duplicates: int,
    still_queued: int | None,
    not_republished: int | None = None,
    agents_lost: bool = False,
    published: int | None = None,
) -> Reconciliation:
    """Balance what was sent against what was received, left queued and nacked by the broker.

    nacked counts messages (each once); not_republished, those of them not published again
    after their last nack (None: none was published again, so all of them). duplicates should
    include both local and cross-tracker duplicates. balanced means every unreceived, unqueued
    message was nacked last and nothing arrived twice; confirmed (None when publisher confirms
    are off) only feeds explain(). ``published``: messages, where ``sent`` counts their copies
    to subscriptions. With ``agents_lost`` (sent and received then hold a lost
    agent's figures up to its last reading) the gap is ``unknown``, and nothing is called lost.
    """
    not_republished = nacked if not_republished is None else not_republished
    for name, value in (
        ("sent", sent),
        ("nacked", nacked),
        ("not_republished", not_republished),
        ("received_unique", received_unique),
        ("duplicates", duplicates),
        ("still_queued", still_queued or 0),
    ):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if confirmed is not None and confirmed < 0:
        raise ValueError(f"confirmed must be >= 0, got {confirmed}")
    if still_queued is None:
        return Reconciliation(sent=sent, confirmed=confirmed, nacked=nacked,
                              received=received_unique, duplicates=duplicates, still_queued=None,
                              lost=None, unexplained=None, balanced=False,
                              not_republished=not_republished, published=published)
    balance = sent - received_unique - still_queued
    unexplained = abs(balance - not_republished)
    if agents_lost:
        return Reconciliation(sent=sent, confirmed=confirmed, nacked=nacked,
                              received=received_unique, duplicates=duplicates,
                              still_queued=still_queued, lost=None, unexplained=None,
                              balanced=False, not_republished=not_republished,
                              unknown=unexplained, published=published)
    return Reconciliation(
        sent=sent,
        confirmed=confirmed,
        nacked=nacked,
        received=received_unique,
        duplicates=duplicates,
        still_queued=still_queued,
        lost=max(balance, 0),
        unexplained=unexplained,
        balanced=unexplained == 0 and duplicates == 0,
        not_republished=not_republished,
        published=published,
    )
