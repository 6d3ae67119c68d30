"""Figures derived from a run's event log and ticks: reaction time of each scale-out, recovery
after each fault, backlog peak and drain time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from results.rundir.manifest import RunManifest

RECOVERED_WITHIN = 0.05  # back within 5% of target
RECOVERED_FOR_S = 3  # for this many ticks in a row
DRAINED_SHARE = 0.1  # a backlog counts as drained under this share of its peak
FAULT_EVENTS = ("fault", "member_lost")  # a scheduled fault; a member lost unscheduled


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run's events, skipping a torn last line (a crash mid-write)."""
    events = []
    try:
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def recovered_at(ticks: list[dict], after_s: float) -> float | None:
    """Elapsed second from which the achieved rate stays within 5% of a non-zero target for
    3 ticks in a row, looking only after ``after_s``. A tick whose rates are unknown breaks
    the run: recovery is shown by known seconds."""
    good = 0
    for tick in ticks:
        if tick["elapsed_s"] <= after_s or tick["target_rate"] <= 0:
            continue
        rates = (tick["send_rate"], tick["receive_rate"])
        good = good + 1 if None not in rates and \
            min(rates) >= (1 - RECOVERED_WITHIN) * tick["target_rate"] else 0
        if good == RECOVERED_FOR_S:
            return tick["elapsed_s"] - (RECOVERED_FOR_S - 1)
    return None


def reaction_times(manifest: RunManifest, events: list[dict], ticks: list[dict]
                   ) -> list[dict]:
    """Per scale-out: threshold crossed -> decision -> member serving -> achieved recovered."""
    window = manifest.scale_out_window_s
    t0 = next((e["t"] for e in events if e["kind"] == "step"), None)
    out = []
    for decision in (e for e in events if e["kind"] == "scale_decision" and e["action"] == "out"):
        started = next((e for e in events if e["kind"] == "member_started"
                        and e["t"] >= decision["t"]), None)
        if started is None or t0 is None:
            continue
        serving_s = started["t"] - t0
        recovered = recovered_at(ticks, serving_s)
        crossed_s = decision["elapsed_s"] - window
        out.append({"member": started.get("member"), "decision_s": decision["elapsed_s"],
                    "to_decision_s": window, "to_serving_s": started["seconds"],
                    "to_recovered_s": None if recovered is None else recovered - serving_s,
                    "total_s": None if recovered is None else recovered - crossed_s})
    return out


def fault_recoveries(events: list[dict], ticks: list[dict]) -> list[dict]:
    """Per fault: seconds until the achieved rate is back within 5% of target, and until then
    or until the fault was cleared, whichever is later (or the end of the load), the seconds
    with nothing received while senders had a target (the receive gap) and the seconds
    publishers were blocked by the broker (a fault that took effect late, after three good
    ticks, still counts what it held). A fault is a scheduled
    one (``fault`` event) or a member that stopped serving while the run did not stop it
    (``member_lost``, named by its member)."""
    t0 = next((e["t"] for e in events if e["kind"] == "step"), None)
    out = []
    for fault in (e for e in events if e["kind"] in FAULT_EVENTS):
        at = fault.get("elapsed_s", fault["t"] - t0 if t0 is not None else 0.0)
        recovered = recovered_at(ticks, at)
        cleared = next((e for e in events if e["kind"] == "fault_cleared"
                        and e.get("action") == fault.get("action") and e["t"] >= fault["t"]),
                       None)
        until = recovered
        if recovered is not None and cleared is not None:  # in force until cleared
            cleared_s = cleared.get("elapsed_s", cleared["t"] - t0 if t0 is not None else 0.0)
            until = max(recovered, cleared_s)
        out.append({"fault": fault.get("action", fault["kind"]), "at_s": at,
                    "recovery_s": None if recovered is None else recovered - at,
                    **({"member": fault["member"]} if fault["kind"] == "member_lost" else {}),
                    **gap_and_blocked(ticks, at, until)})
    return out


def gap_and_blocked(ticks: list[dict], after_s: float, until_s: float | None) -> dict[str, Any]:
    """Seconds after ``after_s`` (up to ``until_s``, else to the last tick with a target) with
    a receive rate of zero while senders had a target, and the growth of the blocked seconds
    over the same span (``None`` in runs that did not record them)."""
    inside = [t for t in ticks if t["elapsed_s"] > after_s and t["target_rate"] > 0
              and (until_s is None or t["elapsed_s"] <= until_s)]
    gap = sum(1 for t in inside if t["receive_rate"] == 0)
    known = [t["blocked_s"] for t in inside if t.get("blocked_s") is not None]
    before = [t["blocked_s"] for t in ticks if t["elapsed_s"] <= after_s
              and t.get("blocked_s") is not None]  # cumulative: its latest value is its peak
    blocked = None if not known else round(max(known) - max(before, default=0.0), 1)
    return {"receive_gap_s": float(gap), "blocked_s": blocked}


def backlog(ticks: list[dict]) -> dict[str, Any]:
    """Peak queue depth, when it peaked, and how long until it was back under a tenth of it
    (a queue in use is rarely exactly empty); from the ticks whose depth is known."""
    known = [t for t in ticks if t["queue_depth"] is not None]
    if not known:
        return {"peak": 0, "peak_at_s": None, "drain_s": None}
    peak = max(known, key=lambda t: t["queue_depth"])
    drained = next((t for t in known if t["elapsed_s"] > peak["elapsed_s"]
                    and t["queue_depth"] <= DRAINED_SHARE * peak["queue_depth"]), None)
    return {"peak": peak["queue_depth"], "peak_at_s": peak["elapsed_s"],
            "drain_s": None if drained is None else drained["elapsed_s"] - peak["elapsed_s"]}
