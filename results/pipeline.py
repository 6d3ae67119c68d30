"""``surge analyze``: analyse the new or changed run directories of each runs root as one Spark
job, write each run's ``analysis/`` from its results and commit them to the root's results lake
(:mod:`results.lake`)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import SurgeError
from results import lake, plots, report, timeline
from results.analysis import RunAnalysis, analyze_runs
from results.catalog import fingerprint, locked, pending
from results.installed import require_analysis
from results.integrity import suspect_samples
from results.progress import Progress, Silent
from results.rundir.manifest import read_manifest
from results.rundir.tables import compact

DEFAULT_PRICE_PER_CORE_HOUR = 0.04  # currency units per core-hour; set your own
SPARK_LOG = "spark.log"  # in the runs root: what Spark's JVM says, off the console
PARALLEL_FROM = 4  # runs in a pass from which their reports are written on every core
CAMPAIGN_FILE = "campaign.json"  # a root that holds it is a campaign's: its runs say so


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
            spark_master: str | None = None, include_drain: bool = False,
            progress: Progress | None = None) -> Summary:
    """Analyse those of ``dirs`` that are new or changed (all with ``force``), each runs root's
    as one job; a run that cannot be analysed is reported and the others go on. ``include_drain``
    counts the drain (before the first step and after the last) in the cost (runs already
    analysed without it are analysed again only with ``force``). Raises
    :class:`~results.installed.AnalysisUnavailable` when a run is due and the analysis extra is
    not installed. ``progress`` is told each stage and the runs done."""
    progress = progress or Silent()
    started = time.monotonic()
    summary = Summary()
    roots: dict[Path, list[Path]] = {}
    for run_dir in dirs:
        roots.setdefault(run_dir.resolve().parent, []).append(run_dir.resolve())
    for root, members in roots.items():
        with locked(root):
            results = lake.Lake(root)
            due = pending(members, results.fingerprints(), force)
            summary.skipped += [d for d in members if d not in due]
            if due:
                require_analysis()  # what to install, before a run is tried
                _analyze_root(results, _readable(due, summary, say, progress), _Options(
                    price_per_core_hour, spark_master, include_drain), summary, say, progress)
    summary.seconds = time.monotonic() - started
    return summary


@dataclass(frozen=True)
class _Options:
    price_per_core_hour: float
    spark_master: str | None
    include_drain: bool


def _readable(due: dict[Path, str], summary: Summary, say: Callable[[str], None],
              progress: Progress) -> dict[Path, str]:
    """The runs of ``due`` whose ``run.json`` reads (the others are named before Spark
    starts), each finished one's parts compacted (see :func:`results.rundir.tables.compact`)
    and its fingerprint taken again; a run without an outcome may still be recording, and is
    left as it is."""
    out = {}
    progress.stage("reading the runs", len(due))
    for run_dir, digest in due.items():
        progress.advance()
        try:
            outcome = read_manifest(run_dir).outcome
        except SurgeError as error:
            _failed(summary, run_dir, error, say)
            continue
        if outcome not in (None, "running"):
            compact(run_dir)
            digest = fingerprint(run_dir)
        out[run_dir] = digest
    return out


def _analyze_root(results: lake.Lake, due: dict[Path, str], options: _Options,
                  summary: Summary, say: Callable[[str], None], progress: Progress) -> None:
    """One job over the due, readable runs of one root, their reports, and one lake
    commit."""
    from results.spark import session
    if not due:
        return
    plotting = threading.Thread(target=plots.load_plotting, daemon=True)
    plotting.start()  # while the JVM starts
    progress.stage("starting Spark")
    spark = session(options.spark_master, results.root / SPARK_LOG)
    campaign = results.root.name if (results.root / CAMPAIGN_FILE).exists() else None
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in lake.TABLES}
    done: dict[str, str] = {}
    progress.stage(f"Spark job over {len(due):,} run" + ("" if len(due) == 1 else "s"))
    analyses = _job(spark, list(due), options, summary, say)
    events = {a.run_dir: timeline.read_events(a.run_dir) for a in analyses}
    progress.stage("reports and plots", len(analyses))
    written = _reports([(a, events[a.run_dir]) for a in analyses], progress)
    for analysis, out in zip(analyses, written, strict=True):
        run_dir = analysis.run_dir
        if isinstance(out, str):
            _failed(summary, run_dir, out, say)
            continue
        for table, listed in lake.run_rows(analysis, events[run_dir], campaign).items():
            rows[table] += listed
        for problem in analysis.problems:
            say(f"warning: {problem}")
        summary.problems += analysis.problems
        summary.analysed.append(run_dir)
        done[run_dir.name] = due[run_dir]
        say(f"{run_dir.name}: {len(analysis.steps)} steps -> {out / 'report.md'}")
    if done:
        progress.stage("committing to the results lake")
        results.commit(rows, done)


def _reports(work: list[tuple[RunAnalysis, list[dict]]], progress: Progress
             ) -> list[Path | str]:
    """Each run's ``analysis/`` (:func:`results.report.write` of the run and its events), in
    processes of their own on
    every core when there are several (the plots take most of the time); per run, where it
    went or why it failed."""
    if len(work) < PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        return _counted(map(_report, work), progress)
    workers = min(os.cpu_count() or 1, len(work))
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            return _counted(pool.map(_report, work, chunksize=max(
                1, len(work) // (4 * workers))), progress)
    except BrokenProcessPool:  # e.g. a calling script without a __main__ guard
        return _counted(map(_report, work), progress)


def _counted(written: Iterable[Path | str], progress: Progress) -> list[Path | str]:
    """``written`` as a list, each item told to ``progress`` as it comes."""
    out = []
    for item in written:
        out.append(item)
        progress.advance()
    return out


def _report(item: tuple[RunAnalysis, list[dict]]) -> Path | str:
    analysis, events = item
    try:
        return report.write(analysis, events, derived(analysis, events))
    except Exception as error:  # noqa: BLE001 - one bad run never stops the rest
        return f"{type(error).__name__}: {error}"


def _job(spark, run_dirs: list[Path], options: _Options, summary: Summary,
         say: Callable[[str], None]) -> list[RunAnalysis]:
    """:func:`~results.analysis.analyze_runs` over ``run_dirs``; when the job fails, each half
    again, so that a run Spark cannot read is found and named and the others are analysed."""
    try:
        return analyze_runs(spark, run_dirs, options.price_per_core_hour, options.include_drain)
    except Exception as error:  # noqa: BLE001 - any failure of one run's files
        if len(run_dirs) == 1:
            _failed(summary, run_dirs[0], error, say)
            return []
        half = len(run_dirs) // 2
        return _job(spark, run_dirs[:half], options, summary, say) + \
            _job(spark, run_dirs[half:], options, summary, say)


def derived(analysis: RunAnalysis, events: list[dict]) -> dict[str, Any]:
    """The figures of a run's timeline: reaction times, fault recoveries, backlog, suspect
    samples and skipped sends, from the rows the job collected."""
    ticks = analysis.ticks
    suspects = suspect_samples(ticks, analysis.member_samples)
    return {"scale_outs": timeline.reaction_times(analysis.manifest, events, ticks),
            "faults": timeline.fault_recoveries(events, ticks),
            "backlog": timeline.backlog(ticks),
            "suspect_samples": {**suspects.as_dict(), "line": suspects.line()},
            "skipped_sends": max((t.get("skipped") or 0 for t in ticks), default=0)}


def _failed(summary: Summary, run_dir: Path, error: BaseException | str,
            say: Callable[[str], None]) -> None:
    """Record and say why ``run_dir`` was not analysed (an error, or what it said)."""
    summary.failed[run_dir] = error if isinstance(error, str) else \
        f"{type(error).__name__}: {error}"
    say(f"{run_dir}: not analysed: {error}{_see_spark_log()}")


def _see_spark_log() -> str:
    from results.spark import log_file
    log = log_file()
    return f" (Spark's log: {log})" if log else ""
