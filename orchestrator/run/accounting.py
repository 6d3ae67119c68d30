"""The end-of-run accounting: every message sent is received, still queued, or lost, and the
run says which (:func:`drivers.accounting.reconcile`), from the agents' own records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drivers import protocol
from drivers.accounting import Reconciliation, merge_exports, reconcile
from orchestrator.specs.scenario import ScenarioSpec


@dataclass
class Accounted:
    """The reconciliation, the figures beside it, and which sequence numbers each producer
    is missing."""

    result: Reconciliation
    extras: dict[str, Any]
    missing: dict[int, Any]


def account(reports: Sequence[protocol.Accounting], snapshots: Sequence[protocol.Snapshot],
            scenario: ScenarioSpec, queued: int | None) -> Accounted:
    """Reconcile the agents' accounting reports and final snapshots with the messages still
    queued (``None``: unknown)."""
    merged = merge_exports([r.bitmaps for r in reports])
    sent_per_producer = {k: v for r in reports for k, v in r.sent.items()}
    confirms = scenario.workload.confirms
    nacked, repeated = _sum(snapshots, "nacked"), _sum(snapshots, "nacks_repeated")
    result = reconcile(
        sent=sum(sent_per_producer.values()),
        confirmed=_sum(snapshots, "confirmed") if confirms else None,
        nacked=nacked,
        received_unique=merged.unique,
        duplicates=_sum(snapshots, "duplicates") + merged.cross_duplicates,
        still_queued=queued,
        not_republished=nacked + repeated - _sum(snapshots, "nacks_republished"))
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


