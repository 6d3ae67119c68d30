"""``placement: existing`` against a RabbitMQ node this test starts itself, outside surge: its
own user and password, TLS with a certificate authority made here, management and Prometheus
listeners. A short run over ``amqps://`` loses nothing, reads the members' figures from their
Prometheus endpoint, and leaves its password nowhere: not in any file of the run directory,
not on any command line, not in the agents' environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pika
import psutil
import pytest

from results.rundir.tables import read_table
from tests.integration.outside_broker import make_certificates, outside_broker

pytestmark = pytest.mark.integration

PORT_BASE = 7500  # amqp, amqps, management, prometheus, distribution, epmd: 7500..7505
QUEUE = "perf-existing"
PASSWORD_VARIABLE = "SURGE_TEST_EXISTING_PASSWORD"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with outside_broker(tmp_path_factory.mktemp("outside"), PORT_BASE) as running:
        credentials = pika.PlainCredentials(running.user, running.password)
        with pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", running.amqp_port, credentials=credentials)) as connection:
            connection.channel().queue_declare(QUEUE, durable=True)  # as its owners would
        yield running


def topology_text(broker, ca_file: Path, uri: str | None = None, **changes: str) -> str:
    fields = {"uri": uri or f"amqps://localhost:{broker.tls_port}",
              "credentials": f"{{user: {broker.user}, password_env: {PASSWORD_VARIABLE}}}",
              "tls": f"{{ca_file: {ca_file}}}", **changes}
    return f"""\
name: outside
placement: existing
cpu_per_member: 2
existing:
  members:
    - uri: "{fields['uri']}"
      prometheus: "http://127.0.0.1:{broker.prometheus_port}"
      management: "http://127.0.0.1:{broker.management_port}"
  credentials: {fields['credentials']}
  tls: {fields['tls']}
queues:
  - {{name: {fields.get('queue', QUEUE)}}}
