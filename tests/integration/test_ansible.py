"""The playbooks in ansible/ for real: syntax check and ansible-lint; the RabbitMQ playbook
bringing up a working two-node cluster on this machine (``surge up --via ansible``, process
mode, its own node names, ports, data and epmd; stopped by PID afterwards, whatever happens);
the MQ uniform-cluster playbook and the agents playbook over a real sshd on loopback (MQ's
commands are the stand-ins of tests/integration/mq_standin_bin, as in test_mq_provision.py).
Nothing touches a system RabbitMQ service."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from tests.mqemu import end_all, install_standins
from tests.sshd import free_port, missing, running_sshd
from topologies import ansible_up
from topologies.mq import uniform
from topologies.rabbitmq import credentials
from topologies.rabbitmq.management import Management
from topologies.rabbitmq.node import rabbitmqctl

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = ROOT / "ansible"
BIN = Path(sys.executable).parent
MQ_PORT_BASE = 9550  # emulated queue managers' listeners, clear of tests/mqemu's free ports
needs_ansible = pytest.mark.skipif(not (BIN / "ansible-playbook").exists(),
                                   reason="ansible-core is not installed (pip install -e .[dev])")
needs_sshd = pytest.mark.skipif(missing() is not None, reason=str(missing()))
def ansible_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1"}


# -- (a) syntax and lint ------------------------------------------------------------------------

@needs_ansible
@pytest.mark.parametrize("playbook", sorted(ansible_up.PLAYBOOKS.values()))
def test_playbook_passes_the_syntax_check(playbook):
    done = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", playbook],
                          cwd=ANSIBLE, env=ansible_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(not (BIN / "ansible-lint").exists(), reason="ansible-lint is not installed")
def test_ansible_lint_is_clean():
    done = subprocess.run([str(BIN / "ansible-lint"), "--offline", "--nocolor"], cwd=ANSIBLE,
                          env=ansible_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Profile 'production' was required, and it passed" in done.stdout + done.stderr


# -- (b) the RabbitMQ playbook, for real, on this machine ------------------------------------------

def ports_free(base: int, members: int) -> bool:
    ports = [base + offset + i for i in range(members) for offset in (0, 10000, 10100, 20000)]
    for port in [*ports, base + 30000]:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port_base(members: int) -> int:
    """A port base from 10700 up (no other test's) whose AMQP, management, Prometheus,
    distribution and epmd ports are all free."""
    for base in range(10700, 11000, 10):
        if ports_free(base, members):
            return base
    pytest.skip("no free port range from 10700 to 11000")


def ours(pid: int, marker: str) -> psutil.Process | None:
    """The process ``pid`` if it runs and names ``marker`` in its environment or command line."""
    if not pid:
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        if marker in " ".join(process.cmdline()) or marker in process.environ().values():
            return process
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return None


def stop_groups(processes: list[psutil.Process]) -> None:
    """SIGTERM the process groups ``processes`` lead, wait for all, SIGKILL what is left."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=30)
    for process in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def pid_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def stop_nodes(state_dir: Path, topology: TopologySpec) -> None:
    """Stop what the playbook started, by the PIDs in its PID files: the nodes, then their epmd
    (a node that loses its epmd while it stops starts one of its own)."""
    nodes = [ours(pid_in(state_dir / f"member-{i}" / "node.pid") or 0,
                  f"surge-{topology.name}-{i}@localhost") for i in range(topology.members)]
    stop_groups([process for process in nodes if process])
    epmd = ours(pid_in(state_dir / "epmd.pid") or 0, f"-port {topology.port_base + 30000}")
    if epmd:
        stop_groups([epmd])


def leftovers(topology: TopologySpec) -> list[psutil.Process]:
    """Processes still naming one of the topology's nodes (none may outlive the test)."""
    prefix = f"surge-{topology.name}-"
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and any(
                    v.startswith(prefix) for v in process.environ().values()):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@needs_ansible
@pytest.mark.skipif(not os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server"),
                    reason="Debian's rabbitmq-server is not installed")
def test_rabbitmq_playbook_brings_up_a_working_cluster(tmp_path, monkeypatch):
    spec = {"name": "ansible-it", "members": 2, "start": 2, "port_base": free_port_base(2),
            "queues": [{"name": "perf", "type": "quorum",
                        "arguments": {"x-quorum-initial-group-size": 2}},
                       {"name": "inst", "per_member": True}]}
    topology = TopologySpec.model_validate(spec)
    topology_file = tmp_path / "ansible-it.yaml"
    topology_file.write_text(yaml.safe_dump(spec))
    state_root = tmp_path / "state"
    state_dir = state_root / topology.name
    monkeypatch.setenv("SURGE_STATE_DIR", str(state_root))
    nodes = [f"surge-ansible-it-{i}@localhost" for i in range(2)]
    epmd_port = topology.port_base + 30000
    try:
        from orchestrator import cli
        result = CliRunner().invoke(cli.app, ["up", "--via", "ansible", str(topology_file)])
        assert result.exit_code == 0, result.output
        # surge's own status sees the members the playbook started (their PIDs recorded)
        assert [line.split()[:2] for line in result.output.splitlines()[-2:]] == \
            [[nodes[0], "running"], [nodes[1], "running"]]

        # the member answers as itself (to rabbitmqctl with the topology's own cookie, its
        # HOME the state directory), and both are running members of one cluster
        secrets = credentials.read(state_dir / "credentials.json")
        assert (state_dir / ".erlang.cookie").read_text() == secrets.cookie
        assert f"Status of node {nodes[1]}" in rabbitmqctl(nodes[1], epmd_port, state_dir,
                                                           "status")
        api = Management("127.0.0.1", topology.port_base + 10001, secrets.user, secrets.password)
        assert sorted(api.running_nodes()) == nodes
        with pytest.raises(ProvisionError, match="401"):  # there is no guest
            Management("127.0.0.1", topology.port_base + 10001, "guest", "guest").running_nodes()
        # the nodes and their epmd listen on loopback only
        leaders = [pid_in(state_dir / f"member-{i}" / "node.pid") for i in range(2)]
        listening = {(c.laddr.ip, c.laddr.port)
                     for pid in [*leaders, pid_in(state_dir / "epmd.pid")]
                     for c in psutil.Process(pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN}
        assert {topology.port_base + 20000, epmd_port} <= {port for _, port in listening}
        assert {ip for ip, _ in listening} <= {"127.0.0.1", "::1"}, listening
        # the management API and Prometheus answer on surge's ports; queues and policy are there
        queues = {q["name"]: q for q in api.request("GET", "/queues/%2F")}
        assert set(queues) == {"perf", "inst.0", "inst.1"}
        assert queues["perf"]["type"] == "quorum"
        assert (queues["inst.0"]["node"], queues["inst.1"]["node"]) == tuple(nodes)
        policy = api.request("GET", "/policies/%2F/surge-quorum-defaults")
        assert policy["definition"] == {"max-in-memory-length": 0}
        with urllib.request.urlopen(f"http://127.0.0.1:{topology.port_base + 10100}/metrics",
                                    timeout=10) as response:
            assert b"rabbitmq_" in response.read()
        # its own data under tmp_path
        assert (state_dir / "member-1" / "mnesia").is_dir()

        # a second run finds everything in place: nothing changes
        again = ansible_up.up(topology, state_root=state_root)
        assert again.status == "successful" and again.changed == {}
    finally:
        stop_nodes(state_dir, topology)
        shutil.rmtree(state_dir, ignore_errors=True)
        left = leftovers(topology)
        for process in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        assert not left, f"processes of the playbook's nodes were left: {[p.pid for p in left]}"


@needs_ansible
def test_check_mode_reports_changes_and_starts_nothing(tmp_path):
    topology = TopologySpec.model_validate({"name": "ansible-check", "members": 2, "start": 2,
                                            "port_base": 7990})
    result = ansible_up.up(topology, state_root=tmp_path, check=True)
    assert result.status == "successful" and result.changed["localhost"] > 0
    # nothing was written but ansible-runner's own directory and the topology's secrets (the
    # inventory holds them), nothing runs
    assert sorted(p.name for p in (tmp_path / "ansible-check").iterdir()) == \
        ["ansible", "credentials.json"]
    assert not leftovers(topology)


# -- (c) MQ uniform cluster and agents over a real sshd --------------------------------------------

@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def over_ssh(sshd, tmp_path_factory):
    """Arguments of ``ansible_up.up`` for hosts behind the test sshd: the system's interpreter
    (a login's PATH may hold version shims), and SSH master connections in a directory of our
    own, asked to exit before the sshd stops (it checks that nothing of its sessions is left)."""
    control = tmp_path_factory.mktemp("ssh-control")
    yield {"extra_vars": {"ansible_python_interpreter": "/usr/bin/python3"},
           "envvars": {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(control)}}
    for socket_path in control.iterdir():
        subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={socket_path}", "surge-test"],
                       capture_output=True, timeout=10)


def ssh_settings(sshd) -> dict:
    return {"port": sshd.port, "user": sshd.user, "key_file": str(sshd.key_file),
            "known_hosts": "strict", "known_hosts_file": str(sshd.known_hosts_file),
            "connect_timeout": 5, "retries": 0}


@needs_ansible
@needs_sshd
def test_mq_playbook_creates_the_rendered_cluster_over_ssh(sshd, over_ssh, tmp_path):
    install_standins(tmp_path / "bin")
    try:
        playbook_creates_the_rendered_cluster(sshd, over_ssh, tmp_path)
    finally:
        started = end_all(tmp_path / "bin")
    assert started == ["UC01QM01"]  # the one the playbook started, emulated, left running


def playbook_creates_the_rendered_cluster(sshd, over_ssh, tmp_path) -> None:
    topology = TopologySpec.model_validate({
        "name": "mq-ansible-it", "broker": "ibmmq", "placement": "ssh", "members": 4,
        "start": 1, "queues": [{"name": "REQUEST"}],
        "ibmmq": {"hosts": [{"name": "QMHostA", "address": "127.0.0.1", "members": 2},
                            {"name": "QMHostB", "address": "127.0.0.1", "members": 2}],
                  "port_base": MQ_PORT_BASE,
                  "bin_dir": str(tmp_path / "bin"), "files_dir": str(tmp_path / "nfs1"),
                  "ssh": ssh_settings(sshd)}})
    calls = tmp_path / "bin" / "state" / "calls.log"

    first = ansible_up.up(topology, state_root=tmp_path / "state", **over_ssh)
    assert first.status == "successful"
    # the files on the hosts are the ones surge rendered
    files = uniform.file_paths(topology)
    assert Path(files["ini"]).read_text() == uniform.ini_text(topology)
    assert Path(files["mqsc"]).read_text() == uniform.mqsc_text(topology)
    assert Path(files["ccdt"]).read_text() == uniform.ccdt_text(topology)
    # every queue manager created with surge's crtmqm line, only the first started
    made = [line for line in calls.read_text().splitlines() if not line.startswith("dspmq")]
    expected = [uniform.crtmqm(topology, qm) for qm in uniform.queue_managers(topology)]
    assert sorted(made[:-1]) == sorted(expected) and made[-1] == "strmqm UC01QM01"

    # a second run creates and starts nothing
    before = len(calls.read_text().splitlines())
    again = ansible_up.up(topology, state_root=tmp_path / "state", **over_ssh)
    assert again.changed == {}
    assert all(line.startswith("dspmq ") for line in calls.read_text().splitlines()[before:])


@needs_ansible
@needs_sshd
def test_mq_playbook_failure_names_host_task_and_message(sshd, over_ssh, tmp_path):
    install_standins(tmp_path / "bin")
    (tmp_path / "bin" / "state").mkdir()
    (tmp_path / "bin" / "state" / "fail-crtmqm").write_text("PERF1\n")
    topology = TopologySpec.model_validate({
        "name": "mq-ansible-fail", "broker": "ibmmq", "placement": "ssh", "members": 2,
        "start": 1, "ibmmq": {"qm_prefix": "PERF", "qm_digits": 1, "qm_first": 0,
                              "hosts": [{"name": "QMHostA", "address": "127.0.0.1",
                                         "members": 2}], "port_base": MQ_PORT_BASE,
                              "bin_dir": str(tmp_path / "bin"),
                              "files_dir": str(tmp_path / "nfs1"), "ssh": ssh_settings(sshd)}})
    try:
        with pytest.raises(ProvisionError) as raised:
            ansible_up.up(topology, state_root=tmp_path / "state", **over_ssh)
    finally:
        assert end_all(tmp_path / "bin") == []  # the failure came before any strmqm
    message = str(raised.value)
    assert message.startswith("ansible: mq-uniform-cluster.yml failed on QMHostA: task 'Create "
                              "the queue managers dspmq does not know")
    assert "PERF1" in message and "no space left on device" in message and "(rc 71)" in message


@contextlib.contextmanager
def agents_play(name: str, port: int, sshd, over_ssh, tmp_path) -> Iterator[Callable[[], Any]]:
    """A one-agent topology ``name`` on the loopback sshd, its agent on ``port`` in process
    mode: yields the call that plays agents.yml on it; the agent's shell (it names its port)
    is stopped afterwards, whatever happened."""
    topology = TopologySpec.model_validate({
        "name": name, "members": 1, "start": 1,
        "hosts": [{"name": "load1", "address": "127.0.0.1", "roles": ["load"], "agents": 1,
                   "work_dir": str(tmp_path / "work"), "ssh": ssh_settings(sshd)}]})
    extra = {**over_ssh["extra_vars"], "surge_agent_mode": "process",
             "surge_agent_install": False, "surge_agent_venv": str(BIN.parent),
             "surge_agent_port_base": port, "surge_agent_bind": "127.0.0.1"}
    try:
        yield lambda: ansible_up.up(topology, state_root=tmp_path / "state", agents=True,
                                    extra_vars=extra, envvars=over_ssh["envvars"])
    finally:
        process = ours(pid_in(tmp_path / "work" / f"agent-{port}.pid") or 0, str(port))
        if process:
            stop_groups([process])


@needs_ansible
@needs_sshd
def test_agents_playbook_starts_an_agent_that_answers_with_its_token(sshd, over_ssh,
                                                                      tmp_path):
    port = free_port()
    with agents_play("agents-it", port, sshd, over_ssh, tmp_path) as play:
        assert play().status == "successful"
        token = (tmp_path / "state" / "agents-it" / "ansible" / "agent-token").read_text()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/clock",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert abs(json.loads(response.read())["ns"] - time.time_ns()) < 60e9
        wrong = urllib.request.Request(f"http://127.0.0.1:{port}/clock",
                                       headers={"Authorization": "Bearer wrong"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(wrong, timeout=10)
        assert refused.value.code == 401
        assert play().changed == {}


class Refusing(http.server.BaseHTTPRequestHandler):
    """An HTTP server that refuses every GET with 401 (as another topology's agent would)."""

    def do_GET(self):  # noqa: N802 (the standard library's name)
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args):
        pass


@needs_ansible
@needs_sshd
def test_agents_playbook_fails_when_another_process_answers_on_the_agents_port(sshd, over_ssh,
                                                                                tmp_path):
    """A port that listens is not an agent that is ours: something on it that refuses the
    play's token fails the play at the token check and names it."""
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with agents_play("agents-taken", port, sshd, over_ssh, tmp_path) as play, \
                pytest.raises(ProvisionError) as raised:
            play()
    finally:
        server.shutdown()
        server.server_close()
    assert str(raised.value).startswith("ansible: agents.yml failed on load1: task 'Check that "
                                        "each agent answers with this play's token'"), raised.value
