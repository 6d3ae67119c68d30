"""What a valid scenario says that is probably not meant: a fault timed after the plan ends
(it never happens) and a step no longer than ``measure.settle`` (it gets no row in the step
table). ``surge validate`` and ``surge run`` show each as one warning line; neither refuses
the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.specs.base import Loc

if TYPE_CHECKING:
    from orchestrator.specs.scenario import ScenarioSpec


def scenario_caveats(scenario: ScenarioSpec) -> list[tuple[Loc, str]]:
    """The warnings of ``scenario``, each at the field it is about."""
    found: list[tuple[Loc, str]] = []
    length, short = 0.0, []
    for i, step in enumerate(scenario.plan):
        counts = len(step.senders) if isinstance(step.senders, list) else 1
        length += step.hold * step.repeat * counts
        if step.hold <= scenario.measure.settle:
            short.append(i)
    if short:
        first = scenario.plan[short[0]]
        more = f" (and {len(short) - 1} more steps)" if len(short) > 1 else ""
        found.append((("plan", short[0], "hold"),
                      f"{first.hold:g} s is not longer than measure.settle "
                      f"({scenario.measure.settle:g} s): the step has no steady seconds and no row "
                      f"in the step table{more}"))
    if not scenario.plan:
        return found
    for i, fault in enumerate(scenario.faults):
        if fault.at is not None and fault.at >= length:
            found.append((("faults", i, "at"),
                          f"{fault.at:g} s is not before the plan ends ({length:g} s): this "
                          f"{fault.kind} never happens"))
    return found
