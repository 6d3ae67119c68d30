"""Synthetic run directories with known answers, for the analysis tests and benchmarks.

A run at 1 Hz: phases of ``phase_s`` seconds, phase *p* targets 1,000 *p* msg/s; one member
serves (at 25% CPU, receiving 90% of the target) until ``second_member_at``, then two (the second
at 15% CPU, its queue delivering 40% of the messages) receive all of it. Each second records
``samples`` lognormal latencies. Then ``drain_s`` seconds of phase 0 (the drain) receive
``DRAIN_RATE`` msg/s with nothing sent. Measured from their intended send times, the same
latencies are ``SCHEDULE_LAG_US`` longer. In the ``unknown`` seconds the agents missed the deadline
(rates and latencies unknown) and so did the second member (its CPU and counts unknown). The
hosts table holds the controller's host at 50% and ``broker-1`` at 30%. Members read report
their resources (:data:`MEMORY_START_MIB`). ``format_version`` 2 or
1 writes an earlier format: no run format 3 columns and no hosts table (1: no per-member message
counts either); ``intended=False`` writes a run of format 3 from before the intended latency
(no ``intended_*`` columns). The parts are compacted as a closing run's are, unless not
``compacted``. ``outliers`` maps seconds to a rate (msg/s) published and received in that second
instead; with ``closed``, ``run.json`` gets the step table and a balanced accounting as a
finished run's controller writes them.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from orchestrator.specs.plan import Phase
from results.rundir.figures import INTENDED, LATENCY, histogram_columns
from results.rundir.histogram import LatencyHistogram
from results.rundir.manifest import FORMAT_VERSION, Accounting, RunManifest, Sampling, read_manifest
from results.rundir.steps import step_rows
from results.rundir.tables import (
    CONTROLLER_HOST,
    RunWriter,
    latency_columns,
    read_rows,
    table_files,
)

MIB = 1 << 20
MEMORY_START_MIB, MEMORY_LIMIT_MIB = 96, 128
"""The first member's memory is ``MEMORY_START_MIB`` + the second's number MiB, over its high
watermark of ``MEMORY_LIMIT_MIB`` MiB (memory alarm on) after second 32; the second member's
is half its watermark throughout."""
SECOND_MEMBER_SHARE = 0.4
WIRE_BYTES, LINK_MBPS = 1100, 100.0  # each message's bytes on the wire, each way; the link
DRAIN_RATE = 500.0
SCHEDULE_LAG_US = 5000  # each message went this long after its intended send time
FORMAT_2_COLUMNS = {  # what each table held before run format 3
    "ticks": ["t", "elapsed_s", "phase", "target_rate", "send_rate", "receive_rate",
              "confirm_rate", "sent", "received", "confirmed", "errors", "reconnects",
              "connections", "members_running", "queue_depth", "latency_p50_ms",
              "latency_p99_ms", "host_cpu_percent", "latency_buckets", "latency_counts"],
    "members": ["t", "elapsed_s", "member", "running", "cpu_percent", "cpu_quota_cores",
                "connections", "messages_in", "messages_out"],
    "agents": ["t", "elapsed_s", "agent", "sent", "received", "errors", "reconnects",
               "cpu_percent", "cpu_seconds", "latency_buckets", "latency_counts"]}


def write_run(run_dir: Path, seconds: int = 40, phase_s: int = 20, second_member_at: int = 31,
              agents: int = 1, samples: int = 500, settle_s: float = 3.0, seed: int = 1,
              parts_every: int = 10, format_version: int = FORMAT_VERSION, drain_s: int = 0,
              unknown: Collection[int] = (), intended: bool = True,
              compacted: bool = True, outliers: Mapping[int, float] | None = None,
              closed: bool = False) -> dict[str, np.ndarray]:
    """Write the run; returns the raw latencies (us) of each step's steady seconds by label."""
    rng = np.random.default_rng(seed)
    writer = RunWriter(run_dir, flush_every_s=1e9)
    phases = [Phase(p + 1, 10.0 * (p + 1), float(p * phase_s), float((p + 1) * phase_s))
              for p in range(-(-seconds // phase_s))]
    lateness = {"count": seconds + drain_s, "p50": 0.01, "p99": 0.02, "max": 0.03}
    sampling = Sampling.model_validate({"tick_lateness_s": lateness, "ticks_skipped": 0,
                                        "depth_age_s": lateness, "deadline_s": 0.8})
    writer.write_manifest(RunManifest(
        format_version=format_version, run_id=run_dir.name, outcome="completed", phases=phases,
        scenario={"name": run_dir.name, "measure": {"settle": settle_s}},
        **({"sampling": sampling} if format_version >= 3 else {})))
    raw: dict[str, list[np.ndarray]] = {}
    sent = received = 0
    delivered = [0, 0]
    for second in range(1, seconds + drain_s + 1):
        drain = second > seconds
        phase = 0 if drain else (second - 1) // phase_s + 1
        members = 2 if second >= second_member_at else 1
        target = 0.0 if drain else 1000.0 * phase
        receive = DRAIN_RATE if drain else 900.0 * target / 1000 if members == 1 else target
        published = target
        if outliers and second in outliers:
            published = receive = outliers[second]
        sent, received = sent + int(published), received + int(receive)
        second_share = SECOND_MEMBER_SHARE if members == 2 else 0.0
        delivered[0] += round(receive * (1 - second_share))
        delivered[1] += round(receive * second_share)
        known = second not in unknown
        histogram, late = LatencyHistogram(), LatencyHistogram()
        if known and not drain:
            latencies = rng.lognormal(mean=8.0 + phase % 3, sigma=0.8,
                                      size=samples).astype(np.int64)
            for value in latencies.tolist():
                histogram.record(value)
                late.record(value + SCHEDULE_LAG_US)
            label, segment_start = _segment(second, phase, phase_s, second_member_at)
            if second >= segment_start - 1 + settle_s and \
                    second >= (phase - 1) * phase_s + settle_s:
                raw.setdefault(label, []).append(latencies)
        stamp = {"t": 1000.0 + second, "elapsed_s": float(second), "phase": phase}
        writer.row("ticks", {
            **stamp, "lateness_s": 0.01, "target_rate": target,
            "send_rate": published if known else None, "receive_rate": receive if known else None,
            "confirm_rate": 0.0, "skip_rate": 0.0, "sent": sent, "received": received,
            "confirmed": 0, "nacked": 0, "skipped": second // 10, "errors": second // 10,
            "reconnects": 0, "connections": 4, "held": 0, "members_running": members,
            "queue_depth": (second % 7) * 100, "depth_age_s": 0.1, "backlog": sent - received,
            "agents_missing": 0 if known else 1, "read_span_s": 0.05, "broker_missing": False,
            "host_cpu_percent": 50.0, **latency_columns(LATENCY, histogram),
            **latency_columns(INTENDED, late)})
        for index in range(2):
            serving = index < members
            read = serving and (known or index == 0)
            writer.row("members", {
                **stamp, "member": f"surge-x-{index}@localhost", "running": serving,
                "cpu_percent": (25.0 if index == 0 else 15.0) if read else None,
                "cpu_interval_s": 1.0 if read else None, "cpu_quota_cores": 0.25,
                "connections": 4 if read else None if serving else 0,
                "messages_in": delivered[index] if read or not serving else None,
                "messages_out": delivered[index] if read or not serving else None,
                **_resources(index, second, received if read else None, receive)})
        for host, percent in ((CONTROLLER_HOST, 50.0), ("broker-1", 30.0)):
            writer.row("hosts", {**stamp, "host": host, "cpu_percent": percent,
                                 "cpu_interval_s": 1.0, "cpu_cores_busy": percent / 100 * 2})
        for agent in range(agents):
            writer.row("agents", {
                **stamp, "agent": agent, "monotonic_s": 500.0 + second,
                "sent": sent // agents, "received": received // agents, "errors": 0,
                "reconnects": 0, "skipped": 0, "cpu_percent": 10.0, "cpu_seconds": 0.1 * second,
                "latency_buckets": [], "latency_counts": []})
        if second % parts_every == 0:
            writer.flush()
    writer.event("step", step=1)
    writer.close(compacted)
    if format_version < 3:
        _earlier_format(run_dir, format_version)
    elif not intended:
        _drop(run_dir, "ticks", [f"{INTENDED}_p50_ms", f"{INTENDED}_p99_ms",
                                 *histogram_columns(INTENDED)])
    if closed:
        _close(run_dir, sent, received)
    return {label: np.concatenate(values) for label, values in raw.items()}


def _resources(index: int, second: int, received: int | None, rate: float
                ) -> dict[str, object]:
    """Member ``index``'s resource columns at ``second`` (all unknown when not read): see
    :data:`MEMORY_LIMIT_MIB`; its traffic is :data:`WIRE_BYTES` per message received
    (``received`` so far, ``rate`` per second), each way, on a link of
    :data:`LINK_MBPS`."""
    if received is None:
        return {}
    memory = (MEMORY_START_MIB + second if index == 0 else MEMORY_LIMIT_MIB // 2) * MIB
    limit = MEMORY_LIMIT_MIB * MIB
    return {"memory_bytes": memory, "memory_limit_bytes": limit,
            "memory_percent_of_watermark": 100.0 * memory / limit,
            "memory_alarm": memory > limit, "disk_free_bytes": 10 << 30,
            "disk_free_limit_bytes": 50_000_000, "disk_alarm": False, "fds_open": 40,
            "fds_max": 1024, "network_in_bytes": received * WIRE_BYTES,
            "network_out_bytes": received * WIRE_BYTES,
            "network_in_mbps": rate * WIRE_BYTES * 8 / 1e6,
            "network_out_mbps": rate * WIRE_BYTES * 8 / 1e6, "network_link_mbps": LINK_MBPS}


def _close(run_dir: Path, sent: int, received: int) -> None:
    """Record the step table (the controller's rule) and the accounting in ``run.json``."""
    manifest = read_manifest(run_dir)
    tables = {name: read_rows(run_dir, name) for name in ("ticks", "members", "hosts", "agents")}
    steps = step_rows(manifest.phases, tables["ticks"], tables["members"], manifest.settle_s,
                      tables["hosts"], tables["agents"])
    queued, duplicates = max(sent - received, 0), max(received - sent, 0)
    accounting = Accounting(sent=sent, received=received, duplicates=duplicates,
                            still_queued=queued, lost=0, unexplained=0, balanced=True,
                            explain=f"sent {sent} = received {received} - duplicates "
                                    f"{duplicates} + queued {queued}: balanced")
    manifest.replace(steps=steps, accounting=accounting).write(run_dir)


def _earlier_format(run_dir: Path, format_version: int) -> None:
    """Rewrite the parts with the columns of ``format_version`` (1 or 2)."""
    shutil.rmtree(run_dir / "metrics" / "hosts")
    for table, columns in FORMAT_2_COLUMNS.items():
        if format_version == 1 and table == "members":
            columns = [c for c in columns if c not in ("messages_in", "messages_out")]
        for part in table_files(run_dir, table):
            pq.write_table(pq.read_table(part, columns=columns), part)


def _drop(run_dir: Path, table: str, columns: list[str]) -> None:
    """Rewrite the parts of ``table`` without ``columns``."""
    for part in table_files(run_dir, table):
        written = pq.read_table(part)
        pq.write_table(written.drop_columns(columns), part)


def _segment(second: int, phase: int, phase_s: int, second_member_at: int) -> tuple[str, int]:
    """The step label of ``second`` and the first second of its segment."""
    first, last = (phase - 1) * phase_s + 1, phase * phase_s
    if not first < second_member_at <= last:
        return str(phase), first
    if second < second_member_at:
        return f"{phase}a", first
    return f"{phase}b", second_member_at
