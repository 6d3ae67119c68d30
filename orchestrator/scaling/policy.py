"""Scaling policy: pure functions of recorded 1 Hz observations. No clock reads, no I/O.

Each :class:`Observation` stands for the second that ends at its ``elapsed_s``. A scale-out
trigger (shortfall, member_cpu, queue_depth, latency_p99) fires when the median of its value over
the last ``for`` seconds passes the threshold: a sustained trend counts even when single seconds
jitter across the threshold, a single glitch does not. A scale-in trigger (``*_below``) fires only
when its condition held in every one of those seconds: capacity is removed only when it has been
idle throughout. A rule fires when any (or all) of its triggers do, the cooldown since the last
action has passed, and the pool allows.

Unknown is unknown, never 0: a second whose figure is unknown (no fresh queue depth, no p99)
does not count for the median and never satisfies a scale-in condition. Member CPU is often
unknown (IBM MQ's exporter has a new figure every ``statistics_interval`` seconds, 10 by default,
each queue manager on its own timer; an existing member without a metrics endpoint has none), so
member CPU conditions are judged member by member over the window, on each member's known
figures only:

- ``member_cpu`` fires when some member has at least ``MIN_KNOWN_CPU`` known figures in the
  window (all of them when the window is shorter) and their median is above the threshold. A
  member with fewer known figures cannot make it fire, but neither do the others' figures
  become 0 or vanish: the hottest member with enough figures decides.
- ``member_cpu_below`` fires only when every member running at the window's end has at least
  ``MIN_KNOWN_CPU`` known figures in the window and every known figure of every member is below
  the threshold. One member with too few known figures (or none) keeps capacity in place.

With MQ's default interval a ``for`` window needs about 20 s to hold two figures of a member.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.specs.scenario import ScaleRule, ScalingSpec, Trigger

TICK_S = 1.0
MIN_KNOWN_CPU = 2  # known figures of a member a member CPU condition needs in its window
CPU_CONDITIONS = ("member_cpu", "member_cpu_below")


@dataclass(frozen=True)
class Observation:
    """What the controller saw in one tick, as the policy needs it."""

    elapsed_s: float
    target_rate: float
    achieved_rate: float
    member_cpu: tuple[float | None, ...] = ()  # running members' CPU share of quota (None:
    # unknown this second)
    queue_depth: int | None = 0  # None: not read this second (a condition on it cannot hold)
    p99_s: float | None = 0.0
    members: tuple[str, ...] = ()  # the names of ``member_cpu``'s members (default: positions)

    def __post_init__(self) -> None:
        if self.members and len(self.members) != len(self.member_cpu):
            raise ValueError("members and member_cpu must name the same members")

    def cpu_by_member(self) -> dict[str, float | None]:
        """Each running member's CPU share this second, by name (``None``: unknown)."""
        names = self.members or tuple(str(i) for i in range(len(self.member_cpu)))
        return dict(zip(names, self.member_cpu, strict=True))


@dataclass(frozen=True)
class Decision:
    """Start (``out``) or stop (``in``) one member, why, and the values that caused it."""

    action: str
    triggers: list[str]
    values: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the live view and the event log."""
        shown = ", ".join(f"{k}={_fmt(v, k)}" for k, v in self.values.items())
        return f"scale-{self.action}: {' and '.join(self.triggers)} ({shown})"


def value_of(condition: str, observation: Observation) -> float | None:
    """The figure a condition compares against its threshold (``None``: unknown this second)."""
    if condition == "shortfall":
        target = observation.target_rate
        return max(0.0, 1.0 - observation.achieved_rate / target) if target > 0 else 0.0
    if condition == "member_cpu":  # the known members' highest: a lower bound if any is unknown
        return max((c for c in observation.member_cpu if c is not None), default=None)
    if condition == "member_cpu_below":  # every member's must be known to say all are below
        known = [c for c in observation.member_cpu if c is not None]
        return max(known) if known and len(known) == len(observation.member_cpu) else None
    if condition in ("queue_depth", "queue_depth_below"):
        return None if observation.queue_depth is None else float(observation.queue_depth)
    if condition == "latency_p99":
        return observation.p99_s
    raise ValueError(f"unknown condition {condition!r}")


def holds(trigger: Trigger, observation: Observation) -> bool:
    """Whether one observation satisfies the trigger's condition."""
    condition = trigger.condition
    value = value_of(condition, observation)
    threshold = getattr(trigger, condition)
    if value is None:
        return False
    return value < threshold if condition.endswith("_below") else value > threshold


