"""``surge up --via ansible``: provision a topology with the playbooks in ``ansible/``.

The topology is rendered into an Ansible inventory (YAML) -- its SSH ``hosts`` with role broker
(RabbitMQ), its ``ibmmq.hosts`` (an MQ uniform cluster), or this machine for placement local --
and the playbook for its broker runs through ``ansible_runner.run``, every event streamed to a
callback. For MQ, the ``-ii``/``-ic`` files and the CCDT are rendered by
:mod:`topologies.mq.uniform` into a directory the playbook copies from, and every ``crtmqm`` is
passed as rendered, so the playbook creates exactly what ``surge plan`` prints.

Everything goes into ansible-runner's private data directory, ``<state>/<topology>/ansible``
(``inventory/hosts.yml``, ``mq-files/``, ``artifacts/<ident>/`` with each run's events), so a
run can be looked at afterwards and the inventory reused with ``ansible-playbook`` by hand.

A failed playbook is data (status, rc, failed events) turned into one
:class:`~orchestrator.errors.ProvisionError` naming the host, the task and the message; a
missing ``ansible-runner`` or playbook is misconfiguration, reported the same way before anything
runs.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ProvisionError
from orchestrator.specs.hosts import SshSpec
from orchestrator.specs.topology import TopologySpec
from topologies.assets import asset
from topologies.rabbitmq import credentials
from topologies.rabbitmq.credentials import ClusterSecrets
from topologies.rabbitmq.node import LOOPBACK

#: The playbook of each broker, and the one for load agents, relative to the ansible directory.
PLAYBOOKS = {"rabbitmq": "rabbitmq.yml", "ibmmq": "mq-uniform-cluster.yml",
             "agents": "agents.yml"}
#: Inventory groups the playbooks target.
GROUPS = {"rabbitmq": "rabbitmq", "ibmmq": "mq_uniform", "agents": "surge_agents"}
#: Events that mean a task failed on a host (an item's failure comes before its task's).
FAILED_EVENTS = ("runner_item_on_failed", "runner_on_failed", "runner_on_unreachable")

Say = Callable[[str], None]
OnEvent = Callable[[dict], None]


@dataclass(frozen=True)
class AnsibleRun:
    """What a playbook run did: ansible-runner's status and rc, tasks changed per host, and
    where its inventory and artifacts (events, stdout) are."""

    playbook: str
    status: str
    rc: int
    changed: dict[str, int] = field(default_factory=dict)
    private_data_dir: Path | None = None
    artifact_dir: Path | None = None


def ansible_dir() -> Path:
    """The directory holding the playbooks and roles: ``$SURGE_ANSIBLE_DIR``, else the ones
    shipped with surge (:func:`topologies.assets.asset`)."""
    configured = os.environ.get("SURGE_ANSIBLE_DIR")
    directory = Path(configured) if configured else asset("ansible")
    if not (directory / PLAYBOOKS["rabbitmq"]).is_file():
        raise ProvisionError(f"no playbooks in {directory}; set SURGE_ANSIBLE_DIR to surge's "
                             "ansible directory")
    return directory


def default_private_dir(topology: TopologySpec, state_root: Path | None = None) -> Path:
    """``<state root>/<topology>/ansible``, the state root being surge's (``$SURGE_STATE_DIR``
    or ``~/.local/state/surge``)."""
    from topologies.base import default_state_root
    return (state_root or default_state_root()) / topology.name / "ansible"


# -- the inventory ------------------------------------------------------------------------------

def ssh_vars(address: str, ssh: SshSpec) -> dict[str, Any]:
    """Connection variables of one host from its SSH settings: address, port, user, key, and
    host key checking (``strict``: the key must be known; ``accept-new``: unknown keys are
    added; ``ignore``: any key, nothing saved)."""
    out: dict[str, Any] = {"ansible_host": address, "ansible_port": ssh.port,
                           "ansible_user": ssh.user,
                           "ansible_ssh_timeout": max(1, math.ceil(ssh.connect_timeout)),
                           "ansible_ssh_retries": ssh.retries}
    if ssh.key_file:
        out["ansible_ssh_private_key_file"] = os.path.expanduser(ssh.key_file)
    checking = {"strict": "yes", "accept-new": "accept-new", "ignore": "no"}[ssh.known_hosts]
    out["ansible_ssh_host_key_checking"] = ssh.known_hosts != "ignore"
    args = ["-o", f"StrictHostKeyChecking={checking}"]
    if ssh.known_hosts == "ignore":
        args += ["-o", "UserKnownHostsFile=/dev/null"]
    elif ssh.known_hosts_file:
        args += ["-o", f"UserKnownHostsFile={os.path.expanduser(ssh.known_hosts_file)}"]
    out["ansible_ssh_common_args"] = shlex.join(args)
    return out


def queue_declarations(topology: TopologySpec, members: list[int]) -> list[dict[str, Any]]:
    """The topology's queues as the rabbitmq role declares them, each with the member that leads
    it, as :class:`~topologies.rabbitmq.local.LocalRabbitMQ` places them: a per-member queue
    has an instance on every member, a pattern's queues are led by the members in turn."""
    from topologies.rabbitmq import queues
    return [{"name": name, "member": index, "type": queue.type, "durable": queue.durable,
             "auto_delete": queue.auto_delete, "arguments": queues.arguments(queue)}
            for queue, name, index in queues.placements(topology.queues, members)]


