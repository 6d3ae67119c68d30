"""The end-of-run accounting: every message sent is received, still queued, or lost, and the
run says which (:func:`drivers.accounting.reconcile`), from the agents' own records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drivers import protocol
from drivers.accounting import Reconciliation, merge_exports, reconcile
from orchestrator.run.agentloss import LostAgent
from orchestrator.specs.scenario import ScenarioSpec


@dataclass
class Accounted:
    """The reconciliation, the figures beside it, and which sequence numbers each producer
    is missing."""

    result: Reconciliation
    extras: dict[str, Any]
    missing: dict[int, Any]


def account(reports: Sequence[protocol.Accounting], snapshots: Sequence[protocol.Snapshot],
            scenario: ScenarioSpec, queued: int | None,
            lost: Sequence[LostAgent] = ()) -> Accounted:
    """Reconcile the agents' accounting reports and final snapshots with the messages still
    queued (``None``: unknown). Agents the run ``lost`` count with their last snapshot (what
    they had sent and received by then); what they did afterwards makes the gap unknown."""
    merged = merge_exports([r.bitmaps for r in reports])
    sent_per_producer = {k: v for r in reports for k, v in r.sent.items()}
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
    extras: dict[str, Any] = {k: _sum(snapshots, k) for k in (
        "out_of_order", "redelivered", "republished", "nacks_republished", "nacks_repeated")}
    extras["skipped_sends"] = _sum(snapshots, "skipped")
    if scenario.workload.pattern == "request-reply":
        extras.update({k: _sum(snapshots, k) for k in ("served", "unmatched", "timeouts")},
                      round_trips=_sum(snapshots, "received"))
    return Accounted(result, extras, missing)


def _sum(snapshots: Sequence[protocol.Snapshot], name: str) -> int:
    return sum(getattr(s, name) for s in snapshots)


