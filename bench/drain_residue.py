"""How long a short run takes on a node whose counters keep deliveries never acknowledged.

    .venv/bin/python bench/drain_residue.py [--hold 10s] [--residue 50] [--port-base 11000]

Starts one RabbitMQ node outside surge (``tests/integration/outside_broker.py``: ports
``port-base`` .. +5, the controller's /metrics on +10) with a quorum queue, and runs
``surge run --no-analyze`` of 2 senders x 100 msg/s with confirms for ``hold``, drain 30 s:
first on the clean node, then after a client took ``residue`` messages without acknowledging
them and closed its channel (requeued, then taken and acknowledged by another client). Prints,
for each run, the command's wall time, the drain's ticks and seconds (senders_stop to
drained) and the depth the drain ended on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pika  # noqa: E402

from results.rundir.tables import read_table  # noqa: E402
from tests.integration.outside_broker import outside_broker  # noqa: E402

QUEUE = "perf-residue"
DRAIN_S = 30


def leave_residue(parameters: pika.ConnectionParameters, count: int) -> None:
    """``count`` deliveries the node counts as never acknowledged; the queue left empty."""
    with pika.BlockingConnection(parameters) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        for _ in range(count):
            channel.basic_publish("", QUEUE, b"residue")
    with pika.BlockingConnection(parameters) as connection:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=count)
        for taken, (method, _, _) in enumerate(
                channel.consume(QUEUE, inactivity_timeout=10), start=1):
            if method is None or taken == count:
                break
        channel.close()
    with pika.BlockingConnection(parameters) as connection:
        channel = connection.channel()
        for _ in range(count + 1):
            method, _, _ = channel.basic_get(QUEUE)
            if method is None:
                break
            channel.basic_ack(method.delivery_tag)


def files(directory: Path, broker, hold: str) -> Path:
    """The topology (the node as an existing cluster) and scenario; the scenario's path."""
    (directory / "topology.yaml").write_text(f"""\
name: drain-residue
placement: existing
cpu_per_member: 1
existing:
  members:
    - uri: "amqp://127.0.0.1:{broker.amqp_port}"
      prometheus: "http://127.0.0.1:{broker.prometheus_port}"
      management: "http://127.0.0.1:{broker.management_port}"
  credentials: {{user: {broker.user}, password_env: DRAIN_RESIDUE_PASSWORD}}
queues:
  - {{name: {QUEUE}, type: quorum}}
""")
    scenario = directory / "scenario.yaml"
    scenario.write_text(f"""\
name: drain-residue
topology: topology.yaml
agents: 1
workload: {{queue: {QUEUE}, senders: 2, receivers: 2, confirms: true, message: {{size: 1KiB}}}}
plan: ["100:{hold}"]
measure: {{settle: 2s, drain: {DRAIN_S}s}}
""")
    return scenario


def run(scenario: Path, runs: Path, env: dict[str, str], metrics_port: int) -> None:
    """One ``surge run``, and what its run directory says of the drain."""
    command = [sys.executable, "-m", "orchestrator.cli", "run", str(scenario), "--no-live",
               "--no-analyze", "--web", "off", "--metrics-port", str(metrics_port),
               "--runs-dir", str(runs)]
    start = time.monotonic()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=DRAIN_S + 300, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - start
    run_dir = next(p.parent for p in runs.glob("*/run.json"))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    at = {e["kind"]: e for e in events}
    manifest = json.loads((run_dir / "run.json").read_text())
    end = manifest["phases"][-1]["end_s"]
    ticks = sorted(read_table(run_dir, "ticks").to_pylist(), key=lambda t: t["elapsed_s"])
    drain = [t for t in ticks if t["phase"] == 0 and t["elapsed_s"] > end]
    span = at["agents_down"]["t"] - at["provision"]["t"]
    print(f"  exit {done.returncode}, wall {wall:.1f} s (provision to agents down "
          f"{span:.1f} s); drain {len(drain)} ticks, "
          f"{at['drained']['t'] - at['senders_stop']['t']:.1f} s, ended at depth "
          f"{at['drained']['queue_depth']}; lost {manifest['accounting']['lost']}")
    print("  drain ticks (s, depth, age s): " + ", ".join(
        f"({t['elapsed_s']:.0f}, {t['queue_depth']}, "
        f"{'-' if t['depth_age_s'] is None else round(t['depth_age_s'], 2)})"
        for t in drain[:6]) + (" ..." if len(drain) > 6 else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", default="10s")
    parser.add_argument("--residue", type=int, default=50)
    parser.add_argument("--port-base", type=int, default=11000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drain-residue-") as tmp, \
            outside_broker(Path(tmp) / "broker", args.port_base) as broker:
        parameters = pika.ConnectionParameters("127.0.0.1", broker.amqp_port,
                                               credentials=pika.PlainCredentials(
                                                   broker.user, broker.password))
        with pika.BlockingConnection(parameters) as connection:
            connection.channel().queue_declare(QUEUE, durable=True,
                                               arguments={"x-queue-type": "quorum"})
        scenario = files(Path(tmp), broker, args.hold)
        env = {**os.environ, "DRAIN_RESIDUE_PASSWORD": broker.password,
               "PYTHONPATH": str(ROOT)}
        print(f"hold {args.hold}, drain up to {DRAIN_S} s, one quorum queue")
        print("clean node:")
        run(scenario, Path(tmp) / "clean", env, args.port_base + 10)
        leave_residue(parameters, args.residue)
        print(f"after {args.residue} deliveries closed unacknowledged:")
        run(scenario, Path(tmp) / "residue", env, args.port_base + 10)


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("drain_residue"):
        main()