def rabbitmq_inventory(topology: TopologySpec, cluster: ClusterSecrets,
                       base_dir: Path | None = None) -> dict[str, Any]:
    """The inventory of a RabbitMQ topology, with its own secrets ``cluster`` (the Erlang cookie and
    the broker user that replaces guest, as surge's provisioners keep them): this machine for
    placement local (process mode, loopback, surge's state directory ``base_dir`` as the nodes'
    files and ``HOME``, so ``surge status``/``down`` see the nodes), or the hosts with role
    broker for placement ssh (systemd units, members in blocks in host order, node names and
    directories as surge's SSH provisioner makes them). epmd and the Erlang distribution listen
    on loopback where the nodes do. The first ``start`` members run; scaling out to the rest of
    the pool stays surge's job."""
    started = list(range(topology.start))
    common = {"rabbitmq_topology": topology.name, "rabbitmq_port_base": topology.port_base,
              "rabbitmq_cpu_cores": topology.cpu_per_member,
              "rabbitmq_queues": queue_declarations(topology, started),
              "rabbitmq_erlang_cookie": cluster.cookie,
              "rabbitmq_default_user": cluster.user, "rabbitmq_default_pass": cluster.password}
    if topology.placement == "local":
        if base_dir is None:
            raise ProvisionError("placement local needs the state directory for the nodes")
        root = os.geteuid() == 0
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "rabbitmq_members": started,
                "rabbitmq_mode": "process", "rabbitmq_install": root, "rabbitmq_become": False,
                "rabbitmq_node_host": "localhost", "rabbitmq_bind_address": LOOPBACK,
                "rabbitmq_dist_address": LOOPBACK, "rabbitmq_base_dir": str(base_dir),
                "rabbitmq_home_dir": str(base_dir)}
        return _inventory({GROUPS["rabbitmq"]: {"localhost": host}}, common)
    if topology.placement != "ssh":
        raise ProvisionError(f"topology {topology.name}: --via ansible provisions placement local "
                             f"or ssh, not {topology.placement} (use surge up)")
    hosts, first = {}, 0
    for spec in (h for h in topology.hosts if "broker" in h.roles):
        members = [i for i in range(first, first + spec.members) if i < topology.start]
        first += spec.members
        loopback = spec.target.startswith("127.")
        if members:  # node names and directories as topologies/rabbitmq/remote.py makes them
            hosts[spec.name] = {
                **ssh_vars(spec.target, spec.ssh), "rabbitmq_members": members,
                "rabbitmq_become": spec.ssh.user != "root",
                "rabbitmq_node_host": "localhost" if loopback else spec.name,
                "rabbitmq_bind_address": spec.target if loopback else None,
                "rabbitmq_dist_address": LOOPBACK if loopback else None,
                "rabbitmq_base_dir": f"{spec.work_dir.rstrip('/')}/{topology.name}"}
    if not hosts:
        raise ProvisionError(f"topology {topology.name} has no host with role broker")
    return _inventory({GROUPS["rabbitmq"]: hosts}, {**common, "rabbitmq_mode": "systemd"})


