"""A regression gate over repeated runs: is the candidate worse than the baseline beyond the noise
between repetitions?

Each side is a set of runs of the same test (a campaign's repetitions, or a directory of run
directories). Per figure of their final step (achieved msg/s, higher is better; p99 ms, and, once
analysed, broker and generator CPU us/msg, lower is better) the change is the candidate's mean
over the baseline's, less one. Its confidence interval comes from the percentile bootstrap: both
sides resampled with replacement, each resample's change computed, the interval's ends taken at
``(1 - confidence) / 2`` and ``(1 + confidence) / 2``. The candidate is **worse** on a figure when
the whole interval lies beyond ``threshold`` in the bad direction: a change that large is not
the noise the repetitions show. Resampling is seeded, so a verdict is repeatable.
"""

from __future__ import annotations

import glob
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SurgeError
from results import lake
from results.rundir.manifest import MANIFEST_FILE, read_manifest

MIN_RUNS = 3
RESAMPLES = 10_000

Reader = Callable[[dict, dict | None], float | None]
"""A figure of one run: from its final step (``run.json``) and its analysis (``None``: not
analysed)."""

FIGURES: dict[str, tuple[bool, Reader]] = {  # name with unit -> (higher is better, read it)
    "achieved msg/s": (True, lambda step, _: step.get("achieved_rate")),
    "p99 ms": (False, lambda step, _: step.get("p99_ms")),
    "broker CPU us/msg": (False, lambda _, a: a["cost"].get("broker_us_per_msg") if a else None),
    "generator CPU us/msg": (False,
                             lambda _, a: a["cost"].get("generator_us_per_msg") if a else None),
}


@dataclass(frozen=True)
class Verdict:
    """One figure: both sides' means, the change and its confidence interval (fractions), and
    whether the candidate is worse beyond the threshold."""

    figure: str
    higher_is_better: bool
    baseline_runs: int
    candidate_runs: int
    baseline_mean: float
    candidate_mean: float
    change: float
    low: float
    high: float
    worse: bool


def bootstrap_change(baseline: Sequence[float], candidate: Sequence[float],
                     confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
                     ) -> tuple[float, float]:
    """The percentile-bootstrap interval of ``mean(candidate) / mean(baseline) - 1``."""
    rng = random.Random(seed)
    changes = []
    for _ in range(resamples):
        base = statistics.fmean(rng.choices(baseline, k=len(baseline)))
        cand = statistics.fmean(rng.choices(candidate, k=len(candidate)))
        changes.append(cand / base - 1 if base else float("inf"))
    changes.sort()
    tail = (1 - confidence) / 2
    return changes[int(tail * (resamples - 1))], changes[int((1 - tail) * (resamples - 1))]


def judge(figure: str, higher_is_better: bool, baseline: Sequence[float],
          candidate: Sequence[float], threshold: float, confidence: float) -> Verdict:
    """The :class:`Verdict` of one figure."""
    base, cand = statistics.fmean(baseline), statistics.fmean(candidate)
    low, high = bootstrap_change(baseline, candidate, confidence)
    worse = high < -threshold if higher_is_better else low > threshold
    return Verdict(figure, higher_is_better, len(baseline), len(candidate), base, cand,
                   cand / base - 1 if base else float("inf"), low, high, worse)


def runs_of(path: Path) -> list[Path]:
    """The finished runs a side names, sorted: the run directories in ``path`` (a campaign's,
    or any directory of runs), or those ``path`` matches as a glob pattern (the cells of one
    side of an A/B campaign, e.g. ``out/ab/*persistent=true*``)."""
    if path.is_dir():
        found = list(path.iterdir())
    elif glob.has_magic(str(path)):
        found = [Path(p) for p in glob.glob(str(path))]
    else:
        found = []
    runs = sorted(p for p in found if (p / MANIFEST_FILE).is_file())
    if len(runs) < MIN_RUNS:
        raise SurgeError(f"{path}: {len(runs)} finished runs; a gate needs at least "
                         f"{MIN_RUNS} repetitions on each side to tell a change from noise")
    return runs


def figures_of(runs: list[Path]) -> dict[str, list[float]]:
    """Each figure's values over ``runs`` (a run that does not give it is left out)."""
    analysed = lake.analysed(runs)
    values: dict[str, list[float]] = {name: [] for name in FIGURES}
    for run_dir in runs:
        steps = read_manifest(run_dir).steps
        if not steps:
            continue
        step = steps[-1].as_json()
        for name, (_, read) in FIGURES.items():
            value = read(step, analysed.get(run_dir))
            if value is not None:
                values[name].append(float(value))
    return values


def gate(baseline: Path, candidate: Path, threshold: float = 0.03,
         confidence: float = 0.95) -> list[Verdict]:
    """Every figure both sides give from at least :data:`MIN_RUNS` runs each."""
    base, cand = figures_of(runs_of(baseline)), figures_of(runs_of(candidate))
    return [judge(name, FIGURES[name][0], base[name], cand[name], threshold, confidence)
            for name in FIGURES
            if len(base[name]) >= MIN_RUNS and len(cand[name]) >= MIN_RUNS]


def gate_text(verdicts: list[Verdict], threshold: float, confidence: float) -> str:
    """One line per figure, then the verdict."""
    from results.rundir.steps import fixed_width
    lines = [["figure", "baseline (runs)", "candidate (runs)", "change",
              f"{confidence:.0%} interval", "verdict"]]
    for v in verdicts:
        lines.append([v.figure, f"{v.baseline_mean:,.2f} ({v.baseline_runs})",
                      f"{v.candidate_mean:,.2f} ({v.candidate_runs})", f"{v.change:+.1%}",
                      f"{v.low:+.1%} .. {v.high:+.1%}",
                      "WORSE" if v.worse else "within noise or better"])
    worse = [v.figure for v in verdicts if v.worse]
    said = (f"candidate worse than baseline beyond {threshold:.0%} with {confidence:.0%} "
            f"confidence: {', '.join(worse)}") if worse else \
        f"no figure worse beyond {threshold:.0%} with {confidence:.0%} confidence"
    return fixed_width(lines) + "\n" + said
