"""``surge analyze``: analyse new or changed run directories with Spark, one root at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from results import report, timeline
from results.analysis import analyze_run
from results.catalog import Catalog, locked
from results.installed import require_analysis
from results.integrity import suspect_samples
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_table

DEFAULT_PRICE_PER_CORE_HOUR = 0.04  # currency units per core-hour; set your own
SPARK_LOG = "spark.log"  # in the runs root: what Spark's JVM says, off the console


@dataclass
class Summary:
    """What one ``surge analyze`` did."""

    analysed: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)  # up to date
    failed: dict[Path, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        """The summary as JSON-ready data (paths as strings; each analysed run's report)."""
        return {"analysed": [str(d) for d in self.analysed],
                "reports": {str(d): str(d / "analysis" / "report.md") for d in self.analysed},
                "up_to_date": [str(d) for d in self.skipped],
                "failed": {str(d): why for d, why in self.failed.items()},
                "problems": list(self.problems), "seconds": round(self.seconds, 3)}


def analyze(dirs: list[Path], price_per_core_hour: float = DEFAULT_PRICE_PER_CORE_HOUR,
            force: bool = False, say: Callable[[str], None] = print,
            spark_master: str | None = None, include_drain: bool = False) -> Summary:
    """Analyse those of ``dirs`` that are new or changed (all with ``force``); a run that
    cannot be analysed is reported and the others go on. ``include_drain`` counts the drain
    (before the first step and after the last) in the cost (runs already analysed without it
    are analysed again only with ``force``). Raises
    :class:`~results.installed.AnalysisUnavailable` when a run is due and the analysis extra is
    not installed."""
    started = time.monotonic()
    summary = Summary()
    roots: dict[Path, list[Path]] = {}
    for run_dir in dirs:
        roots.setdefault(run_dir.resolve().parent, []).append(run_dir.resolve())
    for root, members in roots.items():
        with locked(root):
            catalog = Catalog(root)
            pending = catalog.pending(members, force)
            summary.skipped += [d for d in members if d not in pending]
            if pending:
                require_analysis()  # what to install, before a run is tried
            for run_dir, digest in pending.items():
                try:
                    _analyze_one(run_dir, price_per_core_hour, spark_master, summary, say,
                                 include_drain)
                except Exception as error:  # noqa: BLE001 - one bad run never stops the rest
                    summary.failed[run_dir] = f"{type(error).__name__}: {error}"
                    say(f"{run_dir}: not analysed: {error}{_see_spark_log()}")
                    continue
                catalog.done(run_dir, digest)
                summary.analysed.append(run_dir)
    summary.seconds = time.monotonic() - started
    return summary


def _see_spark_log() -> str:
    from results.spark import log_file
    log = log_file()
    return f" (Spark's log: {log})" if log else ""


def _analyze_one(run_dir: Path, price: float, master: str | None, summary: Summary,
                 say: Callable[[str], None], include_drain: bool = False) -> None:
    from results.spark import session
    read_manifest(run_dir)  # a damaged run.json is named before Spark starts
    spark = session(master, run_dir.parent / SPARK_LOG)
    analysis = analyze_run(spark, run_dir, price, include_drain)
    manifest = analysis.manifest
    ticks = sorted(read_table(run_dir, "ticks").to_pylist(), key=lambda t: t["elapsed_s"])
    members = read_table(run_dir, "members").to_pylist()
    events = timeline.read_events(run_dir)
    suspects = suspect_samples(ticks, members)
    derived = {"scale_outs": timeline.reaction_times(manifest, events, ticks),
               "faults": timeline.fault_recoveries(events, ticks),
               "backlog": timeline.backlog(ticks),
               "suspect_samples": {**suspects.as_dict(), "line": suspects.line()},
               "skipped_sends": max((t.get("skipped") or 0 for t in ticks), default=0)}
    out = report.write(analysis, ticks, members, events, derived)
    for problem in analysis.problems:
        say(f"warning: {problem}")
    summary.problems += analysis.problems
    say(f"{run_dir.name}: {len(analysis.steps)} steps -> {out / 'report.md'}")