def window_value(trigger: Trigger, window: Sequence[Observation]) -> float | None:
    """The figure a trigger judges over its window's known seconds: the median for scale-out
    conditions, the worst second (the highest) for scale-in ones; ``None`` if none is known.
    Member CPU: :func:`cpu_window_value`."""
    if trigger.condition in CPU_CONDITIONS:
        return cpu_window_value(trigger.condition, window)
    values = [v for v in (value_of(trigger.condition, o) for o in window) if v is not None]
    if not values:
        return None
    return max(values) if trigger.condition.endswith("_below") else statistics.median(values)


def cpu_window_value(condition: str, window: Sequence[Observation]) -> float | None:
    """Member CPU over a window, member by member on known figures (module docstring):
    ``member_cpu``: the highest median of a member with enough known figures;
    ``member_cpu_below``: the highest known figure, if every member running at the window's end
    has enough of them. ``None``: too little is known to judge."""
    known: dict[str, list[float]] = {}
    for observation in window:
        for name, cpu in observation.cpu_by_member().items():
            figures = known.setdefault(name, [])
            if cpu is not None:
                figures.append(cpu)
    least = min(MIN_KNOWN_CPU, len(window))
    if condition == "member_cpu":
        return max((statistics.median(v) for v in known.values() if len(v) >= least),
                   default=None)
    running = list(window[-1].cpu_by_member()) if window else []
    if not running or any(len(known[name]) < least for name in running):
        return None
    return max(cpu for name in running for cpu in known[name])


def fired(trigger: Trigger, history: Sequence[Observation]) -> bool:
    """Whether the trigger fires on the last ``for`` seconds of observations."""
    needed = _seconds(trigger)
    if len(history) < needed:
        return False
    window = history[-needed:]
    threshold = getattr(trigger, trigger.condition)
    below = trigger.condition.endswith("_below")
    if below and trigger.condition not in CPU_CONDITIONS:
        return all(holds(trigger, observation) for observation in window)
    value = window_value(trigger, window)
    return value is not None and (value < threshold if below else value > threshold)


def rule_fires(rule: ScaleRule, history: Sequence[Observation]) -> list[Trigger]:
    """The triggers that make ``rule`` fire now (empty when it does not)."""
    triggers = rule.when_any or rule.when_all or []
    firing = [t for t in triggers if fired(t, history)]
    if rule.when_all is not None and len(firing) != len(triggers):
        return []
    return firing


def decide(spec: ScalingSpec, history: Sequence[Observation], running: int, pool: int,
           minimum: int, last_action_s: float | None) -> Decision | None:
    """What to do after the newest observation, if anything.

    ``running`` members run now; at most ``pool`` and at least ``minimum`` may.
    """
    if not history:
        return None
    now = history[-1].elapsed_s
    for action, rule in (("out", spec.scale_out), ("in", spec.scale_in)):
        if rule is None:
            continue
        if last_action_s is not None and now - last_action_s < rule.cooldown:
            continue
        if (action == "out" and running >= pool) or (action == "in" and running <= minimum):
            continue
        firing = rule_fires(rule, history)
        if firing:
            return Decision(action, [_describe(t) for t in firing],
                            {t.condition: window_value(t, history[-_seconds(t):]) for t in firing})
    return None


def _seconds(trigger: Trigger) -> int:
    return max(1, round(trigger.for_s / TICK_S))


def _describe(trigger: Trigger) -> str:
    threshold = getattr(trigger, trigger.condition)
    return f"{trigger.condition} {_fmt(threshold, trigger.condition)} for {trigger.for_s:g}s"


def _fmt(value: Any, condition: str = "") -> str:
    if condition in ("shortfall", "member_cpu", "member_cpu_below"):
        return f"{value:.0%}"
    if condition == "latency_p99":
        return f"{value * 1000:g}ms"
    return f"{value:.3g}" if isinstance(value, float) else str(value)
