"""Controller scale: does the tick loop keep time with many agents and thousands of workers?

For each case (agents x workers) a real scenario runs through the :class:`Controller` on one
local RabbitMQ member (no CPU quota, loopback, ports from 8100): the workers are split evenly
into senders and receivers, each sender at a low fixed rate (``--rate``, 1 msg/s by default, so
the broker is not the limit), spread over ``--queues`` classic queues, for ``--hold`` seconds.
Many agents on loopback stand in for many load hosts. Per case it prints:

* ticks: ticks of the load part (plan step 1), and ticks skipped (whole seconds a late tick
  missed, from ``run.json``);
* tick lateness p50 / p99 / max in ms over the load part (the ``ticks`` table's
  ``lateness_s``: how late each tick started against its one-second grid);
* controller CPU: the controller process's own CPU time over the load part, in % of one core,
  as the run records it (``run.json`` ``sampling.controller_cpu_percent``: process CPU time
  of every thread of the controller, from the first tick to the end of the plan, so without
  provisioning, agent start and configuration). The broker and the agents are other
  processes and are not in it;
* agents CPU: the agents' CPU in total, % of one core (each agent's own ``cpu_seconds`` delta
  over its own clock, from the ``agents`` table, summed over agents), and the broker member's
  CPU (``members`` table, 100 = one core) and the whole host's (``hosts`` table, 100 = every
  core busy), means over the load part;
* send msg/s: the mean achieved total send rate against the target, and the agents'
  readings that missed a tick's deadline.

The requirement (issue 15 point 4) is tick lateness p99 <= 50 ms and controller CPU <= 20 %
of one core with 50 agents and 2,000 workers.

    PYTHONPATH=. .venv/bin/python bench/controller_scale.py [--hold 60]
        [--cases 10x400,10x2000,50x400,50x2000] [--rate 1] [--queues 20] [--runs-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.run.sampling import quantiles  # noqa: E402
from orchestrator.specs.scenario import ScenarioSpec  # noqa: E402
from orchestrator.specs.topology import QueueSpec, TopologySpec  # noqa: E402
from results.rundir.tables import read_table  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

CASES = "10x400,10x2000,50x400,50x2000"
HOLD_S = 60.0
PORT_BASE = 8100  # the member's AMQP port; management and Prometheus are 10,000 and 10,100 up
HEADER = (f"{'agents':>6} {'workers':>7} {'ticks':>5} {'skipped':>7} {'late p50 ms':>11} "
          f"{'p99 ms':>7} {'max ms':>7} {'ctl CPU %':>9} {'agents CPU %':>12} "
          f"{'broker CPU %':>12} {'host CPU %':>10} {'send msg/s':>10} {'target':>7} "
          f"{'missed':>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="agents x workers, comma separated")
    parser.add_argument("--hold", type=float, default=HOLD_S, help="seconds of load per case")
    parser.add_argument("--rate", type=float, default=1.0, help="msg/s per sender")
    parser.add_argument("--queues", type=int, default=20, help="classic queues the workers "
                                                               "spread over")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="keep the run directories here (default: a temporary one)")
    args = parser.parse_args()
    cases = [tuple(int(n) for n in case.split("x")) for case in args.cases.split(",")]
    _raise_file_limit()
    topology = TopologySpec(name="bench-ctlscale", members=1, start=1, port_base=PORT_BASE,
                            queues=[QueueSpec(name="ctlscale-%d", count=args.queues)
                                    if args.queues > 1 else QueueSpec(name="ctlscale")])
    provisioner = LocalRabbitMQ(topology)
    print(f"hold {args.hold:g} s per case, {args.rate:g} msg/s per sender, "
          f"{args.queues} queues, one local RabbitMQ member", flush=True)
    print(HEADER, flush=True)
    try:
        provisioner.up()
        with contextlib.ExitStack() as stack:
            runs = args.runs_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
            for agents, workers in cases:
                scenario = _scenario(agents, workers, args)
                result = Controller(scenario, topology, runs, live=False).run()
                print(_line(agents, workers, _figures(result.run_dir)),
                      flush=True)
    finally:
        provisioner.down()


def _raise_file_limit() -> None:
    """A connection per worker: the broker (started from this process) and this process need
    file descriptors beyond a default soft limit of 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _scenario(agents: int, workers: int, args: argparse.Namespace) -> ScenarioSpec:
    half = workers // 2
    queue = "ctlscale-%d" if args.queues > 1 else "ctlscale"
    return ScenarioSpec.model_validate({
        "name": f"ctlscale-{agents}x{workers}", "topology": "unused.yaml", "agents": agents,
        "workload": {"queue": queue, "senders": half, "receivers": workers - half,
                     "message": {"size": "256B"}},
        "plan": [{"rate_per_sender": args.rate, "hold": args.hold}],
        "measure": {"settle": 2, "drain": 10}})


def _figures(run_dir: Path) -> dict[str, Any]:
    """What one run recorded about its load part (plan step 1)."""
    manifest = json.loads((run_dir / "run.json").read_text())
    sampling = manifest.get("sampling") or {}
    ticks = [t for t in read_table(run_dir, "ticks").to_pylist() if t["phase"] == 1]
    late = quantiles([t["lateness_s"] for t in ticks])
    agents = [r for r in read_table(run_dir, "agents").to_pylist() if r["phase"] == 1]
    members = [r["cpu_percent"] for r in read_table(run_dir, "members").to_pylist()
               if r["phase"] == 1 and r["cpu_percent"] is not None]
    hosts = [r["cpu_percent"] for r in read_table(run_dir, "hosts").to_pylist()
             if r["phase"] == 1 and r["cpu_percent"] is not None]
    sent = [t["send_rate"] for t in ticks if t["send_rate"] is not None]
    return {"ticks": len(ticks), "skipped": sampling.get("ticks_skipped"), "late": late,
            "controller_cpu": sampling.get("controller_cpu_percent"),
            "agents_cpu": _agents_cpu(agents),
            "broker_cpu": statistics.fmean(members) if members else None,
            "host_cpu": statistics.fmean(hosts) if hosts else None,
            "send_rate": statistics.fmean(sent) if sent else None,
            "missed": sum(t["agents_missing"] for t in ticks),
            "target": ticks[-1]["target_rate"] if ticks else None}


def _agents_cpu(rows: list[dict[str, Any]]) -> float | None:
    """The agents' CPU in total, % of one core: each agent's CPU-seconds delta over its own
    clock between its first and last row of the load part, summed."""
    by_agent: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        if row["cpu_seconds"] is not None:
            by_agent.setdefault(row["agent"], []).append(row)
    total = None
    for seen in by_agent.values():
        first, last = seen[0], seen[-1]
        span = last["monotonic_s"] - first["monotonic_s"]
        if span > 0:
            total = (total or 0.0) + 100.0 * (last["cpu_seconds"] - first["cpu_seconds"]) / span
    return total


def _line(agents: int, workers: int, f: dict[str, Any]) -> str:
    late = f["late"]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.1f}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"
    return (f"{agents:>6} {workers:>7} {f['ticks']:>5} {f['skipped']!s:>7} "
            f"{ms(late['p50']):>11} {ms(late['p99']):>7} {ms(late['max']):>7} "
            f"{pct(f['controller_cpu']):>9} {pct(f['agents_cpu']):>12} "
            f"{pct(f['broker_cpu']):>12} {pct(f['host_cpu']):>10} "
            f"{pct(f['send_rate']):>10} {pct(f['target']):>7} {f['missed']:>6}")


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("controller_scale"):
        main()
