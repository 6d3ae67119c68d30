"""The step table (the shape of Table 1 of the uniform-cluster document), from recorded rows.

Pure functions of rows: the controller calls them at the end of a run on what it recorded, and
the analysis can call them on rows read back from Parquet.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean

from results.rundir.histogram import LatencyHistogram
from results.rundir.tables import CONTROLLER_HOST


@dataclass(frozen=True)
class StepRow:
    """Figures for one phase of the plan over its steady part (after ``settle`` seconds), or
    for the drain after the last step (``label`` "drain"). Rates are means over the seconds
    whose figures are known (``None`` if none was); ``missing_seconds`` counts the seconds in
    the window where some source missed its deadline."""

    step: int
    label: str
    target_rate: float
    achieved_rate: float | None  # end to end: the lower of the mean send and receive rates
    min_rate: float | None
    sent_rate: float | None
    received_rate: float | None
    members: int
    cpu_percent: dict[str, float] = field(default_factory=dict)
    host_cpu_percent: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: int = 0
    seconds: int = 0
    skipped: int = 0  # sends a stalled sender could not make up
    hosts_cpu_percent: dict[str, float] = field(default_factory=dict)  # broker hosts (SSH)
    missing_seconds: int = 0
    start_s: float = 0.0
    end_s: float = 0.0

    @property
    def ratio(self) -> float | None:
        """Achieved over target (1.0 when the target is unlimited or zero)."""
        if not self.target_rate:
            return 1.0
        return None if self.achieved_rate is None else self.achieved_rate / self.target_rate


def segments(phases: list[dict], ticks: list[dict], settle_s: float
             ) -> list[tuple[dict, str, list[dict]]]:
    """Steady windows: each phase split where the number of running members changed, each
    part without its first ``settle_s`` seconds. Labels are ``3``, or ``3a``, ``3b``, ..."""
    out = []
    for phase in phases:
        runs: list[list[dict]] = []
        for tick in (t for t in ticks if t["phase"] == phase["index"]):
            if not runs or runs[-1][-1]["members_running"] != tick["members_running"]:
                runs.append([])
            runs[-1].append(tick)
        steady = [[t for t in run if t["elapsed_s"] >= max(run[0]["elapsed_s"] - 1 + settle_s,
                                                           phase["start_s"] + settle_s)]
                  for run in runs]
        steady = [run for run in steady if run]
        for k, run in enumerate(steady):
            label = str(phase["index"]) + (chr(ord("a") + k) if len(steady) > 1 else "")
            out.append((phase, label, run))
    return out


def drain_ticks(phases: list[dict], ticks: list[dict]) -> list[dict]:
    """The ticks after the last step, while the receivers emptied the queues."""
    if not phases:
        return []
    end = phases[-1]["start_s"]
    return [t for t in ticks if t["phase"] == 0 and t["elapsed_s"] > end]


def step_rows(phases: list[dict], ticks: list[dict], members: list[dict],
              settle_s: float, hosts: list[dict] | None = None) -> list[StepRow]:
    """One :class:`StepRow` per steady window (see :func:`segments`)."""
    return [window_row(phase["index"], label, window, members, hosts or [])
            for phase, label, window in segments(phases, ticks, settle_s)]


def drain_row(phases: list[dict], ticks: list[dict], members: list[dict],
              hosts: list[dict] | None = None) -> StepRow | None:
    """The drain after the last step as a row of its own (``None`` if there was none)."""
    window = drain_ticks(phases, ticks)
    return window_row(0, "drain", window, members, hosts or []) if window else None


def _known_mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


def window_row(step: int, label: str, window: list[dict], members: list[dict],
               hosts: list[dict]) -> StepRow:
    """The figures of one window of ticks: mean known rates, CPU per member and per broker
    host over the window's span, percentiles of the merged per-second histograms."""
    start, end = window[0]["elapsed_s"] - 1, window[-1]["elapsed_s"]
    histogram = LatencyHistogram()
    for tick in window:
        histogram.merge(LatencyHistogram.from_sparse(
            dict(zip(tick["latency_buckets"] or [], tick["latency_counts"] or []))))

    def spread(rows: list[dict], key: str, keep) -> dict[str, float]:
        values: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if start < row["elapsed_s"] <= end and keep(row) and row["cpu_percent"] is not None:
                values[row[key]].append(row["cpu_percent"])
        return {name: fmean(v) for name, v in sorted(values.items())}
    sent = _known_mean(t["send_rate"] for t in window)
    received = _known_mean(t["receive_rate"] for t in window)
    both = [min(t["send_rate"], t["receive_rate"]) for t in window
            if t["send_rate"] is not None and t["receive_rate"] is not None]
    return StepRow(
        step=step, label=label, target_rate=fmean(t["target_rate"] for t in window),
        achieved_rate=None if sent is None or received is None else min(sent, received),
        min_rate=min(both) if both else None, sent_rate=sent, received_rate=received,
        members=max(t["members_running"] for t in window),
        cpu_percent=spread(members, "member", lambda r: r["running"]),
        host_cpu_percent=_known_mean(t["host_cpu_percent"] for t in window),
        p50_ms=histogram.percentile(50) / 1000 if histogram.count else None,
        p99_ms=histogram.percentile(99) / 1000 if histogram.count else None,
        errors=window[-1]["errors"] - window[0]["errors"], seconds=len(window),
        skipped=(window[-1].get("skipped") or 0) - (window[0].get("skipped") or 0),
        hosts_cpu_percent=spread(hosts, "host", lambda r: r["host"] != CONTROLLER_HOST),
        missing_seconds=sum(1 for t in window if t.get("agents_missing") or
                            t.get("broker_missing") or t.get("queue_depth", 0) is None),
        start_s=start, end_s=end)


