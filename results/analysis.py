"""The analysis as one Spark job over many run directories: step tables, members, cost.

Reads only what the run directories hold (``run.json`` and the Parquet tables), never the
controller. All the runs given are one dataset per table (each row tagged with its run's index,
from the file it came from), so every figure of every run comes out of the same Spark stages,
whatever the number of runs; runs whose tables were recorded with different columns (an earlier
run format) are read as separate datasets, one per set of columns. Unreadable files are skipped
and named in ``problems``.

The step table is the controller's own rule: each run's ticks are collected (without their
histograms: what plots and the timeline use too, read once), its windows are
:func:`results.rundir.steps.windows` of them, handed back to Spark as a small table joined to the
ticks; Spark reduces each window by the kind each :class:`results.rundir.steps.StepRow` field
declares (the kinds of :mod:`results.rundir.figures`, here as Spark expressions) and
:func:`results.rundir.steps.finish` makes the rows, so the two step tables agree by construction.
A figure no source gave is unknown (``None``), never 0."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from results.rundir.figures import (
    CPU_COLUMN,
    DELIVERED_COLUMN,
    TICK_KINDS,
    Change,
    Count,
    Delivery,
    Figure,
    KeyCount,
    KeyMax,
    KeyMean,
    Max,
    Mean,
    MemberSpan,
    MinLeast,
    Missing,
    Partial,
    histogram_columns,
    histograms_of,
)
from results.rundir.manifest import RunManifest, read_manifest
from results.rundir.steps import (
    DRAIN_LABEL,
    FIGURES,
    StepRow,
    Window,
    finish,
    settle_excluded,
    windows,
)
from results.rundir.tables import SCHEMAS, readable_files

HOURS_PER_MONTH = 730.0
RUN = "run"  # the column each row's run index is in
HISTOGRAM_COLUMNS = {c for name in histograms_of(FIGURES) for c in histogram_columns(name)}


@dataclass
class RunAnalysis:
    """What the Spark job found in one run directory, and the rows it collected for the
    report."""

    run_dir: Path
    manifest: RunManifest
    steps: list[StepRow] = field(default_factory=list)
    drain: StepRow | None = None  # the row after the last step, labelled "drain"
    settle_s: float = 0.0
    settle_excluded_s: int = 0  # seconds of the steps left out of every row as settle
    members: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    ticks: list[dict[str, Any]] = field(default_factory=list)  # without histograms, in time order
    member_samples: list[dict[str, Any]] = field(default_factory=list)  # the members table
    host_samples: list[dict[str, Any]] = field(default_factory=list)  # the hosts table
    # per row label and histogram name (latency, intended): the buckets merged over its window
    histograms: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self.manifest.scenario_name

    @property
    def rows(self) -> list[StepRow]:
        """The step rows, then the drain's if there was one."""
        return self.steps + ([self.drain] if self.drain else [])


@dataclass
class _Run:
    """One run directory in the job: its index (the ``run`` column), its analysis as it fills
    in, and its readable files per table with their columns."""

    index: int
    analysis: RunAnalysis
    files: dict[str, dict[Path, pa.Schema]]

    def columns(self, table: str) -> frozenset[str]:
        return frozenset(c for schema in self.files[table].values() for c in schema.names)


def analyze_run(spark, run_dir: Path, price_per_core_hour: float,
                include_drain: bool = False) -> RunAnalysis:
    """:func:`analyze_runs` of one run directory."""
    return analyze_runs(spark, [run_dir], price_per_core_hour, include_drain)[0]


def analyze_runs(spark, run_dirs: list[Path], price_per_core_hour: float,
                 include_drain: bool = False) -> list[RunAnalysis]:
    """Run the step-table, member and cost job over ``run_dirs`` (in their order). The cost
    leaves the drain (phase 0 before the first step and after the last) out unless
    ``include_drain``. A damaged ``run.json`` raises :class:`~orchestrator.errors.FileError`;
    a Spark failure raises for the whole job."""
    runs = []
    for index, run_dir in enumerate(run_dirs):
        analysis = RunAnalysis(run_dir, read_manifest(run_dir))
        files = {table: readable_files(run_dir, table, analysis.problems) for table in SCHEMAS}
        runs.append(_Run(index, analysis, files))
        if not files["ticks"]:
            analysis.problems.append(f"{run_dir / 'metrics/ticks'}: no readable ticks; "
                                     "nothing to analyse")
        elif analysis.manifest.outcome is None:
            analysis.problems.append(f"{run_dir / 'run.json'}: no outcome (a crashed run); "
                                     "analysed as far as it was recorded")
    groups: dict[tuple, list[_Run]] = {}
    for run in runs:
        if run.files["ticks"]:
            groups.setdefault(tuple(run.columns(t) for t in SCHEMAS), []).append(run)
    for group in groups.values():
        _analyze_group(spark, group, price_per_core_hour, include_drain)
    return [run.analysis for run in runs]


