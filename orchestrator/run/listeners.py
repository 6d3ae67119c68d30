"""What one second of a run hands to everything that follows it.

The run loop reads its sources once a second and builds one :class:`TickRecord`; everything
that consumes a second (the run directory's rows, the rows kept in memory for the schedule and
the step table, the terminal view and the page's feed, ``/metrics``, the scaler, the member
watch) is a :class:`TickListener` registered at setup in :class:`Listeners`. A new feature adds
a listener, not a branch in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.run.sampling import Tick
from orchestrator.specs import plan as plans
from topologies.base import BrokerSample


@dataclass(frozen=True)
class TickRecord:
    """One second of the run: its figures and the rows they make.

    ``phase`` is ``None`` while the queues drain after the load; ``label`` is what the views
    show of the second ("running", "paused", "draining"). ``broker`` is this second's broker
    sample (``None``: it missed), ``latest`` the last one that arrived (its running flags stand
    while samples miss). ``errors`` are the agents' last errors, by agent."""

    elapsed_s: float
    phase: plans.Phase | None
    label: str
    tick: Tick
    row: dict[str, Any]
    member_rows: list[dict[str, Any]]
    host_rows: list[dict[str, Any]]
    agent_rows: list[dict[str, Any]]
    broker: BrokerSample | None
    latest: BrokerSample | None
    errors: dict[int, str]

    @property
    def running(self) -> list[int]:
        """The indexes of the members running in the latest sample."""
        return [i for i, m in enumerate(self.latest.members if self.latest else []) if m.running]


class TickListener(Protocol):
    """Something that follows the run second by second."""

    def on_tick(self, record: TickRecord) -> None:
        """Take one second of the run (in the loop's thread; quick, never blocking)."""


class Listeners:
    """The run's listeners, called in the order they were registered."""

    def __init__(self) -> None:
        self.listening: list[TickListener] = []

    def add(self, listener: TickListener) -> TickListener:
        """Register ``listener`` (after the ones already there); returns it."""
        self.listening.append(listener)
        return listener

    def tick(self, record: TickRecord) -> None:
        """Hand ``record`` to every listener."""
        for listener in self.listening:
            listener.on_tick(record)
