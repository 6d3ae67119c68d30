"""Per-run analysis as Spark jobs over a run directory: step table, members, cost.

Reads only what the run directory holds (``run.json`` and the Parquet parts), never the
controller. Unreadable parts are skipped and named in ``problems``; latency percentiles come from
histograms merged across all seconds of a step (summed per bucket in Spark), never from
averaging percentiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drivers.histogram import LatencyHistogram
from results.jsonfile import read_object
from results.rundir import FORMAT_VERSION, readable_parts

READABLE_VERSIONS = tuple(range(1, FORMAT_VERSION + 1))
PERCENTILES = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}
HOURS_PER_MONTH = 730.0


@dataclass
class RunAnalysis:
    """What the Spark jobs found in one run directory."""

    run_dir: Path
    manifest: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
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


def analyze_run(spark, run_dir: Path, price_per_core_hour: float) -> RunAnalysis:
    """Run the step-table, member and cost jobs on one run directory."""
    manifest = read_manifest(run_dir)
    result = RunAnalysis(run_dir, manifest)
    parts = {table: [str(p) for p in readable_parts(run_dir, table, result.problems)]
             for table in ("ticks", "members", "agents")}
    if not parts["ticks"]:
        result.problems.append(f"{run_dir / 'metrics/ticks'}: no readable ticks; "
                               "nothing to analyse")
        return result
    if manifest.get("outcome") is None:
        result.problems.append(f"{run_dir / 'run.json'}: no outcome (a crashed run); "
                               "analysed as far as it was recorded")
    settle_s = float(manifest["scenario"]["measure"]["settle"])
    ticks = spark.read.parquet(*parts["ticks"])
    members = spark.read.parquet(*parts["members"]) if parts["members"] else None
    steady = _steady_ticks(spark, ticks, manifest.get("phases") or [], settle_s)
    result.steps = _step_rows(steady, members)
    if members is not None:
        result.members = _member_rows(members)
    agents = spark.read.parquet(*parts["agents"]) if parts["agents"] else None
    result.cost = _cost(ticks, members, agents, manifest, price_per_core_hour)
    return result


def _steady_ticks(spark, ticks, phases: list[dict], settle_s: float):
    """Ticks of the steady parts of each phase, tagged with ``segment`` (a member-count run)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    phase_starts = spark.createDataFrame(
        [(int(p["index"]), float(p["start_s"])) for p in phases] or [(0, 0.0)],
        "phase int, start_s double")
    order = Window.partitionBy("phase").orderBy("elapsed_s")
    changed = (F.lag("members_running").over(order) != F.col("members_running")).cast("int")
    tagged = (ticks.filter(F.col("phase") >= 1)
              .withColumn("segment", F.sum(F.coalesce(changed, F.lit(0))).over(
                  order.rowsBetween(Window.unboundedPreceding, 0)))
              .withColumn("segment_start", F.min("elapsed_s").over(
                  Window.partitionBy("phase", "segment")))
              .join(phase_starts, "phase"))
    return tagged.filter(F.col("elapsed_s") >= F.greatest(
        F.col("segment_start") - 1 + settle_s, F.col("start_s") + settle_s)).cache()


def _step_rows(steady, members) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F
    keys = ["phase", "segment"]
    figures = steady.groupBy(*keys).agg(
        F.avg("target_rate").alias("target_rate"), F.avg("send_rate").alias("sent_rate"),
        F.avg("receive_rate").alias("received_rate"),
        F.min(F.least("send_rate", "receive_rate")).alias("min_rate"),
        F.max("members_running").alias("members"),
        F.avg("host_cpu_percent").alias("host_cpu_percent"),
        (F.max("errors") - F.min("errors")).alias("errors"),
        (F.max("reconnects") - F.min("reconnects")).alias("reconnects"),
        F.max("queue_depth").alias("max_backlog"), F.count("*").alias("seconds"),
        (F.min("elapsed_s") - 1).alias("start_s"), F.max("elapsed_s").alias("end_s"),
    ).orderBy(*keys).collect()
    buckets = (steady.select(*keys, F.explode(F.arrays_zip("latency_buckets", "latency_counts"))
                             .alias("b"))
               .groupBy(*keys, F.col("b.latency_buckets").alias("bucket"))
               .agg(F.sum("b.latency_counts").alias("count")).collect())
    histograms: dict[tuple, dict[int, int]] = {}
    for row in buckets:
        histograms.setdefault((row.phase, row.segment), {})[row.bucket] = row["count"]
    per_member = _segment_members(steady, members, figures)
    segments_per_phase: dict[int, int] = {}
    for row in figures:
        segments_per_phase[row.phase] = segments_per_phase.get(row.phase, 0) + 1
    out, seen = [], {}
    for row in figures:
        seen[row.phase] = seen.get(row.phase, -1) + 1
        suffix = chr(ord("a") + seen[row.phase]) if segments_per_phase[row.phase] > 1 else ""
        histogram = LatencyHistogram.from_sparse(histograms.get((row.phase, row.segment), {}))
        member_cpu, delivered = per_member.get((row.phase, row.segment), ({}, {}))
        out.append({
            "step": row.phase, "label": f"{row.phase}{suffix}",
            "target_rate": row.target_rate,
            "achieved_rate": min(row.sent_rate, row.received_rate), "min_rate": row.min_rate,
            "sent_rate": row.sent_rate, "received_rate": row.received_rate,
            "members": row.members, "cpu_percent": member_cpu,
            "delivered_per_member": delivered,
            "balance": jain_index(list((delivered or member_cpu).values())),
            "host_cpu_percent": row.host_cpu_percent,
            **{name: histogram.percentile(q) / 1000 if histogram.count else None
               for name, q in PERCENTILES.items()},
            "max_ms": histogram.max_us / 1000 if histogram.count else None,
            "errors": row.errors, "reconnects": row.reconnects, "max_backlog": row.max_backlog,
            "seconds": row.seconds, "start_s": row.start_s, "end_s": row.end_s})
    return out


