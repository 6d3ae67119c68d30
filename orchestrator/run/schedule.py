"""What the controller follows second by second: a fixed plan, expanded before the run, or a
plan that decides its next phase from what the run measured (``surge capacity``'s search).

A phase of index 0 in a schedule is a pause: no step, senders held back, the second recorded
as phase 0 (like the drain at the end, it is in no step's figures)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.specs import plan as plans
from results.rundir.steps import StepRow, drain_row, step_rows

if TYPE_CHECKING:
    from orchestrator.run.faults import FaultInjector
    from orchestrator.run.listeners import TickRecord


@dataclass
class History:
    """The rows the controller has recorded so far (its own lists, read only), and per second
    the agents' CPU% summed (over the agents that reported it)."""

    ticks: list[dict] = field(default_factory=list)
    member_rows: list[dict] = field(default_factory=list)
    host_rows: list[dict] = field(default_factory=list)
    agent_rows: list[dict] = field(default_factory=list)  # each agent's CPU% per second
    generator_cpu: list[tuple[float, float]] = field(default_factory=list)  # (elapsed_s, % summed)

    def step_rows(self, phases: list[plans.Phase], settle_s: float) -> list[StepRow]:
        """The step rows of ``phases`` from what was recorded."""
        return step_rows([asdict(p) for p in phases], self.ticks, self.member_rows, settle_s,
                         self.host_rows, self.agent_rows)

    def drain_row(self, phases: list[plans.Phase]) -> StepRow | None:
        """The row of the drain after ``phases`` (``None``: none recorded)."""
        return drain_row([asdict(p) for p in phases], self.ticks, self.member_rows,
                         self.host_rows, self.agent_rows)

    def on_tick(self, record: TickRecord) -> None:
        """Keep the second's rows, and its agents' CPU% summed where any agent reported it
        (a listener: the schedule and the step table read what it keeps)."""
        self.ticks.append(record.row)
        self.member_rows.extend(record.member_rows)
        self.host_rows.extend(record.host_rows)
        self.agent_rows.extend({"elapsed_s": row["elapsed_s"], "agent": row["agent"],
                                "cpu_percent": row["cpu_percent"]} for row in record.agent_rows)
        generator = [row["cpu_percent"] for row in record.agent_rows
                     if row["cpu_percent"] is not None]
        if generator:
            self.generator_cpu.append((record.elapsed_s, sum(generator)))


class Schedule(Protocol):
    """A plan the controller follows."""

    @property
    def phases(self) -> list[plans.Phase]:
        """The steps so far (all of them, for a fixed plan), as ``run.json`` records them."""

    @property
    def planned_s(self) -> float:
        """The longest the load part may take."""

    def phase_at(self, elapsed_s: float, history: History) -> plans.Phase | None:
        """The phase in force ``elapsed_s`` into the load; ``None`` once the plan is over."""

    def manifest_fields(self) -> dict[str, Any]:
        """What ``run.json`` records of the schedule besides its phases."""

    def attach(self, event: Callable[..., None]) -> None:
        """Record what the schedule decides through ``event(kind, **fields)``."""

    def attach_faults(self, faults: FaultInjector) -> None:
        """Hand the schedule the run's fault injector (a schedule that holds faults over its
        phases adds them there)."""


class FixedSchedule:
    """The scenario's plan, expanded before the run."""

    def __init__(self, phases: list[plans.Phase]):
        self._phases = phases

    @property
    def phases(self) -> list[plans.Phase]:
        return self._phases

    @property
    def planned_s(self) -> float:
        return plans.duration(self._phases)

    def phase_at(self, elapsed_s: float, history: History) -> plans.Phase | None:
        return plans.phase_at(self._phases, elapsed_s)

    def manifest_fields(self) -> dict[str, Any]:
        return {}

    def attach(self, event: Callable[..., None]) -> None:
        pass

    def attach_faults(self, faults: FaultInjector) -> None:
        pass


def pause(start_s: float, end_s: float) -> plans.Phase:
    """A phase without load: every sender held back."""
    return plans.Phase(0, 0.0, start_s, end_s, senders=0)
