"""The verdict on one run of a campaign from its ``run.json``, against the campaign's
:class:`~orchestrator.specs.campaign.Requirement`."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.specs.campaign import Requirement
from results.rundir.manifest import Accounting, RunManifest
from results.rundir.steps import StepRow


@dataclass(frozen=True)
class Verdict:
    """Whether a run met its campaign's requirement, and why in one line."""

    passed: bool
    reason: str


def judge(requirement: Requirement, manifest: RunManifest) -> Verdict:
    """Judge one run from its ``run.json``: it must have completed, with a step table, every
    considered step's achieved rate within ``rate_within`` of its target (and p99 below
    ``p99_below``), and, if ``lossless``, nothing lost."""
    if manifest.outcome != "completed":
        return Verdict(False, f"run not completed (outcome {manifest.outcome or 'unknown'})")
    if manifest.capacity is not None:
        return _capacity(requirement, manifest)
    steps = manifest.steps
    if not steps:
        return Verdict(False, "no step table (is every hold longer than measure.settle?)")
    considered = steps if requirement.steps == "all" else steps[-1:]
    problems = [problem for problem in (
        _rate_problem(requirement.rate_within, considered, _KEYS[requirement.rate]),
        _latency_problem(requirement.p99_below, considered),
        _loss_problem(manifest.accounting) if requirement.lossless else None) if problem]
    if problems:
        return Verdict(False, "; ".join(problems))
    key = _KEYS[requirement.rate]
    worst = max(considered, key=lambda s: abs(_deviation(s, key)))
    return Verdict(True, f"within ±{requirement.rate_within:.0%} (worst "
                         f"{_deviation(worst, key):+.1%}"
                         f" at step {_label(worst)})"
                         + ("; nothing lost" if requirement.lossless else ""))


def _capacity(requirement: Requirement, manifest: RunManifest) -> Verdict:
    """A capacity search passes when it found a rate that held the SLO twice and (if
    ``lossless``) lost nothing; its probes that broke the SLO are how it searched."""
    search = manifest.capacity
    problems = [problem for problem in (
        None if search.rate and search.converged else f"no rate found: {search.why}",
        _loss_problem(manifest.accounting) if requirement.lossless else None) if problem]
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True, f"sustains {search.rate:,.0f} msg/s at {search.members} members "
                         f"within the SLO ({len(search.probes)} probes)"
                         + ("; nothing lost" if requirement.lossless else ""))


_KEYS = {"achieved": "achieved_rate", "published": "sent_rate"}


def _deviation(step: StepRow, key: str = "achieved_rate") -> float:
    return getattr(step, key) / step.target_rate - 1.0 if step.target_rate else 0.0


def _label(step: StepRow) -> str:
    return step.label or str(step.step)


def _rate_problem(within: float, steps: list[StepRow], key: str) -> str | None:
    unknown = [s for s in steps if getattr(s, key) is None]
    if unknown:  # what was not measured cannot meet a requirement
        return f"step {_label(unknown[0])}: {key.replace('_', ' ')} unknown (no source answered)"
    out = [s for s in steps if abs(_deviation(s, key)) > within + 1e-9]
    if not out:
        return None
    worst = max(out, key=lambda s: abs(_deviation(s, key)))
    more = f" (and {len(out) - 1} more step{'s' if len(out) > 2 else ''})" if len(out) > 1 else ""
    what = "achieved" if key == "achieved_rate" else "published"
    return (f"step {_label(worst)}: {what} {getattr(worst, key):,.0f} of "
            f"{worst.target_rate:,.0f} msg/s ({_deviation(worst, key):+.1%}, allowed "
            f"±{within:.0%}){more}")


def _latency_problem(below_s: float | None, steps: list[StepRow]) -> str | None:
    if below_s is None:
        return None
    unknown = [s for s in steps if s.p99_ms is None]
    if unknown:
        return f"step {_label(unknown[0])}: p99 unknown (no latency recorded)"
    out = [s for s in steps if s.p99_ms >= below_s * 1000]
    if not out:
        return None
    worst = max(out, key=lambda s: s.p99_ms)
    return f"step {_label(worst)}: p99 {worst.p99_ms:,.1f} ms (allowed below {below_s * 1000:g})"


def _loss_problem(accounting: Accounting | None) -> str | None:
    if accounting is None:
        return "no accounting"
    if accounting.lost is None:
        return "loss unknown (the queues could not be read at the end)"
    if not accounting.lost and not accounting.unexplained:
        return None
    figures = ", ".join(f"{name} {'?' if value is None else value}" for name, value in (
        ("lost", accounting.lost), ("duplicates", accounting.duplicates),
        ("unexplained", accounting.unexplained)))
    return f"messages lost: {figures}"


