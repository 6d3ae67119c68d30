"""What the live page shows, kept where the page's requests can read it.

The controller hands over what it computes anyway (its tick and member rows, its events, each
step's row when the step ends, the accounting); nothing here is computed for the page, and a
request only slices lists that the controller appends to. A :class:`Board` is what one web
server shows: the run in progress (or last run) and, for a campaign, its cells.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from results.rundir.steps import MESSAGES

#: The tick columns the page charts, in the order it receives them.
TICK_COLUMNS = ("t", "elapsed_s", "phase", "target_rate", "send_rate", "receive_rate",
                "queue_depth", "backlog", "latency_p50_ms", "latency_p99_ms", "errors",
                "reconnects", "members_running", "cancels", "blocked", "blocked_s",
                "confirm_p50_ms", "confirm_p99_ms", "sending", "consuming", "queues_in_use")
MEMBER_COLUMNS = ("elapsed_s", "member", "running", "cpu_percent", "cpu_quota_cores")
MARKED_EVENTS = frozenset((
    "step", "pause", "members_up", "member_started", "member_stopped", "member_draining",
    "member_killed", "member_restarted", "member_lost", "member_back", "scale_decision",
    "scale_failed", "fault", "fault_cleared", "fault_failed", "memory_alarm", "queues_deleted",
    "quorum_restored", "senders_stop", "drained", "error", "probe", "capacity", "accounting",
    "exit", "agent_lost"))


@dataclass
class RunFeed:
    """One run as the page sees it. ``ticks`` and ``members`` are the controller's own rows
    (shared, only ever appended to); ``phases`` the plan's steps as followed so far."""

    run_id: str
    scenario: str
    planned_s: float
    ticks: list[dict[str, Any]] = field(default_factory=list)
    members: list[dict[str, Any]] = field(default_factory=list)
    phases: list[Any] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    accounting: dict[str, Any] | None = None
    outcome: str = "running"
    label: str = "starting"
    run_dir: Path | None = None
    analysis: list[str] = field(default_factory=list)  # plots of a finished run
    broker: str = ""  # what the broker said it is (the ``broker`` event's label)
    emulated: bool = False  # ... a test emulator: its CPU and rates are not the product's
    terms: dict[str, str] = field(default_factory=lambda: asdict(MESSAGES))  # rate unit, roles

    def event(self, record: dict[str, Any]) -> None:
        """Keep an event the page marks or lists; the ``broker`` event names the broker."""
        if record.get("kind") == "broker":
            self.broker, self.emulated = record.get("label", ""), bool(record.get("emulated"))
        if record.get("kind") in MARKED_EVENTS:
            self.events.append(record)

    def since(self, ticks: int = 0, members: int = 0, events: int = 0) -> dict[str, Any]:
        """The page's view from the given positions on: the run's header, the rows, events
        and steps it has not had yet (steps and phases whole: a few dozen), and where to
        continue."""
        tick_rows, member_rows = self.ticks[ticks:], self.members[members:]
        new_events = self.events[events:]
        return {
            "run": {"run_id": self.run_id, "scenario": self.scenario,
                    "planned_s": self.planned_s, "outcome": self.outcome, "label": self.label,
                    "analysis": self.analysis, "broker": self.broker,
                    "emulated": self.emulated, "terms": self.terms},
            "ticks": [[_json(row.get(c)) for c in TICK_COLUMNS] for row in tick_rows],
            "tick_columns": TICK_COLUMNS,
            "members": [[_json(row.get(c)) for c in MEMBER_COLUMNS] for row in member_rows],
            "member_columns": MEMBER_COLUMNS,
            "events": new_events,
            "phases": [_phase(p) for p in list(self.phases)],
            "steps": list(self.steps),
            "accounting": self.accounting,
            "next": {"ticks": ticks + len(tick_rows), "members": members + len(member_rows),
                     "events": events + len(new_events)},
        }


def _json(value: Any) -> Any:
    """A figure as JSON can carry it: an infinite or NaN reading is unknown (null)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _phase(phase: Any) -> dict[str, Any]:
    """A plan step as the page marks it."""
    fields = phase if isinstance(phase, dict) else phase.__dict__
    return {k: fields.get(k) for k in ("index", "start_s", "end_s", "rate_per_sender",
                                      "senders")}


@dataclass
class Board:
    """What one web server shows: the current run (``None`` before the first) and, for a
    campaign, its cells."""

    run: RunFeed | None = None
    campaign: Callable[[], dict[str, Any]] | None = None  # its cells, counts and time left
    asked_at: float | None = None  # monotonic time of the page's last request
    ended_shown: threading.Event = field(default_factory=threading.Event)  # the run's end seen

    def view(self, ticks: int = 0, members: int = 0, events: int = 0,
             run_id: str | None = None) -> dict[str, Any]:
        """The page's document; positions reset when the run is another than ``run_id``."""
        self.asked_at = time.monotonic()
        run = self.run
        if run is not None and run_id not in (None, run.run_id):
            ticks = members = events = 0
        document = run.since(ticks, members, events) if run else {"run": None}
        document["campaign"] = self.campaign() if self.campaign else None
        if run is not None and run.outcome != "running":
            self.ended_shown.set()
        return document

    def linger(self, seconds: float) -> None:
        """Wait (at most ``seconds``) for a page that is watching to fetch the run's end, so
        that it shows the outcome and accounting before the server stops; no wait when no
        page asked in the last ``seconds``."""
        if self.asked_at is not None and time.monotonic() - self.asked_at < seconds:
            self.ended_shown.wait(seconds)
