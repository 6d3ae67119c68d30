"""A local topology is closed to the network: every socket its processes listen on is on
loopback, it has its own Erlang cookie and broker user (guest does not exist), its secrets are
kept private and appear on no command line."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path

import pika
import pika.exceptions
import psutil
import pytest

from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration

PORT_BASE = 7950  # clear of the session cluster (7200) and of the other tests
LOOPBACK = {"127.0.0.1", "::1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    topology = TopologySpec(name="it-listen", members=2, start=2, port_base=PORT_BASE,
                            queues=[QueueSpec(name="closed", type="classic")])
    with local_cluster(topology, tmp_path_factory.mktemp("state")) as provisioner:
        yield provisioner


def started_processes(cluster) -> list[psutil.Process]:
    """Every live process in the process groups surge started: each member's VM (with its
    erl_child_setup and inet_gethost) and the topology's epmd."""
    state = json.loads((cluster.state_dir / "state.json").read_text())
    leaders = {m.pid for m in cluster.status() if m.pid} | {state["epmd_pid"]}
    assert len(leaders) == 3, leaders
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) in leaders:
                found.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def test_every_listening_socket_is_on_loopback(cluster):
    listening = {}
    for process in started_processes(cluster):
        for connection in process.net_connections(kind="inet"):
            if connection.status == psutil.CONN_LISTEN:
                listening[(connection.laddr.ip, connection.laddr.port)] = process.name()
    ports = {port for _, port in listening}
    expected = {PORT_BASE + offset + i for offset in (0, 10000, 10100, 20000) for i in (0, 1)}
    assert ports >= expected | {PORT_BASE + 30000}, listening  # AMQP, HTTP, dist, epmd
    assert {ip for ip, _ in listening} <= LOOPBACK, listening


def test_the_topology_has_its_own_private_cookie(cluster):
    state_dir = cluster.state_dir
    cookie = state_dir / ".erlang.cookie"
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(cookie.stat().st_mode) == 0o400
    assert stat.S_IMODE((state_dir / "credentials.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "member-0" / "rabbitmq.conf").stat().st_mode) == 0o600
    assert stat.S_IMODE((state_dir / "member-0").stat().st_mode) == 0o700
    assert cookie.read_text() == cluster.secrets().cookie
    shared = Path.home() / ".erlang.cookie"
    if shared.exists():
        assert shared.read_text().strip() != cookie.read_text()
    # the nodes and rabbitmqctl use it: the CLI reaches a member through the private epmd
    assert "closed" in cluster.settled_queue_depths()


def amqp(port: int, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials(user, password),
        connection_attempts=1, socket_timeout=10))


def test_guest_is_refused_and_the_generated_user_is_let_in(cluster):
    settings = cluster.client_settings()
    assert set(settings) == {"user", "password"} and settings["user"] != "guest"
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        amqp(PORT_BASE, "guest", "guest")
    connection = amqp(PORT_BASE + 1, settings["user"], settings["password"])
    try:
        connection.channel().queue_declare("closed", passive=True)
    finally:
        connection.close()

    def overview(user: str, password: str) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{PORT_BASE + 10000}/api/overview")
        request.add_header("Authorization",
                           "Basic " + b64encode(f"{user}:{password}".encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    assert overview("guest", "guest") == 401
    assert overview(settings["user"], settings["password"]) == 200
    assert sorted(cluster.management().running_nodes()) == [m.name for m in cluster.status()]


def test_no_secret_on_a_command_line_or_in_an_environment(cluster):
    secrets = cluster.secrets()
    processes = started_processes(cluster)
    assert any(p.name() == "beam.smp" for p in processes)
    for process in processes:
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        for secret in (secrets.cookie, secrets.password):
            assert secret.encode() not in cmdline, process
            assert secret.encode() not in environ, process