def _analyze_group(spark, runs: list[_Run], price: float, include_drain: bool) -> None:
    """The job over runs whose tables have the same columns."""
    dirs = spark.createDataFrame([(_spark_path(spark, run.analysis.run_dir), run.index)
                                  for run in runs], f"_dir string, {RUN} int")
    frames = {table: _read(spark, runs, table, dirs) for table in SCHEMAS}
    for frame in frames.values():
        if frame is not None:
            frame.cache()
    by_index = {run.index: run for run in runs}
    ticks = _collect(frames["ticks"], [c for c in frames["ticks"].columns
                                       if c not in HISTOGRAM_COLUMNS])
    samples = _collect(frames["members"], frames["members"].columns) \
        if frames["members"] is not None else {}
    host_samples = _collect(frames["hosts"], frames["hosts"].columns) \
        if frames["hosts"] is not None else {}
    windows_of: list[tuple[_Run, Window]] = []
    for run in runs:
        analysis = run.analysis
        analysis.ticks = ticks.get(run.index, [])
        analysis.member_samples = samples.get(run.index, [])
        analysis.host_samples = host_samples.get(run.index, [])
        analysis.settle_s = analysis.manifest.settle_s
        rows_of = windows(analysis.manifest.phases, analysis.ticks, analysis.settle_s)
        analysis.settle_excluded_s = settle_excluded(analysis.ticks, rows_of)
        windows_of += [(run, window) for window in rows_of]
    rows, histograms = window_rows(spark, frames, [(run.index, w) for run, w in windows_of])
    for (run, _), row in zip(windows_of, rows, strict=True):
        if row is None:
            continue
        if row.label == DRAIN_LABEL:
            run.analysis.drain = row
        else:
            run.analysis.steps.append(row)
    for (run, window), merged in zip(windows_of, histograms, strict=True):
        if merged:
            run.analysis.histograms[window.label] = merged
    members = frames["members"]
    if members is not None:
        members = _with_cpu_seconds(members, by_index)
        for index, rows_of_run in _member_rows(members).items():
            by_index[index].analysis.members = rows_of_run
    for index, cost in _costs(spark, runs, members, frames["agents"], price,
                              include_drain).items():
        by_index[index].analysis.cost = cost
    for frame in frames.values():
        if frame is not None:
            frame.unpersist()


def _read(spark, runs: list[_Run], table: str, dirs):
    """One table of ``runs`` as one DataFrame with each row's run index in :data:`RUN`, from
    ``dirs`` (each run's directory as Spark names it, :func:`_spark_path`, and its index);
    None if no run has a readable file of the table."""
    from pyspark.sql import functions as F
    paths = [str(path) for run in runs for path in run.files[table]]
    if not paths:
        return None
    schemas = {schema for run in runs for schema in run.files[table].values()}
    if len(schemas) == 1:  # as the footers said: Spark need not read them again
        from pyspark.sql.pandas.types import from_arrow_schema
        frame = spark.read.schema(from_arrow_schema(schemas.pop())).parquet(*paths)
    else:
        frame = spark.read.option("mergeSchema", "true").parquet(*paths)
    directory = F.regexp_replace(F.col("_metadata.file_path"), "/metrics/[^/]+/[^/]+$", "")
    return (frame.withColumn("_dir", F.regexp_replace(directory, _NO_AUTHORITY, "$1:/"))
            .join(F.broadcast(dirs), "_dir").drop("_dir"))


_NO_AUTHORITY = "^([a-z]+):///"  # file:///x and file:/x are one file; Spark says either


