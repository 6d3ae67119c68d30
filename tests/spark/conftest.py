"""One real local Spark session for the whole suite, and synthetic run directories with known
answers."""

import shutil

import numpy as np
import pytest

from drivers.histogram import LatencyHistogram
from results.rundir import RunWriter

if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

SETTLE_S = 3.0


@pytest.fixture(scope="session")
def spark():
    from results.spark import session
    return session("local[2]")


def write_run(root, name="synthetic", seed=1, seconds=40, parts_every=10):
    """Two 20 s phases at 1 Hz: phase 1 on one member, phase 2 gains a second member at 30 s.

    Returns the run directory and the raw latencies (us) of the steady seconds per segment label.
    """
    rng = np.random.default_rng(seed)
    run_dir = root / name
    writer = RunWriter(run_dir, flush_every_s=1e9)
    phases = [{"index": 1, "rate_per_sender": 10.0, "start_s": 0.0, "end_s": 20.0},
              {"index": 2, "rate_per_sender": 20.0, "start_s": 20.0, "end_s": 40.0}]
    writer.write_manifest({"run_id": name, "outcome": "completed", "phases": phases,
                           "scenario": {"name": name, "measure": {"settle": SETTLE_S}},
                           "accounting": {"sent": 0, "received": 0}})
    raw: dict[str, list[np.ndarray]] = {"1": [], "2a": [], "2b": []}
    sent = received = 0
    agent_cpu = 0.0
    for second in range(1, seconds + 1):
        phase = 1 if second <= 20 else 2
        members = 2 if second > 30 else 1
        target = 1000.0 * phase
        receive = 900.0 * phase if members == 1 else target
        sent += int(target)
        received += int(receive)
        latencies = rng.lognormal(mean=8.0 + phase, sigma=0.8, size=500).astype(np.int64)
        histogram = LatencyHistogram()
        for value in latencies:
            histogram.record(int(value))
        sparse = histogram.to_sparse()
        start = 0.0 if phase == 1 else (20.0 if members == 1 else 30.0)
        label = "1" if phase == 1 else ("2a" if members == 1 else "2b")
        if second >= start + SETTLE_S:
            raw[label].append(latencies)
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
            writer.row("members", {
                "t": 1000.0 + second, "elapsed_s": float(second),
                "member": f"surge-x-{index}@localhost", "running": index < members,
                "cpu_percent": (25.0 if index == 0 else 15.0) if index < members else None,
                "cpu_quota_cores": 0.25, "connections": 4 if index < members else 0})
        agent_cpu += 0.1
        writer.row("agents", {
            "t": 1000.0 + second, "elapsed_s": float(second), "agent": 0, "sent": sent,
            "received": received, "errors": 0, "reconnects": 0, "cpu_percent": 10.0,
            "cpu_seconds": agent_cpu, "latency_buckets": [], "latency_counts": []})
        if second % parts_every == 0:
            writer.flush()
    writer.event("step", step=1)
    writer.close()
    return run_dir, {k: np.concatenate(v) for k, v in raw.items()}
