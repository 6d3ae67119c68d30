"""The run directory's rows of each second: ``ticks``, ``members``, ``hosts`` and ``agents``
(see :mod:`orchestrator.run.rows` for what each holds)."""

from __future__ import annotations

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
