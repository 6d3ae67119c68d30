"""The verdict on one run of a campaign from its ``run.json``, against the campaign's
:class:`~orchestrator.specs.campaign.Requirement`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.specs.campaign import Requirement


@dataclass(frozen=True)
class Verdict:
    """Whether a run met its campaign's requirement, and why in one line."""

    passed: bool
    reason: str


def judge(requirement: Requirement, manifest: dict[str, Any]) -> Verdict:
    """Judge one run from its ``run.json``: it must have completed, with a step table, every
    considered step's achieved rate within ``rate_within`` of its target (and p99 below
    ``p99_below``), and, if ``lossless``, nothing lost."""
    outcome = manifest.get("outcome")
    if outcome != "completed":
        return Verdict(False, f"run not completed (outcome {outcome or 'unknown'})")
    steps = manifest.get("steps") or []
    if not steps:
        return Verdict(False, "no step table (is every hold longer than measure.settle?)")
    considered = steps if requirement.steps == "all" else steps[-1:]
    problems = [problem for problem in (
        _rate_problem(requirement.rate_within, considered, _KEYS[requirement.rate]),
        _latency_problem(requirement.p99_below, considered),
        _loss_problem(manifest.get("accounting")) if requirement.lossless else None) if problem]
    if problems:
        return Verdict(False, "; ".join(problems))
    key = _KEYS[requirement.rate]
    worst = max(considered, key=lambda s: abs(_deviation(s, key)))
    return Verdict(True, f"within ±{requirement.rate_within:.0%} (worst "
                         f"{_deviation(worst, key):+.1%}"
                         f" at step {_label(worst)})"
                         + ("; nothing lost" if requirement.lossless else ""))


_KEYS = {"achieved": "achieved_rate", "published": "sent_rate"}


def _deviation(step: dict, key: str = "achieved_rate") -> float:
    target = step.get("target_rate") or 0.0
    return step[key] / target - 1.0 if target else 0.0


def _label(step: dict) -> str:
    return str(step.get("label") or step.get("step", "?"))


def _rate_problem(within: float, steps: list[dict], key: str) -> str | None:
    unknown = [s for s in steps if s.get(key) is None]
    if unknown:  # what was not measured cannot meet a requirement
        return f"step {_label(unknown[0])}: {key.replace('_', ' ')} unknown (no source answered)"
    out = [s for s in steps if abs(_deviation(s, key)) > within + 1e-9]
    if not out:
        return None
    worst = max(out, key=lambda s: abs(_deviation(s, key)))
    more = f" (and {len(out) - 1} more step{'s' if len(out) > 2 else ''})" if len(out) > 1 else ""
    what = "achieved" if key == "achieved_rate" else "published"
    return (f"step {_label(worst)}: {what} {worst[key]:,.0f} of "
            f"{worst['target_rate']:,.0f} msg/s ({_deviation(worst, key):+.1%}, allowed "
            f"±{within:.0%}){more}")


def _latency_problem(below_s: float | None, steps: list[dict]) -> str | None:
    if below_s is None:
        return None
    unknown = [s for s in steps if s.get("p99_ms") is None]
    if unknown:
        return f"step {_label(unknown[0])}: p99 unknown (no latency recorded)"
    out = [s for s in steps if s["p99_ms"] >= below_s * 1000]
    if not out:
        return None
    worst = max(out, key=lambda s: s["p99_ms"])
    return f"step {_label(worst)}: p99 {worst['p99_ms']:,.1f} ms (allowed below {below_s * 1000:g})"


def _loss_problem(accounting: dict | None) -> str | None:
    if not accounting:
        return "no accounting"
    if "lost" in accounting and accounting["lost"] is None:
        return "loss unknown (the queues could not be read at the end)"
    if not accounting.get("lost") and not accounting.get("unexplained"):
        return None
    figures = ", ".join(f"{name} {accounting.get(name, '?')}"
                        for name in ("lost", "duplicates", "unexplained"))
    return f"messages lost: {figures}"


