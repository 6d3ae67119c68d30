"""Synthetic run directories with known answers, for the analysis tests and benchmarks.

A run at 1 Hz: phases of ``phase_s`` seconds, phase *p* targets 1,000 *p* msg/s; one member
serves (at 25% CPU, receiving 90% of the target) until ``second_member_at``, then two (the second
at 15% CPU, its queue delivering 40% of the messages) receive all of it. Each second records
``samples`` lognormal latencies. ``format_version=1`` writes the previous format (no
per-member message counts).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from drivers.histogram import LatencyHistogram
from results.rundir import FORMAT_VERSION, RunWriter

SECOND_MEMBER_SHARE = 0.4


def write_run(run_dir: Path, seconds: int = 40, phase_s: int = 20, second_member_at: int = 31,
              agents: int = 1, samples: int = 500, settle_s: float = 3.0, seed: int = 1,
              parts_every: int = 10, format_version: int = FORMAT_VERSION
              ) -> dict[str, np.ndarray]:
    """Write the run; returns the raw latencies (us) of each step's steady seconds by label."""
    rng = np.random.default_rng(seed)
    writer = RunWriter(run_dir, flush_every_s=1e9)
    phases = [{"index": p + 1, "rate_per_sender": 10.0 * (p + 1), "start_s": float(p * phase_s),
               "end_s": float((p + 1) * phase_s)} for p in range(-(-seconds // phase_s))]
    writer.write_manifest({"format_version": format_version,
                           "run_id": run_dir.name, "outcome": "completed", "phases": phases,
                           "scenario": {"name": run_dir.name, "measure": {"settle": settle_s}},
                           "accounting": {}})
    raw: dict[str, list[np.ndarray]] = {}
    sent = received = 0
    delivered = [0, 0]
    for second in range(1, seconds + 1):
        phase = (second - 1) // phase_s + 1
        members = 2 if second >= second_member_at else 1
        target = 1000.0 * phase
        receive = 900.0 * target / 1000 if members == 1 else target
        sent, received = sent + int(target), received + int(receive)
        second_share = SECOND_MEMBER_SHARE if members == 2 else 0.0
        delivered[0] += round(receive * (1 - second_share))
        delivered[1] += round(receive * second_share)
        latencies = rng.lognormal(mean=8.0 + phase % 3, sigma=0.8, size=samples).astype(np.int64)
        histogram = LatencyHistogram()
        for value in latencies.tolist():
            histogram.record(value)
        sparse = histogram.to_sparse()
        label, segment_start = _segment(second, phase, phase_s, second_member_at)
        if second >= segment_start - 1 + settle_s and second >= (phase - 1) * phase_s + settle_s:
            raw.setdefault(label, []).append(latencies)
        writer.row("ticks", {
            "t": 1000.0 + second, "elapsed_s": float(second), "phase": phase,
            "target_rate": target, "send_rate": target, "receive_rate": receive,
            "confirm_rate": 0.0, "sent": sent, "received": received, "confirmed": 0,
            "errors": second // 10, "reconnects": 0, "connections": 4,
            "members_running": members, "queue_depth": (second % 7) * 100,
            "latency_p50_ms": histogram.percentile(50) / 1000,
            "latency_p99_ms": histogram.percentile(99) / 1000, "host_cpu_percent": 50.0,
            "latency_buckets": list(sparse), "latency_counts": list(sparse.values())})
        for index in range(2):
            serving = index < members
            writer.row("members", {
                "t": 1000.0 + second, "elapsed_s": float(second),
                "member": f"surge-x-{index}@localhost", "running": serving,
                "cpu_percent": (25.0 if index == 0 else 15.0) if serving else None,
                "cpu_quota_cores": 0.25, "connections": 4 if serving else 0,
                "messages_in": delivered[index], "messages_out": delivered[index]})
        for agent in range(agents):
            writer.row("agents", {
                "t": 1000.0 + second, "elapsed_s": float(second), "agent": agent,
                "sent": sent // agents, "received": received // agents, "errors": 0,
                "reconnects": 0, "cpu_percent": 10.0, "cpu_seconds": 0.1 * second,
                "latency_buckets": [], "latency_counts": []})
        if second % parts_every == 0:
            writer.flush()
    writer.event("step", step=1)
    writer.close()
    if format_version == 1:
        for part in (run_dir / "metrics" / "members").glob("part-*.parquet"):
            pq.write_table(pq.read_table(part).drop(["messages_in", "messages_out"]), part)
    return {label: np.concatenate(values) for label, values in raw.items()}


def _segment(second: int, phase: int, phase_s: int, second_member_at: int) -> tuple[str, int]:
    """The step label of ``second`` and the first second of its segment."""
    first, last = (phase - 1) * phase_s + 1, phase * phase_s
    if not first < second_member_at <= last:
        return str(phase), first
    if second < second_member_at:
        return f"{phase}a", first
    return f"{phase}b", second_member_at
