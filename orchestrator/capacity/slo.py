"""Whether a probe's step row holds the SLO, and how long a probe must hold to tell: pure."""

from __future__ import annotations

from orchestrator.specs.capacity import SloSpec
from results.rundir.steps import StepRow


def hold_s(rate: float, slo: SloSpec, precision: float, minimum_s: float,
           maximum_s: float) -> float:
    """Steady seconds of a probe at ``rate`` (total msg/s): long enough that a system carrying
    ``precision`` less than ``rate`` builds up the backlog the SLO allows (its surplus is
    ``precision x rate`` msg/s), within ``minimum_s`` and ``maximum_s``."""
    needed = (slo.backlog + 1) / (precision * rate) if rate > 0 else maximum_s
    return min(maximum_s, max(minimum_s, needed))


def p99_ms(row: StepRow) -> float | None:
    """The p99 the SLO is held to: from the intended send times where senders were paced (what
    a paced client waits, coordinated omission included), else from the actual ones."""
    return row.intended_p99_ms if row.intended_p99_ms is not None else row.p99_ms


def broken(row: StepRow, slo: SloSpec) -> tuple[str, ...]:
    """Why ``row`` breaks ``slo`` (empty: it holds). A figure nobody measured breaks it: an
    unknown latency or rate cannot be called carried. An unknown queue depth is left out
    (some brokers do not say it); the end-to-end rate still shows a growing backlog."""
    reasons = []
    latency = p99_ms(row)
    if latency is None:
        reasons.append("no latency measured")
    elif latency > slo.p99 * 1000:
        reasons.append(f"p99 {latency:,.1f} ms > {slo.p99 * 1000:g} ms")
    if row.max_backlog is not None and row.max_backlog > slo.backlog:
        reasons.append(f"backlog {row.max_backlog:,} > {slo.backlog:,} messages")
    if row.errors > slo.loss:
        reasons.append(f"{row.errors:,} messages failed > {slo.loss:,}")
    if row.achieved_rate is None:
        reasons.append("no end-to-end rate measured")
    elif row.achieved_rate < (1 - slo.shortfall) * row.target_rate:
        reasons.append(f"achieved {row.achieved_rate:,.0f} of {row.target_rate:,.0f} msg/s")
    if row.seconds == 0:
        reasons.append("no steady seconds")
    return tuple(reasons)