def _segment_members(steady, members, figures) -> dict[tuple, tuple[dict, dict]]:
    """Per segment and serving member over its (start, end] span: mean CPU%, and messages
    delivered from the queues it leads (format 2 on; empty for format 1 runs)."""
    if members is None:
        return {}
    from pyspark.sql import functions as F
    spans = steady.sparkSession.createDataFrame(
        [(r.phase, r.segment, float(r.start_s), float(r.end_s)) for r in figures] or
        [(0, 0, 0.0, 0.0)], "phase int, segment long, start_s double, end_s double")
    counted = "messages_out" in members.columns
    delivered = (F.max("messages_out") - F.min("messages_out")) if counted else F.lit(None)
    rows = (members.filter(F.col("running") & F.col("cpu_percent").isNotNull())
            .join(spans, (F.col("elapsed_s") > F.col("start_s"))
                  & (F.col("elapsed_s") <= F.col("end_s")))
            .groupBy("phase", "segment", "member")
            .agg(F.avg("cpu_percent").alias("cpu"), delivered.alias("delivered")).collect())
    out: dict[tuple, tuple[dict, dict]] = {}
    for row in sorted(rows, key=lambda r: r.member):
        cpu, messages = out.setdefault((row.phase, row.segment), ({}, {}))
        cpu[row.member] = row.cpu
        if row.delivered is not None:
            messages[row.member] = row.delivered
    return out


def _member_rows(members) -> list[dict[str, Any]]:
    """Per member over the time it served: CPU, connections, and its shares of broker CPU and
    of the messages delivered (format 2 on)."""
    from pyspark.sql import functions as F
    counted = "messages_out" in members.columns
    rows = (members.filter(F.col("running"))
            .groupBy("member").agg(
                F.avg("cpu_percent").alias("mean_cpu_percent"),
                F.max("cpu_percent").alias("max_cpu_percent"),
                F.avg("connections").alias("mean_connections"),
                F.sum(F.col("cpu_percent") / 100).alias("cpu_seconds"),
                ((F.max("messages_out") - F.min("messages_out")) if counted
                 else F.lit(None).cast("long")).alias("messages_delivered"),
                F.count("*").alias("seconds_serving"))
            .orderBy("member").collect())
    cpu_total = sum(r.cpu_seconds or 0.0 for r in rows) or 1.0
    messages_total = sum(r.messages_delivered or 0 for r in rows)
    return [{**r.asDict(), "cpu_share": (r.cpu_seconds or 0.0) / cpu_total,
             "message_share": (r.messages_delivered or 0) / messages_total
             if messages_total else None} for r in rows]


def _cost(ticks, members, agents, manifest: dict, price_per_core_hour: float) -> dict[str, Any]:
    """CPU microseconds per message for the broker and the load generator, and what carrying
    1,000 msg/s costs per month at ``price_per_core_hour`` (document 001's ranking measure)."""
    from pyspark.sql import functions as F
    accounting = manifest.get("accounting") or {}
    totals = ticks.agg(F.max("sent").alias("sent"), F.max("received").alias("received")).first()
    received = accounting.get("received") or totals.received or 0
    broker_s = (members.agg(F.sum(F.col("cpu_percent") / 100)).first()[0] or 0.0) \
        if members is not None else 0.0
    generator_s = 0.0
    if agents is not None:
        generator_s = sum(r.used or 0.0 for r in agents.groupBy("agent").agg(
            (F.max("cpu_seconds") - F.min("cpu_seconds")).alias("used")).collect())
    broker_us = broker_s * 1e6 / received if received else None
    generator_us = generator_s * 1e6 / received if received else None

    def monthly(us_per_msg: float | None) -> float | None:
        # Cores busy at 1,000 msg/s = 1,000 * us/msg / 1e6.
        return None if us_per_msg is None else \
            1000 * us_per_msg / 1e6 * price_per_core_hour * HOURS_PER_MONTH
    return {"messages": received, "broker_cpu_s": broker_s, "generator_cpu_s": generator_s,
            "broker_us_per_msg": broker_us, "generator_us_per_msg": generator_us,
            "price_per_core_hour": price_per_core_hour,
            "broker_cost_per_1k_msg_s_month": monthly(broker_us),
            "generator_cost_per_1k_msg_s_month": monthly(generator_us)}


def jain_index(values: list[float]) -> float | None:
    """Jain's fairness index: 1.0 when the load is spread evenly, 1/n when one takes it all."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))
