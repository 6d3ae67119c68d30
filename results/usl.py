"""The Universal Scalability Law fitted to sustainable rates over member counts, and what it
projects, with its error from repeated measurements: pure.

``X(N) = lam N / (1 + sigma (N - 1) + kappa N (N - 1))``: ``lam`` the rate one member carries,
``sigma`` contention (what serialises), ``kappa`` coherency (what members pay to agree). A
negative ``sigma`` is Gunther's superlinear case (each added member carries more than the one
before, until the payback point ``-sigma / kappa``, after which the law falls below linear); it
is allowed as long as the law stays finite up to the farthest count it may project.

The noise of a measured rate is relative (a share of the rate), so the fit minimises relative
squared errors: for given ``sigma`` and ``kappa`` the best ``lam`` is closed-form, and the search
is over those two (a grid, then a pattern search). The interval of a projection comes from
refitting on simulated repeats; a projection is withheld, with the reason, when the fit cannot
carry it.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

MIN_COUNTS = 3  # member counts: the law has three parameters
MAX_ERROR = 0.10  # RMS of the relative errors of the fit
MAX_SPREAD = 2.0  # a projection's interval may span at most this factor
MAX_REACH = 4.0  # project at most this many times the largest count measured
DRAWS = 100
PATTERN_MOVES = 60  # of the pattern search: each one moves or halves its steps
LEVEL = 0.90
_STEPS = [10 ** (-4 + 4 * i / 8) for i in range(9)]
_SIGMAS = [-s for s in _STEPS[:7]] + [0.0] + _STEPS
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
    def payback_members(self) -> float | None:
        """Where a superlinear law falls back to linear (``None``: not superlinear, or never)."""
        return -self.sigma / self.kappa if self.sigma < 0 < self.kappa else None

    def members_for(self, rate: float, limit: int = 1024) -> int | None:
        """The fewest members that carry ``rate`` (``None``: no count up to ``limit`` does)."""
        return next((n for n in range(1, limit + 1)
                     if _denominator(n, self.sigma, self.kappa) > 0 and self.rate(n) >= rate),
                    None)


@dataclass(frozen=True)
class Fit:
    """A fitted law, how well it fits (RMS of the relative errors), the points it was fitted to,
    why it cannot be trusted (empty: it can), and what a reader must know to use it (``notes``,
    such as superlinear scaling)."""

    law: Law | None
    error: float | None
    points: tuple[tuple[int, float], ...]
    unreliable: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def reach(self) -> int:
        """The farthest member count the fit may project."""
        return int(MAX_REACH * max((n for n, _ in self.points), default=0))


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


def _finite(sigma: float, kappa: float, reach: int) -> bool:
    """Whether the denominator, a parabola in ``N`` that is 1 at one member, stays positive up
    to ``reach`` members: at ``reach`` and at its lowest point if that lies between."""
    lowest = (kappa - sigma) / (2 * kappa) if kappa > 0 else reach
    return all(_denominator(n, sigma, kappa) > 0 for n in (reach, min(max(lowest, 1), reach)))


def _solve(points: Sequence[tuple[int, float]], sigma: float, kappa: float, reach: int
           ) -> tuple[float, float]:
    """The best ``lam`` for ``sigma`` and ``kappa``, and its sum of squared relative errors
    (infinite where the law is not finite and positive up to ``reach`` members)."""
    if kappa < 0 or sigma > 1 or not _finite(sigma, kappa, reach):
        return 0.0, math.inf
    shape = [n / _denominator(n, sigma, kappa) / x for n, x in points]  # fitted / measured, per lam
    lam = sum(shape) / sum(g * g for g in shape)
    return lam, sum((1 - lam * g) ** 2 for g in shape)


def _linearised(points: Sequence[tuple[int, float]]) -> list[tuple[float, float]]:
    """Starting points from the law's linear form: ``N / X = (1 + sigma (N - 1) + kappa N (N -
    1)) / lam`` is linear in ``1 / lam``, ``sigma / lam`` and ``kappa / lam``, and a relative
    error in ``X`` is the same relative error in ``N / X``, so weighted linear least squares
    (with and without coherency) lands next to the answer."""
    starts = []
    for terms in (3, 2):
        rows = [([1.0, n - 1.0, n * (n - 1.0)][:terms], n / x) for n, x in points]
        normal = [[sum(r[i] * r[j] / y ** 2 for r, y in rows) for j in range(terms)]
                  + [sum(r[i] / y for r, y in rows)] for i in range(terms)]
        solved = _gauss(normal)
        if solved and solved[0] > 0:
            starts.append((solved[1] / solved[0], solved[2] / solved[0] if terms == 3 else 0.0))
    return starts


def _gauss(augmented: list[list[float]]) -> list[float] | None:
    """The solution of a small linear system given as its augmented matrix (``None``:
    singular)."""
    size = len(augmented)
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(augmented[r][col]))
        if abs(augmented[pivot][col]) < 1e-300:
            return None
        augmented[col], augmented[pivot] = augmented[pivot], augmented[col]
        for row in range(size):
            if row != col:
                factor = augmented[row][col] / augmented[col][col]
                augmented[row] = [a - factor * b for a, b in zip(augmented[row], augmented[col])]
    return [augmented[i][size] / augmented[i][i] for i in range(size)]


def _least_squares(points: Sequence[tuple[int, float]], reach: int) -> Law:
    """The law of least squared relative error: the best of a grid and the linearised
    solutions, then a pattern search around it."""
    sigma, kappa = min([(s, k) for s in _SIGMAS for k in _KAPPAS] + _linearised(points),
                       key=lambda sk: _solve(points, *sk, reach)[1])
    error = _solve(points, sigma, kappa, reach)[1]
    steps = [max(abs(sigma), 1e-4) / 2, max(kappa, 1e-6) / 2]
    moves = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1)]
    for _ in range(PATTERN_MOVES):
        trials = [(sigma + a * steps[0], max(0.0, kappa + b * steps[1])) for a, b in moves]
        trial_error, trial = min((_solve(points, *t, reach)[1], t) for t in trials)
        if trial_error < error:
            (sigma, kappa), error = trial, trial_error
        elif steps[0] < 1e-6 and steps[1] < 1e-8:
            break
        else:
            steps = [s / 2 for s in steps]
    return Law(_solve(points, sigma, kappa, reach)[0], sigma, kappa)


def fit(points: Sequence[tuple[int, float]]) -> Fit:
    """The law fitted to ``(members, sustainable rate)`` measurements (repeats as separate
    points), with the reasons not to trust it: too few member counts, no repeats, or a poor
    fit."""
    points = tuple(sorted((int(n), float(x)) for n, x in points if x is not None and x > 0))
    counts = sorted({n for n, _ in points})
    if len(counts) < MIN_COUNTS:
        return Fit(None, None, points, (f"too few points: {len(counts)} member count(s) measured"
                                        f", the law's 3 parameters need at least {MIN_COUNTS}",))
    reach = int(MAX_REACH * counts[-1])
    law = _least_squares(points, reach)
    error = math.sqrt(_solve(points, law.sigma, law.kappa, reach)[1] / len(points))
    reasons = []
    if error > MAX_ERROR:
        reasons.append(f"poor fit: RMS error {error:.0%} of the measured rates (more than "
                       f"{MAX_ERROR:.0%})")
    if not any(sum(1 for n, _ in points if n == c) > 1 for c in counts):
        reasons.append("no repeated measurements: the fit's error is unknown (repeat the "
                       "searches)")
    return Fit(law, error, points, tuple(reasons), _notes(law))


def _notes(law: Law) -> tuple[str, ...]:
    if law.sigma >= 0:
        return ()
    payback = law.payback_members
    until = (f" up to the payback point near {payback:,.0f} members, past which the law falls "
             f"below linear" if payback else ", with no payback point within the counts the "
             "fit may project")
    return (f"superlinear (sigma < 0): each added member carries more than the one before"
            f"{until}; the per-member gain measured here need not last beyond the counts "
            f"measured",)


@functools.lru_cache(maxsize=8)
def _draws(result: Fit, seed: int) -> tuple[Law, ...]:
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
        laws.append(_least_squares(
            [(n, result.law.rate(n) * max(0.05, 1 + chance.gauss(0, drawn)))
             for n, _ in result.points], result.reach))
    return tuple(laws)


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
    if result.points and members > result.reach:
        reasons.append(f"{members} members is more than {MAX_REACH:g} x the largest count "
                       f"measured ({max(n for n, _ in result.points)})")
    if reasons or result.law is None:
        return Projection(None, withheld=tuple(reasons))
    low, high = _interval([law.rate(members) for law in _draws(result, seed)])
    if low <= 0 or high / low > MAX_SPREAD:
        return Projection(None, low, high, (f"the interval {low:,.0f} to {high:,.0f} msg/s is "
                                            f"too wide",))
    return Projection(result.law.rate(members), low, high)


def members_for(result: Fit, rate: float, seed: int = 0) -> Projection:
    """The fewest members that carry ``rate``, with its interval; withheld as
    :func:`rate_at`'s, or when the fitted law does not reach ``rate`` within the counts it may
    project."""
    if result.unreliable or result.law is None:
        return Projection(None, withheld=result.unreliable)
    needed = result.law.members_for(rate, result.reach)
    if needed is None:
        most = max(result.law.rate(n) for n in range(1, result.reach + 1))
        return Projection(None, withheld=(
            f"the fitted law carries at most {most:,.0f} msg/s up to {result.reach} members: "
            f"{rate:,.0f} msg/s is out of reach",))
    low, high = _interval([law.members_for(rate, result.reach) or math.inf
                           for law in _draws(result, seed)])
    if high / low > MAX_SPREAD:
        return Projection(None, low, high, (
            f"the interval {low} to {high:.0f} members is too wide" if high < math.inf else
            f"from {low} members to out of reach within {result.reach}",))
    return Projection(float(needed), low, high)
