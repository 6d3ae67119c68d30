"""Load plans as pure functions of elapsed time: no clock reads, no I/O.

A plan's steps (absolute or ``+increment`` rates, held, repeated, ramped, or swept over client
counts) expand into a flat list of :class:`Phase` objects; the controller asks
:func:`phase_at` which one applies at second ``t`` and :func:`rate_at` what rate it asks for
then. A consumer processing-time profile and message sizes over time expand the same way
(:func:`delay_phases`, :func:`size_phases`).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.specs.message import SizeStep
from orchestrator.specs.scenario import BacklogSpec, DelayStep, StepSpec


@dataclass(frozen=True)
class Phase:
    """One held value: step ``index`` (1-based, counting repeats and sweep counts) from
    ``start_s`` to ``end_s``, moving linearly from ``from_rate`` when it ramps; ``senders`` is
    the number of active senders (``None``: all), ``receivers`` of receivers started
    (``None``: as before)."""

    index: int
    rate_per_sender: float
    start_s: float
    end_s: float
    from_rate: float | None = None
    senders: int | None = None
    backlog: BacklogSpec | None = None  # a backlog built and drained within this phase
    receivers: int | None = None

    def rate_at(self, elapsed_s: float) -> float:
        """The per-sender rate ``elapsed_s`` into the run (inside this phase)."""
        if self.from_rate is None:
            return self.rate_per_sender
        share = min(1.0, max(0.0, (elapsed_s - self.start_s) / (self.end_s - self.start_s)))
        return self.from_rate + (self.rate_per_sender - self.from_rate) * share


def expand(steps: list[StepSpec]) -> list[Phase]:
    """Flatten steps into phases; relative rates add to the previous phase's rate (floor 0)."""
    phases: list[Phase] = []
    rate = 0.0
    clock = 0.0
    for step in steps:
        counts = step.senders if isinstance(step.senders, list) else [step.senders]
        started = step.receivers if isinstance(step.receivers, list) else \
            [step.receivers] * len(counts)
        for _ in range(step.repeat):
            for senders, receivers in zip(counts, started):
                previous = rate
                rate = step.rate_per_sender.after(rate)
                phases.append(Phase(len(phases) + 1, rate, clock, clock + step.hold,
                                    previous if step.ramp else None, senders, step.backlog,
                                    receivers))
                clock += step.hold
    return phases


def delay_phases(steps: list[DelayStep]) -> list[Phase]:
    """A consumer processing-time profile as phases whose "rate" is the delay in seconds."""
    return _profile([(step.delay, step.hold, step.ramp) for step in steps])


def size_phases(steps: list[SizeStep]) -> list[Phase]:
    """Message sizes over time as phases whose "rate" is the size in bytes."""
    return _profile([(float(step.size), step.hold, False) for step in steps])


def _profile(steps: list[tuple[float, float, bool]]) -> list[Phase]:
    """Values held one after another (value, hold, ramping from the previous one) as
    phases."""
    phases: list[Phase] = []
    clock, last = 0.0, 0.0
    for value, hold, ramp in steps:
        phases.append(Phase(len(phases) + 1, value, clock, clock + hold,
                            last if ramp else None))
        clock += hold
        last = value
    return phases


def phase_at(phases: list[Phase], elapsed_s: float) -> Phase | None:
    """The phase in force ``elapsed_s`` seconds into the run, or ``None`` once the plan is over."""
    for phase in phases:
        if phase.start_s <= elapsed_s < phase.end_s:
            return phase
    return None


def value_at(phases: list[Phase], elapsed_s: float, default: float = 0.0) -> float:
    """The value a profile asks for at ``elapsed_s``; after its end the last value stays."""
    phase = phase_at(phases, elapsed_s)
    if phase is not None:
        return phase.rate_at(elapsed_s)
    return phases[-1].rate_per_sender if phases and elapsed_s >= phases[-1].end_s else default


def duration(phases: list[Phase]) -> float:
    """Total planned load time in seconds."""
    return phases[-1].end_s if phases else 0.0
