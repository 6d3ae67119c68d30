"""Runs side by side: at their final step (document 000's Table 2 shape), and, once analysed,
statistics per figure and a ranking by cost among runs that met their requirement (by default
the final step within 3% of its target; a campaign says which of its runs met its own). A run
whose cost is unknown (its members' CPU was not measured) is listed as such, never ranked. The
statistics and the ranking read the analysed figures from the results lake of each run's root
(:mod:`results.lake`)."""

from __future__ import annotations

import statistics
from collections.abc import Collection
from pathlib import Path

from orchestrator.errors import SurgeError
from results import lake
from results.rundir.manifest import MANIFEST_FILE, read_manifest
from results.rundir.steps import StepRow, fixed_width
from results.rundir.tables import read_rows


def final_step(run_dir: Path) -> tuple[str, StepRow, str]:
    """A run's scenario name, the last row of its step table and its accounting verdict."""
    manifest = read_manifest(run_dir)
    if not manifest.steps:
        raise SurgeError(f"{run_dir / MANIFEST_FILE}: no step table; did the run finish?")
    verdict = manifest.accounting.verdict() if manifest.accounting else "not accounted"
    return manifest.scenario_name, manifest.steps[-1], verdict


def final_rows(run_dirs: list[Path]) -> list[dict]:
    """Per run, its final step: target and achieved rate (msg/s), members, mean member CPU and
    host CPU (%), p99 (ms) and the accounting verdict; None for a figure no source gave."""
    rows = []
    for run_dir in run_dirs:
        name, row, verdict = final_step(run_dir)
        cpu = sum(row.cpu_percent.values()) / len(row.cpu_percent) if row.cpu_percent else None
        rows.append({"run_dir": str(run_dir), "test": name, "target_rate": row.target_rate,
                     "achieved_rate": row.achieved_rate, "members": row.members,
                     "member_cpu_percent_mean": cpu, "host_cpu_percent": row.host_cpu_percent,
                     "p99_ms": row.p99_ms, "accounting": verdict})
    return rows


def as_text(run_dirs: list[Path]) -> str:
    """One line per run (:func:`final_rows`); "-" for a figure no source gave."""
    lines = [["test", "target msg/s", "achieved msg/s", "members", "member CPU% (mean)",
              "host CPU%", "p99 ms", "accounting"]]
    for row in final_rows(run_dirs):
        lines.append([row["test"], f"{row['target_rate']:,.0f}", _figure(row["achieved_rate"]),
                      str(row["members"]), _figure(row["member_cpu_percent_mean"], ".1f"),
                      _figure(row["host_cpu_percent"], ".1f"), _figure(row["p99_ms"], ".2f"),
                      row["accounting"]])
    return fixed_width(lines)


def plot_runs(run_dirs: list[Path]) -> dict[str, dict]:
    """Per run (by its directory's name), what :func:`results.plots.compare_figures` overlays:
    its ticks and members in time order and its step table."""
    runs = {}
    for run_dir in run_dirs:
        steps = read_manifest(run_dir).steps
        runs[run_dir.name] = {"steps": steps, **{table: read_rows(run_dir, table)
                                                 for table in ("ticks", "members")}}
    return runs


def plot(run_dirs: list[Path], out: Path) -> list[Path]:
    """``surge compare --plot``: the runs overlaid in ``out`` (one PNG per figure, see
    :func:`results.plots.compare_figures`); the files written."""
    from results.plots import compare_figures, save  # matplotlib: only to plot
    names = [run_dir.name for run_dir in run_dirs]
    if len(set(names)) != len(names):
        raise SurgeError(f"two runs named alike ({', '.join(names)}): each run is one legend "
                         "entry, by its directory's name")
    return [out / name for name in save(compare_figures(plot_runs(run_dirs)), out)]


