"""The search for the highest total rate that holds an SLO, as a pure function of the probes
measured so far (no clock, no I/O: tested on simulated systems).

It brackets the knee by multiplying the rate by ``growth`` while the SLO holds (dividing it
while it breaks from the first probe on), then bisects between the highest rate that held and
the lowest that broke until they are within ``precision`` of each other, and confirms the rate
that held with a hold of its own. A confirmation that breaks makes that rate the lowest broken
one, and the bisection goes on below it. Measurements that contradict each other (a rate that
held above one that broke) are settled against the higher rate: the highest rate held *below*
the lowest rate that broke.

From a first probe at ``start`` below the knee ``K`` it takes about ``log2(K / start) + 1``
probes to bracket and ``log2(1 / precision)`` to bisect: with the defaults, at most
``ceil(log2(K / start)) + 8`` probes in all, confirmation included, and up to 4 more for each
confirmation that breaks (noise near the knee).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """A rate to hold (total msg/s); ``confirm`` for the final hold of the rate found."""

    rate: float
    confirm: bool = False


@dataclass(frozen=True)
class Outcome:
    """What one probe measured: whether the SLO ``held``, the rate achieved end to end, and
    why it broke."""

    probe: Probe
    held: bool
    achieved: float | None = None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Found:
    """The end of a search: the highest target that held (``None``: even the lowest probe
    broke) and the rate it carried (``rate``: the lowest end-to-end rate its held probes
    achieved, at most the target; the SLO lets a target hold that is a little above what was
    delivered, and the answer is what was delivered), how many probes it took, whether it
    converged and confirmed, and why it ended."""

    rate: float | None
    probes: int
    converged: bool
    why: str
    target: float | None = None


@dataclass(frozen=True)
class SearchSettings:
    """How the search moves: the first probe's rate, the factor while bracketing, the relative
    width at which bisection stops, the probe budget, and the rate below which it gives up."""

    start: float
    growth: float = 2.0
    precision: float = 0.04
    max_probes: int = 16
    floor: float = 1.0

    def __post_init__(self) -> None:
        if not (self.start > 0 and self.growth > 1 and 0 < self.precision < 1
                and self.max_probes >= 2 and self.floor > 0):
            raise ValueError(f"search settings out of range: {self}")


def bracket(outcomes: list[Outcome]) -> tuple[float | None, float | None]:
    """The highest rate that held below the lowest that broke, and that lowest broken rate
    (``None`` for either that no probe has given yet)."""
    broken = [o.probe.rate for o in outcomes if not o.held]
    high = min(broken) if broken else None
    held = [o.probe.rate for o in outcomes if o.held and (high is None or o.probe.rate < high)]
    return (max(held) if held else None), high


def next_probe(settings: SearchSettings, outcomes: list[Outcome]) -> Probe | Found:
    """The next probe given every outcome so far, or the search's end."""
    low, high = bracket(outcomes)
    last = outcomes[-1] if outcomes else None
    if last is not None and last.probe.confirm and last.held:
        return _found(last.probe.rate, outcomes, True,
                      f"{last.probe.rate:,.0f} msg/s held the SLO and held it again")
    if len(outcomes) >= settings.max_probes:
        return _found(low, outcomes, False,
                      f"the budget of {settings.max_probes} probes was spent before the search "
                      f"converged" + (f" (bracket {low:,.0f} to {high:,.0f} msg/s)"
                                      if low and high else ""))
    if high is None:
        return Probe(_round(low * settings.growth) if low else settings.start)
    if low is None:
        lower = _round(high / settings.growth)
        if lower < settings.floor:
            return Found(None, len(outcomes), True,
                         f"the SLO broke even at {high:,.4g} msg/s")
        return Probe(lower)
    if high / low - 1 > settings.precision:
        return Probe(_between(low, high))
    return Probe(low, confirm=True)


def _found(target: float | None, outcomes: list[Outcome], converged: bool, why: str) -> Found:
    """The end at ``target``, with the rate its held probes carried end to end."""
    if target is None:
        return Found(None, len(outcomes), converged, why)
    carried = min([target] + [o.achieved for o in outcomes if o.held and o.probe.rate == target
                              and o.achieved is not None])
    if carried < target:
        why += f"; it carried {carried:,.0f} msg/s end to end"
    return Found(carried, len(outcomes), converged, why, target)


def _between(low: float, high: float) -> float:
    """The middle of (low, high), rounded to 3 significant digits where that stays inside."""
    middle = (low + high) / 2
    rounded = _round(middle)
    return rounded if low < rounded < high else middle


def _round(rate: float) -> float:
    """``rate`` to 3 significant digits (a probe's rate people can read)."""
    if rate <= 0:
        return rate
    digits = 2 - math.floor(math.log10(rate))
    return round(rate, digits) if digits > 0 else float(round(rate, digits))
