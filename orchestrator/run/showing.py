"""The terminal view and the page's feed, refreshed from each second of the run."""

from __future__ import annotations

from orchestrator.run.listeners import TickRecord
from orchestrator.run.liveview import LiveView, ViewState
from orchestrator.web.feed import RunFeed


class ViewFeed:
    """Keeps the live view's state and the page's label current, and redraws the view (a
    listener). ``ticks`` are the rows recorded so far (this second's included)."""

    def __init__(self, state: ViewState, view: LiveView, feed: RunFeed, ticks: list[dict]):
        self.state, self.view, self.feed, self.ticks = state, view, feed, ticks

    def on_tick(self, record: TickRecord) -> None:
        """The view's state from the second's row, and the view redrawn."""
        row, state = record.row, self.state
        members = record.latest.members if record.latest else []
        state.__dict__.update(
            step=row["phase"] or state.step, elapsed_s=row["elapsed_s"],
            target_rate=row["target_rate"], send_rate=row["send_rate"],
            measured_target=self.ticks[-2]["target_rate"] if len(self.ticks) > 1 else None,
            receive_rate=row["receive_rate"], members_running=row["members_running"],
            queue_depth=row["queue_depth"], p50_ms=row["latency_p50_ms"],
            p99_ms=row["latency_p99_ms"], backlog=row["backlog"],
            errors=row["errors"], reconnects=row["reconnects"], phase=record.label,
            blocked=row["blocked"], blocked_s=row["blocked_s"], sending=row["sending"],
            consuming=row["consuming"],
            missing=row["agents_missing"] + (1 if row["broker_missing"] else 0),
            member_cpu={m.name: record.tick.member_cpu_percent.get(m.name) if m.running
                        else None for m in members})
        self.feed.label = record.label
        state.received_history.append(row["receive_rate"])
        if record.errors and row["errors"]:
            state.last_event = f"last error: {list(record.errors.values())[-1]}"
        self.view.update(state)
