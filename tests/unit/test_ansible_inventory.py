"""Inventories rendered from topologies for the playbooks in ansible/, the files and crtmqm
arguments handed to the MQ role, failure messages from runner events, and ``up()`` against a
stand-in ``ansible_runner`` (no Ansible runs here; tests/integration/test_ansible.py runs it)."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.errors import ProvisionError
from orchestrator.specs.hosts import SshSpec
from orchestrator.specs.loader import load_topology
from orchestrator.specs.topology import TopologySpec
from topologies import ansible_up
from topologies.mq import uniform
from topologies.rabbitmq import credentials

SECRETS = credentials.ClusterSecrets(cookie="COOKIE", user="surge", password="PASS")

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE = ROOT / "ansible"


def local(**changes) -> TopologySpec:
    spec = {"name": "inv", "members": 3, "start": 2, "port_base": 7800,
            "queues": [{"name": "perf", "type": "quorum",
                        "arguments": {"x-quorum-initial-group-size": 2}},
                       {"name": "inst", "per_member": True},
                       {"name": "p-%d", "count": 3}]}
    return TopologySpec.model_validate({**spec, **changes})


def ssh_topology(**changes) -> TopologySpec:
    spec = {
        "name": "remote", "placement": "ssh", "members": 3, "start": 3, "cpu_per_member": 2,
        "port_base": 6000,
        "hosts": [
            {"name": "b1", "address": "10.0.0.1", "roles": ["broker"], "members": 2,
             "work_dir": "/srv/surge/",
             "ssh": {"port": 2222, "user": "root", "key_file": "/keys/id", "known_hosts": "strict",
                     "known_hosts_file": "/keys/known_hosts", "connect_timeout": 7.5,
                     "retries": 3}},
            {"name": "b2", "roles": ["broker", "load"], "members": 1, "agents": 2,
             "ssh": {"user": "admin", "known_hosts": "accept-new"}},
            {"name": "l1", "roles": ["load"], "python": "/opt/py/bin/python3",
             "ssh": {"user": "bench", "known_hosts": "ignore"}}]}
    return TopologySpec.model_validate({**spec, **changes})


def hosts_of(inventory: dict, group: str) -> dict[str, dict]:
    return inventory["all"]["children"][group]["hosts"]


def group_vars(inventory: dict, group: str) -> dict:
    return inventory["all"]["children"][group]["vars"]


def role_defaults(role: str) -> set[str]:
    return set(yaml.safe_load((ANSIBLE / "roles" / role / "defaults" / "main.yml").read_text()))


# -- RabbitMQ -----------------------------------------------------------------------------------

def test_local_topology_runs_its_started_members_on_this_machine_like_surge():
    inventory = ansible_up.rabbitmq_inventory(local(), SECRETS, Path("/state/inv"))
    host = hosts_of(inventory, "rabbitmq")["localhost"]
    assert host["ansible_connection"] == "local"
    assert host["ansible_python_interpreter"] == sys.executable
    assert host["rabbitmq_members"] == [0, 1]  # start 2 of a pool of 3
    assert host["rabbitmq_mode"] == "process" and host["rabbitmq_become"] is False
    assert host["rabbitmq_node_host"] == "localhost"
    assert host["rabbitmq_bind_address"] == "127.0.0.1"
    assert host["rabbitmq_base_dir"] == "/state/inv"  # surge's own state directory
    # the topology's own cookie (in the state directory, the nodes' HOME) and broker user;
    # epmd and distribution on loopback
    assert host["rabbitmq_home_dir"] == "/state/inv"
    assert host["rabbitmq_dist_address"] == "127.0.0.1"
    common = group_vars(inventory, "rabbitmq")
    assert (common["rabbitmq_erlang_cookie"], common["rabbitmq_default_user"],
            common["rabbitmq_default_pass"]) == ("COOKIE", "surge", "PASS")
    assert common["rabbitmq_port_base"] == 7800 and common["rabbitmq_topology"] == "inv"


def test_queues_are_declared_where_surge_declares_them():
    queues = group_vars(ansible_up.rabbitmq_inventory(local(), SECRETS, Path("/s")),
                        "rabbitmq")["rabbitmq_queues"]
    placed = [(q["name"], q["member"]) for q in queues]
    assert placed == [("perf", 0), ("inst.0", 0), ("inst.1", 1),
                      ("p-1", 0), ("p-2", 1), ("p-3", 0)]
    perf = queues[0]
    assert perf["type"] == "quorum" and perf["durable"] is True
    assert perf["arguments"] == {"x-quorum-initial-group-size": 2, "x-queue-type": "quorum",
                                 "x-queue-leader-locator": "client-local"}
    assert queues[1]["arguments"] == {"x-queue-type": "classic"}


def test_ssh_topology_puts_members_in_blocks_on_the_broker_hosts():
    inventory = ansible_up.rabbitmq_inventory(ssh_topology(), SECRETS)
    hosts = hosts_of(inventory, "rabbitmq")
    assert list(hosts) == ["b1", "b2"]  # l1 has no broker role
    assert hosts["b1"]["rabbitmq_members"] == [0, 1] and hosts["b2"]["rabbitmq_members"] == [2]
    b1 = hosts["b1"]
    assert (b1["ansible_host"], b1["ansible_port"], b1["ansible_user"]) == ("10.0.0.1", 2222,
                                                                           "root")
    assert b1["ansible_ssh_private_key_file"] == "/keys/id"
    assert b1["ansible_ssh_timeout"] == 8 and b1["ansible_ssh_retries"] == 3
    assert b1["rabbitmq_become"] is False and hosts["b2"]["rabbitmq_become"] is True
    assert b1["rabbitmq_base_dir"] == "/srv/surge/remote"
    assert b1["rabbitmq_node_host"] == "b1" and "rabbitmq_bind_address" not in b1
    assert "rabbitmq_dist_address" not in b1  # other hosts' nodes reach it by name
    assert hosts["b2"]["ansible_host"] == "b2"  # no address: the name
    common = group_vars(inventory, "rabbitmq")
    assert common["rabbitmq_mode"] == "systemd" and common["rabbitmq_erlang_cookie"] == "COOKIE"
    assert (common["rabbitmq_default_user"], common["rabbitmq_default_pass"]) == ("surge", "PASS")
    assert common["rabbitmq_cpu_cores"] == 2


def test_a_loopback_host_has_localhost_nodes_bound_to_loopback():
    spec = ssh_topology(hosts=[{"name": "lo", "address": "127.0.0.1", "roles": ["broker"],
                                "members": 3}])
    host = hosts_of(ansible_up.rabbitmq_inventory(spec, SECRETS), "rabbitmq")["lo"]
    assert (host["rabbitmq_node_host"], host["rabbitmq_bind_address"],
            host["rabbitmq_dist_address"]) == ("localhost", "127.0.0.1", "127.0.0.1")


def test_hosts_whose_members_do_not_start_are_left_out():
    inventory = ansible_up.rabbitmq_inventory(ssh_topology(start=2), SECRETS)
    assert list(hosts_of(inventory, "rabbitmq")) == ["b1"]


@pytest.mark.parametrize(("mode", "checking", "args"), [
    ("strict", True, "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=/k/known"),
    ("accept-new", True, "-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/k/known"),
    ("ignore", False, "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"),
])
def test_host_key_checking_follows_the_ssh_settings(mode, checking, args):
    out = ansible_up.ssh_vars("h", SshSpec(known_hosts=mode, known_hosts_file="/k/known"))
    assert out["ansible_ssh_host_key_checking"] is checking
    assert out["ansible_ssh_common_args"] == args
    assert "ansible_ssh_private_key_file" not in out  # the agent and ~/.ssh keys
    assert (out["ansible_user"], out["ansible_port"]) == ("mqm", 22)


def test_a_key_file_under_home_is_expanded():
    out = ansible_up.ssh_vars("h", SshSpec(key_file="~/.ssh/id_surge"))
    assert out["ansible_ssh_private_key_file"] == os.path.expanduser("~/.ssh/id_surge")


def test_kubernetes_placement_is_refused():
    spec = local(placement="kubernetes", kubernetes={"namespace": "x"})
    with pytest.raises(ProvisionError, match="placement local or ssh, not kubernetes"):
        ansible_up.rabbitmq_inventory(spec, SECRETS)


def test_local_placement_needs_a_state_directory():
    with pytest.raises(ProvisionError, match="state directory"):
        ansible_up.rabbitmq_inventory(local(), SECRETS)


# -- IBM MQ -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def uc01() -> TopologySpec:
    return load_topology(ROOT / "topologies" / "mq-uc01-uniform.yaml")


def test_mq_inventory_hands_the_role_surges_own_crtmqm_lines(uc01, tmp_path):
    inventory = ansible_up.mq_inventory(uc01, tmp_path)
    hosts = hosts_of(inventory, "mq_uniform")
    assert list(hosts) == ["MQHost1", "MQHost2"]
    first = hosts["MQHost1"]
    assert (first["ansible_host"], first["ansible_user"]) == ("qmhost1.example.com", "mqm")
    assert first["ansible_ssh_common_args"] == "-o StrictHostKeyChecking=yes"
    assert first["mq_uniform_user"] == "mqm" and first["mq_uniform_become"] is True
    qms = {qm.name: qm for qm in uniform.queue_managers(uc01)}
    entries = first["mq_uniform_queue_managers"] + hosts["MQHost2"]["mq_uniform_queue_managers"]
    assert [e["name"] for e in entries] == [f"UC01QM{i:02d}" for i in range(1, 13)]
    for entry in entries:
        assert entry["crtmqm"] == uniform.crtmqm_args(uc01, qms[entry["name"]])
        assert entry["slice"] == f"mq-{entry['name']}.slice"
    assert [e["name"] for e in entries if e["start"]] == ["UC01QM01"]
    assert " ".join(entries[6]["crtmqm"]) == ("crtmqm -lc -p 1414 -ii /nfs1/uniclus.ini -ic "
                                             "/nfs1/uniclus.mqsc -iv CONNAME=MQHost2(1414) "
                                             "UC01QM07")
    common = group_vars(inventory, "mq_uniform")
    assert common["mq_uniform_files_src_dir"] == str(tmp_path)
    assert (common["mq_uniform_files_dir"], common["mq_uniform_ini_file"],
            common["mq_uniform_mqsc_file"], common["mq_uniform_ccdt_file"]) == (
        "/nfs1", "uniclus.ini", "uniclus.mqsc", "UC01.json")
    assert common["mq_uniform_cpu_cores"] == 4 and common["mq_uniform_bin_dir"] == ""


def test_the_files_the_playbook_copies_are_the_rendered_ones(uc01, tmp_path):
    playbook, inventory = ansible_up.plan_for(uc01, tmp_path)
    assert playbook == "mq-uniform-cluster.yml"
    files = tmp_path / "mq-files"
    assert (files / "uniclus.ini").read_text() == uniform.ini_text(uc01)
    assert (files / "uniclus.mqsc").read_text() == uniform.mqsc_text(uc01)
    assert json.loads((files / "UC01.json").read_text()) == uniform.ccdt(uc01)
    assert group_vars(inventory, "mq_uniform")["mq_uniform_files_src_dir"] == str(files)


def test_mq_inventory_needs_an_ssh_uniform_cluster():
    with pytest.raises(ProvisionError, match="MQ uniform cluster"):
        ansible_up.mq_inventory(local(), Path("/x"))


# -- agents -------------------------------------------------------------------------------------

def test_agents_inventory_lists_the_load_hosts():
    inventory = ansible_up.agents_inventory(ssh_topology())
    hosts = hosts_of(inventory, "surge_agents")
    assert list(hosts) == ["b2", "l1"]
    assert hosts["b2"]["surge_agent_count"] == 2 and hosts["l1"]["surge_agent_count"] == 1
    assert hosts["l1"]["surge_agent_python"] == "/opt/py/bin/python3"
    assert hosts["l1"]["ansible_ssh_host_key_checking"] is False
    assert hosts["l1"]["surge_agent_become"] is True


def test_agents_need_a_load_host():
    with pytest.raises(ProvisionError, match="no host with role load"):
        ansible_up.agents_inventory(local())


# -- the inventory and the roles agree ----------------------------------------------------------

@pytest.mark.parametrize(("render", "group", "role"), [
    (lambda: ansible_up.rabbitmq_inventory(local(), SECRETS, Path("/s")), "rabbitmq",
     "rabbitmq"),
    (lambda: ansible_up.rabbitmq_inventory(ssh_topology(), SECRETS), "rabbitmq", "rabbitmq"),
    (lambda: ansible_up.mq_inventory(load_topology(ROOT / "topologies/mq-uc01-uniform.yaml"),
                                     Path("/f")), "mq_uniform", "mq_uniform"),
    (lambda: ansible_up.agents_inventory(ssh_topology()), "surge_agents", "surge_agent"),
])
def test_every_variable_surge_sets_is_a_documented_role_default(render, group, role):
    inventory = render()
    keys = set(group_vars(inventory, group))
    for host in hosts_of(inventory, group).values():
        keys |= set(host)
    own = {key for key in keys if not key.startswith("ansible_")}
    assert own <= role_defaults(role), own - role_defaults(role)


def test_each_playbook_targets_the_group_surge_renders():
    for broker, playbook in ansible_up.PLAYBOOKS.items():
        plays = yaml.safe_load((ANSIBLE / playbook).read_text())
        assert [play["hosts"] for play in plays] == [ansible_up.GROUPS[broker]]


# -- secrets kept between runs ------------------------------------------------------------------

def test_the_agent_token_is_made_once_and_private(tmp_path):
    token = ansible_up.agent_token(tmp_path)
    assert ansible_up.agent_token(tmp_path) == token
    assert stat.S_IMODE((tmp_path / "agent-token").stat().st_mode) == 0o600


@pytest.mark.parametrize("topology", [local, ssh_topology])
def test_the_cluster_secrets_are_the_provisioners_made_once_in_the_state_directory(
        tmp_path, topology):
    private_dir = tmp_path / "state" / topology().name / "ansible"
    _, first = ansible_up.plan_for(topology(), private_dir)
    _, again = ansible_up.plan_for(topology(), private_dir)
    kept = credentials.read(tmp_path / "state" / topology().name / "credentials.json")
    for inventory in (first, again):
        common = group_vars(inventory, "rabbitmq")
        assert (common["rabbitmq_erlang_cookie"], common["rabbitmq_default_user"],
                common["rabbitmq_default_pass"]) == (kept.cookie, kept.user, kept.password)


# -- events and failures ------------------------------------------------------------------------

def event(kind: str, host: str = "b1", task: str = "Start the nodes", **data) -> dict:
    return {"event": kind, "event_data": {"host": host, "task": task, **data}}


def test_a_failure_names_the_host_the_task_the_item_and_the_message():
    events = [
        event("runner_on_ok", res={"changed": True}),
        event("runner_on_failed", host="b2", task="Check", ignore_errors=True,
              res={"msg": "ignored"}),
        event("runner_item_on_failed", res={"item": 1, "msg": "non-zero return code", "rc": 1,
                                            "stderr": "line1\nport 5681 in use"}),
        event("runner_on_failed", res={"msg": "One or more items failed"}),
        event("runner_on_unreachable", host="b3", task="Gathering Facts",
              res={"msg": "Failed to connect to the host via ssh: Permission denied"}),
    ]
    message = ansible_up.failure_message("rabbitmq.yml", "failed", 2, events)
    assert message.splitlines() == [
        "ansible: rabbitmq.yml failed on b1: task 'Start the nodes' (item 1): non-zero return "
        "code: line1 | port 5681 in use (rc 1)",
        "ansible: rabbitmq.yml failed on b3: unreachable: Failed to connect to the host via "
        "ssh: Permission denied"]


def test_a_run_that_failed_without_a_failed_task_says_how_it_ended():
    message = ansible_up.failure_message("agents.yml", "failed", 4, [],
                                         "ERROR! the role 'x' was not found")
    assert message == ("ansible: agents.yml ended failed (rc 4) with no failed task: ERROR! the "
                       "role 'x' was not found")


def test_events_become_one_line_each():
    assert ansible_up.describe_event(event("runner_on_ok", res={"changed": True})) == \
        "  b1: Start the nodes (changed)"
    assert ansible_up.describe_event(event("runner_retry", res={"attempts": 2, "retries": 120})) \
        == "  b1: Start the nodes (attempt 2 of 120)"
    assert ansible_up.describe_event(event("runner_on_skipped")) is None
    stats = {"event": "playbook_on_stats",
             "event_data": {"ok": {"b1": 5}, "changed": {"b1": 2}, "failures": {}, "dark": {}}}
    assert ansible_up.describe_event(stats) == \
        "recap: b1: ok=5 changed=2 failed=0 unreachable=0"
    assert ansible_up.changed_per_host([event("runner_on_ok"), stats]) == {"b1": 2}


# -- up() against a stand-in ansible_runner -----------------------------------------------------

class FakeRunner:
    """What ``ansible_runner.run`` returns, with canned events."""

    def __init__(self, status: str, events: list[dict], artifact_dir: Path):
        self.status, self.rc, self.events = status, 0 if status == "successful" else 2, events
        self.config = types.SimpleNamespace(artifact_dir=str(artifact_dir))
        self.stdout = types.SimpleNamespace(read=lambda: "")


@pytest.fixture
def fake_runner(monkeypatch, tmp_path):
    calls: list[dict] = []
    outcome = {"status": "successful", "events": [
        {"event": "playbook_on_stats", "event_data": {"changed": {"localhost": 3}}}]}

    def run(**kwargs):
        calls.append(kwargs)
        for e in outcome["events"]:
            kwargs["event_handler"](e)
        return FakeRunner(outcome["status"], outcome["events"], tmp_path / "artifacts")

    monkeypatch.setitem(sys.modules, "ansible_runner", types.SimpleNamespace(run=run))
    return calls, outcome


def test_up_runs_the_brokers_playbook_with_the_rendered_inventory(fake_runner, tmp_path):
    calls, _ = fake_runner
    said: list[str] = []
    state = tmp_path / "state"
    (state / "inv" / "member-0").mkdir(parents=True)
    (state / "inv" / "member-0" / "node.pid").write_text("4242")
    (state / "inv" / "epmd.pid").write_text("4241\n")
    result = ansible_up.up(local(start=1), state_root=state, say=said.append, check=False,
                           extra_vars={"rabbitmq_log_level": "info"})
    call = calls[0]
    assert call["playbook"] == "rabbitmq.yml" and call["project_dir"] == str(ANSIBLE)
    assert call["private_data_dir"] == str(state / "inv" / "ansible")
    assert call["extravars"] == {"rabbitmq_log_level": "info"} and call["cmdline"] is None
    assert call["envvars"]["PATH"].startswith(str(Path(sys.executable).parent))
    inventory = yaml.safe_load(Path(call["inventory"]).read_text())
    assert hosts_of(inventory, "rabbitmq")["localhost"]["rabbitmq_members"] == [0]
    assert stat.S_IMODE((state / "inv" / "ansible").stat().st_mode) == 0o700
    assert result.status == "successful" and result.changed == {"localhost": 3}
    assert said[0].startswith("ansible: rabbitmq.yml on localhost; inventory ")
    assert said[-1] == "recap: localhost: ok=0 changed=3 failed=0 unreachable=0"
    # surge status/down find the nodes: the local provisioner's state names their PIDs
    recorded = json.loads((state / "inv" / "state.json").read_text())
    assert recorded["epmd_pid"] == 4241
    assert recorded["members"] == {"0": {"pid": 4242, "cgroup": None, "serving": True,
                                         "joined": True}}


def test_check_mode_changes_nothing_and_records_nothing(fake_runner, tmp_path):
    calls, _ = fake_runner
    ansible_up.up(local(), state_root=tmp_path, check=True)
    assert calls[0]["cmdline"] == "--check --diff"
    assert not (tmp_path / "inv" / "state.json").exists()


def test_a_failed_run_raises_naming_host_task_and_message(fake_runner, tmp_path):
    _, outcome = fake_runner
    outcome["status"] = "failed"
    outcome["events"] = [event("runner_on_failed", host="localhost",
                               task="Wait until each node's management API answers as that node",
                               res={"msg": "Status code was -1: Connection refused"})]
    with pytest.raises(ProvisionError) as raised:
        ansible_up.up(local(), state_root=tmp_path)
    assert str(raised.value) == (
        "ansible: rabbitmq.yml failed on localhost: task 'Wait until each node's management "
        "API answers as that node': Status code was -1: Connection refused")
    assert raised.value.temporary is False


def test_agents_get_a_token_kept_for_the_controller(fake_runner, tmp_path):
    calls, _ = fake_runner
    ansible_up.up(ssh_topology(), state_root=tmp_path, agents=True)
    assert calls[0]["playbook"] == "agents.yml"
    token = (tmp_path / "remote" / "ansible" / "agent-token").read_text()
    assert calls[0]["extravars"]["surge_agent_token"] == token


def test_without_ansible_runner_up_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ansible_runner", None)  # import fails
    with pytest.raises(ProvisionError, match=r"surge\[ansible\]"):
        ansible_up.up(local(), state_root=tmp_path)


def test_a_missing_playbook_directory_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("SURGE_ANSIBLE_DIR", str(tmp_path))
    with pytest.raises(ProvisionError, match="no playbooks in"):
        ansible_up.ansible_dir()


# -- the command line ---------------------------------------------------------------------------

def test_surge_up_via_ansible_calls_the_playbook_runner(monkeypatch, tmp_path):
    from orchestrator import cli
    seen = []
    monkeypatch.setattr(ansible_up, "up", lambda spec, say: seen.append(spec.name))
    topology = tmp_path / "t.yaml"
    topology.write_text(yaml.safe_dump(ssh_topology().model_dump(mode="json",
                                                                 exclude_defaults=True)))
    result = CliRunner().invoke(cli.app, ["up", "--via", "ansible", str(topology)])
    assert result.exit_code == 0, result.output
    assert seen == ["remote"]
    refused = CliRunner().invoke(cli.app, ["up", "--via", "puppet", str(topology)])
    assert refused.exit_code == 2
