"""Per-run analysis as Spark jobs over a run directory: step table, members, cost.

Reads only what the run directory holds (``run.json`` and the Parquet parts), never the
controller. Unreadable parts are skipped and named in ``problems``. The windows are the
controller's own (:func:`results.rundir.steps.segments` and
:func:`results.rundir.steps.drain_ticks` on the ticks read with pyarrow); Spark aggregates each
window's rows as :func:`results.rundir.steps.window_row` does, so the two step tables agree by
construction. Rates are means of the known seconds; latency percentiles come from histograms
merged across all seconds of a window (summed per bucket in Spark), never from averaging
percentiles. A figure no source gave is unknown (``None``), never 0."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results.rundir.histogram import LatencyHistogram
from results.rundir.jsonfile import read_object
from results.rundir.steps import drain_ticks, segments
from results.rundir.tables import CONTROLLER_HOST, FORMAT_VERSION, read_table, readable_parts

READABLE_VERSIONS = tuple(range(1, FORMAT_VERSION + 1))
PERCENTILES = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}
HOURS_PER_MONTH = 730.0


@dataclass
class RunAnalysis:
    """What the Spark jobs found in one run directory."""

    run_dir: Path
    manifest: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    drain: dict[str, Any] | None = None  # the row after the last step, labelled "drain"
    settle_s: float = 0.0
    settle_excluded_s: int = 0  # seconds of the steps left out of every row as settle
    members: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self.manifest["scenario"]["name"]


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``run.json``, checked for a format version this reader understands."""
    path = run_dir / "run.json"
    manifest = read_object(path, missing="missing; not a run directory")
    version = manifest.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{path}: format_version {version!r}; this surge reads "
                         f"{' and '.join(map(str, READABLE_VERSIONS))}")
    return manifest


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
    if manifest.get("outcome") is None:
        result.problems.append(f"{run_dir / 'run.json'}: no outcome (a crashed run); "
                               "analysed as far as it was recorded")
    result.settle_s = float(manifest["scenario"]["measure"]["settle"])
    phases = manifest.get("phases") or []
    when = sorted(read_table(run_dir, "ticks").select(["elapsed_s", "phase", "members_running"])
                  .to_pylist(), key=lambda t: t["elapsed_s"])
    windows = [(phase["index"], label, ticks)
               for phase, label, ticks in segments(phases, when, result.settle_s)]
    result.settle_excluded_s = sum(1 for t in when if t["phase"] >= 1) - \
        sum(len(ticks) for *_, ticks in windows)
    drain = drain_ticks(phases, when)
    frames = {table: spark.read.parquet(*paths) if paths else None
              for table, paths in parts.items()}
    rows = _window_rows(spark, frames["ticks"], frames["members"], frames["hosts"],
                        windows + ([(0, "drain", drain)] if drain else []))
    result.steps = [row for row in rows if row["label"] != "drain"]
    result.drain = next((row for row in rows if row["label"] == "drain"), None)
    members = frames["members"]
    if members is not None:
        members = _with_cpu_seconds(members, result.problems)
        result.members = _member_rows(members)
    result.cost = _cost(frames["ticks"], members, frames["agents"], manifest,
                        price_per_core_hour, include_drain, result.problems)
    return result


def _window_rows(spark, ticks, members, hosts, windows: list[tuple[int, str, list[dict]]]
                 ) -> list[dict[str, Any]]:
    """One row per window ``(step, label, ticks)``: the figures of
    :func:`results.rundir.steps.window_row` aggregated in Spark over the window's ticks (found
    by their ``elapsed_s``), with more percentiles, reconnects, max backlog, the messages each
    member delivered and the balance."""
    if not windows:
        return []
    from pyspark.sql import functions as F
    keys = spark.createDataFrame([(float(t["elapsed_s"]), i) for i, (*_, window)
                                  in enumerate(windows) for t in window],
                                 "elapsed_s double, window int")
    tagged = ticks.join(F.broadcast(keys), "elapsed_s").cache()
    figures = {row.window: row for row in
               tagged.groupBy("window").agg(*_tick_figures(ticks.columns)).collect()}
    buckets = (tagged.select("window", F.explode(F.arrays_zip("latency_buckets",
                                                              "latency_counts")).alias("b"))
               .groupBy("window", F.col("b.latency_buckets").alias("bucket"))
               .agg(F.sum("b.latency_counts").alias("count")).collect())
    tagged.unpersist()
    histograms: dict[int, dict[int, int]] = {}
    for row in buckets:
        histograms.setdefault(row.window, {})[row.bucket] = row["count"]
    spans = spark.createDataFrame(
        [(i, float(row.start_s), float(row.end_s), row.seconds) for i, row in figures.items()],
        "window int, start_s double, end_s double, seconds long")
    per_member = _window_members(members, spans) if members is not None else {}
    per_host = _window_means(hosts.filter(F.col("host") != CONTROLLER_HOST), "host", spans) \
        if hosts is not None else {}
    out = []
    for i, (step, label, _) in enumerate(windows):
        row = figures.get(i)
        if row is None:  # its ticks were all in parts Spark could not read
            continue
        histogram = LatencyHistogram.from_sparse(histograms.get(i, {}))
        known = row.sent_rate is not None and row.received_rate is not None
        out.append({
            "step": step, "label": label, "target_rate": row.target_rate,
            "achieved_rate": min(row.sent_rate, row.received_rate) if known else None,
            "min_rate": row.min_rate, "sent_rate": row.sent_rate,
            "received_rate": row.received_rate, "members": row.members,
            **per_member.get(i, _NO_MEMBERS), "host_cpu_percent": row.host_cpu_percent,
            "hosts_cpu_percent": per_host.get(i, {}),
            **{name: histogram.percentile(q) / 1000 if histogram.count else None
               for name, q in PERCENTILES.items()},
            "max_ms": histogram.max_us / 1000 if histogram.count else None,
            **{name: row[name] for name in ("errors", "reconnects", "skipped", "max_backlog",
                                            "seconds", "missing_seconds", "start_s",
                                            "end_s")}})
    return out