def _spark_path(spark, directory: Path) -> str:
    """``directory`` as Spark names the files under it (a qualified, escaped URI)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(str(directory.resolve()))
    filesystem = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return re.sub(_NO_AUTHORITY, r"\1:/", filesystem.makeQualified(path).toUri().toString())


def _collect(frame, columns: list[str]) -> dict[int, list[dict[str, Any]]]:
    """``columns`` of every row of ``frame`` by run index, each run's in time order."""
    table = frame.select(*columns).toArrow()
    out: dict[int, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        out.setdefault(row.pop(RUN), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["elapsed_s"])
    return out


def window_rows(spark, frames: dict[str, Any], windows_of: list[tuple[int, Window]]
                ) -> tuple[list[StepRow | None], list[dict[str, dict[int, int]]]]:
    """Per window (a run index and one of its windows), its :class:`StepRow` (None when Spark
    read none of its ticks) and its merged histograms: each window reduced in Spark (its ticks
    found by run and ``elapsed_s``, the member and host rows by run and span) into a
    :class:`~results.rundir.figures.Partial`, finished as the controller finishes its own."""
    if not windows_of:
        return [], []
    from pyspark.sql import functions as F
    ticks = frames["ticks"]
    keys = spark.createDataFrame(pa.table({
        RUN: pa.array([run for run, w in windows_of for _ in w.seconds], pa.int32()),
        "elapsed_s": pa.array([s for _, w in windows_of for s in w.seconds], pa.float64()),
        "window": pa.array([i for i, (_, w) in enumerate(windows_of) for _ in w.seconds],
                           pa.int32())}))
    tagged = ticks.join(F.broadcast(keys), [RUN, "elapsed_s"]).cache()
    reduced = {row.window: row.asDict() for row in tagged.groupBy("window").agg(
        *[_tick_expression(how, ticks.columns).alias(name) for name, how in FIGURES.items()
          if isinstance(how, TICK_KINDS)]).collect()}
    histograms: dict[int, dict[str, dict[int, int]]] = {}
    exploded = [tagged.select("window", F.lit(name).alias("histogram"), F.explode(
        F.arrays_zip(F.col(bucket).alias("bucket"), F.col(count).alias("count"))).alias("b"))
        for name in histograms_of(FIGURES)
        for bucket, count in [histogram_columns(name)]
        if bucket in ticks.columns]  # else a run from before it was recorded: unknown
    if exploded:
        union = exploded[0]
        for more in exploded[1:]:
            union = union.unionByName(more)
        for row in (union.groupBy("window", "histogram", F.col("b.bucket").alias("bucket"))
                    .agg(F.sum("b.count").alias("count")).collect()):
            histograms.setdefault(row.window, {}).setdefault(row.histogram, {})[row.bucket] = \
                row["count"]
    tagged.unpersist()
    spans = spark.createDataFrame([(run, i, float(w.start_s), float(w.end_s))
                                   for i, (run, w) in enumerate(windows_of)],
                                  "span_run int, window int, start_s double, end_s double")
    keyed = _key_means(frames, spans)
    members = frames.get("members")
    counted = members is None or DELIVERED_COLUMN in members.columns
    delivery: tuple[dict[int, list[MemberSpan]], dict[int, int]] = ({}, {})
    if members is not None and any(isinstance(how, Delivery) for how in FIGURES.values()):
        delivery = _member_spans(members, spans, counted)
    return [finish(window, Partial(
        ticks=reduced[i], histograms=histograms.get(i, {}),
        keyed={name: means.get(i, {}) for name, means in keyed.items()},
        members=delivery[0].get(i, []), unknown_seconds=delivery[1].get(i, 0), counted=counted))
        if i in reduced else None  # its parts were unreadable
        for i, (_, window) in enumerate(windows_of)], \
        [histograms.get(i, {}) for i in range(len(windows_of))]


def _tick_expression(how: Figure, columns: list[str]):
    """The Spark aggregate of one tick figure (see :func:`results.rundir.figures.tick_value`);
    a column the run's format did not record is unknown, or 0 for a counter, or known for a
    flag."""
    from pyspark.sql import functions as F

    def col(name: str, default=None, kind: str = "double"):
        if name in columns:
            return F.col(name)
        return F.lit(default).cast(kind)
    if isinstance(how, Mean):
        return F.avg(col(how.column))
    if isinstance(how, Max):
        return F.max(col(how.column))
    if isinstance(how, Change):
        counter = F.coalesce(col(how.column, 0, "long"), F.lit(0))
        return F.max_by(counter, "elapsed_s") - F.min_by(counter, "elapsed_s")
    if isinstance(how, Count):
        return F.count(F.lit(1))
    if isinstance(how, Missing):
        missing = F.lit(False)
        for flag in how.flags:
            missing = missing | F.coalesce(col(flag, False, "boolean").cast("boolean"),
                                           F.lit(False))
        for name in (c for c in how.nulls if c in columns):
            missing = missing | F.col(name).isNull()
        return F.sum(missing.cast("int"))
    if isinstance(how, MinLeast):
        known = F.lit(True)
        for name in how.columns:
            known = known & col(name).isNotNull()
        return F.min(F.when(known, F.least(*[col(name) for name in how.columns])))
    raise TypeError(f"not a tick figure: {how!r}")


def _in_span(spans):
    """Rows of the same run as a span (``span_run``) and in it, (start_s, end_s]."""
    from pyspark.sql import functions as F
    return ((F.col(RUN) == spans["span_run"]) & (F.col("elapsed_s") > spans["start_s"])
            & (F.col("elapsed_s") <= spans["end_s"]))


def _key_means(frames: dict[str, Any], spans) -> dict[str, dict[int, dict[str, Any]]]:
    """Per :class:`~results.rundir.figures.KeyMean` field (and its kinds), per window and key
    (member, host or agent): the figure of the known values of its column in the kept rows of
    its span (see :func:`results.rundir.figures.key_means`), all fields in one query; a column
    the run did not record gives none."""
    from pyspark.sql import functions as F
    selected = []
    for name, how in FIGURES.items():
        frame = frames.get(how.table) if isinstance(how, KeyMean) else None
        if frame is None or how.column not in frame.columns:
            continue
        if how.where is not None:
            column, operator, value = how.where
            keep = F.col(column) == F.lit(value)
            frame = frame.filter(keep if operator == "==" else ~keep)
        selected.append(frame.select(
            RUN, "elapsed_s", F.lit(name).alias("figure"),
            F.col(how.key).cast("string").alias("key"),
            F.col(how.column).cast("double").alias("value")))
    if not selected:
        return {}
    union = selected[0]
    for more in selected[1:]:
        union = union.unionByName(more)
    rows = (union.join(spans, _in_span(spans)).groupBy("figure", "window", "key")
            .agg(F.avg("value").alias("mean"), F.max("value").alias("max"),
                 F.sum("value").alias("sum")).collect())
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r.key):
        how = FIGURES[row.figure]
        value = (row["max"] if isinstance(how, KeyMax) else
                 None if row["sum"] is None else int(row["sum"]) if isinstance(how, KeyCount)
                 else row["mean"])
        if value is not None:
            out.setdefault(row.figure, {}).setdefault(row.window, {})[row.key] = value
    return out


