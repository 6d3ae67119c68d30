"""Rate accuracy: achieved / target per 10 s window for 10, 100 and 1,000 msg/s per sender.

Runs real scenarios through the controller on a one-member local RabbitMQ (no CPU quota, a
classic queue) and prints one line per 10 s window. A window is marked ``saturated`` when the
receivers fell behind (the queue grew), which is where a rate target cannot be held by anyone.

    .venv/bin/python bench/rate_accuracy.py [--senders 10,50,200] [--rates 10,100,1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.specs.scenario import QueueSpec, ScenarioSpec, TopologySpec  # noqa: E402
from results.rundir.tables import read_table  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

WINDOW_S = 10
HOLD_S = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--senders", default="10,50,200")
    parser.add_argument("--rates", default="10,100,1000")
    parser.add_argument("--hold", type=float, default=HOLD_S, help="seconds per rate step")
    args = parser.parse_args()
    counts = [int(n) for n in args.senders.split(",")]
    # A queue per run, so what one saturated run leaves behind never reaches the next.
    topology = TopologySpec(name="bench-rate", members=1, start=1, port_base=7300,
                            queues=[QueueSpec(name=f"rate-{n}", type="classic") for n in counts])
    provisioner = LocalRabbitMQ(topology)
    print(f"{'senders':>7} {'msg/s/sender':>12} {'window s':>9} {'target msg/s':>13} "
          f"{'achieved msg/s':>15} {'achieved/target':>16} {'received msg/s':>15} note")
    try:
        provisioner.up()
        with tempfile.TemporaryDirectory() as runs:
            for senders in counts:
                rates = [float(r) for r in args.rates.split(",")]
                scenario = ScenarioSpec.model_validate({
                    "name": f"rate-{senders}", "topology": "unused.yaml",
                    "workload": {"queue": f"rate-{senders}", "senders": senders,
                                 "receivers": senders,
                                 "message": {"size": "2KiB"}, "ack": "auto"},
                    "plan": [{"rate_per_sender": r, "hold": args.hold} for r in rates],
                    "measure": {"settle": 2, "drain": 5}})
                result = Controller(scenario, topology, Path(runs), live=False).run()
                _report(result.run_dir, senders, rates, args.hold)
    finally:
        provisioner.down()


def _report(run_dir: Path, senders: int, rates: list[float], hold: float) -> None:
    """Print achieved/target for each whole 10 s window of each step (after 1 s of settling)."""
    ticks = read_table(run_dir, "ticks").to_pylist()
    for index, rate in enumerate(rates, start=1):
        start = (index - 1) * hold + 1
        for w in range(int((hold - 1) // WINDOW_S)):
            lo, hi = start + w * WINDOW_S, start + (w + 1) * WINDOW_S
            inside = [i for i, t in enumerate(ticks) if t["phase"] == index
                      and lo <= t["elapsed_s"] < hi + 0.5]
            if len(inside) < 2:
                continue
            first, last = ticks[inside[0]], ticks[inside[-1]]
            seconds = last["elapsed_s"] - first["elapsed_s"]
            achieved = (last["sent"] - first["sent"]) / seconds
            got = (last["received"] - first["received"]) / seconds
            target = rate * senders
            grew = last["queue_depth"] > first["queue_depth"] + target
            note = "saturated" if grew or got < 0.97 * achieved else ""
            print(f"{senders:>7} {rate:>12,.0f} {w * WINDOW_S:>4}-{(w + 1) * WINDOW_S:<4} "
                  f"{target:>13,.0f} {achieved:>15,.0f} {achieved / target:>16.4f} "
                  f"{got:>15,.0f} {note}", flush=True)


if __name__ == "__main__":
    main()
