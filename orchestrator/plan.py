"""Load plans as pure functions of elapsed time: no clock reads, no I/O.

A plan's steps (absolute or ``+increment`` rates, held and repeated) expand into a flat list of
:class:`Phase` objects; the controller asks :func:`phase_at` which one applies at second ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.specs import StepSpec


@dataclass(frozen=True)
class Phase:
    """One held rate: step ``index`` (1-based, counting repeats) from ``start_s`` to ``end_s``."""

    index: int
    rate_per_sender: float
    start_s: float
    end_s: float


def expand(steps: list[StepSpec]) -> list[Phase]:
    """Flatten steps into phases; relative rates add to the previous phase's rate (floor 0)."""
    phases: list[Phase] = []
    rate = 0.0
    clock = 0.0
    for step in steps:
        text = step.rate_per_sender
        for _ in range(step.repeat):
            rate = max(0.0, rate + float(text)) if text[0] in "+-" else float(text)
            phases.append(Phase(len(phases) + 1, rate, clock, clock + step.hold))
            clock += step.hold
    return phases


def phase_at(phases: list[Phase], elapsed_s: float) -> Phase | None:
    """The phase in force ``elapsed_s`` seconds into the run, or ``None`` once the plan is over."""
    for phase in phases:
        if phase.start_s <= elapsed_s < phase.end_s:
            return phase
    return None


def duration(phases: list[Phase]) -> float:
    """Total planned load time in seconds."""
    return phases[-1].end_s if phases else 0.0