MET_RATIO = 0.97
FIGURES = {  # name with unit -> how to read it from analysis.json
    "achieved msg/s": lambda a: a["steps"][-1]["achieved_rate"],
    "p99 ms": lambda a: a["steps"][-1]["p99_ms"],
    "broker CPU us/msg": lambda a: a["cost"]["broker_us_per_msg"],
    "generator CPU us/msg": lambda a: a["cost"]["generator_us_per_msg"],
    "cost per 1k msg/s/month": lambda a: a["cost"]["broker_cost_per_1k_msg_s_month"],
}


def statistics_rows(run_dirs: list[Path]) -> list[dict]:
    """Per figure over the analysed runs: how many runs gave it, mean, standard deviation,
    min, max, and the change from the first run to the last in % (NaN from a first run of 0)."""
    analysed = lake.analysed(run_dirs)
    analyses = [analysed[d] for d in run_dirs if d in analysed and analysed[d]["steps"]]
    rows = []
    for name, read in FIGURES.items():
        values = [v for v in (read(a) for a in analyses) if v is not None]
        if not values:
            continue
        rows.append({"figure": name, "runs": len(values), "mean": statistics.fmean(values),
                     "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
                     "min": min(values), "max": max(values),
                     "change_percent": (values[-1] - values[0]) / values[0] * 100
                     if values[0] else float("nan")})
    return rows


def statistics_text(run_dirs: list[Path]) -> str:
    """:func:`statistics_rows` as a table."""
    lines = [["figure (final step)", "runs", "mean", "stdev", "min", "max", "change %"]]
    for row in statistics_rows(run_dirs):
        lines.append([row["figure"], str(row["runs"]),
                      *(f"{row[k]:,.2f}" for k in ("mean", "stdev", "min", "max")),
                      f"{row['change_percent']:+.1f}"])
    return fixed_width(lines)


def ranking_rows(run_dirs: list[Path], passed: Collection[Path] | None = None) -> list[dict]:
    """Runs that met their requirement, cheapest per 1,000 msg/s first (``rank`` from 1), then
    those whose cost is unknown (``rank`` None). The requirement is the final step within 3% of
    its target, unless ``passed`` names the runs that met one of their own (a campaign's)."""
    chosen = None if passed is None else {run_dir.resolve() for run_dir in passed}
    rows, unknown = [], []
    analysed = lake.analysed(run_dirs)
    for run_dir in run_dirs:
        analysis = analysed.get(run_dir)
        if analysis is None or not analysis["steps"]:
            continue
        last = analysis["steps"][-1]
        cost = analysis["cost"].get("broker_cost_per_1k_msg_s_month")
        met = _met_target(last) if chosen is None else run_dir.resolve() in chosen
        if met:
            (unknown if cost is None else rows).append(
                (cost, run_dir.name, last["achieved_rate"], last["members"]))
    return [{"rank": rank, "run": name, "achieved_rate": achieved, "members": members,
             "cost_per_1k_msg_s_month": cost}
            for rank, (cost, name, achieved, members) in
            [*enumerate(sorted(rows), start=1), *((None, entry) for entry in unknown)]]


def ranking_text(run_dirs: list[Path], passed: Collection[Path] | None = None) -> str:
    """:func:`ranking_rows` as a table ("-" and "cost unknown" for the unranked)."""
    lines = [["rank", "run", "achieved msg/s", "members", "cost per 1k msg/s/month"]]
    for row in ranking_rows(run_dirs, passed):
        cost = row["cost_per_1k_msg_s_month"]
        lines.append(["-" if row["rank"] is None else str(row["rank"]), row["run"],
                      _figure(row["achieved_rate"]), str(row["members"]),
                      "cost unknown" if cost is None else f"{cost:,.2f}"])
    return fixed_width(lines)


def _figure(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _met_target(step: dict) -> bool:
    """The step's achieved rate within 3% of its target (not met when it is unknown)."""
    if not step["target_rate"]:
        return True
    return step["achieved_rate"] is not None and \
        step["achieved_rate"] / step["target_rate"] >= MET_RATIO
