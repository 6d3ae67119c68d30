"""What the run directory keeps of each second: the rows of ``ticks``, ``members``, ``hosts``
and ``agents`` (see :mod:`orchestrator.run.rows` for what each holds), and the text of each
new agent error as an event (the rows count errors; the event says what they were)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.run.listeners import TickRecord
from results.rundir.tables import RunWriter


class RunDirRows:
    """Writes each second's rows into the run directory (a listener)."""

    def __init__(self, writer: RunWriter):
        self.writer = writer

    def on_tick(self, record: TickRecord) -> None:
        """Append the second's rows to their tables."""
        self.writer.row("ticks", record.row)
        for table, rows in (("members", record.member_rows), ("hosts", record.host_rows),
                            ("agents", record.agent_rows)):
            for row in rows:
                self.writer.row(table, row)


class AgentErrors:
    """An ``agent_error`` event each time an agent's last error is a new text: the agent, its
    errors so far and the text (a listener). An error repeated with the same text is only
    counted, in the ``agents`` rows; at most one text per agent a second is seen."""

    def __init__(self, event: Callable[..., Any]):
        self.event = event
        self.said: dict[int, str] = {}

    def on_tick(self, record: TickRecord) -> None:
        """Record the agents' last errors that were not recorded before."""
        if not record.errors:
            return
        counts = {row["agent"]: row["errors"] for row in record.agent_rows}
        for agent, text in record.errors.items():
            if self.said.get(agent) != text:
                self.said[agent] = text
                self.event("agent_error", agent=agent, errors=counts.get(agent), error=text)
