"""Members and agents on SSH hosts: a broker host and two load hosts, each a real sshd on its own
loopback address (127.0.1.1, 127.0.1.2, 127.0.1.3), as document 000 runs its queue managers on
QMHost1, its senders on AppHost1 and its receivers on AppHost2."""

from __future__ import annotations

import json
import stat
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.tables import read_table
from tests.sshd import missing, running_sshd
from topologies.rabbitmq.remote import SshRabbitMQ

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]

ADDRESSES = {"brokers": "127.0.1.1", "senders": "127.0.1.2", "receivers": "127.0.1.3"}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    servers = {}
    try:
        for role, address in ADDRESSES.items():
            context = running_sshd(tmp_path_factory.mktemp(f"sshd-{role}"), address=address)
            servers[role] = (context, context.__enter__())
        yield {role: server for role, (_, server) in servers.items()}
    finally:
        for context, _ in servers.values():
            context.__exit__(None, None, None)


@pytest.fixture(scope="module")
def topology(hosts, tmp_path_factory) -> TopologySpec:
    tmp_path = tmp_path_factory.mktemp("hosts")

    def host(role: str, **fields):
        server = hosts[role]
        return {"name": role, "address": server.host, "work_dir": str(tmp_path / role),
                "python": sys.executable,
                "ssh": {"port": server.port, "user": server.user, "key_file": str(server.key_file),
                        "known_hosts_file": str(server.known_hosts_file), "retries": 0},
                **fields}
    return TopologySpec.model_validate({
        "name": "ssh2", "placement": "ssh", "members": 2, "start": 1, "cpu_per_member": 1.0,
        "port_base": 9050, "queues": [{"name": "q"}],
        "hosts": [host("brokers", roles=["broker"], members=2),
                  host("senders", roles=["load"]),
                  host("receivers", roles=["load"])]})


def scenario(hold: str, **fields) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "ssh-run", "topology": Path("unused.yaml"),
        "workload": {"queue": "q", "senders": 4, "receivers": 4},
        "plan": [{"rate_per_sender": 50, "hold": hold}],
        "agents_on": {"senders": ["senders"], "receivers": ["receivers"]},
        "measure": {"settle": "2s", "drain": "20s"}, **fields})


