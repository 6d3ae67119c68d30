"""The Universal Scalability Law fitted to sustainable rates over member counts, and what it
projects, with its error from repeated measurements: pure.

``X(N) = lam N / (1 + sigma (N - 1) + kappa N (N - 1))``: ``lam`` the rate one member carries,
``sigma`` contention (what serialises), ``kappa`` coherency (what members pay to agree). The fit
is least squares on the rates: for given ``sigma`` and ``kappa`` the best ``lam`` is closed-form,
so the search is over two non-negative parameters (a grid, then a pattern search). The interval
of a projection comes from refitting on resamples of the repeats at each member count
(bootstrap); a projection is withheld, with the reason, when the fit cannot carry it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

MIN_COUNTS = 3  # member counts: the law has three parameters
MAX_ERROR = 0.10  # RMS error of the fit relative to the mean rate
MAX_SPREAD = 2.0  # a projection's interval may span at most this factor
MAX_REACH = 4.0  # project at most this many times the largest count measured
DRAWS = 100
PATTERN_MOVES = 60  # of the pattern search: each one moves or halves its steps
LEVEL = 0.90
_SIGMAS = [0.0] + [10 ** (-4 + 4 * i / 8) for i in range(9)]
_KAPPAS = [0.0] + [10 ** (-6 + 6 * i / 8) for i in range(9)]


@dataclass(frozen=True)
class Law:
    """The three parameters."""

    lam: float
    sigma: float
    kappa: float

    def rate(self, members: float) -> float:
        """The rate ``members`` carry."""
        return self.lam * members / _denominator(members, self.sigma, self.kappa)

    @property
    def peak_members(self) -> float | None:
        """Where the rate peaks (``None``: it never does, kappa 0)."""
        return math.sqrt((1 - self.sigma) / self.kappa) if self.kappa > 0 and self.sigma < 1 \
            else (1.0 if self.sigma >= 1 else None)

    def members_for(self, rate: float, limit: int = 1024) -> int | None:
        """The fewest members that carry ``rate`` (``None``: no count up to ``limit`` does)."""
        return next((n for n in range(1, limit + 1) if self.rate(n) >= rate), None)


@dataclass(frozen=True)
class Fit:
    """A fitted law, how well it fits (RMS error relative to the mean rate), the points it was
    fitted to, and why it cannot be trusted (empty: it can)."""

    law: Law | None
    error: float | None
    points: tuple[tuple[int, float], ...]
    unreliable: tuple[str, ...]


@dataclass(frozen=True)
class Projection:
    """A projected figure with its interval (``LEVEL``, from resampled repeats), or the reasons
    it is withheld."""

    value: float | None
    low: float | None = None
    high: float | None = None
    withheld: tuple[str, ...] = ()


def _denominator(n: float, sigma: float, kappa: float) -> float:
    return 1 + sigma * (n - 1) + kappa * n * (n - 1)


def _solve(points: Sequence[tuple[int, float]], sigma: float, kappa: float
           ) -> tuple[float, float]:
    """The best ``lam`` for ``sigma`` and ``kappa``, and its sum of squared errors."""
    shape = [n / _denominator(n, sigma, kappa) for n, _ in points]
    lam = sum(x * g for (_, x), g in zip(points, shape)) / sum(g * g for g in shape)
    return lam, sum((x - lam * g) ** 2 for (_, x), g in zip(points, shape))


def _least_squares(points: Sequence[tuple[int, float]]) -> Law:
    """The law of least squared error: best grid point, then a pattern search around it."""
    best = min(((s, k) for s in _SIGMAS for k in _KAPPAS),
               key=lambda sk: _solve(points, *sk)[1])
    sigma, kappa = best
    error = _solve(points, sigma, kappa)[1]
    steps = [max(sigma, 1e-4) / 2, max(kappa, 1e-6) / 2]
    moves = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1)]
    for _ in range(PATTERN_MOVES):
        trials = [(max(0.0, sigma + a * steps[0]), max(0.0, kappa + b * steps[1]))
                  for a, b in moves]
        trial_error, trial = min((_solve(points, *t)[1], t) for t in trials)
        if trial_error < error:
            (sigma, kappa), error = trial, trial_error
        else:
            steps = [s / 2 for s in steps]
    return Law(_solve(points, sigma, kappa)[0], sigma, kappa)


def fit(points: Sequence[tuple[int, float]]) -> Fit:
    """The law fitted to ``(members, sustainable rate)`` measurements (repeats as separate
    points), with the reasons not to trust it: too few member counts, or a poor fit."""
    points = tuple(sorted((int(n), float(x)) for n, x in points if x is not None and x > 0))
    counts = sorted({n for n, _ in points})
    if len(counts) < MIN_COUNTS:
        return Fit(None, None, points, (f"too few points: {len(counts)} member count(s) measured"
                                        f", the law's 3 parameters need at least {MIN_COUNTS}",))
    law = _least_squares(points)
    mean = sum(x for _, x in points) / len(points)
    error = math.sqrt(sum((x - law.rate(n)) ** 2 for n, x in points) / len(points)) / mean
    reasons = []
    if error > MAX_ERROR:
        reasons.append(f"poor fit: RMS error {error:.0%} of the mean rate (more than "
                       f"{MAX_ERROR:.0%})")
    if not any(sum(1 for n, _ in points if n == c) > 1 for c in counts):
        reasons.append("no repeated measurements: the fit's error is unknown (repeat the "
                       "searches)")
    return Fit(law, error, points, tuple(reasons))


def _draws(result: Fit, seed: int) -> list[Law]:
    """Laws refitted on simulated repeats: the fitted rates with relative noise at the spread
    the repeats showed (pooled over member counts), that spread itself drawn for each resample
    from what its degrees of freedom allow (scaled inverse chi-squared), so that few repeats
    widen the interval as they should."""
    by_count: dict[int, list[float]] = {}
    for n, x in result.points:
        by_count.setdefault(n, []).append(x)
    freedom = len(result.points) - len(by_count)
    spread = math.sqrt(sum((x / (sum(xs) / len(xs)) - 1) ** 2 for xs in by_count.values()
                           for x in xs) / freedom)
    chance = random.Random(seed)
    laws = []
    for _ in range(DRAWS):
        drawn = spread * math.sqrt(freedom / sum(chance.gauss(0, 1) ** 2
                                                 for _ in range(freedom)))
        laws.append(_least_squares([(n, result.law.rate(n) * (1 + chance.gauss(0, drawn)))
                                    for n, _ in result.points]))
    return laws


def _interval(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    tail = (1 - LEVEL) / 2
    return (ordered[int(tail * (len(ordered) - 1))],
            ordered[math.ceil((1 - tail) * (len(ordered) - 1))])


def rate_at(result: Fit, members: int, seed: int = 0) -> Projection:
    """The rate ``members`` would carry, with its interval; withheld when the fit is not to be
    trusted, ``members`` is more than :data:`MAX_REACH` times the largest count measured, or the
    interval spans more than :data:`MAX_SPREAD` times."""
    reasons = list(result.unreliable)
    largest = max((n for n, _ in result.points), default=0)
    if largest and members > MAX_REACH * largest:
        reasons.append(f"{members} members is more than {MAX_REACH:g} x the largest count "
                       f"measured ({largest})")
    if reasons or result.law is None:
        return Projection(None, withheld=tuple(reasons))
    low, high = _interval([law.rate(members) for law in _draws(result, seed)])
    if low <= 0 or high / low > MAX_SPREAD:
        return Projection(None, low, high, (f"the interval {low:,.0f} to {high:,.0f} msg/s is "
                                            f"too wide",))
    return Projection(result.law.rate(members), low, high)


def members_for(result: Fit, rate: float, seed: int = 0) -> Projection:
    """The fewest members that carry ``rate``, with its interval; withheld as
    :func:`rate_at`'s, or when the fitted law never reaches ``rate``."""
    if result.unreliable or result.law is None:
        return Projection(None, withheld=result.unreliable)
    needed = result.law.members_for(rate)
    if needed is None:
        peak = result.law.peak_members or 1
        return Projection(None, withheld=(
            f"the fitted law peaks at {result.law.rate(peak):,.0f} msg/s near "
            f"{peak:,.0f} members: {rate:,.0f} msg/s is out of reach",))
    largest = max(n for n, _ in result.points)
    if needed > MAX_REACH * largest:
        return Projection(None, withheld=(
            f"it would take {needed} members, more than {MAX_REACH:g} x the largest count "
            f"measured ({largest})",))
    counts = [law.members_for(rate) or math.inf for law in _draws(result, seed)]
    low, high = _interval(counts)
    return Projection(float(needed), low, high)
