"""``surge analyze`` pass after pass (``--watch``), and the analysis that ends ``surge run`` and
``surge capacity``: the loops and documents behind those commands, the printing left to them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from results.catalog import run_dirs
from results.compare import ranking_rows, ranking_text, statistics_rows, statistics_text
from results.installed import analysis_missing
from results.pipeline import DEFAULT_PRICE_PER_CORE_HOUR, Summary, analyze
from results.progress import Progress

Say = Callable[[str], None]


@dataclass(frozen=True)
class Pass:
    """One analysis pass over ``dirs`` and what it did."""

    dirs: list[Path]
    summary: Summary

    def line(self) -> str:
        """The pass in one line: how many runs were analysed, up to date, failed, and how long."""
        summary = self.summary
        return (f"analysed {len(summary.analysed)}, up to date {len(summary.skipped)}, "
                f"failed {len(summary.failed)} in {summary.seconds:.1f} s")

    def document(self, compare: bool = False) -> dict:
        """The pass as JSON-ready data; with ``compare`` the runs' statistics and ranking."""
        document = self.summary.as_dict()
        if compare:
            document.update(statistics=statistics_rows(self.dirs),
                            ranking=ranking_rows(self.dirs))
        return document

    def comparison_text(self) -> str:
        """The runs' statistics and ranking as text."""
        return statistics_text(self.dirs) + "\n\n" + ranking_text(self.dirs)


def analyze_passes(runs: list[Path] | None, runs_dir: Path, on_pass: Callable[[Pass], None],
                   interval: float | None = None,
                   price_per_core_hour: float = DEFAULT_PRICE_PER_CORE_HOUR,
                   force: bool = False, say: Say = print, spark_master: str | None = None,
                   include_drain: bool = False,
                   sleep: Callable[[float], None] = time.sleep,
                   progress: Progress | None = None) -> Pass:
    """Analyse ``runs`` (every run under ``runs_dir`` when None, looked for afresh each pass),
    hand each pass to ``on_pass``, and with an ``interval`` go on every ``interval`` seconds
    (``force`` applies to the first pass only) until interrupted; returns the last pass."""
    while True:
        dirs = list(runs) if runs else run_dirs(runs_dir)
        done = Pass(dirs, analyze(dirs, price_per_core_hour, force, say, spark_master,
                                  include_drain, progress))
        on_pass(done)
        if interval is None:
            return done
        force = False
        sleep(interval)


def analyze_if_installed(dirs: list[Path], say: Say, skipped: Say) -> Summary | None:
    """The analysis at the end of a run or search: ``dirs`` analysed, or (None) one line to
    ``skipped`` saying what to install when the analysis extra is missing."""
    if why := analysis_missing():
        skipped(f"analysis skipped: {why}")
        return None
    say("analysing with Spark (--no-analyze skips this) ...")
    return analyze(dirs, say=say)