def as_text(rows: list[StepRow], unit: str = "msg/s", settle_s: float | None = None) -> str:
    """A fixed-width table for terminals and logs; ``unit`` names what the rates count (round
    trips/s for request/reply, where "sent" counts requests and "received" matched replies). A
    target of 0 is shown as "max": as fast as it goes; "-" is a figure no source gave. Given
    ``settle_s``, a last line says which seconds the figures cover."""
    members = sorted({m for row in rows for m in row.cpu_percent})
    hosts = sorted({h for row in rows for h in row.hosts_cpu_percent})
    short = [member_index(m) for m in members]
    header = ["step", f"target {unit}", f"achieved {unit}", f"sent {unit}", f"received {unit}",
              "members", *[f"m{s} CPU%" for s in short], "host CPU%",
              *[f"{h} CPU%" for h in hosts], "p50 ms", "p99 ms", "skipped", "errors"]
    lines = [header]
    for row in rows:
        lines.append([
            row.label, f"{row.target_rate:,.0f}" if row.target_rate or row.label == "drain"
            else "max", _cell(row.achieved_rate), _cell(row.sent_rate),
            _cell(row.received_rate), str(row.members),
            *[_cell(row.cpu_percent.get(m), ".1f") for m in members],
            _cell(row.host_cpu_percent, ".1f"),
            *[_cell(row.hosts_cpu_percent.get(h), ".1f") for h in hosts],
            _cell(row.p50_ms, ".2f"), _cell(row.p99_ms, ".2f"), f"{row.skipped:,}",
            str(row.errors)])
    table = fixed_width(lines)
    if settle_s is not None:
        missing = sum(r.missing_seconds for r in rows)
        table += (f"\nrates are means, percentiles merged over each step's seconds after the "
                  f"first {settle_s:g} s (settle); drain: after the last step"
                  + (f"; {missing} seconds had a source missing (\"-\" = unknown)"
                     if missing else ""))
    return table


def _cell(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def member_index(node_name: str) -> str:
    """The pool index in a member's node name: ``surge-uniform-4-2@localhost`` -> ``2``."""
    return node_name.split("@")[0].rsplit("-", 1)[-1]


def fixed_width(lines: list[list[str]]) -> str:
    """Right-aligned columns, two spaces apart; the first line is the header."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines)
