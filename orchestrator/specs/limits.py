"""The upper bounds of a spec's figures, so none can overflow to ``inf`` on the way to a run.

Each bound is far above what a broker test can use and far below what a float cannot hold:
a rate of a million messages a second per sender (one AMQP connection publishes some tens of
thousands), a hundred million in all, a plan of a week, prices no cloud charges. A figure
written ``1e4`` is read as a number (YAML 1.1, which PyYAML speaks, reads it as text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Protocol

from pydantic import BeforeValidator, Field

from orchestrator.specs import units
from orchestrator.specs.base import Loc
from orchestrator.specs.rate import StepRate

MAX_RATE_PER_SENDER = 1_000_000.0
"""msg/s one sender may be asked for, by a step, a sum of ``+increment`` steps or a spike."""
MAX_TOTAL_RATE = 100_000_000.0
"""msg/s all senders together may be asked for (a step's rate times its senders, a capacity
search's ``start_rate`` and ``target``)."""
MAX_PLAN_S = 7 * 86400.0
"""Longest plan (every hold of every repeat and sweep count): a week."""
MAX_SPIKE_FACTOR = 100.0
"""Largest ``publish_spike`` factor."""
MAX_PRICE_PER_MEMBER_HOUR = 100_000.0
"""Largest price of one member for one hour (the largest instances cost some tens)."""
MAX_CORES_PER_MEMBER = 4096.0
"""Most cores a member may be priced at."""
MAX_NETWORK_MBPS = 1_000_000.0
"""Fastest network link a member may have (Mb/s): 1 Tb/s."""

def _number(value: Any) -> Any:
    """``1e4`` (text in YAML 1.1) as the number it means; anything else is left to the field
    (which refuses ``true``, ``nan`` and other text)."""
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return value


Number = Annotated[float, BeforeValidator(_number, json_schema_input_type=float | Annotated[
    str, Field(pattern=units.NUMBER_PATTERN + "$")])]
"""A float field that also takes ``1e4`` written without a decimal point."""


class _Step(Protocol):
    rate_per_sender: StepRate
    hold: float
    repeat: int
    senders: int | list[int] | None


def plan_problems(plan: Sequence[_Step], senders: int, spike: float = 1.0,
                  timed: bool = True) -> list[tuple[Loc, str]]:
    """Where a plan asks one sender, or all of them, for more than :data:`MAX_RATE_PER_SENDER`
    or :data:`MAX_TOTAL_RATE` (with ``spike``, the largest publish_spike factor, applied), or
    (if ``timed``) runs longer than :data:`MAX_PLAN_S`; counted step by step, not expanded.
    One problem of each kind at most, at the first step that has it."""
    found: dict[str, tuple[Loc, str]] = {}
    rate, length = 0.0, 0.0
    for i, step in enumerate(plan):
        counts = step.senders if isinstance(step.senders, list) else [step.senders or senders]
        change = step.rate_per_sender
        first = change.after(rate)
        last = max(0.0, rate + change.value * step.repeat * len(counts)) if change.relative \
            else first
        peak = max(first, last) * spike
        if peak > MAX_RATE_PER_SENDER:
            found.setdefault("sender", (("plan", i, "rate_per_sender"), (
                f"asks a sender for {_rate(peak)} msg/s{_spiked(spike)}; at most "
                f"{MAX_RATE_PER_SENDER:,.0f}")))
        elif peak * max(counts) > MAX_TOTAL_RATE:
            found.setdefault("total", (("plan", i, "rate_per_sender"), (
                f"asks {max(counts)} senders for {_rate(peak * max(counts))} msg/s in all"
                f"{_spiked(spike)}; at most {MAX_TOTAL_RATE:,.0f}")))
        rate = last
        length += step.hold * step.repeat * len(counts)
        if timed and length > MAX_PLAN_S:
            found.setdefault("length", (("plan", i, "hold"), (
                f"the plan lasts {_span(length)} up to here; at most {_span(MAX_PLAN_S)}")))
    return list(found.values())


def _rate(value: float) -> str:
    if not math.isfinite(value):
        return "more than 1e308"
    return f"{value:,.0f}" if value < 1e15 else f"{value:.3g}"


def _spiked(spike: float) -> str:
    return f" with a publish_spike of x{spike:g}" if spike != 1.0 else ""


def _span(seconds: float) -> str:
    """``604800`` -> ``"7 days (604,800 s)"``."""
    if seconds >= 86400:
        return f"{seconds / 86400:,.4g} days ({seconds:,.0f} s)"
    return f"{seconds:,.0f} s"
