"""Scaling efficiency: saturated throughput with k members over k times that of one member.

For k = 1..N it runs the uniform cluster with k members serving from the start and offers each
member the same rate, above what one member carries, so the brokers are the bottleneck and every
k sees the same relative overload (a deeper backlog costs a classic queue more per message, so a
fixed total would flatter large k). The achieved rate (end to end, the lower of the mean send and
receive rates over the steady part) is k members' saturated rate.
Efficiency(k) = saturated(k) / (k * saturated(1)); the target is at least 0.8.

    .venv/bin/python bench/efficiency.py [--members 4] [--hold 40] [--per-member 4500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.specs.loader import load_scenario  # noqa: E402
from results.rundir.steps import StepRow  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios/uniform-fixed-rate-all-members.yaml"
OFFER_PER_MEMBER = 4500.0  # msg/s; about 1.3x what a quarter-core member carries here


def saturated_run(members: int, offered: float, hold_s: float, runs: Path) -> StepRow:
    """One fixed-rate run with ``members`` serving; returns its step row."""
    senders = load_scenario(SCENARIO)[0].workload.senders
    scenario, topology = load_scenario(SCENARIO, [
        f"topology.members={members}", f"topology.start={members}", "topology.port_base=7400",
        f"plan.0.rate_per_sender={offered / senders:.1f}", f"plan.0.hold={hold_s:g}s",
        "measure.settle=10s", "measure.drain=90s"])
    result = Controller(scenario, topology, runs, live=False).run()
    return result.steps[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4, help="largest k")
    parser.add_argument("--hold", type=float, default=40.0, help="seconds per run")
    parser.add_argument("--per-member", type=float, default=OFFER_PER_MEMBER,
                        help="msg/s offered per member")
    args = parser.parse_args()
    one = None
    print(f"{'k':>2} {'offered msg/s':>14} {'achieved msg/s':>15} {'per member':>11} "
          f"{'member CPU%':>12} {'host CPU%':>10} {'efficiency':>10}", flush=True)
    with tempfile.TemporaryDirectory() as runs:
        for k in range(1, args.members + 1):
            offered = k * args.per_member
            row = saturated_run(k, offered, args.hold, Path(runs))
            one = one or row.achieved_rate
            cpu = sum(row.cpu_percent.values()) / max(1, len(row.cpu_percent))
            saturated = "" if row.ratio < 0.97 else "  (not saturated: raise --per-member)"
            print(f"{k:>2} {offered:>14,.0f} {row.achieved_rate:>15,.0f} "
                  f"{row.achieved_rate / k:>11,.0f} {cpu:>12.1f} {row.host_cpu_percent:>10.1f} "
                  f"{row.achieved_rate / (k * one):>10.2f}{saturated}", flush=True)


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("efficiency"):
        main()