def mq_inventory(topology: TopologySpec, files_dir: Path) -> dict[str, Any]:
    """The inventory of an MQ uniform cluster: every ``ibmmq.hosts`` entry with its queue
    managers (name, port, CONNAME, the rendered ``crtmqm`` arguments, its slice, whether it
    starts), and ``files_dir``, where :func:`write_mq_files` put the files to copy."""
    from topologies.mq import uniform
    mq = topology.ibmmq
    if mq is None or topology.placement != "ssh" or topology.link is not None:
        raise ProvisionError(f"topology {topology.name}: --via ansible provisions an MQ uniform "
                             "cluster on ibmmq.hosts (placement ssh, no link)")
    qms = uniform.queue_managers(topology)
    hosts = {}
    for spec in mq.hosts:
        ssh = spec.ssh or mq.ssh
        hosts[spec.name] = {
            **ssh_vars(spec.address or spec.name, ssh),
            "mq_uniform_user": ssh.user, "mq_uniform_become": ssh.user != "root",
            "mq_uniform_queue_managers": [
                {"name": qm.name, "index": qm.index, "port": qm.port, "conname": qm.conname,
                 "crtmqm": uniform.crtmqm_args(topology, qm),
                 "slice": mq.cgroup_slice.format(qm=qm.name), "start": qm.index < topology.start}
                for qm in qms if qm.host.name == spec.name]}
    files = uniform.file_paths(topology)
    common = {"mq_uniform_topology": topology.name, "mq_uniform_files_src_dir": str(files_dir),
              "mq_uniform_files_dir": mq.files_dir.rstrip("/"),
              "mq_uniform_ini_file": Path(files["ini"]).name,
              "mq_uniform_mqsc_file": Path(files["mqsc"]).name,
              "mq_uniform_ccdt_file": Path(files["ccdt"]).name,
              "mq_uniform_bin_dir": mq.bin_dir, "mq_uniform_cpu_cores": topology.cpu_per_member}
    return _inventory({GROUPS["ibmmq"]: hosts}, common)


def agents_inventory(topology: TopologySpec) -> dict[str, Any]:
    """The inventory of the topology's load hosts (role load) for ``agents.yml``: how many
    agents each runs, its work directory and interpreter."""
    hosts = {spec.name: {**ssh_vars(spec.target, spec.ssh), "surge_agent_count": spec.agents,
                         "surge_agent_dir": spec.work_dir, "surge_agent_python": spec.python,
                         "surge_agent_become": spec.ssh.user != "root"}
             for spec in topology.hosts if "load" in spec.roles and spec.agents}
    if not hosts:
        raise ProvisionError(f"topology {topology.name} has no host with role load")
    return _inventory({GROUPS["agents"]: hosts}, {"surge_agent_topology": topology.name})


def _inventory(groups: dict[str, dict[str, dict]], group_vars: dict[str, Any]) -> dict:
    return {"all": {"children": {
        name: {"hosts": {host: {k: v for k, v in hostvars.items() if v is not None}
                         for host, hostvars in hosts.items()},
               "vars": group_vars}
        for name, hosts in groups.items()}}}


def write_mq_files(topology: TopologySpec, directory: Path) -> dict[str, Path]:
    """Write the rendered ``-ii`` file, ``-ic`` file and CCDT (what ``surge plan`` shows) into
    ``directory`` under the names they get on the hosts; returns their paths."""
    from topologies.mq import uniform
    directory.mkdir(parents=True, exist_ok=True)
    paths = uniform.file_paths(topology)
    texts = {"ini": uniform.ini_text(topology), "mqsc": uniform.mqsc_text(topology),
             "ccdt": uniform.ccdt_text(topology)}
    out = {}
    for kind, text in texts.items():
        out[kind] = directory / Path(paths[kind]).name
        out[kind].write_text(text)
    return out