def _member_spans(members, spans, counted: bool
                  ) -> tuple[dict[int, list[MemberSpan]], dict[int, int]]:
    """Per window, each serving member's :class:`~results.rundir.figures.MemberSpan` and the
    distinct seconds where some member's figure was unknown (see
    :func:`results.rundir.figures.member_spans`)."""
    from pyspark.sql import functions as F
    serving = (members.filter(F.col("running"))
               .select(RUN, "elapsed_s", "member", CPU_COLUMN,
                       F.col(DELIVERED_COLUMN if counted else CPU_COLUMN).alias("figure"))
               .join(spans, _in_span(spans)))
    unknown = F.col("figure").isNull()
    known_at = F.when(~unknown, F.col("elapsed_s"))
    rows = (serving.groupBy("window", "member")
            .agg(F.avg(CPU_COLUMN).alias("cpu"),
                 (F.max("figure") - F.min("figure")).alias("delivered"),
                 (F.max(known_at) - F.min(known_at)).alias("known_s"),
                 F.sum(unknown.cast("int")).alias("unknown"),
                 F.collect_set(F.when(unknown, F.col("elapsed_s"))).alias("unknown_at"))
            .collect())
    by_window: dict[int, list[MemberSpan]] = {}
    unknown_at: dict[int, set[float]] = {}
    for row in sorted(rows, key=lambda r: r.member):
        by_window.setdefault(row.window, []).append(
            MemberSpan(row.member, row.delivered, row.known_s, row.unknown, row.cpu))
        unknown_at.setdefault(row.window, set()).update(row.unknown_at)
    seconds = {window: len(at) for window, at in unknown_at.items()}
    return by_window, seconds


