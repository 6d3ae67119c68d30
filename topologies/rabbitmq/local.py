"""RabbitMQ members as local processes on loopback, each with its own ports, data and cgroup.

State (PIDs, cgroups, the private epmd) lives in ``<state root>/<topology>/state.json`` so that
``surge down`` stops exactly what surge started, by PID, and a crashed run's leftovers are found.
That directory (mode 0700) also holds the topology's own secrets (:mod:`~topologies.rabbitmq.
credentials`, made at its first ``up``): ``credentials.json`` (0600) and ``.erlang.cookie``
(0400), the directory being ``HOME`` of its members and of every ``rabbitmqctl`` call. The
private epmd and every member's Erlang distribution listen on loopback only, like the AMQP,
management and Prometheus listeners.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

from orchestrator.errors import ProvisionError
from orchestrator.specs.topology import TopologySpec
from topologies.base import (
    BrokerSample,
    CpuReading,
    Member,
    MemberSample,
    MemberStats,
    Provisioner,
    default_state_root,
)
from topologies.cgroups import BOOT_SHARES, CpuCgroup
from topologies.rabbitmq import credentials, node, ports, queues
from topologies.rabbitmq.adverse import AdverseControls
from topologies.rabbitmq.credentials import ClusterSecrets, KeptSecrets
from topologies.rabbitmq.management import Management
from topologies.rabbitmq.prometheus import node_stats

log = logging.getLogger(__name__)

HOST = node.LOOPBACK
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class LocalRabbitMQ(KeptSecrets, AdverseControls, Provisioner):
    """Local-process provisioner for RabbitMQ (a :class:`topologies.base.Provisioner`)."""

    plugins = node.PLUGINS  # what each member's enabled-plugins file lists

    def __init__(self, topology: TopologySpec, state_root: Path | None = None):
        self.topology = topology
        self.state_dir = (state_root or default_state_root()) / topology.name
        self.epmd_port = ports.epmd_port(topology.port_base)
        self.secrets_file = self.state_dir / "credentials.json"
        self._secrets: ClusterSecrets | None = None
        self._write_lock = threading.Lock()  # members start in parallel threads

    # -- the pool ---------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Member ``index`` of the pool as configured (not whether it runs)."""
        base = self.topology.port_base
        return Member(index=index, name=f"surge-{self.topology.name}-{index}@localhost", host=HOST,
                      port=base + index, management_port=base + 10000 + index,
                      prometheus_port=base + 10100 + index,
                      endpoint=node.amqp_url(HOST, base + index))

    def dist_port(self, index: int) -> int:
        """Member ``index``'s Erlang distribution port (its other ports: :meth:`member`; the
        epmd's: ``epmd_port``)."""
        return ports.dist_port(self.topology.port_base, index)

    def status(self, state: dict | None = None) -> list[Member]:
        """Every member of the pool: serving, on standby (warm pool) or stopped, with its PID."""
        state = state if state is not None else self._read_state()
        out = []
        for index in range(self.topology.members):
            member = self.member(index)
            booted = self._booted(state, index)
            serving = booted and self._serving_flag(state, index)
            out.append(dataclasses.replace(
                member, running=serving, standby=booted and not serving,
                pid=state["members"][str(index)]["pid"] if booted else None))
        return out

    def running(self) -> list[Member]:
        """The members that run now."""
        return [m for m in self.status() if m.running]

    # -- up / down --------------------------------------------------------------------------

    def up(self) -> list[Member]:
        """Serve ``topology.start`` members (reusing running ones), boot the rest of a warm pool
        to standby, cluster them and declare the queues. Every port of every member to boot is
        checked first: a busy one is an error and nothing starts, as is a quorum queue whose
        replicas would go to members standing by (:func:`standby_replicas`)."""
        refused = standby_replicas(self.topology)
        if refused:
            raise ProvisionError(refused)
        with self._locked():
            state = self._reconcile(self._read_state())
            self._provision_secrets(state)
            members = range(self.topology.members)
            first = None if any(self._serving(state, i) for i in members) else next(
                (i for i in members if self._booted(state, i)), 0)
            wanted = {*range(self.topology.start), *([] if first is None else [first]),
                      *(members[self.topology.start:] if self.topology.warm_pool else [])}
            self._check_ports(state, [i for i in sorted(wanted) if not self._booted(state, i)])
            self._ensure_epmd(state)
            if first is not None:
                self._serve(state, first)
            to_serve = [i for i in range(self.topology.start) if not self._serving(state, i)]
            to_stand_by = [i for i in members[self.topology.start:]
                           if self.topology.warm_pool and not self._booted(state, i)]
            for index in to_serve + to_stand_by:
                state["members"].setdefault(str(index), {})
            with concurrent.futures.ThreadPoolExecutor(max(1, len(to_serve + to_stand_by))) as pool:
                list(pool.map(lambda i: self._serve(state, i) if i in to_serve
                              else self._boot(state, i, serve=False), to_serve + to_stand_by))
            self._declare_queues([i for i in members if self._serving(state, i)])
        return self.status()

    def start_member(self, index: int | None = None) -> Member:
        """Bring the next member of the pool that does not serve (or ``index``) into service:
        start its broker application if it stands by, boot and join it otherwise."""
        with self._locked():
            state = self._read_state()
            if index is None:
                idle = [i for i in range(self.topology.members) if not self._serving(state, i)]
                if not idle:
                    raise ProvisionError(f"all {self.topology.members} members already serve")
                index = idle[0]
            self._check_ports(state, [] if self._booted(state, index) else [index])
            self._ensure_epmd(state)
            self._serve(state, index)
            self._declare_queues([index])
        return self.status()[index]

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Take member ``index`` out of service: in a warm pool, stop its broker application and
        keep it on standby; otherwise stop its VM (SIGTERM, wait). ``kill``: SIGKILL at once."""
        with self._locked():
            state = self._read_state()
            entry = state["members"].get(str(index), {})
            if self.topology.warm_pool and not kill and self._booted(state, index):
                self._ctl(self.member(index).name, "stop_app")
                entry["serving"] = False
            else:
                _stop_process(entry.get("pid"), self.member(index).name, kill)
                entry["pid"] = None
            self._write_state(state)

    def stop_vm(self, index: int) -> None:
        """Stop member ``index``'s Erlang VM (SIGTERM, wait), even in a warm pool: the next
        :meth:`start_member` boots a new VM on the member's data (a rolling restart)."""
        with self._locked():
            state = self._read_state()
            entry = state["members"].get(str(index), {})
            _stop_process(entry.get("pid"), self.member(index).name, kill=False)
            entry["pid"] = None
            self._write_state(state)

    def down(self) -> list[str]:
        """Stop every process this topology started and remove its state and data."""
        if not self.state_dir.exists():
            return [f"{self.topology.name}: nothing to stop"]
        said = []
        with self._locked():
            state = self._read_state()
            entries = sorted(state["members"].items())
            with concurrent.futures.ThreadPoolExecutor(max(1, len(entries))) as pool:
                stopped = list(pool.map(
                    lambda item: _stop_process(item[1].get("pid"), self.member(int(item[0])).name,
                                               kill=False), entries))
            for (index, entry), was_running in zip(entries, stopped):
                if was_running:
                    said.append(f"stopped {self.member(int(index)).name} (pid {entry['pid']})")
                if entry.get("cgroup"):
                    CpuCgroup.at(entry["cgroup"]).remove()
            if _stop_process(state.get("epmd_pid"), "epmd", kill=False):
                said.append(f"stopped epmd on port {self.epmd_port} (pid {state['epmd_pid']})")
        shutil.rmtree(self.state_dir, ignore_errors=True)
        said.append(f"removed {self.state_dir}")
        return said

    # -- observation ------------------------------------------------------------------------

    def management(self, members: list[Member] | None = None) -> Management:
        """A management client on some running member (of ``members``, if already known)."""
        running = [m for m in (members if members is not None else self.status()) if m.running]
        if not running:
            raise ProvisionError(f"no member of {self.topology.name} runs", temporary=True)
        return self._api(running[0].management_port)

    def sample(self) -> BrokerSample:
        """Per member its CPU seconds (its cgroup's, else its processes'), stamped with the
        midpoint of the read, and the quota in force at that moment (a member resuming from
        standby runs unlimited for a while); connections and messages: :meth:`member_stats`."""
        state = self._read_state()
        members = self.status(state)
        samples = []
        for member in members:
            entry = state["members"].get(str(member.index), {})
            group = CpuCgroup.at(entry["cgroup"]) if entry.get("cgroup") else None
            quota = group.quota_cores() if group else None
            reading = None
            if member.running:
                before = time.monotonic()
                seconds = group.cpu_seconds() if group else None
                if seconds is None:
                    seconds = _tree_cpu_seconds(member.pid)
                after = time.monotonic()
                reading = None if seconds is None else CpuReading(seconds, (before + after) / 2)
            samples.append(MemberSample(member.name, member.running, reading, quota))
        return BrokerSample(samples)

    asks_members = True  # every member answers for itself

    def member_stats(self, member: Member) -> MemberStats | None:
        """Connections and messages, from the member's own Prometheus endpoint (``None``: it
        did not answer in time, or does not run)."""
        return node_stats(member.metrics_url)

    def settled_queue_depths(self) -> dict[str, int]:
        """Messages (ready + unacknowledged) per queue, asked of the queue processes themselves:
        the management API's figures are statistics that lag behind on a CPU-starved member."""
        running = self.running()
        if not running:
            raise ProvisionError(f"no member of {self.topology.name} runs", temporary=True)
        return node.parse_queue_listing(self._ctl(running[0].name, *node.LIST_QUEUES))

    # -- internals --------------------------------------------------------------------------

    def _serve(self, state: dict, index: int) -> None:
        """Bring member ``index`` into service, from standby or from nothing."""
        if self._booted(state, index):
            self._resume(state, index)
        else:
            self._boot(state, index, serve=True)

    def _boot(self, state: dict, index: int, serve: bool) -> None:
        """Boot one member at full speed, let it join the cluster, then apply its CPU quota;
        without ``serve`` its broker application is stopped again (standby).

        A blank member joins through classic peer discovery (the serving members are its seeds),
        so no stop_app/join_cluster/start_app round trip is needed. It boots without its quota
        and with a high CPU weight, so a member with a small quota on a busy host does not take a
        minute to start; the quota and a normal weight apply once it serves.
        """
        member = self.member(index)
        entry = state["members"].setdefault(str(index), {})
        files = node.NodeFiles(self.state_dir / f"member-{index}")
        seeds = [] if entry.get("joined") else [
            self.member(i).name for i in range(self.topology.members)
            if i != index and state["members"].get(str(i), {}).get("joined")
            and self._serving(state, i)]
        if not entry.get("joined"):
            shutil.rmtree(files.root, ignore_errors=True)
        files.root.mkdir(parents=True, exist_ok=True)
        node.write_files(member, files, seeds, self.secrets(), self.plugins)
        group = CpuCgroup.create(f"surge-{self.topology.name}-{index}", None, BOOT_SHARES)
        env = node.node_env(member, files, self.dist_port(index), self.epmd_port,
                            self.state_dir)
        process = node.spawn(env, files, group)
        self._write_state(state, entry, pid=process.pid, cgroup=group.name if group else None,
                          serving=False)
        self._await(member, process.pid, files)
        if seeds and member.name not in self._api(member.management_port).running_nodes():
            self._join(member, seeds[0])
        if not serve:
            self._ctl(member.name, "stop_app")
        self._write_state(state, entry, joined=True, serving=serve)
        if group:
            group.set_quota(self.topology.cpu_per_member)
        log.info("member %s %s", member.name,
                 f"serves on {HOST}:{member.port}" if serve else "stands by")

    def _resume(self, state: dict, index: int) -> None:
        """Start the broker application of a member on standby, at full speed, then cap it."""
        member = self.member(index)
        entry = state["members"][str(index)]
        group = CpuCgroup.at(entry["cgroup"]) if entry.get("cgroup") else None
        if group:
            group.set_quota(None, BOOT_SHARES)
        self._ctl(member.name, "start_app", cgroup=group)
        self._await(member, entry["pid"], node.NodeFiles(self.state_dir / f"member-{index}"))
        self._write_state(state, entry, serving=True)
        if group:
            group.set_quota(self.topology.cpu_per_member)
        log.info("member %s serves on %s:%d", member.name, HOST, member.port)

    def _await(self, member: Member, pid: int, files: node.NodeFiles) -> None:
        """Wait until the member's management API answers as that node (the last thing to boot)."""
        api = self._api(member.management_port, timeout_s=2.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if _exited(pid):
                tail = files.console_log.read_text(errors="replace").strip().splitlines()[-5:]
                raise ProvisionError(f"{member.name} exited: " + " | ".join(tail))
            try:
                if (api.request("GET", "/overview") or {}).get("node") == member.name:
                    return
            except ProvisionError:
                pass
            if time.monotonic() > deadline:
                raise ProvisionError(f"{member.name} did not start within {START_TIMEOUT_S:.0f} s;"
                                     f" see {files.console_log}", temporary=True)
            time.sleep(0.2)

    def _join(self, member: Member, seed: str) -> None:
        """Join by hand where peer discovery did not (a seed that was busy at boot)."""
        log.info("%s: joining %s with rabbitmqctl", member.name, seed)
        self._ctl(member.name, "stop_app")
        self._ctl(member.name, "join_cluster", seed)
        self._ctl(member.name, "start_app")

    def _declare_queues(self, members: list[int]) -> None:
        """Declare shared queues (idempotent), the per-member instances of ``members``, the
        exchanges and the bindings."""
        queues.declare(self.topology, members,
                       lambda index: self._api(self.member(index).management_port))

    def _api(self, port: int, timeout_s: float = 5.0) -> Management:
        """A management client for the member whose management listener is on ``port``, as the
        topology's user."""
        secrets = self.secrets()
        return Management(HOST, port, secrets.user, secrets.password, timeout_s=timeout_s)

    def _ctl(self, name: str, *args: str, cgroup: CpuCgroup | None = None) -> str:
        """``rabbitmqctl -n name ARGS`` through the topology's epmd, with its cookie."""
        return node.rabbitmqctl(name, self.epmd_port, self.state_dir, *args, cgroup=cgroup)

    def _provision_secrets(self, state: dict) -> None:
        """Make the topology's secrets at its first ``up`` and (re)write its cookie file. Live
        members without a secrets file were started by an older surge (guest, the shared
        cookie): refused, they need a ``surge down`` first."""
        if not self.secrets_file.exists() and any(
                self._booted(state, i) for i in range(self.topology.members)):
            raise ProvisionError(f"{self.topology.name}: its members run without the "
                                 f"topology's own credentials ({self.secrets_file} is missing); "
                                 "run surge down on it, then surge up")
        self._secrets = credentials.load_or_create(self.secrets_file)
        credentials.write_cookie(self.state_dir, self._secrets.cookie)

    def _ensure_epmd(self, state: dict) -> None:
        if _alive(state.get("epmd_pid"), "epmd"):
            return
        process = subprocess.Popen(
            [shutil.which("epmd") or "epmd", "-port", str(self.epmd_port), "-address", HOST],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        state["epmd_pid"] = process.pid
        self._write_state(state)
        _wait_port(self.epmd_port, 10.0)

    def _check_ports(self, state: dict, to_boot: list[int]) -> None:
        """Refuse (ProvisionError naming member, port and purpose) if any port of the members
        ``to_boot``, or of epmd where it is to start, is taken."""
        claims = [c for i in to_boot for c in ports.member_claims(self.member(i),
                                                                  self.dist_port(i))]
        if not _alive(state.get("epmd_pid"), "epmd"):
            claims.append(ports.epmd_claim(HOST, self.epmd_port))
        ports.require_free(claims, ports.bound_here)

    def _booted(self, state: dict, index: int) -> bool:
        """Whether the member's VM runs (serving or on standby)."""
        return _alive(state["members"].get(str(index), {}).get("pid"), self.member(index).name)

    def _serving(self, state: dict, index: int) -> bool:
        """Whether the member's broker application serves clients."""
        return self._booted(state, index) and self._serving_flag(state, index)

    @staticmethod
    def _serving_flag(state: dict, index: int) -> bool:
        """What the state says of a booted member (state from before warm pools: serving)."""
        return state["members"][str(index)].get("serving", True)

    def _reconcile(self, state: dict) -> dict:
        """Forget members that died (a crashed run); with none alive, start from clean data."""
        alive = [i for i in range(self.topology.members) if self._booted(state, i)]
        if state["members"] and not alive:
            if any(e.get("pid") for e in state["members"].values()):
                log.warning("%s: found state of a previous run with no live member; "
                            "starting from clean data", self.topology.name)
            for index in list(state["members"]):
                shutil.rmtree(self.state_dir / f"member-{index}", ignore_errors=True)
            state["members"] = {}
        return state

    def _read_state(self) -> dict:
        path = self.state_dir / "state.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return {"topology": self.topology.name, "epmd_pid": None, "members": {}}
        except ValueError as error:
            raise ProvisionError(f"{path} is corrupt ({error}); stop its processes by hand "
                                 f"and delete {self.state_dir}") from None

    def _write_state(self, state: dict, entry: dict | None = None, **fields) -> None:
        """Save ``state``, first updating ``entry`` (a member's part of it) with ``fields``;
        members start in parallel threads, so both happen under one lock."""
        with self._write_lock:
            if entry is not None:
                entry.update(fields)
            self.state_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.state_dir / "state.json.tmp"
            tmp.write_text(json.dumps(state, indent=2))
            tmp.replace(self.state_dir / "state.json")

    @contextmanager
    def _locked(self):
        credentials.private_dir(self.state_dir)
        with open(self.state_dir / "lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


def standby_replicas(topology: TopologySpec) -> str:
    """Why ``topology`` cannot start as a warm pool ("" if it can): a quorum queue with more
    replicas than members started puts the rest on members standing by (joined, broker
    application stopped), and RabbitMQ never finishes declaring it."""
    if not topology.warm_pool or topology.start >= topology.members:
        return ""
    for queue in topology.queues:
        size = queue.arguments.get("x-quorum-initial-group-size")
        if queue.type == "quorum" and isinstance(size, int) and size > topology.start:
            return (f"{topology.name}: queue {queue.name}'s x-quorum-initial-group-size {size} "
                    f"is more than the {topology.start} members started; the warm pool's "
                    f"others stand by joined but stopped, and a quorum queue with replicas on "
                    f"them is never declared: start {size} or more, set warm_pool: false, or "
                    f"lower the group size. Nothing was started")
    return ""


def _alive(pid: int | None, marker: str) -> bool:
    """Whether ``pid`` runs and is really ours (its command line or environment names ``marker``).

    A broker VM's command line does not carry its node name, but its environment does.
    """
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return marker in " ".join(process.cmdline()) or marker in process.environ().values()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _exited(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie. Unlike :func:`_alive` this reads nothing that a
    process changes while it execs (the start script becomes the VM), so it has no false
    alarms during a boot."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _stop_process(pid: int | None, marker: str, kill: bool) -> bool:
    """Stop a process group we started; returns whether something was running."""
    if not _alive(pid, marker):
        return False
    try:
        os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
    except ProcessLookupError:
        return False
    try:
        psutil.Process(pid).wait(timeout=STOP_TIMEOUT_S)
    except psutil.TimeoutExpired:
        os.killpg(pid, signal.SIGKILL)
    except psutil.NoSuchProcess:
        pass
    _reap_group(pid)
    return True


def _reap_group(pgid: int) -> None:
    """Kill what is left of the process group (erl_child_setup, inet_gethost)."""
    for process in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(process.pid) == pgid:
                process.kill()
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue


def _tree_cpu_seconds(pid: int | None) -> float | None:
    try:
        root = psutil.Process(pid)
        total = 0.0
        for process in [root, *root.children(recursive=True)]:
            times = process.cpu_times()
            total += times.user + times.system
        return total
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _wait_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise ProvisionError(f"nothing listens on {HOST}:{port} after {timeout_s:.0f} s",
                         temporary=True)
