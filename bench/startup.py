"""Command to first publish: how long ``surge run`` takes from the command to its agents' first
message, on a RabbitMQ node that already runs (``placement: existing``).

The script starts one RabbitMQ node of its own, the way a platform team would and not through
surge (``tests/integration/outside_broker.py``: its own user and password, loopback, ports from
``--port-base``), with a classic queue ``startup``, and writes a topology ``placement:
existing`` on it (plain ``amqp://``) and a scenario of 1 sender at 1,000 msg/s and 1 receiver
for 2 s. Each repetition of a case:

1. the queue is purged, and a consumer of this script's own subscribes to it beside the run's
   receiver (the broker hands deliveries round-robin, so it gets every other message);
2. the wall clock is read and ``python -m orchestrator.cli run SCENARIO --no-live --web off
   --metrics-port 0 --no-analyze`` is started (the interpreter's start counts);
3. the first publish is the earliest send time among the messages this consumer got: the
   wall-clock ``send_time_ns`` each sender stamps into a message's header as it publishes it
   (``drivers/header.py``). At 1,000 msg/s the earliest message seen was sent at most 2 ms
   after the very first one. Minus the wall clock at 2., that is "first publish" below;
4. the run's ``events.jsonl`` gives when it had loaded the spec and opened its run directory
   (its first event), when its agents answered (``agents_up``) and when it had told them the
   first rate (``step``), all from the same start; its ``ticks`` table how late its latest
   tick was against its one-second grid (what is loaded after the first publish must not
   make a tick late).

Bytecode is cached, as an installed surge's is (pip compiles it): the commands run with
``PYTHONPYCACHEPREFIX`` in the script's temporary directory (``PYTHONDONTWRITEBYTECODE``
unset), and an untimed round per checkout first writes the caches. Without them every start
compiles surge's sources, a tenth of a second more.

Cases: one agent (``agents: 1``) and two (one per core, surge's default on this machine).
surge keeps no agents between runs (its warm pool is the brokers': members booted and standing
by, or left running by ``surge up`` and ``--keep``, which a run then uses as they are, as it
uses this node); every run here starts its own agents.
``--checkouts A,B`` runs each case with the code of each checkout in turn (``PYTHONPATH`` and
working directory; ABAB..., so both see the same noise of a shared host) and prints medians
per checkout; by default, this checkout only. Before the runs, ``python -c "import
orchestrator.cli"`` and ``... orchestrator.run.entry`` (what ``surge run`` imports before it
reads the spec) are timed the same way, alternately.

    PYTHONPATH=. .venv/bin/python bench/startup.py [--repeat 9] [--checkouts DIR,DIR]
        [--port-base 11100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pika  # noqa: E402

from results.rundir.tables import read_rows  # noqa: E402
from tests.integration.outside_broker import outside_broker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUEUE = "startup"
RATE = 1000  # msg/s of the one sender
PASSWORD_VARIABLE = "SURGE_BENCH_STARTUP_PASSWORD"
SEND_TIME = struct.Struct("!q")  # the header's send_time_ns, at offset 16 (drivers/header.py)
RUN_TIMEOUT_S = 120.0
IMPORTS = {"import orchestrator.cli": "import orchestrator.cli",
           "+ orchestrator.run.entry": "import orchestrator.cli, orchestrator.run.entry"}


def topology(amqp_port: int, prometheus_port: int, management_port: int, user: str) -> str:
    return f"""\
name: startup-bench
placement: existing
cpu_per_member: 2
existing:
  members:
    - uri: "amqp://127.0.0.1:{amqp_port}"
      prometheus: "http://127.0.0.1:{prometheus_port}"
      management: "http://127.0.0.1:{management_port}"
  credentials: {{user: {user}, password_env: {PASSWORD_VARIABLE}}}
queues:
  - {{name: {QUEUE}}}
"""


def scenario(agents: int) -> str:
    return f"""\