def _with_cpu_seconds(members, runs: dict[int, _Run]):
    """Members rows with ``cpu_s``: CPU-seconds used, CPU% / 100 x the interval the CPU% is
    over (``cpu_interval_s``; for rows without one, as in runs before format 3, the time since
    the member's previous row, which the member's first row does not have; said in the run's
    ``problems``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    since = F.col("elapsed_s") - F.lag("elapsed_s").over(
        Window.partitionBy(RUN, "member").orderBy("elapsed_s"))
    given = "cpu_interval_s" in members.columns
    interval = F.coalesce(F.col("cpu_interval_s"), since) if given else since
    fallback = members.filter(F.col("cpu_percent").isNotNull() & (
        F.col("cpu_interval_s").isNull() if given else F.lit(True))).groupBy(RUN).count()
    for row in fallback.collect():
        runs[row[RUN]].analysis.problems.append(
            f"{row['count']} member CPU readings have no cpu_interval_s (as in runs before "
            "format 3): each is taken over the time since the member's previous row, a "
            "member's first row not at all")
    return members.withColumn("cpu_s", F.col("cpu_percent") / 100 * interval)


def _member_rows(members) -> dict[int, list[dict[str, Any]]]:
    """Per run, per member over the time it served: CPU, connections, the seconds its CPU and
    message count were unknown, and its shares of broker CPU-seconds and of the messages
    delivered (format 2 on), both over known readings only."""
    from pyspark.sql import functions as F
    counted = "messages_out" in members.columns
    rows = (members.filter(F.col("running"))
            .groupBy(RUN, "member").agg(
                F.avg("cpu_percent").alias("mean_cpu_percent"),
                F.max("cpu_percent").alias("max_cpu_percent"),
                F.avg("connections").alias("mean_connections"),
                F.sum("cpu_s").alias("cpu_seconds"),
                ((F.max("messages_out") - F.min("messages_out")) if counted
                 else F.lit(None).cast("long")).alias("messages_delivered"),
                F.count("*").alias("seconds_serving"),
                F.sum(F.col("cpu_percent").isNull().cast("int")).alias("cpu_unknown_s"),
                (F.sum(F.col("messages_out").isNull().cast("int")) if counted
                 else F.lit(None).cast("long")).alias("messages_unknown_s"))
            .orderBy(RUN, "member").collect())
    by_run: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        values = row.asDict()
        by_run.setdefault(values.pop(RUN), []).append(values)
    for listed in by_run.values():
        cpu = _shares([r["cpu_seconds"] for r in listed])
        messages = _shares([r["messages_delivered"] for r in listed])
        for values, c, m in zip(listed, cpu, messages):
            values.update(cpu_share=c, message_share=m)
    return by_run


def _shares(values: list[float | None]) -> list[float | None]:
    """Each known value's share of the known total (``None`` for unknown ones, or all when
    the known total is 0)."""
    total = sum(v for v in values if v is not None)
    return [v / total if v is not None and total else None for v in values]


def _costs(spark, runs: list[_Run], members, agents, price_per_core_hour: float,
           include_drain: bool) -> dict[int, dict[str, Any]]:
    """Per run: CPU microseconds per message for the broker and the load generator, and what
    carrying 1,000 msg/s costs per month at ``price_per_core_hour`` (document 001's ranking
    measure).

    Over the steps, from the first step's first tick to the last step's last (the drain left
    out) unless ``include_drain``: broker CPU-seconds are each member row's CPU% x its own
    interval (``members`` with ``cpu_s``), generator CPU-seconds what each agent's process used
    (its ``cpu_seconds`` counter), and the messages those received (from the collected
    ticks). A CPU no source measured (no member CPU reading in the run, e.g. Kubernetes or
    Native HA) is ``None``, never 0."""
    from pyspark.sql import functions as F
    span = {run.index: (-math.inf, math.inf) if include_drain else
            _steps_span(run.analysis.ticks) for run in runs}
    spans = spark.createDataFrame([(i, start, end) for i, (start, end) in span.items()],
                                  f"{RUN} int, start double, end double")
    before, until = F.col("elapsed_s") <= F.col("start"), F.col("elapsed_s") <= F.col("end")
    used = []  # (run, "broker" or "generator", CPU-seconds, known readings): one query
    if members is not None:
        used.append(members.join(F.broadcast(spans), RUN).groupBy(RUN).agg(
            F.lit("broker").alias("kind"),
            F.sum(F.when(~before & until, F.col("cpu_s"))).alias("used"),
            F.count("cpu_percent").alias("readings")))
    if agents is not None:
        used.append(agents.join(F.broadcast(spans), RUN).groupBy(RUN, "agent").agg(
            (F.max(F.when(until, F.col("cpu_seconds"))) - F.coalesce(
                F.max(F.when(before, F.col("cpu_seconds"))), F.min("cpu_seconds"))
             ).alias("per_agent"))
            .groupBy(RUN).agg(F.lit("generator").alias("kind"), F.sum("per_agent").alias("used"),
                              F.count("per_agent").alias("readings")))
    broker: dict[int, float] = {}
    generator: dict[int, float] = {}
    if used:
        union = used[0] if len(used) == 1 else used[0].unionByName(used[1])
        for r in union.collect():
            if r.readings:
                (broker if r.kind == "broker" else generator)[r[RUN]] = r.used or 0.0
    return {run.index: _cost(run.analysis, span[run.index], broker.get(run.index),
                             generator.get(run.index), price_per_core_hour, include_drain)
            for run in runs}


def _cost(analysis: RunAnalysis, span: tuple[float, float], broker_s: float | None,
          generator_s: float | None, price_per_core_hour: float, include_drain: bool
          ) -> dict[str, Any]:
    """One run's cost from its CPU-seconds over ``span`` (see :func:`_costs`)."""
    start, end = span
    received_at = [t["received"] for t in analysis.ticks
                   if t["elapsed_s"] <= end and t["received"] is not None]
    before = [t["received"] for t in analysis.ticks
              if t["elapsed_s"] <= start and t["received"] is not None]
    received = (max(received_at, default=0) or 0) - (max(before, default=0) or 0)
    accounting = analysis.manifest.accounting
    if include_drain:
        received = (accounting.received if accounting else None) or received
    if broker_s is None:
        analysis.problems.append("no member CPU readings in this run: broker cost unknown")
    broker_us = broker_s * 1e6 / received if received and broker_s is not None else None
    generator_us = generator_s * 1e6 / received if received and generator_s is not None \
        else None

    hosts_s = _hosts_cpu_s(analysis.host_samples, span)

    def monthly(us_per_msg: float | None) -> float | None:
        # Cores busy at 1,000 msg/s = 1,000 * us/msg / 1e6.
        return None if us_per_msg is None else \
            1000 * us_per_msg / 1e6 * price_per_core_hour * HOURS_PER_MONTH
    return {"messages": received, "broker_cpu_s": broker_s, "generator_cpu_s": generator_s,
            "broker_us_per_msg": broker_us, "generator_us_per_msg": generator_us,
            "hosts_cpu_s": hosts_s,
            "host_us_per_msg": {host: used * 1e6 / received for host, used in hosts_s.items()}
            if received else {},
            "price_per_core_hour": price_per_core_hour, "include_drain": include_drain,
            "span_s": None if include_drain else [start, end],
            "broker_cost_per_1k_msg_s_month": monthly(broker_us),
            "generator_cost_per_1k_msg_s_month": monthly(generator_us)}


def _hosts_cpu_s(samples: list[dict[str, Any]], span: tuple[float, float]) -> dict[str, float]:
    """CPU-seconds each host used over ``span`` (everything on it), from its readings of the
    hosts table (cores busy x the reading's interval); a host with no reading there is left
    out, never 0."""
    start, end = span
    used: dict[str, float] = {}
    for sample in samples:
        busy, interval = sample.get("cpu_cores_busy"), sample.get("cpu_interval_s")
        if busy is None or interval is None or not start < sample["elapsed_s"] <= end:
            continue
        used[sample["host"]] = used.get(sample["host"], 0.0) + busy * interval
    return used


def _steps_span(ticks: list[dict[str, Any]]) -> tuple[float, float]:
    """The (start, end] seconds of the steps: the second before the first tick of a step to
    the last such tick ((0, 0] if no tick was in a step)."""
    stepped = [t["elapsed_s"] for t in ticks if t["phase"] >= 1]
    return (min(stepped) - 1, max(stepped)) if stepped else (0.0, 0.0)
