"""What a campaign records of each cell: its status and verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.specs.campaign import Cell


@dataclass
class CellRecord:
    """A cell's state: ``done``, ``failed``, ``interrupted`` or ``pending``; its verdict."""

    cell: Cell
    status: str = "pending"
    passed: bool | None = None
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        """This record as ``campaign.json`` keeps it."""
        return {"id": self.cell.id, "scenario": str(self.cell.scenario),
                "overrides": self.cell.overrides, "repetition": self.cell.repetition,
                "status": self.status, "passed": self.passed, "reason": self.reason}
