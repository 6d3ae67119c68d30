"""The end-of-run accounting: every message sent is received, still queued, or lost, and the
run says which (:func:`drivers.accounting.reconcile`), from the agents' own records.

Published to an exchange, a message is copied to every queue its routing key reaches, and each
queue is a subscription whose receivers get one copy. The accounting then counts copies: which
queues each message reached is known without asking anyone (the key a message took is a
function of its producer and sequence number, :class:`drivers.routing.KeyPicker`, and where a
key goes is the topology's bindings, :meth:`TopologySpec.routes`), so each subscription is
balanced exactly: routed = received + queued + lost. A stream keeps its messages and each of
its receivers reads all of them from its own offset: every receiver is a subscription, balanced
once it has read every copy routed to it; what it has not read may still be in the stream or
dropped by its retention, which the broker does not say, so the balance is then unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drivers import protocol
from drivers.accounting import MergedCounts, Reconciliation, merge_exports, reconcile
from drivers.routing import KeyPicker
from orchestrator.agents.placement import reader_group
from orchestrator.run.agentloss import LostAgent
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec


@dataclass
class Accounted:
    """The reconciliation, the figures beside it, and which sequence numbers each producer
    is missing (none said when an agent was lost: its receivers may have had them)."""

    result: Reconciliation
    extras: dict[str, Any]
    missing: dict[int, Any]


@dataclass(frozen=True)
class Routing:
    """Where a run's messages went: ``routes[k]`` is the set of the workload's queues that
    routing key ``k`` reaches, and ``picker`` which key each message took."""

    routes: tuple[frozenset[str], ...]
    picker: KeyPicker
    readers: int = 0  # a stream's or a queue per receiver's: each receiver gets every message

    @classmethod
    def of(cls, scenario: ScenarioSpec, route: Any, queues: Sequence[str],
           each_reader: bool = False) -> Routing | None:
        """The routing of ``scenario`` (``None``: the default exchange to queues, one copy of
        each message); ``route(exchange, key, headers)`` is :meth:`TopologySpec.routes` and
        ``queues`` the workload's queues; with ``each_reader`` (a stream, a queue per
        receiver) every receiver is a subscription of its own."""
        workload = scenario.workload
        readers = workload.receivers if each_reader else 0
        if not workload.exchange:
            return cls((frozenset(queues),), KeyPicker(1), readers) if each_reader else None
        mine = frozenset(queues)
        keys, headers = workload.keys, workload.message.properties.headers
        return cls(tuple(route(workload.exchange, key, headers) & mine for key in keys),
                   KeyPicker(len(keys), workload.key_order, float(workload.zipf_exponent)),
                   readers)

    @property
    def queues(self) -> list[str]:
        """Every queue some key reaches."""
        return sorted(set().union(*self.routes))

    @property
    def subscriptions(self) -> dict[str, str]:
        """Each subscription and the queue it reads: every queue, or a stream's readers."""
        if not self.readers:
            return {queue: queue for queue in self.queues}
        return {reader_group(queue, i): queue for queue in self.queues
                for i in range(1, self.readers + 1)}

    def expected(self, queue: str, producer_id: int, sent: int) -> int:
        """The bitmap of the sequence numbers of ``producer_id`` routed to ``queue``."""
        takes = [queue in reached for reached in self.routes]
        if all(takes):
            return (1 << sent) - 1
        if not any(takes):
            return 0
        bits = bytearray((sent + 7) // 8)
        for first, picks in self._picks(producer_id, sent):
            for i, key in enumerate(picks, first):
                if takes[key]:
                    bits[i >> 3] |= 1 << (i & 7)
        return int.from_bytes(bits, "little")

    def unroutable(self, sent_per_producer: dict[int, int]) -> int:
        """Messages whose key reaches none of the workload's queues."""
        if all(self.routes):
            return 0
        nowhere = [not reached for reached in self.routes]
        return sum(sum(nowhere[key] for key in picks) for producer, sent in
                   sent_per_producer.items() for _, picks in self._picks(producer, sent))

    def _picks(self, producer_id: int, sent: int, chunk: int = 1 << 20):
        """The keys of messages 0 .. sent - 1 of ``producer_id``, a chunk at a time."""
        for first in range(0, sent, chunk):
            yield first, self.picker.picks(producer_id, first, min(chunk, sent - first))

    def copies_each(self) -> int | None:
        """Copies of every message (a stream's: as many as it has readers), where all keys
        reach as many queues (else ``None``)."""
        sizes = {len(reached) * (self.readers or 1) for reached in self.routes}
        return sizes.pop() if len(sizes) == 1 else None


def routing_of(scenario: ScenarioSpec, topology: TopologySpec) -> Routing | None:
    """The :class:`Routing` of ``scenario`` on ``topology``."""
    queue = topology.queue(scenario.workload.queue)
    return Routing.of(scenario, topology.routes,
                      topology.queue_names(queue.name) if queue else [],
                      each_reader=queue is not None and queue.each_reader)


def copies_each(scenario: ScenarioSpec, topology: TopologySpec) -> int | None:
    """How many copies of each message are received: 1 through the default exchange; through
    an exchange, as many as every key reaches queues alike (``None`` where keys differ); a
    stream's, once by each of its receivers."""
    routing = routing_of(scenario, topology)
    return 1 if routing is None else routing.copies_each()


def account(reports: Sequence[protocol.Accounting], snapshots: Sequence[protocol.Snapshot],
            scenario: ScenarioSpec, queued: int | None,
            lost: Sequence[LostAgent] = (), routing: Routing | None = None,
            per_queue: dict[str, int] | None = None) -> Accounted:
    """Reconcile the agents' accounting reports and final snapshots with the messages still
    queued (``None``: unknown). Agents the run ``lost`` count with their last snapshot (what
    they had sent and received by then); what they did afterwards makes the gap unknown. With
    a ``routing``, copies are counted per subscription (``per_queue``: each queue's depth)."""
    sent_per_producer = {k: v for r in reports for k, v in r.sent.items()}
    if routing is None:
        done = _account_once(reports, snapshots, scenario, queued, lost, sent_per_producer)
    else:
        done = _account_copies(reports, snapshots, scenario, per_queue, lost, routing,
                               sent_per_producer)
    return dataclasses.replace(done, missing={}) if lost else done


def _account_once(reports: Sequence[protocol.Accounting],
                  snapshots: Sequence[protocol.Snapshot], scenario: ScenarioSpec,
                  queued: int | None, lost: Sequence[LostAgent],
                  sent_per_producer: dict[int, int]) -> Accounted:
    """:func:`account` of messages that each reach one queue."""
    merged = merge_exports([bitmaps for r in reports for bitmaps in r.bitmaps.values()])
    confirms = scenario.workload.confirms
    last = [agent.snapshot for agent in lost if agent.snapshot is not None]
    every = [*snapshots, *last]
    nacked, repeated = _sum(every, "nacked"), _sum(every, "nacks_repeated")
    result = reconcile(
        sent=sum(sent_per_producer.values()) + _sum(last, "sent"),
        confirmed=_sum(every, "confirmed") if confirms else None,
        nacked=nacked,
        received_unique=merged.unique + _sum(last, "received") - _sum(last, "duplicates"),
        duplicates=_sum(every, "duplicates") + merged.cross_duplicates,
        still_queued=queued,
        not_republished=nacked + repeated - _sum(every, "nacks_republished"),
        agents_lost=bool(lost))
    missing = {pid: merged.missing(pid, n) for pid, n in sent_per_producer.items()}
    return Accounted(result, _extras(snapshots, scenario), missing)


def _account_copies(reports: Sequence[protocol.Accounting],
                    snapshots: Sequence[protocol.Snapshot], scenario: ScenarioSpec,
                    per_queue: dict[str, int] | None, lost: Sequence[LostAgent],
                    routing: Routing, sent_per_producer: dict[int, int]) -> Accounted:
    """:func:`account` of messages copied to subscriptions: each queue's expected copies
    against what its receivers got and what it still holds. A lost agent's producers are not
    reported: their copies count as its last reading says (sent x copies where every key
    reaches as many queues), what receivers got of them as received, and each
    subscription's gap as unknown, not lost."""
    reads = routing.subscriptions
    groups = sorted(set(reads) | {g for r in reports for g in r.bitmaps if g})
    subscriptions: dict[str, dict[str, int]] = {}
    missing: dict[int, int] = {}
    copies = received = misrouted = duplicates = unreported = 0
    for group in groups:
        queue = reads.get(group, group)
        merged = merge_exports([r.bitmaps[group] for r in reports if group in r.bitmaps])
        routed = got = stray = 0
        for producer, sent in sent_per_producer.items():
            expected = routing.expected(queue, producer, sent)
            seen = merged.bitmaps.get(producer, 0)
            routed += expected.bit_count()
            got += (seen & expected).bit_count()
            stray += (seen & ~expected).bit_count()
            missing[producer] = missing.get(producer, 0) + (expected & ~seen).bit_count()
        unreported += sum(bits.bit_count() for producer, bits in merged.bitmaps.items()
                          if producer not in sent_per_producer)  # a lost agent's
        held = None if per_queue is None else per_queue.get(queue, 0)
        if routing.readers:
            # a stream keeps its messages, and its length is not reported (neither by the
            # management API nor by list_queues): what a reader has not read may be there
            # still, or dropped by retention; unknown either way
            held = 0 if got >= routed else None
        subscriptions[group] = _subscription(routed, got, stray, held, merged, bool(lost))
        copies, received, misrouted = copies + routed, received + got, misrouted + stray
        duplicates += merged.cross_duplicates
    last = [agent.snapshot for agent in lost if agent.snapshot is not None]
    every = [*snapshots, *last]
    nacked, repeated = _sum(every, "nacked"), _sum(every, "nacks_repeated")
    not_republished = nacked + repeated - _sum(every, "nacks_republished")
    each = routing.copies_each()
    result = reconcile(
        sent=copies + _sum(last, "sent") * (each or 0), confirmed=None, nacked=nacked,
        received_unique=received + misrouted + unreported + _sum(last, "received")
        - _sum(last, "duplicates"),
        duplicates=_sum(every, "duplicates") + duplicates,
        still_queued=None if per_queue is None or (not_republished and each is None)
        or any("queued" not in s for s in subscriptions.values())
        else sum(s["queued"] for s in subscriptions.values()),
        not_republished=not_republished * (each or 0), agents_lost=bool(lost),
        published=sum(sent_per_producer.values()) + _sum(last, "sent"))
    extras = _extras(snapshots, scenario)
    extras.update(misrouted=misrouted, unroutable=routing.unroutable(sent_per_producer))
    if routing.readers:
        extras["rereads"] = _sum(snapshots, "rereads")
    return Accounted(dataclasses.replace(result, subscriptions=subscriptions), extras, missing)


def _subscription(routed: int, got: int, stray: int, held: int | None,
                  merged: MergedCounts, agents_lost: bool = False) -> dict[str, int]:
    """One subscription's balance: copies routed to it, received, still queued, lost (with
    an agent lost: of the producers still reporting, and the gap ``unknown``)."""
    out = {"routed": routed, "received": got, "duplicates": merged.cross_duplicates}
    if stray:
        out["misrouted"] = stray
    if held is not None:
        out.update(queued=held, **{"unknown" if agents_lost else "lost":
                                   max(0, routed - got - held)})
    return out


def _extras(snapshots: Sequence[protocol.Snapshot], scenario: ScenarioSpec) -> dict[str, Any]:
    """The figures beside the balance: out of order, redelivered, republished, skipped."""
    extras: dict[str, Any] = {k: _sum(snapshots, k) for k in (
        "out_of_order", "redelivered", "republished", "nacks_republished", "nacks_repeated")}
    extras["skipped_sends"] = _sum(snapshots, "skipped")
    if scenario.workload.message.mandatory:
        extras["returned"] = _sum(snapshots, "returned")
    extras.update({name: count for name in ("requeued", "rejected", "committed")
                   if (count := _sum(snapshots, name))})
    if scenario.workload.pattern == "request-reply":
        extras.update({k: _sum(snapshots, k) for k in ("served", "unmatched", "timeouts")},
                      round_trips=_sum(snapshots, "received"))
    return extras


def _sum(snapshots: Sequence[protocol.Snapshot], name: str) -> int:
    return sum(getattr(s, name) for s in snapshots)