def plan_for(topology: TopologySpec, private_dir: Path, agents: bool = False
             ) -> tuple[str, dict[str, Any]]:
    """The playbook for ``topology`` and its inventory (``agents``: the load hosts' instead),
    writing what the playbook reads (MQ files) into ``private_dir``."""
    if agents:
        return PLAYBOOKS["agents"], agents_inventory(topology)
    if topology.broker == "ibmmq":
        files_dir = private_dir / "mq-files"
        write_mq_files(topology, files_dir)
        return PLAYBOOKS["ibmmq"], mq_inventory(topology, files_dir)
    # the topology's state directory: its secrets, and for placement local the nodes' files,
    # where surge's provisioners keep them (so a second run does not change them)
    state_dir = private_dir.parent
    cluster = credentials.load_or_create(state_dir / "credentials.json")
    base_dir = state_dir if topology.placement == "local" else None
    return PLAYBOOKS["rabbitmq"], rabbitmq_inventory(topology, cluster, base_dir)


# -- running it -----------------------------------------------------------------------------------

def up(topology: TopologySpec, *, state_root: Path | None = None, say: Say | None = None,
       on_event: OnEvent | None = None, check: bool = False, agents: bool = False,
       extra_vars: dict[str, Any] | None = None, envvars: dict[str, str] | None = None,
       timeout_s: float | None = None) -> AnsibleRun:
    """Render the inventory, run the topology's playbook (``agents``: ``agents.yml`` on its load
    hosts) through ansible-runner and return what it did; raises ``ProvisionError`` naming the
    host, task and message of the first failure.

    ``check`` runs in Ansible's check mode (``--check --diff``): what would change, nothing
    changed. ``say`` gets one line per task result, ``on_event`` every raw runner event.
    ``extra_vars`` override any role variable (e.g. ``{"rabbitmq_mode": "process"}``).
    """
    try:
        import ansible_runner
    except ImportError:
        raise ProvisionError("--via ansible needs ansible-runner and ansible-core: "
                             "pip install 'surge[ansible]'") from None
    project = ansible_dir()
    private_dir = default_private_dir(topology, state_root)
    private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(private_dir, 0o700)  # holds the inventory (with the secrets), extra vars, tokens
    playbook, inventory = plan_for(topology, private_dir, agents)
    inventory_path = private_dir / "inventory" / "hosts.yml"
    inventory_path.parent.mkdir(exist_ok=True)
    inventory_path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    if agents:
        extra_vars = {"surge_agent_token": agent_token(private_dir), **(extra_vars or {})}
    environment = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   "ANSIBLE_NOCOLOR": "1", **(envvars or {})}
    say = say or (lambda line: None)
    say(f"ansible: {playbook} on {', '.join(_hosts(inventory))}"
        f"{' (check mode)' if check else ''}; inventory {inventory_path}")

    def handle(event: dict) -> bool:
        if on_event is not None:
            on_event(event)
        line = describe_event(event)
        if line:
            say(line)
        return True

    runner = ansible_runner.run(
        private_data_dir=str(private_dir), project_dir=str(project), playbook=playbook,
        inventory=str(inventory_path), extravars=extra_vars or {}, envvars=environment,
        cmdline="--check --diff" if check else None, quiet=True, event_handler=handle,
        rotate_artifacts=20, timeout=timeout_s)
    events = list(runner.events)
    result = AnsibleRun(playbook, runner.status, runner.rc if runner.rc is not None else -1,
                        changed_per_host(events), private_dir, Path(runner.config.artifact_dir))
    if runner.status != "successful":
        raise ProvisionError(failure_message(playbook, runner.status, result.rc, events,
                                             _stdout_tail(runner)),
                             temporary=runner.status == "timeout")
    if topology.broker == "rabbitmq" and topology.placement == "local" and not check \
            and not agents:
        record_local_members(topology, private_dir.parent)
    return result


def agent_token(private_dir: Path) -> str:
    """The token of the agents ``agents.yml`` starts, made once and kept (mode 0600) in
    ``private_dir/agent-token`` for the controller."""
    path = private_dir / "agent-token"
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(24))
    return path.read_text().strip()