@pytest.fixture(scope="module")
def provisioner(topology, tmp_path_factory):
    """One broker host for the module: booting members is the slow part."""
    provisioner = SshRabbitMQ(topology, state_root=tmp_path_factory.mktemp("state"))
    pids: set[int] = set()
    try:
        yield provisioner, pids
    finally:
        pids |= {m.pid for m in provisioner.status() if m.pid}
        provisioner.down()
        left = [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not left, f"broker processes left on the host: {left}"


def agents_of(run_dir):
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "agents_up":
            return event["agents"]
    return []


def test_members_on_a_broker_host_and_agents_on_two_load_hosts(provisioner, topology,
                                                                tmp_path):
    ssh, pids = provisioner
    members = ssh.up()
    pids |= {m.pid for m in members if m.pid}
    assert [m.running for m in members] == [True, False]
    assert members[0].host == "127.0.1.1"
    controller = Controller(scenario("6s"), topology, tmp_path / "runs", live=False,
                            provisioner=ssh)
    result = controller.run()
    assert result.outcome == "completed"
    assert result.accounting.balanced and result.accounting.sent > 0.9 * 200 * 6
    assert_closed(ssh, topology, result.run_dir)
    assert 0.95 <= result.steps[0].ratio <= 1.05, result.steps
    hosts = [a["host"] for a in agents_of(result.run_dir)]
    assert hosts == ["127.0.0.1", "127.0.0.1"]  # both load hosts' agents through forwarded ports
    manifest = json.loads((result.run_dir / "run.json").read_text())
    clocks = manifest["clocks"]
    assert set(clocks["hosts"]) == {"senders", "receivers"}
    for clock in clocks["hosts"].values():  # one machine: each offset is 0 within its error
        assert abs(clock["offset_ms"]) <= clock["uncertainty_ms"] + 0.5, clocks
    assert clocks["latency_reliable"] == (clocks["latency_error_bound_ms"] <= 2.0)
    assert not ssh.warnings  # the cgroup quota was written
    # the broker host's CPU is sampled beside the controller's, and shown in the step table
    host_rows = read_table(result.run_dir, "hosts").to_pylist()
    assert {r["host"] for r in host_rows} == {"controller", "brokers"}
    broker_cpu = [r["cpu_percent"] for r in host_rows if r["host"] == "brokers"]
    assert sum(1 for c in broker_cpu if c is not None and 0 < c <= 100) >= len(broker_cpu) - 2
    assert "brokers" in result.steps[0].hosts_cpu_percent
    members = read_table(result.run_dir, "members").to_pylist()
    serving = [r for r in members if r["running"] and r["phase"] == 1]
    assert serving and all(r["cpu_percent"] is None or r["cpu_percent"] <= 115 + 5
                           for r in serving)

    started = ssh.start_member()
    pids.add(started.pid)
    assert started.running and [m.running for m in ssh.status()] == [True, True]
    ssh.stop_member(1)
    assert [m.running for m in ssh.status()] == [True, False]


def test_a_lost_load_host_is_reported_and_the_run_ends_cleanly(provisioner, topology, hosts,
                                                              tmp_path):
    """The receivers' host drops mid-run; the scenario says a lost agent ends the load
    (exit.agent_lost), so the run stops its senders, accounts for what it can and names the
    rest unknown."""
    ssh, pids = provisioner
    pids |= {m.pid for m in ssh.up() if m.pid}
    controller = Controller(scenario("40s", exit={"agent_lost": True}), topology,
                            tmp_path / "runs", live=False, provisioner=ssh)
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(result=controller.run()))
    thread.start()
    deadline = time.monotonic() + 60
    while not controller.ticks and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    for role in ("senders", "receivers"):  # each load host's agent listens on its loopback only
        assert _listening_addresses(hosts[role]) == {"127.0.0.1"}, role
    senders_host = [p.pid for p in hosts["senders"].session_processes()]
    sessions = hosts["receivers"].session_processes()
    agent_pids = [p.pid for s in sessions for p in s.children(recursive=True)]
    lost_at = time.time()
    for session in sessions:  # the connection to the receivers' host drops
        session.kill()
    thread.join(90)
    assert not thread.is_alive()
    result = outcome["result"]
    assert result.outcome == "completed" and result.steps
    run_dir = controller.run_dir
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    [lost] = [e for e in events if e["kind"] == "agent_lost"]
    assert lost["receivers"] == 4 and lost["senders"] == 0  # the receivers' host
    assert lost["t"] - lost_at < 8
    assert any(e["kind"] == "exit" and e["reason"] == "an agent was lost" for e in events)
    manifest = json.loads((run_dir / "run.json").read_text())
    accounting = manifest["accounting"]
    assert accounting["lost"] is None and accounting["unknown"] is not None, accounting
    assert manifest["agents_lost"][0]["received"] > 0
    time.sleep(1)
    assert not [p for p in agent_pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    # the other host's agent was stopped too
    assert senders_host and not [p for p in senders_host if psutil.pid_exists(p)
                                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def assert_closed(ssh: SshRabbitMQ, topology: TopologySpec, run_dir: Path) -> None:
    """The topology's own cookie (0400, in its 0700 directory on the host) and broker user (its
    password only in the 0600 rabbitmq.conf there): neither in any file of the run (every SSH
    command is in events.jsonl); the member and its epmd listen on loopback only."""
    secrets = ssh.secrets()
    assert ssh.client_settings() == {"user": "surge", "password": secrets.password}
    root = Path(topology.hosts[0].work_dir) / topology.name
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(root) == 0o700 and mode(root / ".erlang.cookie") == 0o400
    assert (root / ".erlang.cookie").read_text() == secrets.cookie
    assert mode(root / "member-0" / "rabbitmq.conf") == 0o600
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secrets.password.encode() not in data and secrets.cookie.encode() not in data, \
                path
    member = ssh.status()[0]
    epmd = json.loads(ssh.state_file.read_text())["epmd"]["brokers"]
    listening = {(c.laddr.ip, c.laddr.port) for pid in (member.pid, epmd)
                 for c in psutil.Process(pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN}
    assert {port for _, port in listening} >= {9050, 19050, 29050, 39050}, listening
    assert {ip for ip, _ in listening} <= {"127.0.0.1", "127.0.1.1", "::1"}, listening


def _listening_addresses(sshd) -> set[str]:
    """The addresses the processes of ``sshd``'s sessions listen on."""
    return {c.laddr.ip for p in sshd.session_processes()
            for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