"""


SCENARIO = f"""\
name: existing-amqps
topology: topology.yaml
agents: 2
workload: {{queue: {QUEUE}, senders: 2, receivers: 2, message: {{size: 1KiB}}}}
plan: ["100:6s"]
measure: {{settle: 2s, drain: 20s}}
"""


def write_specs(directory: Path, topology: str) -> Path:
    (directory / "topology.yaml").write_text(topology)
    (directory / "scenario.yaml").write_text(SCENARIO)
    return directory / "scenario.yaml"


def surge(*args: str, env: dict[str, str], timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


class SecretWatch:
    """Looks at every process's command line, and at the environment of the run's agents,
    while the run goes (a secret seen there is kept as evidence)."""

    def __init__(self, secret: str, parent: int):
        self.secret, self.parent = secret.encode(), parent
        self.seen: list[str] = []
        self.agents_seen = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.wait(0.2):
            for process in psutil.process_iter(["pid"]):
                try:
                    cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
                    if self.secret in cmdline:
                        self.seen.append(f"cmdline of {process.pid}: {cmdline[:80]!r}")
                    if b"agent" in cmdline and process.pid != self.parent and \
                            self.parent in [p.pid for p in process.parents()]:
                        self.agents_seen += 1
                        if self.secret in Path(f"/proc/{process.pid}/environ").read_bytes():
                            self.seen.append(f"environment of agent {process.pid}")
                except (OSError, psutil.Error):
                    continue


def test_a_run_over_amqps_against_a_cluster_surge_did_not_start(broker, tmp_path):
    specs = write_specs(tmp_path, topology_text(broker, broker.ca_file))
    env = {**os.environ, PASSWORD_VARIABLE: broker.password,
           "SURGE_STATE_DIR": str(tmp_path / "state")}
    runs = tmp_path / "runs"
    plan = surge("plan", str(specs), env=env, timeout_s=60)
    assert plan.returncode == 0, plan.stderr
    command = [sys.executable, "-m", "orchestrator.cli", "run", str(specs), "--runs-dir",
               str(runs), "--no-live", "--json", "--metrics-port", "0"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, stdin=subprocess.DEVNULL)
    watch = SecretWatch(broker.password, process.pid)
    watch.thread.start()
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        watch.stop.set()
        watch.thread.join()
    assert process.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    run_dir = Path(summary["run_dir"])
    accounting = summary["accounting"]
    assert accounting["sent"] >= 0.9 * 2 * 100 * 6
    assert accounting["lost"] == 0 and accounting["duplicates"] == 0 and accounting["balanced"]

    members = read_table(run_dir, "members").to_pylist()
    assert {m["member"] for m in members} == {broker.node}  # named as the node calls itself
    busy = [m for m in members if m["cpu_percent"] is not None]
    assert len(busy) >= 5, "member CPU comes from the node's own Prometheus endpoint"
    assert all(0 < m["cpu_percent"] <= 100 for m in busy), busy  # of the 2 declared cores
    assert max(m["connections"] or 0 for m in members) >= 4  # 2 senders + 2 receivers
    manifest = json.loads((run_dir / "run.json").read_text())
    assert list(manifest["unmeasured"]) == ["member system CPU"]  # the one figure missing
    assert manifest["topology"]["existing"]["credentials"]["password_env"] == PASSWORD_VARIABLE

    report = run_dir / "analysis" / "report.md"
    if report.exists():  # where Java is there for Spark
        assert "not measured: member system CPU" in report.read_text()

    assert watch.agents_seen > 0
    assert watch.seen == []
    secret = broker.password.encode()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and (run_dir / "events.jsonl").exists()
    assert [str(p) for p in files if secret in p.read_bytes()] == []
    assert broker.password not in plan.stdout + plan.stderr + stdout + stderr


def test_the_member_cpu_read_from_prometheus_is_the_node_process_cpu(broker):
    """The source of an existing member's CPU, checked against the kernel's account of the
    node's process: the VM's runtime counter is its user CPU time (not its system time, which
    the run says it cannot know)."""
    from topologies.rabbitmq.prometheus import node_stats
    url = f"http://127.0.0.1:{broker.prometheus_port}/metrics"
    times = psutil.Process(broker.pid).cpu_times()
    stats = node_stats(url, cpu=True)
    assert stats is not None and stats.cpu is not None and stats.cpu.at > 0
    assert stats.cpu.seconds == pytest.approx(times.user, rel=0.05, abs=0.1)
    assert stats.cpu.seconds < times.user + times.system


@pytest.mark.parametrize("case", ["unset password", "wrong password", "inline password",
                                  "unreachable", "wrong CA", "missing queue"])
def test_a_bad_existing_topology_fails_clearly_before_any_load(broker, tmp_path, case):
    other_ca = make_certificates(tmp_path / "other")["ca"]
    topology = {
        "unset password": lambda: topology_text(broker, broker.ca_file),
        "wrong password": lambda: topology_text(broker, broker.ca_file),
        "inline password": lambda: topology_text(
            broker, broker.ca_file, uri=f"amqps://{broker.user}:{broker.password}@localhost:"
                                        f"{broker.tls_port}"),
        "unreachable": lambda: topology_text(broker, broker.ca_file,
                                             uri=f"amqps://localhost:{PORT_BASE + 9}"),
        "wrong CA": lambda: topology_text(broker, other_ca),
        "missing queue": lambda: topology_text(broker, broker.ca_file, queue="no-such-queue"),
    }[case]()
    specs = write_specs(tmp_path, topology)
    if case == "missing queue":
        specs.write_text(SCENARIO.replace(QUEUE, "no-such-queue"))
    password = {"unset password": None, "wrong password": "not-it"}.get(case, broker.password)
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VARIABLE}
    env["SURGE_STATE_DIR"] = str(tmp_path / "state")
    if password is not None:
        env[PASSWORD_VARIABLE] = password
    started = time.monotonic()
    done = surge("run", str(specs), "--runs-dir", str(tmp_path / "runs"), "--no-live",
                 "--no-analyze", "--metrics-port", "0", env=env, timeout_s=120)
    said = done.stderr.strip()
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in said and broker.password not in said + done.stdout
    expected = {"unset password": f"{PASSWORD_VARIABLE} is not set",
                "wrong password": "refused the user and password",
                "inline password": "is written with credentials before the host",
                "unreachable": "ConnectionRefusedError",
                "wrong CA": "certificate is not trusted",
                "missing queue": "queues do not exist: no-such-queue"}[case]
    assert expected in said, said
    assert time.monotonic() - started < 60
    events = list((tmp_path / "runs").glob("*/events.jsonl"))
    kinds = [json.loads(line)["kind"] for e in events for line in e.read_text().splitlines()]
    assert "agents_up" not in kinds and "step" not in kinds  # nothing was sent