name: startup-{agents}
topology: topology.yaml
agents: {agents}
workload: {{queue: {QUEUE}, senders: 1, receivers: 1, message: {{size: 1KiB}}}}
plan: ["{RATE}:2s"]
measure: {{settle: 1s, drain: 5s}}
"""


class FirstSeen:
    """A consumer of the workload's queue beside the run's receiver: the earliest send time
    among the messages it gets."""

    def __init__(self, parameters: pika.ConnectionParameters):
        self.connection = pika.BlockingConnection(parameters)
        self.channel = self.connection.channel()
        self.channel.queue_purge(QUEUE)
        self.channel.basic_qos(prefetch_count=50)
        self.earliest: int | None = None
        self.seen = 0
        self.channel.basic_consume(QUEUE, self._on_message, auto_ack=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._consume, daemon=True)
        self.thread.start()

    def _on_message(self, channel, method, properties, body: bytes) -> None:
        if len(body) >= 24 and body[:2] == b"SG":
            sent = SEND_TIME.unpack_from(body, 16)[0]
            self.earliest = sent if self.earliest is None else min(self.earliest, sent)
            self.seen += 1

    def _consume(self) -> None:
        while not self.stop.is_set():
            self.connection.process_data_events(time_limit=0.05)

    def close(self) -> int | None:
        self.stop.set()
        self.thread.join(10)
        self.connection.close()
        return self.earliest


def one_run(checkout: Path, specs: Path, agents: int, runs: Path, env: dict[str, str],
            parameters: pika.ConnectionParameters) -> dict[str, float]:
    """One ``surge run`` of the case; seconds from its start to each mark."""
    watcher = FirstSeen(parameters)
    command = [sys.executable, "-m", "orchestrator.cli", "run", str(specs / f"{agents}.yaml"),
               "--runs-dir", str(runs), "--no-live", "--web", "off", "--metrics-port", "0",
               "--no-analyze"]
    before = set(runs.glob("*")) if runs.exists() else set()
    start = time.time_ns()
    done = subprocess.run(command, cwd=checkout, env={**env, "PYTHONPATH": str(checkout)},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    earliest = watcher.close()
    if done.returncode != 0 or earliest is None:
        raise SystemExit(f"{checkout}: run failed (exit {done.returncode}, {watcher.seen} "
                         f"messages seen)\n{done.stderr[-3000:]}")
    (run_dir,) = set(runs.glob("*")) - before
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    first = {}
    for event in events:
        first.setdefault(event["kind"], event["t"])
    late = [row["lateness_s"] for row in read_rows(run_dir, "ticks")
            if row["lateness_s"] is not None]
    return {"set up": events[0]["t"] - start / 1e9,
            "agents up": first["agents_up"] - start / 1e9,
            "rate sent": first["step"] - start / 1e9,
            "first publish": (earliest - start) / 1e9,
            "latest tick, late by": max(late, default=0.0)}


def import_time(checkout: Path, statement: str, env: dict[str, str]) -> float:
    """Seconds for a fresh interpreter to run ``statement`` (its start included)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], cwd=checkout, check=True,
                   env={**env, "PYTHONPATH": str(checkout)}, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def label(checkout: Path) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=checkout, capture_output=True, text=True).stdout.strip()
    return f"{commit or checkout.name}{'+' if dirty else ''}"


def median_line(name: str, values: list[float]) -> str:
    return (f"  {name:36s} median {statistics.median(values):6.3f} s   min "
            f"{min(values):6.3f}  max {max(values):6.3f}  (n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs per case and checkout")
    parser.add_argument("--checkouts", default=str(ROOT),
                        help="comma-separated checkouts of surge to compare, run alternately")
    parser.add_argument("--agents", default="1,2", help="cases: agents per run")
    parser.add_argument("--port-base", type=int, default=11100,
                        help="the node's ports: amqp, amqps, management, Prometheus, "
                             "distribution, epmd from here")
    args = parser.parse_args()
    checkouts = [Path(c).resolve() for c in args.checkouts.split(",")]
    labels = {c: label(c) for c in checkouts}
    cases = [int(n) for n in args.agents.split(",")]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SURGE_") and k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="surge-startup-") as tmp:
        work = Path(tmp)
        env["SURGE_STATE_DIR"] = str(work / "state")
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        imports: dict[tuple[Path, str], list[float]] = {}
        for checkout in checkouts:  # untimed: bytecode caches written, files in the page cache
            import_time(checkout, IMPORTS["+ orchestrator.run.entry"], env)
        for _ in range(args.repeat):
            for checkout in checkouts:
                for name, statement in IMPORTS.items():
                    imports.setdefault((checkout, name), []).append(
                        import_time(checkout, statement, env))
        with outside_broker(work / "broker", args.port_base) as broker:
            env[PASSWORD_VARIABLE] = broker.password
            parameters = pika.ConnectionParameters(
                "127.0.0.1", broker.amqp_port,
                credentials=pika.PlainCredentials(broker.user, broker.password))
            with pika.BlockingConnection(parameters) as connection:
                connection.channel().queue_declare(QUEUE, durable=True)
            specs = work / "specs"
            specs.mkdir()
            (specs / "topology.yaml").write_text(topology(
                broker.amqp_port, broker.prometheus_port, broker.management_port, broker.user))
            for agents in cases:
                (specs / f"{agents}.yaml").write_text(scenario(agents))
            marks: dict[tuple[Path, int], list[dict[str, float]]] = {}
            for checkout in checkouts:  # untimed: the agents' modules' caches, the broker's
                one_run(checkout, specs, cases[-1], work / "runs", env, parameters)
            for _ in range(args.repeat):
                for agents in cases:
                    for checkout in checkouts:
                        marks.setdefault((checkout, agents), []).append(one_run(
                            checkout, specs, agents, work / "runs", env, parameters))
    print(f"placement: existing, one RabbitMQ node on loopback already running; 1 sender at "
          f"{RATE:,} msg/s, 1 receiver; {args.repeat} runs per case and checkout, alternately; "
          f"seconds from the command's start")
    for checkout in checkouts:
        print(f"\n{labels[checkout]} ({checkout})")
        for name in IMPORTS:
            print(median_line(f"python -c '{name}'", imports[(checkout, name)]))
        for agents in cases:
            runs = marks[(checkout, agents)]
            print(f" {agents} agent{'s' if agents > 1 else ''}:")
            for mark in runs[0]:
                print(median_line(mark, [run[mark] for run in runs]))
    if len(checkouts) > 1:
        print("\nfirst publish, median per case: " + "; ".join(
            f"{agents} agent{'s' if agents > 1 else ''}: " + " -> ".join(
                f"{statistics.median(r['first publish'] for r in marks[(c, agents)]):.3f} s "
                f"({labels[c]})" for c in checkouts) for agents in cases))


if __name__ == "__main__":
    from bench.record import recorded
    with recorded("startup"):
        main()
