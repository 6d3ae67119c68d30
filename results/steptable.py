"""The step table (the shape of Table 1 of the uniform-cluster document), from recorded rows.

Pure functions of rows: the controller calls them at the end of a run on what it recorded, and
the analysis can call them on rows read back from Parquet.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean

from drivers.histogram import LatencyHistogram


@dataclass(frozen=True)
class StepRow:
    """Figures for one phase of the plan over its steady part (after ``settle`` seconds)."""

    step: int
    label: str
    target_rate: float
    achieved_rate: float  # end to end: the lower of the mean send and mean receive rates
    min_rate: float
    sent_rate: float
    received_rate: float
    members: int
    cpu_percent: dict[str, float] = field(default_factory=dict)
    host_cpu_percent: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    errors: int = 0
    seconds: int = 0

    @property
    def ratio(self) -> float:
        """Achieved over target (1.0 when the target is unlimited or zero)."""
        return self.achieved_rate / self.target_rate if self.target_rate else 1.0


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


def step_rows(phases: list[dict], ticks: list[dict], members: list[dict],
              settle_s: float) -> list[StepRow]:
    """One :class:`StepRow` per steady window (see :func:`segments`)."""
    out = []
    for phase, label, window in segments(phases, ticks, settle_s):
        start, end = window[0]["elapsed_s"] - 1, window[-1]["elapsed_s"]
        histogram = LatencyHistogram()
        for tick in window:
            histogram.merge(LatencyHistogram.from_sparse(
                dict(zip(tick["latency_buckets"] or [], tick["latency_counts"] or []))))
        cpu: dict[str, list[float]] = defaultdict(list)
        for row in members:
            if start < row["elapsed_s"] <= end and row["running"] \
                    and row["cpu_percent"] is not None:
                cpu[row["member"]].append(row["cpu_percent"])
        send = [t["send_rate"] for t in window]
        received = fmean(t["receive_rate"] for t in window)
        out.append(StepRow(
            step=phase["index"], label=label, target_rate=fmean(t["target_rate"] for t in window),
            achieved_rate=min(fmean(send), received),
            min_rate=min(min(t["send_rate"], t["receive_rate"]) for t in window),
            sent_rate=fmean(send), received_rate=received,
            members=max(t["members_running"] for t in window),
            cpu_percent={m: fmean(v) for m, v in sorted(cpu.items())},
            host_cpu_percent=fmean(t["host_cpu_percent"] for t in window),
            p50_ms=histogram.percentile(50) / 1000, p99_ms=histogram.percentile(99) / 1000,
            errors=window[-1]["errors"] - window[0]["errors"], seconds=len(window)))
    return out


def as_text(rows: list[StepRow], unit: str = "msg/s") -> str:
    """A fixed-width table for terminals and logs; ``unit`` names what the rates count (round
    trips/s for request/reply, where "sent" counts requests and "received" matched replies). A
    target of 0 is shown as "max": as fast as it goes."""
    members = sorted({m for row in rows for m in row.cpu_percent})
    short = [member_index(m) for m in members]
    header = ["step", f"target {unit}", f"achieved {unit}", f"sent {unit}", f"received {unit}",
              "members",
              *[f"m{s} CPU%" for s in short], "host CPU%", "p50 ms", "p99 ms", "errors"]
    lines = [header]
    for row in rows:
        lines.append([
            row.label, f"{row.target_rate:,.0f}" if row.target_rate else "max",
            f"{row.achieved_rate:,.0f}",
            f"{row.sent_rate:,.0f}", f"{row.received_rate:,.0f}", str(row.members),
            *[f"{row.cpu_percent[m]:.1f}" if m in row.cpu_percent else "-" for m in members],
            f"{row.host_cpu_percent:.1f}", f"{row.p50_ms:.2f}", f"{row.p99_ms:.2f}",
            str(row.errors)])
    return fixed_width(lines)


def member_index(node_name: str) -> str:
    """The pool index in a member's node name: ``surge-uniform-4-2@localhost`` -> ``2``."""
    return node_name.split("@")[0].rsplit("-", 1)[-1]


def fixed_width(lines: list[list[str]]) -> str:
    """Right-aligned columns, two spaces apart; the first line is the header."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines)
