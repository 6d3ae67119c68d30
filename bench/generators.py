"""Same-run comparison of load generators on one local RabbitMQ member (no CPU quota).

Three generators take turns on the same broker, case by case, alternated over ``--rounds``
rounds (each round rotates which goes first):

* ``surge``: local ``surge agent`` processes, as many and with the workers placed as ``surge
  run`` places them by default (one agent per core, never more than the workers;
  :func:`orchestrator.agents.placement.place`), configured with the default workload's
  prefetch (200) and manual multi-acks, snapshotted once a second as the controller does;
* ``pika``: the plain pika loop of :mod:`bench.plain_pika` (one process per producer/consumer
  pair, prefetch 200, multi-ack every 50), where the case is one it can do;
* ``c``: ``bench/c/amqpgen.c`` on Debian's librabbitmq, compiled here with ``gcc -O2``
  (prefetch 200, multi-ack every 50, at most 2,000 unconfirmed publishes per producer, as
  surge's driver);
* ``base``: surge again, its agents running the code of another checkout (``--base-tree``, a
  worktree of an earlier commit): a change and what it changes measured side by side.

Each measurement declares a fresh queue, starts the generator, waits ``--warmup`` seconds,
then measures ``--seconds``: published and consumed msg/s from the member's own Prometheus
counters (``rabbitmq_global_messages_received_total`` / ``..._delivered_total``), the
generator's CPU-seconds over its whole process tree (psutil), consumed messages per
generator CPU-second, the member's CPU (its process tree) and the whole host's; the backlog is
published - consumed over the window and the queue's ready messages at its end. The queue is
deleted before the next generator. Per case and generator it prints min / median / max over
the rounds.

    PYTHONPATH=. .venv/bin/python bench/generators.py [--rounds 3] [--seconds 10]
        [--warmup 3] [--cases 1+1-classic,4+4-quorum,...] [--generators surge,pika,c]
        [--port 11200] [--base-tree ../surge-base --generators surge,base]

A run with ``--base-tree`` keeps its output in ``bench/results/generators_vs_base.txt``, apart
from the generators' own comparison. The member's ports derive from ``--port-base`` as a
topology's do, or are the five ports from ``--port`` (AMQP, management, Prometheus, Erlang
distribution, epmd), for a host where only a small range is free; its node is then named after
that port.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plain_pika import measure_plain_pika, queue_depth, run_plain_rpc  # noqa: E402
from drivers import protocol  # noqa: E402
from orchestrator.agents.local import spawn_local_agents  # noqa: E402
from orchestrator.agents.placement import place  # noqa: E402
from orchestrator.errors import AgentError, ProvisionError  # noqa: E402
from orchestrator.specs.scenario import ExitSpec, ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from orchestrator.specs.workload import WorkloadSpec
from results.rundir import compiled  # noqa: E402
from topologies.rabbitmq.local import LocalRabbitMQ  # noqa: E402
from topologies.rabbitmq.node import amqp_url  # noqa: E402
from topologies.rabbitmq.prometheus import node_stats  # noqa: E402

C_SOURCE = Path(__file__).resolve().parent / "c" / "amqpgen.c"
PREFETCH = WorkloadSpec.model_fields["prefetch"].default  # surge's default workload: 200
MULTI_ACK = 50  # PerfTest's multi-ack as compared in issue 15; surge acks every prefetch // 4
CONFIRM_WINDOW = WorkloadSpec.model_fields["confirm_window"].default  # unconfirmed per producer
STOP_TIMEOUT_S = 20.0
LIFETIME_MARGIN_S = 30.0  # a generator ends by itself this long after its run, if not stopped
SETTLE_S = 1.0  # pause between measurements, once the queue is deleted


@dataclass(frozen=True)
class Case:
    """One load shape: producers and consumers, message, queue, total rate (0: unlimited)."""

    name: str
    producers: int
    consumers: int
    queue_type: str = "classic"
    size: int = 2048
    persistent: bool = False
    confirms: bool = False
    rate: float = 0.0
    in_flight: int = 0  # request/reply: requests outstanding per requester; 0: point to point

    def describe(self) -> str:
        rate = "unlimited" if not self.rate else f"{self.rate:,.0f} msg/s in total " \
                                                 f"({self.rate / self.producers:g} per producer)"
        size = f"{self.size // 1024} KiB" if self.size < 1 << 20 else f"{self.size >> 20} MiB"
        rpc = (f", request/reply with {self.in_flight} in flight per requester (the broker "
               "counts a request and a reply per round trip)") if self.in_flight else ""
        return (f"{self.producers}+{self.consumers}, {self.queue_type}, {size} "
                f"{'persistent' if self.persistent else 'transient'}"
                f"{', publisher confirms' if self.confirms else ''}, {rate}{rpc}")


CASES = {c.name: c for c in (
    Case("1+1-classic", 1, 1),
    Case("1+1-quorum", 1, 1, "quorum"),
    Case("4+4-classic", 4, 4),
    Case("4+4-quorum", 4, 4, "quorum"),
    Case("1+1-quorum-confirms", 1, 1, "quorum", confirms=True),
    Case("1+1-classic-persistent", 1, 1, persistent=True),
    Case("10+10-10k", 10, 10, rate=10_000),
    Case("180+180-1each", 180, 180, rate=180),
    Case("1+1-64KiB", 1, 1, size=64 * 1024),
    Case("1+1-1MiB", 1, 1, size=1 << 20),
    Case("4+4-request-reply", 4, 4, in_flight=10),
)}


class OneRange(LocalRabbitMQ):
    """The one member with every port in ``port`` .. ``port + 4``: AMQP, management,
    Prometheus, Erlang distribution, epmd."""

    def __init__(self, topology: TopologySpec, port: int):
        super().__init__(topology)
        self.port = port
        self.epmd_port = port + 4

    def member(self, index: int):
        port = self.port
        return dataclasses.replace(super().member(index), port=port, management_port=port + 1,
                                   prometheus_port=port + 2, endpoint=amqp_url("127.0.0.1", port))

    def dist_port(self, index: int) -> int:
        return self.port + 3


class Broker:
    """The one member: its queue for a case, its own counters, its CPU."""

    def __init__(self, provisioner: LocalRabbitMQ, member: Any):
        self.provisioner, self.member = provisioner, member
        self.api = provisioner.management()
        self.settings = provisioner.client_settings()
        self.credentials = (self.settings["user"], self.settings["password"])

    def declare(self, case: Case) -> str:
        name = f"genbench-{case.queue_type}"
        self.delete(name)
        self.api.declare_queue(QueueSpec(name=name, type=case.queue_type))
        return name

    def delete(self, queue: str) -> None:
        with contextlib.suppress(ProvisionError):  # absent already (404)
            self.api.request("DELETE", f"/queues/%2F/{queue}")

    def counters(self) -> tuple[float, int, int]:
        """(when, published into, delivered out of) the member, from its Prometheus endpoint."""
        stats = node_stats(self.member.metrics_url, timeout_s=10.0)
        if stats is None:
            raise RuntimeError(f"{self.member.metrics_url} did not answer")
        return stats.at, stats.messages_in, stats.messages_out

    def cpu_seconds(self) -> float:
        reading = self.provisioner.sample().members[0].cpu
        return float("nan") if reading is None else reading.seconds

    def depth(self, queue: str) -> int:
        return queue_depth(self.member.host, self.member.port, queue, self.credentials)


# -- generators ------------------------------------------------------------------------------

class Running:
    """A started generator: the roots of its process tree, and how to stop it."""

    def __init__(self, roots: list[int], stop: Callable[[], str]):
        self.roots, self._stop = roots, stop

    def stop(self) -> str:
        """Stop it; what it says about itself (its own counts), for the progress line."""
        return self._stop()


class Surge:
    """surge's agents on the compiled hot path where it is built; ``pure``: with
    ``SURGE_SPEEDUPS=0``, the pure-Python one (results.rundir.compiled)."""

    def __init__(self, workdir: Path, tree: Path | None = None, pure: bool = False):
        self.workdir = workdir
        self.tree = tree  # the checkout whose code the agents run (None: this one)
        self.name = "base" if tree is not None else "surge-pure" if pure else "surge"
        self.env = {compiled.ENV: "0" if pure else "1"}

    def unsupported(self, case: Case) -> str | None:
        return None

    def start(self, case: Case, queue: str, broker: Broker, run_s: float) -> Running:
        workload = WorkloadSpec.model_validate({
            "queue": queue, "senders": case.producers, "receivers": case.consumers,
            "message": {"size": case.size, "persistent": case.persistent},
            "confirms": case.confirms,
            **({"pattern": "request-reply", "in_flight": case.in_flight}
               if case.in_flight else {})})
        # only placement reads the scenario: its workload and exit
        scenario = ScenarioSpec.model_construct(name="genbench", workload=workload, plan=[],
                                                exit=ExitSpec())
        count = max(1, min(os.cpu_count() or 1, case.producers + case.consumers))
        with _code_of(self.tree, self.env):
            agents = _launcher_of(self.tree)(count, self.workdir / f"agents-{self.name}",
                                             run_s + LIFETIME_MARGIN_S)
        stop_polling = threading.Event()
        last: dict[int, protocol.Snapshot] = {}

        def poll() -> None:  # one snapshot per agent a second, as the controller's tick
            while not stop_polling.wait(1.0):
                for agent in agents:
                    with contextlib.suppress(AgentError):  # late: not the figure anyway
                        last[agent.index] = agent.snapshot(timeout_s=5.0)

        def stop() -> str:
            stop_polling.set()
            poller.join(10)
            with ThreadPoolExecutor(len(agents)) as pool:
                list(pool.map(lambda agent: agent.stop(), agents))
            sent = sum(s.sent for s in last.values())
            received = sum(s.received for s in last.values())
            errors = sum(s.errors for s in last.values())
            return f"own: sent {sent:,} received {received:,} errors {errors}"

        try:
            placement = place(scenario, "rabbitmq", broker.settings, [broker.member], count,
                              range(count), range(count),
                              QueueSpec(name=queue, type=case.queue_type),
                              case.rate / case.producers)
            with ThreadPoolExecutor(count) as pool:
                list(pool.map(lambda pair: pair[0].configure(pair[1]),
                              zip(agents, placement.configs)))
        except BaseException:
            with ThreadPoolExecutor(len(agents)) as pool:
                list(pool.map(lambda agent: agent.stop(), agents))
            raise
        poller = threading.Thread(target=poll, name="snapshots", daemon=True)
        poller.start()
        return Running([agent.process.pid for agent in agents], stop)


def _launcher_of(tree: Path | None) -> Callable[..., list]:
    """``spawn_local_agents`` of checkout ``tree`` (None: this one): how its agents are started
    is its own (their command line changes with it)."""
    if tree is None:
        return spawn_local_agents
    spec = importlib.util.spec_from_file_location(
        "base_local_agents", tree / "orchestrator" / "agents" / "local.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.spawn_local_agents


@contextlib.contextmanager
def _code_of(tree: Path | None, env: dict[str, str]):
    """Processes started meanwhile run the code of checkout ``tree`` (``python -m`` looks in
    the working directory first, then ``PYTHONPATH``), with ``env`` in their environment."""
    cwd = os.getcwd()
    changes = {**env, **({"PYTHONPATH": str(tree)} if tree is not None else {})}
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    if tree is not None:
        os.chdir(tree)
    try:
        yield
    finally:
        os.chdir(cwd)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _plain_rpc(host: str, port: int, queue: str, credentials: tuple[str, str], size: int,
               seconds: float, in_flight: int, persistent: bool, results: Any) -> None:
    """One plain pika request/reply pair (a requester and a responder thread), in its own
    process."""
    results.put(run_plain_rpc(host, port, queue, size, seconds, credentials=credentials,
                              in_flight=in_flight, prefetch=PREFETCH, persistent=persistent))


def _plain_loop(host: str, port: int, queue: str, credentials: tuple[str, str], size: int,
                seconds: float, warmup: float, persistent: bool, results: Any) -> None:
    """One plain pika loop (a publisher and a consumer thread), in its own process."""
    figures = measure_plain_pika(host, port, queue, size=size, seconds=seconds, warmup=warmup,
                                 credentials=credentials, prefetch=PREFETCH, auto_ack=False,
                                 ack_every=MULTI_ACK, cleanup=False, persistent=persistent)
    results.put({k: figures[k] for k in ("published", "received", "cpu_seconds")})


class PlainPika:
    name = "pika"

    def unsupported(self, case: Case) -> str | None:
        if case.confirms:
            return "the plain loop has no publisher confirms"
        if case.rate:
            return "the plain loop has no rate limit"
        if case.producers != case.consumers:
            return "the plain loop pairs one producer with one consumer"
        return None

    def start(self, case: Case, queue: str, broker: Broker, run_s: float) -> Running:
        # each loop measures its own window (reported, not used), which it starts after a
        # second and ends a second after the benchmark's; then it stops by itself
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        member = broker.member
        target, args = (_plain_rpc, (run_s + 1.0, case.in_flight)) if case.in_flight else \
            (_plain_loop, (run_s, 1.0))
        loops = [context.Process(
            target=target, name=f"plain-pika-{i}", daemon=True,
            args=(member.host, member.port, queue, broker.credentials, case.size,
                  *args, case.persistent, results))
            for i in range(case.producers)]
        for loop in loops:
            loop.start()

        def stop() -> str:
            own = []
            for loop in loops:
                loop.join(STOP_TIMEOUT_S)
                if loop.is_alive():
                    loop.kill()
                    loop.join()
            while not results.empty():
                own.append(results.get())
            return (f"own: published {sum(o['published'] for o in own):,} received "
                    f"{sum(o['received'] for o in own):,}, "
                    f"{len(own)}/{len(loops)} loops reported")

        return Running([loop.pid for loop in loops], stop)


class CClient:
    name = "c"

    def __init__(self, workdir: Path):
        self.binary = workdir / "amqpgen"
        self.missing = self._compile()

    def _compile(self) -> str | None:
        if shutil.which("gcc") is None:
            return "gcc not installed (apt-get install gcc)"
        if not Path("/usr/include/amqp.h").exists():
            return "librabbitmq-dev not installed (apt-get install librabbitmq-dev)"
        done = subprocess.run(["gcc", "-O2", "-o", str(self.binary), str(C_SOURCE),
                               "-lrabbitmq", "-lpthread"], capture_output=True, text=True)
        if done.returncode:
            return f"gcc failed: {done.stderr.strip()[:200]}"
        return None

    def unsupported(self, case: Case) -> str | None:
        return "the C client has no request/reply mode" if case.in_flight else self.missing

    def start(self, case: Case, queue: str, broker: Broker, run_s: float) -> Running:
        member = broker.member
        command = [str(self.binary), "--host", member.host, "--port", str(member.port),
                   "--user", broker.credentials[0], "--queue", queue,
                   "--producers", str(case.producers), "--consumers", str(case.consumers),
                   "--size", str(case.size), "--rate", str(case.rate),
                   "--seconds", str(run_s + LIFETIME_MARGIN_S), "--prefetch", str(PREFETCH),
                   "--multi-ack", str(MULTI_ACK), "--confirm-window", str(CONFIRM_WINDOW)]
        command += ["--persistent"] if case.persistent else []
        command += ["--confirms"] if case.confirms else []
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env={**os.environ,
                                                   "AMQPGEN_PASSWORD": broker.credentials[1]})

        def stop() -> str:
            process.send_signal(signal.SIGTERM)
            try:
                out, err = process.communicate(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
            lines = out.strip().splitlines()
            if process.returncode or not lines:
                return f"exit {process.returncode}: {err.strip()[-300:]}"
            own = json.loads(lines[-1])
            return (f"own: published {own['published']:,} consumed {own['consumed']:,} "
                    f"confirmed {own['confirmed']:,}")

        return Running([process.pid], stop)


# -- measuring -------------------------------------------------------------------------------

def tree_cpu(roots: list[int]) -> float:
    """CPU seconds (user + system) of the processes ``roots`` and all their descendants, each
    counted once (a root may be another's descendant)."""
    seen: dict[int, psutil.Process] = {}
    for pid in roots:
        try:
            root = psutil.Process(pid)
            seen.update((p.pid, p) for p in [root, *root.children(recursive=True)])
        except psutil.NoSuchProcess:
            continue
    total = 0.0
    for process in seen.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def host_busy() -> tuple[float, float]:
    """(busy CPU seconds of the whole host, now)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0), time.monotonic()


def profile(py_spy: str, roots: list[int], seconds: float, prefix: Path
            ) -> list[subprocess.Popen]:
    """Sample each of ``roots`` with py-spy for ``seconds`` (collapsed stacks, without pausing
    the process) into ``prefix``-N.txt; py-spy runs outside the measured process trees."""
    return [subprocess.Popen(
        [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, int(seconds))),
         "--rate", "250", "--nonblocking", "--format", "raw",
         "--output", f"{prefix}-{index}.txt"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for index, pid in enumerate(roots)]


def measure(generator: Any, case: Case, broker: Broker, warmup: float, seconds: float,
            profile_to: Path | None = None, py_spy: str = "") -> dict[str, Any]:
    """One generator on one case: figures over the steady window, or an ``error``; with
    ``profile_to``, surge's agents are also sampled by py-spy over that window."""
    queue = broker.declare(case)
    samplers: list[subprocess.Popen] = []
    try:
        running = generator.start(case, queue, broker, run_s=warmup + seconds)
        try:
            time.sleep(warmup)
            if profile_to is not None and generator.name.startswith("surge"):
                samplers = profile(py_spy, running.roots, seconds, profile_to)
            at0, in0, out0 = broker.counters()
            cpu0, broker0, host0 = tree_cpu(running.roots), broker.cpu_seconds(), host_busy()
            time.sleep(seconds)
            at1, in1, out1 = broker.counters()
            cpu1, broker1, host1 = tree_cpu(running.roots), broker.cpu_seconds(), host_busy()
            depth = broker.depth(queue)
        finally:
            for sampler in samplers:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    sampler.wait(30)
            said = running.stop()
    finally:
        broker.delete(queue)
        time.sleep(SETTLE_S)
    span, cpu = at1 - at0, cpu1 - cpu0
    return {"consumed": (out1 - out0) / span, "published": (in1 - in0) / span,
            "cpu_s": cpu, "per_cpu_s": (out1 - out0) / cpu if cpu > 0 else float("nan"),
            "broker_pct": 100 * (broker1 - broker0) / span,
            "host_pct": 100 * (host1[0] - host0[0]) / (host1[1] - host0[1])
            / (os.cpu_count() or 1),
            "backlog_window": (in1 - in0) - (out1 - out0), "backlog_end": depth, "said": said}


# -- printing --------------------------------------------------------------------------------

COLUMNS = (("consumed msg/s", "consumed", "{:,.0f}"), ("published msg/s", "published", "{:,.0f}"),
           ("gen CPU-s", "cpu_s", "{:.1f}"), ("msgs/CPU-s", "per_cpu_s", "{:,.0f}"),
           ("broker CPU %", "broker_pct", "{:.0f}"), ("host busy %", "host_pct", "{:.0f}"),
           ("pub-cons", "backlog_window", "{:,.0f}"), ("depth at end", "backlog_end", "{:,.0f}"))


RATIO_KEYS = ("consumed", "per_cpu_s")  # the figures compared with the C client's, as ratios


def spread(values: list[float], form: str) -> str:
    """min / median / max."""
    return " / ".join(form.format(v) for v in (min(values), statistics.median(values),
                                               max(values)))


def print_table(case: Case, results: dict[str, list[dict]], skipped: dict[str, str],
                order: list[str], rounds: int, warmup: float, seconds: float) -> None:
    print(f"\n{case.name}: {case.describe()}; {rounds} rounds of {seconds:g} s after "
          f"{warmup:g} s warm-up; min / median / max")
    cells = {name: [spread([r[key] for r in results[name]], form) for _, key, form in COLUMNS]
             for name in order if results.get(name)}
    widths = [max([len(title)] + [len(c[i]) for c in cells.values()])
              for i, (title, _, _) in enumerate(COLUMNS)]
    print(f"{'generator':10} " + "  ".join(f"{t:>{w}}" for (t, _, _), w in zip(COLUMNS, widths)))
    for name in order:
        if name in cells:
            print(f"{name:10} " + "  ".join(f"{c:>{w}}" for c, w in zip(cells[name], widths)))
        else:
            print(f"{name:10} - ({skipped.get(name, 'no measurement')})")
    if "c" in cells:
        c = {key: statistics.median(r[key] for r in results["c"]) for key in RATIO_KEYS}
        for name in order:
            if name != "c" and name in cells and all(c.values()):
                ratios = [statistics.median(r[key] for r in results[name]) / c[key]
                          for key in RATIO_KEYS]
                print(f"{name} / c (medians): consumed msg/s x{ratios[0]:.2f}, "
                      f"msgs/CPU-s x{ratios[1]:.2f}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="steady window per case")
    parser.add_argument("--warmup", type=float, default=3.0, help="at least 2")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--generators", default="surge,pika,c")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also sample surge's agents with py-spy over each measured window "
                             "(collapsed stacks, DIR/CASE-rROUND-AGENT.txt)")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy",
                        help="the py-spy executable, for --profile")
    parser.add_argument("--port-base", type=int, default=8000,
                        help="the member's ports (AMQP, management, Prometheus) derive from it")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="instead: the member's five ports are PORT .. PORT+4 (AMQP, "
                             "management, Prometheus, Erlang distribution, epmd)")
    parser.add_argument("--base-tree", type=Path, metavar="DIR",
                        help="generator 'base': surge agents running the code of checkout DIR")
    args = parser.parse_args()
    # stopped by a signal, it stops the broker and the generators it started all the same
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    cases = [CASES[name] for name in args.cases.split(",") if name]
    wanted = args.generators.split(",")
    if unknown := set(wanted) - {"surge", "surge-pure", "pika", "c", "base"}:
        parser.error(f"unknown generators {sorted(unknown)}")
    if "base" in wanted and not (args.base_tree and (args.base_tree / "drivers").is_dir()):
        parser.error("generator 'base' needs --base-tree, a checkout of surge")
    if not 1 <= args.rounds <= 20 or not 1 <= args.seconds <= 600 or not 2 <= args.warmup <= 60:
        parser.error("rounds 1-20, seconds 1-600, warmup 2-60")

    if args.port is None:
        provisioner = LocalRabbitMQ(TopologySpec(name="genbench", members=1, start=1,
                                                 port_base=args.port_base))
    else:
        provisioner = OneRange(TopologySpec(name=f"genbench-{args.port}", members=1, start=1),
                               args.port)
    with tempfile.TemporaryDirectory(prefix="genbench-") as workdir:
        available = {"surge": lambda: Surge(Path(workdir)),
                     "surge-pure": lambda: Surge(Path(workdir), pure=True), "pika": PlainPika,
                     "c": lambda: CClient(Path(workdir)),
                     "base": lambda: Surge(Path(workdir), args.base_tree.resolve())}
        generators = [available[name]() for name in wanted]
        try:
            (member,) = [m for m in provisioner.up() if m.running]
            broker = Broker(provisioner, member)
            print(f"generators.py: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, one member "
                  f"({member.name}, no CPU quota), {os.cpu_count()} cores; rates from the "
                  f"member's own counters; CPU over each generator's process tree; broker CPU "
                  f"% of one core, host busy % of all cores", flush=True)
            for case in cases:
                results: dict[str, list[dict]] = {g.name: [] for g in generators}
                skipped: dict[str, str] = {}
                for round_ in range(args.rounds):
                    turn = generators[round_ % len(generators):] + \
                        generators[:round_ % len(generators)]
                    for generator in turn:
                        reason = generator.unsupported(case)
                        if reason:
                            skipped[generator.name] = reason
                            continue
                        try:
                            figures = measure(
                                generator, case, broker, args.warmup, args.seconds,
                                args.profile / f"{case.name}-r{round_ + 1}"
                                if args.profile else None, args.py_spy)
                        except Exception as error:  # noqa: BLE001 - said, then next
                            skipped[generator.name] = f"failed: {error}"[:200]
                            print(f"  {case.name} round {round_ + 1} {generator.name}: "
                                  f"failed: {error}", file=sys.stderr, flush=True)
                            continue
                        results[generator.name].append(figures)
                        print(f"  {case.name} round {round_ + 1} {generator.name}: consumed "
                              f"{figures['consumed']:,.0f}/s published "
                              f"{figures['published']:,.0f}/s CPU {figures['cpu_s']:.1f} s "
                              f"broker {figures['broker_pct']:.0f}% ({figures['said']})",
                              file=sys.stderr, flush=True)
                print_table(case, results, skipped, [g.name for g in generators],
                            args.rounds, args.warmup, args.seconds)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one cannot cut this short
            provisioner.down()


if __name__ == "__main__":
    from bench.record import recorded
    # a change measured against its base is kept apart from the generators' own comparison
    with recorded("generators_vs_base" if "--base-tree" in sys.argv else "generators"):
        main()
