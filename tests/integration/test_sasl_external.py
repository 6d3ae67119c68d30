"""SASL EXTERNAL (PerfTest's -se) against a RabbitMQ node this test configures itself: its TLS
listener asks for client certificates from the test's own CA and takes the certificate's
common name as the user. A run that authenticates with a client certificate and no password
loses nothing; a certificate from another CA is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest

from results.rundir.tables import read_rows
from tests.integration.outside_broker import (
    make_certificates,
    make_client_certificate,
    outside_broker,
)

pytestmark = pytest.mark.integration

PORT_BASE = 8880  # amqp, amqps, management, prometheus, distribution, epmd
CLIENT = "surge-client"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with outside_broker(tmp_path_factory.mktemp("external"), PORT_BASE,
                        sasl_external=True) as running:
        _management(running, "PUT", f"/users/{CLIENT}", {"password_hash": "", "tags": ""})
        _management(running, "PUT", f"/permissions/%2F/{CLIENT}",
                    {"configure": ".*", "write": ".*", "read": ".*"})
        _management(running, "PUT", "/queues/%2F/perf-external", {"durable": True})
        yield running


def _management(broker, method: str, path: str, body: dict) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.management_port}/api{path}", method=method,
        data=json.dumps(body).encode(), headers={
            "content-type": "application/json", "authorization": "Basic " + b64encode(
                f"{broker.user}:{broker.password}".encode()).decode()})
    urllib.request.urlopen(request, timeout=10).close()


WORKLOAD = "{queue: perf-external, senders: 1, receivers: 1, confirms: true, max_backlog: null}"


def specs(directory: Path, broker, cert: Path, key: Path, workload: str = WORKLOAD,
          plan: str = "100:4s", more: str = "") -> Path:
    (directory / "topology.yaml").write_text(f"""\
name: external
placement: existing
existing:
  members: [{{uri: "amqps://localhost:{broker.tls_port}"}}]
  mechanism: EXTERNAL
  tls: {{ca_file: {broker.ca_file}, cert_file: {cert}, key_file: {key}}}
queues: [{{name: perf-external}}]
""")
    (directory / "scenario.yaml").write_text(f"""\
name: external
topology: topology.yaml
agents: 1
workload: {workload}
plan: ["{plan}"]
measure: {{settle: 1s, drain: 10s}}
{more}""")
    return directory / "scenario.yaml"


def surge(directory: Path, scenario: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURGE_")}
    env["SURGE_STATE_DIR"] = str(directory / "state")
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(scenario),
                           "--runs-dir", str(directory / "runs"), "--no-live", "--no-analyze",
                           "--metrics-port", "0"], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_a_run_authenticates_with_its_client_certificate_and_no_password(broker, tmp_path):
    client = make_client_certificate(broker.ca_file, CLIENT)
    scenario = specs(tmp_path, broker, client["cert"], client["key"])
    done = surge(tmp_path, scenario)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = (p.parent for p in (tmp_path / "runs").glob("*/run.json"))
    books = json.loads((run_dir / "run.json").read_text())["accounting"]
    assert books["sent"] > 300 and books["balanced"], books["explain"]


def test_an_unlimited_sender_over_tls_keeps_its_queue_within_its_backlog(broker, tmp_path):
    """The backlog gate's depth readings on a TLS connection: declares written as frames,
    answers taken off the stream that pika decrypts (``install_depth_reader``)."""
    client = make_client_certificate(broker.ca_file, CLIENT)
    scenario = specs(tmp_path, broker, client["cert"], client["key"], workload=(
        "{queue: perf-external, senders: 1, receivers: 1, prefetch: 20, max_backlog: 200}"),
        plan="0:4s", more="faults: [{kind: consumer_slowdown, at: 0s, duration: 4s, "
                          "delay: 2ms}]\n")
    done = surge(tmp_path, scenario)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = (p.parent for p in (tmp_path / "runs").glob("*/run.json"))
    books = json.loads((run_dir / "run.json").read_text())["accounting"]
    assert books["sent"] > 500 and books["balanced"], books["explain"]
    ticks = [t for t in read_rows(run_dir, "ticks") if t["phase"]]
    backlog = [t["sent"] - t["received"] for t in ticks]  # the receiver takes 500 msg/s
    assert max(backlog) < 200 + 20 + 64, backlog


def test_a_certificate_from_another_authority_is_refused_in_one_line(broker, tmp_path):
    stranger = make_certificates(tmp_path / "other")  # its own CA, not the broker's
    client = make_client_certificate(stranger["ca"], CLIENT)
    scenario = specs(tmp_path, broker, client["cert"], client["key"])
    done = surge(tmp_path, scenario)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "amqps://localhost" in last, done.stderr[-2000:]
