"""Per-run analysis as Spark jobs over a run directory: step table, members, cost.

Reads only what the run directory holds (``run.json`` and the Parquet parts), never the
controller. Unreadable parts are skipped and named in ``problems``. The step table is the
controller's own rule: the windows are :func:`results.rundir.steps.windows` of the ticks read
with pyarrow, handed to Spark as a small table joined to the ticks; Spark reduces each window
by the kind each :class:`results.rundir.steps.StepRow` field declares (the kinds of
:mod:`results.rundir.figures`, here as Spark expressions) and
:func:`results.rundir.steps.finish` makes the rows, so the two step tables agree by
construction. A figure no source gave is unknown (``None``), never 0."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results.rundir.figures import (
    CPU_COLUMN,
    DELIVERED_COLUMN,
    TICK_KINDS,
    Change,
    Count,
    Delivery,
    Figure,
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
from results.rundir.tables import read_table, readable_parts

HOURS_PER_MONTH = 730.0


@dataclass
class RunAnalysis:
    """What the Spark jobs found in one run directory."""

    run_dir: Path
    manifest: RunManifest
    steps: list[StepRow] = field(default_factory=list)
    drain: StepRow | None = None  # the row after the last step, labelled "drain"
    settle_s: float = 0.0
    settle_excluded_s: int = 0  # seconds of the steps left out of every row as settle
    members: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self.manifest.scenario_name


def analyze_run(spark, run_dir: Path, price_per_core_hour: float,
                include_drain: bool = False) -> RunAnalysis:
    """Run the step-table, member and cost jobs on one run directory. The cost leaves the
    drain (phase 0 before the first step and after the last) out unless ``include_drain``."""
    manifest = read_manifest(run_dir)
    result = RunAnalysis(run_dir, manifest)
    parts = {table: [str(p) for p in readable_parts(run_dir, table, result.problems)]
             for table in ("ticks", "members", "agents", "hosts")}
    if not parts["ticks"]:
        result.problems.append(f"{run_dir / 'metrics/ticks'}: no readable ticks; "
                               "nothing to analyse")
        return result
    if manifest.outcome is None:
        result.problems.append(f"{run_dir / 'run.json'}: no outcome (a crashed run); "
                               "analysed as far as it was recorded")
    result.settle_s = manifest.settle_s
    when = sorted(read_table(run_dir, "ticks").select(["elapsed_s", "phase", "members_running"])
                  .to_pylist(), key=lambda t: t["elapsed_s"])
    rows_of = windows(manifest.phases, when, result.settle_s)
    result.settle_excluded_s = settle_excluded(when, rows_of)
    frames = {table: spark.read.parquet(*paths) if paths else None
              for table, paths in parts.items()}
    rows = window_rows(spark, frames, rows_of)
    result.steps = [row for row in rows if row.label != DRAIN_LABEL]
    result.drain = next((row for row in rows if row.label == DRAIN_LABEL), None)
    members = frames["members"]
    if members is not None:
        members = _with_cpu_seconds(members, result.problems)
        result.members = _member_rows(members)
    result.cost = _cost(frames["ticks"], members, frames["agents"], manifest,
                        price_per_core_hour, include_drain, result.problems)
    return result


def window_rows(spark, frames: dict[str, Any], rows_of: list[Window]) -> list[StepRow]:
    """One :class:`StepRow` per window whose ticks Spark read: each window reduced in Spark
    (its ticks found by their ``elapsed_s``, the member and host rows by its span) into a
    :class:`~results.rundir.figures.Partial`, finished as the controller finishes its own."""
    if not rows_of:
        return []
    from pyspark.sql import functions as F
    ticks = frames["ticks"]
    keys = spark.createDataFrame([(float(second), i) for i, window in enumerate(rows_of)
                                  for second in window.seconds],
                                 "elapsed_s double, window int")
    tagged = ticks.join(F.broadcast(keys), "elapsed_s").cache()
    reduced = {row.window: row.asDict() for row in tagged.groupBy("window").agg(
        *[_tick_expression(how, ticks.columns).alias(name) for name, how in FIGURES.items()
          if isinstance(how, TICK_KINDS)]).collect()}
    histograms: dict[int, dict[str, dict[int, int]]] = {}
    for histogram in histograms_of(FIGURES):
        bucket, count = histogram_columns(histogram)
        if bucket not in ticks.columns:  # a run from before it was recorded: unknown
            continue
        for row in (tagged.select("window", F.explode(F.arrays_zip(bucket, count)).alias("b"))
                    .groupBy("window", F.col(f"b.{bucket}").alias("bucket"))
                    .agg(F.sum(f"b.{count}").alias("count")).collect()):
            histograms.setdefault(row.window, {}).setdefault(histogram, {})[row.bucket] = \
                row["count"]
    tagged.unpersist()
    spans = spark.createDataFrame([(i, float(w.start_s), float(w.end_s))
                                   for i, w in enumerate(rows_of)],
                                  "window int, start_s double, end_s double")
    keyed = {name: _key_means(frames.get(how.table), how, spans)
             for name, how in FIGURES.items() if isinstance(how, KeyMean)}
    members = frames.get("members")
    counted = members is None or DELIVERED_COLUMN in members.columns
    delivery: tuple[dict[int, list[MemberSpan]], dict[int, int]] = ({}, {})
    if members is not None and any(isinstance(how, Delivery) for how in FIGURES.values()):
        delivery = _member_spans(members, spans, counted)
    return [finish(window, Partial(
        ticks=reduced[i], histograms=histograms.get(i, {}),
        keyed={name: means.get(i, {}) for name, means in keyed.items()},
        members=delivery[0].get(i, []), unknown_seconds=delivery[1].get(i, 0), counted=counted))
        for i, window in enumerate(rows_of) if i in reduced]  # else its parts were unreadable


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


def _in_span():
    from pyspark.sql import functions as F
    return (F.col("elapsed_s") > F.col("start_s")) & (F.col("elapsed_s") <= F.col("end_s"))


def _key_means(frame, how: KeyMean, spans) -> dict[int, dict[str, float]]:
    """Per window and key (member or host): the mean known CPU% of the kept rows in its span
    (see :func:`results.rundir.figures.key_means`)."""
    if frame is None:
        return {}
    from pyspark.sql import functions as F
    column, operator, value = how.where
    keep = F.col(column) == F.lit(value)
    rows = (frame.filter(keep if operator == "==" else ~keep)
            .select("elapsed_s", how.key, CPU_COLUMN).join(spans, _in_span())
            .groupBy("window", how.key).agg(F.avg(CPU_COLUMN).alias("cpu")).collect())
    out: dict[int, dict[str, float]] = {}
    for row in sorted(rows, key=lambda r: r[how.key]):
        if row.cpu is not None:
            out.setdefault(row.window, {})[row[how.key]] = row.cpu
    return out


def _member_spans(members, spans, counted: bool
                  ) -> tuple[dict[int, list[MemberSpan]], dict[int, int]]:
    """Per window, each serving member's :class:`~results.rundir.figures.MemberSpan` and the
    distinct seconds where some member's figure was unknown (see
    :func:`results.rundir.figures.member_spans`)."""
    from pyspark.sql import functions as F
    serving = (members.filter(F.col("running"))
               .select("elapsed_s", "member", CPU_COLUMN,
                       F.col(DELIVERED_COLUMN if counted else CPU_COLUMN).alias("figure"))
               .join(spans, _in_span()))
    unknown = F.col("figure").isNull()
    known_at = F.when(~unknown, F.col("elapsed_s"))
    rows = (serving.groupBy("window", "member")
            .agg(F.avg(CPU_COLUMN).alias("cpu"),
                 (F.max("figure") - F.min("figure")).alias("delivered"),
                 (F.max(known_at) - F.min(known_at)).alias("known_s"),
                 F.sum(unknown.cast("int")).alias("unknown")).collect())
    by_window: dict[int, list[MemberSpan]] = {}
    for row in sorted(rows, key=lambda r: r.member):
        by_window.setdefault(row.window, []).append(
            MemberSpan(row.member, row.delivered, row.known_s, row.unknown, row.cpu))
    seconds = {row.window: row.n for row in serving.groupBy("window").agg(
        F.countDistinct(F.when(unknown, F.col("elapsed_s"))).alias("n")).collect()}
    return by_window, seconds


def _with_cpu_seconds(members, problems: list[str]):
    """Members rows with ``cpu_s``: CPU-seconds used, CPU% / 100 x the interval the CPU% is
    over (``cpu_interval_s``; for rows without one, as in runs before format 3, the time since
    the member's previous row, which the member's first row does not have; said in
    ``problems``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    since = F.col("elapsed_s") - F.lag("elapsed_s").over(
        Window.partitionBy("member").orderBy("elapsed_s"))
    given = "cpu_interval_s" in members.columns
    interval = F.coalesce(F.col("cpu_interval_s"), since) if given else since
    fallback = members.filter(F.col("cpu_percent").isNotNull() & (
        F.col("cpu_interval_s").isNull() if given else F.lit(True))).count()
    if fallback:
        problems.append(f"{fallback} member CPU readings have no cpu_interval_s (as in runs "
                        "before format 3): each is taken over the time since the member's previous "
                        "row, a member's first row not at all")
    return members.withColumn("cpu_s", F.col("cpu_percent") / 100 * interval)


def _member_rows(members) -> list[dict[str, Any]]:
    """Per member over the time it served: CPU, connections, the seconds its CPU and message
    count were unknown, and its shares of broker CPU-seconds and of the messages delivered
    (format 2 on), both over known readings only."""
    from pyspark.sql import functions as F
    counted = "messages_out" in members.columns
    rows = (members.filter(F.col("running"))
            .groupBy("member").agg(
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
            .orderBy("member").collect())
    cpu = _shares([r.cpu_seconds for r in rows])
    messages = _shares([r.messages_delivered for r in rows])
    return [{**r.asDict(), "cpu_share": c, "message_share": m}
            for r, c, m in zip(rows, cpu, messages)]


def _shares(values: list[float | None]) -> list[float | None]:
    """Each known value's share of the known total (``None`` for unknown ones, or all when
    the known total is 0)."""
    total = sum(v for v in values if v is not None)
    return [v / total if v is not None and total else None for v in values]


def _cost(ticks, members, agents, manifest: RunManifest, price_per_core_hour: float,
          include_drain: bool, problems: list[str]) -> dict[str, Any]:
    """CPU microseconds per message for the broker and the load generator, and what carrying
    1,000 msg/s costs per month at ``price_per_core_hour`` (document 001's ranking measure).

    Over the steps, from the first step's first tick to the last step's last (the drain left
    out) unless ``include_drain``: broker CPU-seconds are each member row's CPU% x its own
    interval (``members`` with ``cpu_s``), generator CPU-seconds what each agent's process used
    (its ``cpu_seconds`` counter), and the messages those received. A CPU no source measured
    (no member CPU reading in the run, e.g. Kubernetes or Native HA) is ``None``, never 0."""
    from pyspark.sql import functions as F
    start, end = (-math.inf, math.inf) if include_drain else _steps_span(ticks)
    before, until = F.col("elapsed_s") <= start, F.col("elapsed_s") <= end
    totals = ticks.agg(F.max(F.when(until, F.col("received"))).alias("end"),
                       F.max(F.when(before, F.col("received"))).alias("start")).first()
    received = (totals.end or 0) - (totals.start or 0)
    if include_drain:
        received = (manifest.accounting.received if manifest.accounting else None) or received
    broker_s = None
    if members is not None:
        known = members.agg(F.count("cpu_percent").alias("readings"),
                            F.sum(F.when(~before & until, F.col("cpu_s"))).alias("used")).first()
        broker_s = (known.used or 0.0) if known.readings else None
    if broker_s is None:
        problems.append("no member CPU readings in this run: broker cost unknown")
    generator_s = None
    if agents is not None:
        used = [r.used for r in agents.groupBy("agent").agg(
            (F.max(F.when(until, F.col("cpu_seconds"))) - F.coalesce(
                F.max(F.when(before, F.col("cpu_seconds"))), F.min("cpu_seconds"))
             ).alias("used")).collect() if r.used is not None]
        generator_s = sum(used) if used else None
    broker_us = broker_s * 1e6 / received if received and broker_s is not None else None
    generator_us = generator_s * 1e6 / received if received and generator_s is not None \
        else None

    def monthly(us_per_msg: float | None) -> float | None:
        # Cores busy at 1,000 msg/s = 1,000 * us/msg / 1e6.
        return None if us_per_msg is None else \
            1000 * us_per_msg / 1e6 * price_per_core_hour * HOURS_PER_MONTH
    return {"messages": received, "broker_cpu_s": broker_s, "generator_cpu_s": generator_s,
            "broker_us_per_msg": broker_us, "generator_us_per_msg": generator_us,
            "price_per_core_hour": price_per_core_hour, "include_drain": include_drain,
            "span_s": None if include_drain else [start, end],
            "broker_cost_per_1k_msg_s_month": monthly(broker_us),
            "generator_cost_per_1k_msg_s_month": monthly(generator_us)}


def _steps_span(ticks) -> tuple[float, float]:
    """The (start, end] seconds of the steps: the second before the first tick of a step to
    the last such tick ((0, 0] if no tick was in a step)."""
    from pyspark.sql import functions as F
    span = ticks.filter(F.col("phase") >= 1).agg(
        (F.min("elapsed_s") - 1).alias("start"), F.max("elapsed_s").alias("end")).first()
    return (0.0, 0.0) if span.end is None else (span.start, span.end)
