"""The live view of a campaign: cells done, running and left, the running cell's figures, and
an estimate of the time left."""

from __future__ import annotations

import time
from statistics import fmean
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from orchestrator.run.liveview import ViewState, plain_line
from orchestrator.specs.campaign import Campaign, Cell
from orchestrator.specs.units import format_span

if TYPE_CHECKING:
    from orchestrator.campaign.records import CellRecord
    from results.rundir.manifest import RunManifest

DEFAULT_OVERHEAD_S = 20.0  # per cell until one is measured: agents, drain, accounting


def eta_s(planned_left: list[float], current_planned: float | None, current_elapsed: float,
          overheads: list[float]) -> float:
    """Seconds left: the planned load time of the cells still to run plus the mean measured
    overhead per cell (``DEFAULT_OVERHEAD_S`` until one is measured), less what the running
    cell has done."""
    overhead = fmean(overheads) if overheads else DEFAULT_OVERHEAD_S
    current = 0.0 if current_planned is None else \
        max(0.0, current_planned + overhead - current_elapsed)
    return current + sum(planned + overhead for planned in planned_left)


def recorded_overhead(manifest: RunManifest | None, planned_s: float) -> float | None:
    """Seconds a recorded run took beyond its planned load (from ``started_at`` and
    ``ended_at`` in its run.json), so a resumed campaign's estimate starts from experience."""
    if manifest is None or manifest.started_at is None or manifest.ended_at is None:
        return None
    try:
        took = manifest.ended_at - manifest.started_at
    except TypeError:  # one with a time zone, one without: not a file surge wrote
        return None
    return max(0.0, took.total_seconds() - planned_s)


class CampaignView:
    """Campaign progress: a rich live panel when stdout is a terminal, otherwise one line as
    each cell starts and one as it ends. The cells' own controllers draw nothing."""

    def __init__(self, campaign: Campaign, records: list[CellRecord],
                 console: Console | None = None):
        self.campaign = campaign
        self.records = records
        self.console = console or Console()
        self.fancy = self.console.is_terminal
        self.overheads: list[float] = []
        self.slots: dict[str, float] = {}  # cell id -> wall seconds it took
        self.current: Cell | None = None
        self.current_state: ViewState | None = None
        self.started = time.monotonic()
        self.cell_started = 0.0
        self._live: Live | None = None

    def __enter__(self) -> CampaignView:
        if self.fancy:
            self._live = Live(get_renderable=self.render, console=self.console,
                              refresh_per_second=2)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.__exit__(*exc)
            self._live = None

    def say(self, message: str, style: str | None = None) -> None:
        """A line above the panel (or in the log), taken literally and never wrapped."""
        self.console.print(Text(message, style=style or ""), soft_wrap=True)

    def start(self, cell: Cell, state: ViewState | None) -> None:
        """A cell starts; ``state`` is its controller's view state, read as it runs."""
        self.current, self.current_state = cell, state
        self.cell_started = time.monotonic()
        if not self.fancy:
            self.say(f"{self.counts()}: {cell.id} starting "
                     f"({self.campaign.planned_s(cell):.0f} s planned)")

    def finish(self, record: CellRecord, slot_s: float) -> None:
        """A cell ended; ``slot_s`` is its wall time including topology work around it."""
        self.slots[record.cell.id] = slot_s
        if record.status == "done":
            self.overheads.append(max(0.0, slot_s - self.campaign.planned_s(record.cell)))
        self.current, self.current_state = None, None
        verdict = {True: "pass", False: "fail", None: "-"}[record.passed]
        self.say(f"{record.cell.id}: {record.status}, {verdict}: {record.reason} "
                 f"[{format_span(slot_s)}]")

    def _progress(self) -> tuple[list[str], list[Cell], float]:
        """The records' statuses, the cells left (not the running one) and the seconds left."""
        statuses = [r.status for r in self.records]
        left = [r.cell for r in self.records if r.status != "done"
                and r.cell is not self.current]
        eta = eta_s([self.campaign.planned_s(c) for c in left],
                    self.campaign.planned_s(self.current) if self.current else None,
                    time.monotonic() - self.cell_started, self.overheads)
        return statuses, left, eta

    def counts(self) -> str:
        """``1 done, 1 running, 2 left (0 failed), ~1m20s left``."""
        statuses, left, eta = self._progress()
        running = 1 if self.current else 0
        return (f"{statuses.count('done')} done, {running} running, {len(left)} left "
                f"({statuses.count('failed')} failed), ~{format_span(eta)} left")

    def page(self) -> dict[str, Any]:
        """The campaign as the live page shows it: every cell with its status and verdict,
        the counts, the seconds so far and left (read by the page's server thread)."""
        statuses, left, eta = self._progress()
        current = self.current
        cells = [{"name": r.cell.id,
                  "run_id": r.cell.id if r.status != "pending" or r.cell is current else None,
                  "status": "running" if r.cell is current else r.status,
                  "verdict": {True: "pass", False: "fail", None: None}[r.passed]
                  if r.cell is not current else None, "reason": r.reason,
                  "seconds": self.slots.get(r.cell.id)} for r in self.records]
        return {"name": self.campaign.spec.name, "cells": cells,
                "done": statuses.count("done"), "running": 1 if current else 0,
                "left": len(left), "failed": statuses.count("failed"), "eta_s": eta,
                "elapsed_s": time.monotonic() - self.started}

    def render(self) -> Group:
        """The panel: campaign, counts and time left, the running cell and its figures."""
        head = Text.assemble((f"surge campaign {self.campaign.spec.name}", "bold"),
                             f"  {self.counts()}",
                             f"  elapsed {format_span(time.monotonic() - self.started)}")
        if not self.current:
            return Group(head)
        cell = Text.assemble(("cell ", "bold"), (self.current.id, "cyan"),
                             f"  {time.monotonic() - self.cell_started:.0f}/"
                             f"{self.campaign.planned_s(self.current):.0f} s")
        figures = Text(plain_line(self.current_state) if self.current_state else "", style="dim")
        return Group(head, cell, figures)