def _tick_figures(columns: list[str]) -> list:
    """Spark aggregates of a window's ticks, named as :class:`results.rundir.steps.StepRow`'s
    fields; columns a format did not record count as 0 (counters) or as known (flags)."""
    from pyspark.sql import functions as F

    def col(name: str, default):
        return F.coalesce(F.col(name), F.lit(default)) if name in columns else F.lit(default)

    def change(name: str):  # a cumulative counter from the window's first tick to its last
        return (F.max_by(col(name, 0), "elapsed_s") - F.min_by(col(name, 0), "elapsed_s")
                ).alias(name)
    both = F.col("send_rate").isNotNull() & F.col("receive_rate").isNotNull()
    missing = (col("agents_missing", 0) > 0) | col("broker_missing", False) \
        | F.col("queue_depth").isNull()
    return [F.avg("target_rate").alias("target_rate"), F.avg("send_rate").alias("sent_rate"),
            F.avg("receive_rate").alias("received_rate"),
            F.min(F.when(both, F.least("send_rate", "receive_rate"))).alias("min_rate"),
            F.max("members_running").alias("members"),
            F.avg("host_cpu_percent").alias("host_cpu_percent"),
            change("errors"), change("reconnects"), change("skipped"),
            F.max("queue_depth").alias("max_backlog"), F.count("*").alias("seconds"),
            F.sum(missing.cast("int")).alias("missing_seconds"),
            (F.min("elapsed_s") - 1).alias("start_s"), F.max("elapsed_s").alias("end_s")]


_NO_MEMBERS: dict[str, Any] = {"cpu_percent": {}, "delivered_per_member": {}, "balance": None,
                               "balance_seconds": 0, "unknown_per_member": {}}


def _in_span():
    from pyspark.sql import functions as F
    return (F.col("elapsed_s") > F.col("start_s")) & (F.col("elapsed_s") <= F.col("end_s"))


def _window_means(frame, key: str, spans) -> dict[int, dict[str, float]]:
    """Per window and ``key`` (member or host): the mean of the known CPU% in its span."""
    from pyspark.sql import functions as F
    rows = (frame.select("elapsed_s", key, "cpu_percent").join(spans, _in_span())
            .groupBy("window", key).agg(F.avg("cpu_percent").alias("cpu")).collect())
    out: dict[int, dict[str, float]] = {}
    for row in sorted(rows, key=lambda r: r[key]):
        if row.cpu is not None:
            out.setdefault(row.window, {})[row[key]] = row.cpu
    return out


def _window_members(members, spans) -> dict[int, dict[str, Any]]:
    """Per window, over the serving members' rows in its span: mean known CPU%, messages each
    member's queues delivered (format 2 on), the balance over known readings only (Jain's
    index over each member's delivery rate between its first and last known count; over mean
    CPU% for format 1; ``None`` when a member has none), the seconds known for every member and
    each member's unknown seconds."""
    from pyspark.sql import functions as F
    counted = "messages_out" in members.columns
    serving = (members.filter(F.col("running"))
               .select("elapsed_s", "member", "cpu_percent",
                       F.col("messages_out" if counted else "cpu_percent").alias("figure"))
               .join(spans, _in_span()))
    unknown = F.col("figure").isNull()
    known_at = F.when(~unknown, F.col("elapsed_s"))
    rows = (serving.groupBy("window", "member")
            .agg(F.avg("cpu_percent").alias("cpu"),
                 (F.max("figure") - F.min("figure")).alias("delivered"),
                 (F.max(known_at) - F.min(known_at)).alias("known_s"),
                 F.sum(unknown.cast("int")).alias("unknown")).collect())
    known_seconds = {row.window: row.known for row in serving.groupBy("window", "seconds").agg(
        (F.col("seconds") - F.countDistinct(F.when(unknown, F.col("elapsed_s"))))
        .alias("known")).collect()}
    out: dict[int, dict[str, Any]] = {}
    serving_members: dict[int, int] = {}
    for row in sorted(rows, key=lambda r: r.member):
        serving_members[row.window] = serving_members.get(row.window, 0) + 1
        entry = out.setdefault(row.window, {
            "cpu_percent": {}, "delivered_per_member": {}, "rates": {}, "unknown_per_member": {},
            "balance_seconds": known_seconds[row.window]})
        if row.cpu is not None:
            entry["cpu_percent"][row.member] = row.cpu
        if row.unknown:
            entry["unknown_per_member"][row.member] = row.unknown
        if counted and row.delivered is not None:
            entry["delivered_per_member"][row.member] = row.delivered
            if row.known_s:
                entry["rates"][row.member] = row.delivered / row.known_s
    for window, entry in out.items():  # no balance while a member's figure is all unknown
        known = entry.pop("rates") if counted else entry["cpu_percent"]
        entry["balance"] = jain_index(list(known.values())) \
            if len(known) == serving_members[window] else None
    return out


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


def _cost(ticks, members, agents, manifest: dict, price_per_core_hour: float,
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
        received = (manifest.get("accounting") or {}).get("received") or received
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


def jain_index(values: list[float]) -> float | None:
    """Jain's fairness index: 1.0 when the load is spread evenly, 1/n when one takes it all."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))
