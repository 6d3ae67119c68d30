"""Strangers' connections against a run: tick lateness with and without a flood, side by side.

Pairs of the same real run through the :class:`Controller` on one local RabbitMQ member
(loopback, ports from 8270): first without a flood, then with a separate process
(``python -m tests.flood``) keeping ``--per-port`` idle connections open to each agent and to
the live page for the whole run, reopening those the servers close (they close a connection
that sends no request within 2 s). Per run it prints the outcome, the accounting, ticks and
ticks skipped, and tick lateness p50 / p99 / max in ms (``run.json`` ``sampling``: how late
each tick started against its one-second grid), and for the flooded runs how many connects the
flood made. The requirement (issue 28 point 6): the flood neither ends nor slows the run.

    PYTHONPATH=. .venv/bin/python bench/http_flood.py [--hold 40] [--agents 2] [--pairs 2]
        [--per-port 500] [--runs-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.run.controller import Controller  # noqa: E402
from orchestrator.specs.scenario import ScenarioSpec  # noqa: E402
from orchestrator.specs.topology import TopologySpec  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402

PORT_BASE = 8270
HEADER = (f"{'run':>8} {'outcome':>10} {'accounting':>10} {'ticks':>5} {'skipped':>7} "
          f"{'late p50 ms':>11} {'p99 ms':>7} {'max ms':>7} {'connects':>8}")


def _publish_ports(controller: Controller, path: Path, done: threading.Event) -> None:
    """Write the agents' and the page's ports to ``path`` once the controller knows them."""
    while not done.wait(0.1):
        prometheus = controller.manifest.prometheus
        if prometheus and prometheus.agents and controller.page is not None:
            ports = [int(a.rsplit(":", 1)[1]) for a in prometheus.agents] + [controller.page.port]
            path.write_text("\n".join(map(str, ports)) + "\n")
            return


def one_run(spec: ScenarioSpec, topology: TopologySpec, runs: Path, flood_per_port: int,
            hold_s: float) -> str:
    """One run, flooded when ``flood_per_port``; its row."""
    controller = Controller(spec, topology, runs, live=False, web="127.0.0.1:0",
                            sd_dir=runs / "sd")
    connects = "-"
    done = threading.Event()
    flood = None
    if flood_per_port:
        ports = runs / f"{controller.run_id}.ports"
        threading.Thread(target=_publish_ports, args=(controller, ports, done),
                         daemon=True).start()
        flood = subprocess.Popen([sys.executable, "-m", "tests.flood", str(ports), "--per-port",
                                  str(flood_per_port), "--max-s", str(hold_s + 180)],
                                 stdout=subprocess.PIPE, text=True)
    try:
        result = controller.run()
    finally:
        done.set()
        if flood is not None:
            flood.terminate()
            connects = flood.communicate(timeout=30)[0].split()[1]
    sampling = json.loads((result.run_dir / "run.json").read_text())["sampling"]
    late = sampling["tick_lateness_s"]
    balanced = "balanced" if result.accounting and result.accounting.balanced else "NOT"

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{1000 * value:.1f}"
    return (f"{'flooded' if flood_per_port else 'quiet':>8} {result.outcome:>10} {balanced:>10} "
            f"{late['count']:>5} {sampling['ticks_skipped']:>7} {ms(late['p50']):>11} "
            f"{ms(late['p99']):>7} {ms(late['max']):>7} {connects:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hold", type=float, default=40.0, help="seconds of load per run")
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--per-port", type=int, default=500)
    parser.add_argument("--runs-dir", type=Path)
    options = parser.parse_args()
    runs = options.runs_dir or Path(tempfile.mkdtemp(prefix="surge-http-flood-"))
    topology = TopologySpec.model_validate({
        "name": "htpbench", "members": 1, "start": 1, "cpu_per_member": 1.0,
        "port_base": PORT_BASE, "queues": [{"name": "work", "type": "classic"}]})
    spec = ScenarioSpec.model_validate({
        "name": "http-flood", "topology": "unused.yaml", "agents": options.agents,
        "workload": {"queue": "work", "senders": 4, "receivers": 4,
                     "message": {"size": "1KiB"}},
        "plan": [{"rate_per_sender": 100, "hold": f"{options.hold}s"}],
        "measure": {"settle": "1s", "drain": "20s"}})
    provisioner = LocalRabbitMQ(topology)
    print(HEADER, flush=True)
    try:
        provisioner.up()
        for _ in range(options.pairs):
            for per_port in (0, options.per_port):
                print(one_run(spec, topology, runs, per_port, options.hold), flush=True)
    finally:
        provisioner.down()
    print(f"runs in {runs}")


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("http_flood"):
        main()