def describe_event(event: dict) -> str | None:
    """One line for a task result or the recap; None for events not worth a line."""
    kind = event.get("event", "")
    data = event.get("event_data") or {}
    host, task = data.get("host", "?"), data.get("task", "?")
    if kind == "playbook_on_play_start":
        return f"play: {data.get('play', '?')}"
    if kind == "runner_on_ok":
        return f"  {host}: {task}{' (changed)' if (data.get('res') or {}).get('changed') else ''}"
    if kind == "runner_on_failed" and not data.get("ignore_errors"):
        return f"  {host}: {task} FAILED: {_result_message(data.get('res') or {})}"
    if kind == "runner_on_unreachable":
        return f"  {host}: UNREACHABLE: {_result_message(data.get('res') or {})}"
    if kind == "runner_retry":
        res = data.get("res") or {}
        return f"  {host}: {task} (attempt {res.get('attempts', '?')} of " \
               f"{res.get('retries', '?')})"
    if kind == "playbook_on_stats":
        hosts = sorted(set().union(*(data.get(k) or {} for k in ("ok", "failures",
                                                                  "dark", "changed"))))
        return "\n".join(
            f"recap: {h}: ok={(data.get('ok') or {}).get(h, 0)} "
            f"changed={(data.get('changed') or {}).get(h, 0)} "
            f"failed={(data.get('failures') or {}).get(h, 0)} "
            f"unreachable={(data.get('dark') or {}).get(h, 0)}" for h in hosts) or None
    return None


def changed_per_host(events: Iterable[dict]) -> dict[str, int]:
    """Tasks changed per host, from the run's final statistics."""
    for event in events:
        if event.get("event") == "playbook_on_stats":
            return dict((event.get("event_data") or {}).get("changed") or {})
    return {}


def failure_message(playbook: str, status: str, rc: int, events: Iterable[dict],
                    stdout_tail: str = "") -> str:
    """``ansible: rabbitmq.yml failed on broker1: task 'Start the nodes': <message>`` for every
    host that failed (an item's message where a loop failed), or the status, rc and the end of
    the output when no task failed (a syntax error, an unknown role)."""
    failures: dict[str, str] = {}
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") not in FAILED_EVENTS or data.get("ignore_errors"):
            continue
        host = data.get("host", "?")
        if host in failures:
            continue  # the item's message is more precise than its loop task's
        res = data.get("res") or {}
        item = res.get("_ansible_item_label", res.get("item"))
        what = "unreachable" if event["event"] == "runner_on_unreachable" else \
            f"task '{data.get('task', '?')}'" + (f" (item {item})" if item is not None else "")
        failures[host] = f"{what}: {_result_message(res)}"
    if failures:
        return "\n".join(f"ansible: {playbook} failed on {host}: {message}"
                         for host, message in failures.items())
    tail = f": {stdout_tail}" if stdout_tail else ""
    return f"ansible: {playbook} ended {status} (rc {rc}) with no failed task{tail}"


def _result_message(res: dict) -> str:
    """A module result's message, with the last lines of its stderr (or stdout) if any."""
    message = str(res.get("msg") or "").strip()
    output = str(res.get("stderr") or res.get("module_stderr") or "").strip()
    if not output and res.get("rc") not in (None, 0):
        output = str(res.get("stdout") or "").strip()
    tail = " | ".join(output.splitlines()[-3:])
    if tail and tail not in message:
        message = f"{message}: {tail}" if message else tail
    if res.get("rc") not in (None, 0):
        message += f" (rc {res['rc']})"
    return message or json.dumps(res)[:300]


def _stdout_tail(runner: Any, lines: int = 5) -> str:
    try:
        text = runner.stdout.read()
    except (AttributeError, OSError, ValueError):
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _hosts(inventory: dict) -> list[str]:
    return [host for group in inventory["all"]["children"].values() for host in group["hosts"]]


def record_local_members(topology: TopologySpec, state_dir: Path) -> None:
    """Record the nodes the playbook started on this machine in the local provisioner's
    ``state.json`` (PIDs from the nodes' PID files), so ``surge status`` and ``surge down``
    treat them as their own; entries of live members already there are kept."""
    path = state_dir / "state.json"
    try:
        state = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        state = {"topology": topology.name, "epmd_pid": None, "members": {}}
    epmd = _pid(state_dir / "epmd.pid")
    if epmd is not None and not _alive(state.get("epmd_pid")):
        state["epmd_pid"] = epmd
    for index in range(topology.start):
        pid = _pid(state_dir / f"member-{index}" / "node.pid")
        if pid is not None:
            entry = state["members"].setdefault(str(index), {})
            entry.update(pid=pid, cgroup=entry.get("cgroup") if entry.get("pid") == pid
                         else None, serving=True, joined=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


def _pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    import psutil
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
