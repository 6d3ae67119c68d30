"""Rate accuracy and latency: achieved / target and p50/p99 per 10 s window, per sender count.

Runs real scenarios through the controller on a one-member local RabbitMQ (no CPU quota, a
classic queue) and prints one line per 10 s window: target, achieved (sent) and received msg/s
(each agent's counters over the interval between its own readings, on its own clock, summed),
and the latency percentiles of the window's merged histograms, from the actual send time and
from each message's intended (scheduled) send time, without coordinated omission. A window is
marked ``saturated`` when the receivers fell behind (the queue grew), which is where a rate
target cannot be held by anyone.

    .venv/bin/python bench/rate_accuracy.py [--senders 10,100] [--totals 10,100,1000,10000]
        [--rates 1,10,100 (per sender, instead of --totals)] [--hold 21]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.specs.scenario import ScenarioSpec  # noqa: E402
from orchestrator.specs.topology import QueueSpec, TopologySpec  # noqa: E402
from results.rundir.figures import INTENDED, LATENCY, merged_histogram  # noqa: E402
from results.rundir.histogram import LatencyHistogram  # noqa: E402
from results.rundir.tables import read_table  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

WINDOW_S = 10
HOLD_S = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--senders", default="10,100")
    parser.add_argument("--rates", help="msg/s per sender, one step each")
    parser.add_argument("--totals", default="10,100,1000,10000,20000",
                        help="msg/s of all senders together, one step each (without --rates)")
    parser.add_argument("--hold", type=float, default=HOLD_S, help="seconds per rate step")
    args = parser.parse_args()
    counts = [int(n) for n in args.senders.split(",")]
    # A queue per run, so what one saturated run leaves behind never reaches the next.
    topology = TopologySpec(name="bench-rate", members=1, start=1, port_base=7300,
                            queues=[QueueSpec(name=f"rate-{n}", type="classic") for n in counts])
    provisioner = LocalRabbitMQ(topology)
    print(f"{'senders':>7} {'msg/s/sender':>12} {'window s':>9} {'target msg/s':>13} "
          f"{'achieved msg/s':>15} {'achieved/target':>16} {'received msg/s':>15} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'intended p50':>12} {'intended p99':>12} note")
    try:
        provisioner.up()
        with tempfile.TemporaryDirectory() as runs:
            for senders in counts:
                rates = [float(r) for r in args.rates.split(",")] if args.rates else \
                    [float(t) / senders for t in args.totals.split(",")]
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
    agents = read_table(run_dir, "agents").to_pylist()
    for index, rate in enumerate(rates, start=1):
        start = (index - 1) * hold + 1
        for w in range(int((hold - 1) // WINDOW_S)):
            lo, hi = start + w * WINDOW_S, start + (w + 1) * WINDOW_S
            inside = [i for i, t in enumerate(ticks) if t["phase"] == index
                      and lo <= t["elapsed_s"] < hi + 0.5]
            if len(inside) < 2:
                continue
            first, last = ticks[inside[0]], ticks[inside[-1]]
            span = (first["elapsed_s"], last["elapsed_s"])
            achieved, got = (_agents_rate(agents, span, counter)
                             for counter in ("sent", "received"))
            target = rate * senders
            grew = last["queue_depth"] > first["queue_depth"] + target
            note = "saturated" if grew or got < 0.97 * achieved else ""
            window = [ticks[i] for i in inside[1:]]  # the seconds after the first tick's
            actual, intended = (LatencyHistogram.from_sparse(merged_histogram(window, name))
                                for name in (LATENCY, INTENDED))
            print(f"{senders:>7} {rate:>12,.4g} {w * WINDOW_S:>4}-{(w + 1) * WINDOW_S:<4} "
                  f"{target:>13,.0f} {achieved:>15,.1f} {achieved / target:>16.4f} "
                  f"{got:>15,.1f} {_ms(actual, 50):>7} {_ms(actual, 99):>7} "
                  f"{_ms(intended, 50):>12} {_ms(intended, 99):>12} {note}", flush=True)


def _agents_rate(agents: list[dict], span: tuple[float, float], counter: str) -> float:
    """The sum over agents of each agent's ``counter`` change between its first and last
    reading in the ticks of ``span``, over the time between those readings on the agent's own
    clock (``monotonic_s``): exact however late each reading reached the controller."""
    by_agent: dict[int, list[dict]] = {}
    for row in agents:
        if span[0] <= row["elapsed_s"] <= span[1]:
            by_agent.setdefault(row["agent"], []).append(row)
    total = 0.0
    for rows in by_agent.values():
        rows.sort(key=lambda r: r["monotonic_s"])
        if len(rows) >= 2 and rows[-1]["monotonic_s"] > rows[0]["monotonic_s"]:
            total += (rows[-1][counter] - rows[0][counter]) / \
                (rows[-1]["monotonic_s"] - rows[0]["monotonic_s"])
    return total


def _ms(histogram: LatencyHistogram, q: float) -> str:
    return f"{histogram.percentile(q) / 1000:.2f}" if histogram.count else "-"


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("rate_accuracy"):
        main()
