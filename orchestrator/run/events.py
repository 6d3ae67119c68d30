"""The run's events: each one into ``events.jsonl`` and the page's feed, and the ones a person
watching needs (:data:`SHOWN_EVENTS`) onto the terminal view."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

from orchestrator.clock import Clock
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.web.feed import RunFeed
from results.rundir.tables import RunWriter

SHOWN_EVENTS = frozenset((
    "provision", "members_up", "agents_up", "step", "accounting", "teardown", "scale_decision",
    "scale_failed", "member_started", "rebalanced", "member_draining", "member_stopped",
    "error", "clocks", "queues_unchecked", "probe", "capacity", "web", "agent_lost",
    "member_lost", "member_back", "receivers_not_ready", "broker"))


class RunEvents:
    """Records events as ``events(kind, **fields)`` once the run directory is open
    (:meth:`open`); the commands a provisioner runs on hosts before that (asking whether members
    run) are kept and written first."""

    def __init__(self, feed: RunFeed, state: ViewState, view: LiveView, clock: Clock):
        self.feed, self.state, self.view, self.clock = feed, state, view, clock
        self.writer: RunWriter | None = None
        self._early: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def open(self, writer: RunWriter) -> None:
        """The run directory is open: write the remote commands run before, in order."""
        with self._lock:
            self.writer = writer
            for fields in self._early:
                writer.event("remote_command", **fields)
            self._early.clear()

    def __call__(self, kind: str, **fields: Any) -> None:
        assert self.writer is not None, "an event before the run directory is open"
        record = self.writer.event(kind, **fields)
        self.feed.event(record)
        if kind in SHOWN_EVENTS:
            text = record.get("explain") or "; ".join(
                ", ".join(map(str, v)) if isinstance(v, list) else f"{k}={v}"
                for k, v in fields.items() if k != "agents")
            self.state.last_event = f"{kind}: {text}"
            wall = datetime.fromtimestamp(self.clock.time()).strftime("%H:%M:%S")
            self.view.say(f"[dim]{wall}[/] {kind}: {text}", event=kind)

    def remote_command(self, result) -> None:
        """Keep every command a provisioner ran on a host, with its exit status and output."""
        fields = {"t": time.time(), "host": result.host, "command": result.command,
                  "status": result.status, "seconds": round(result.seconds, 3),
                  "stdout": result.stdout[-2000:], "stderr": result.stderr[-2000:]}
        with self._lock:
            if self.writer is None:
                self._early.append(fields)
            else:
                self.writer.event("remote_command", **fields)
