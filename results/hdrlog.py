"""A run's latency as an HdrHistogram interval log (``surge export-hlog``): one interval per
tick of the run's ``ticks`` table, one tag per latency kind, in the format of
:mod:`results.rundir.hlog`.

A tick's histograms hold the messages received since the agents' previous snapshots, so the
interval of a tick runs from the previous tick's ``elapsed_s`` to its own (the first tick's from
one second before it, at the earliest 0). The log's start time is when the load started on the
controller's wall clock: the least ``t - elapsed_s`` over the ticks (a tick's ``t`` is stamped
once its readings are in, within the tick's deadline of its start). The intervals' starts are
seconds after it, the clock of ``elapsed_s`` and of the plan's steps, which the log names in
comment lines.
"""

from __future__ import annotations

import io
from pathlib import Path

from orchestrator.errors import SurgeError
from results.rundir.figures import CONFIRM, INTENDED, LATENCY, histogram_columns
from results.rundir.histogram import LatencyHistogram
from results.rundir.hlog import MAX_UNIT_RATIO, Interval, write_log
from results.rundir.manifest import RunManifest, read_manifest
from results.rundir.tables import read_rows

KINDS = {LATENCY: "from each message's actual send time",
         INTENDED: "from each message's intended send time (rate-limited senders only)",
         CONFIRM: "publisher confirms, from publish to the broker's confirm"}
"""Each latency kind a run may record (its tag in the log) and what it measures."""
FIRST_TICK_S = 1.0
"""How long the first tick's interval is taken to be (s): the ticks' period."""


def run_intervals(run_dir: Path, kinds: list[str] | None = None
                  ) -> tuple[RunManifest, float, list[Interval]]:
    """The run's manifest, its load start (s since the Unix epoch) and its intervals, by start
    time then kind: of ``kinds``, or of every kind the run recorded a latency of. A kind asked
    for that the run did not record, or a run with none, is a :class:`SurgeError`."""
    manifest = read_manifest(run_dir)
    ticks = read_rows(run_dir, "ticks")
    where = run_dir / "metrics" / "ticks"
    if not ticks:
        raise SurgeError(f"{where}: no ticks recorded; nothing to export")
    recorded = [kind for kind in KINDS if any(row.get(histogram_columns(kind)[1])
                                              for row in ticks)]
    for kind in kinds or []:
        if kind not in recorded:
            raise SurgeError(f"{where}: no {kind} latency recorded (its column "
                             f"{histogram_columns(kind)[0]} is absent or empty); this run "
                             f"has {', '.join(recorded) or 'none'}")
    chosen = [kind for kind in KINDS if kind in (kinds or recorded)]
    if not chosen:
        raise SurgeError(f"{where}: no latency recorded in any tick; nothing to export")
    start_time_s = min(row["t"] - row["elapsed_s"] for row in ticks)
    intervals = []
    previous = max(0.0, ticks[0]["elapsed_s"] - FIRST_TICK_S)
    for row in ticks:
        for kind in chosen:
            intervals.append(Interval(kind, previous, row["elapsed_s"] - previous,
                                      tick_histogram(row, kind)))
        previous = row["elapsed_s"]
    return manifest, start_time_s, intervals


def tick_histogram(row: dict, kind: str) -> LatencyHistogram:
    """The histogram ``kind`` of one tick row (empty where the tick holds none)."""
    buckets, counts = histogram_columns(kind)
    return LatencyHistogram.from_sparse(dict(zip(row.get(buckets) or [],
                                                 row.get(counts) or [], strict=True)))


def export(run_dir: Path, kinds: list[str] | None = None) -> tuple[str, list[Interval]]:
    """The run's interval log (text) and its intervals."""
    manifest, start_time_s, intervals = run_intervals(run_dir, kinds)
    tags = sorted({interval.tag for interval in intervals}, key=list(KINDS).index)
    comments = [f"surge run {manifest.run_id}: latency in microseconds (µs), 1 µs lowest "
                f"discernible value, 3 significant digits; Interval_Max in ms (µs / "
                f"{MAX_UNIT_RATIO:g})",
                *(f"Tag={tag}: {KINDS[tag]}" for tag in tags),
                *(f"Step {phase.index}: {phase.start_s:.3f} s to {phase.end_s:.3f} s after "
                  f"StartTime" for phase in manifest.phases)]
    out = io.StringIO()
    write_log(out, intervals, start_time_s, comments)
    return out.getvalue(), intervals
