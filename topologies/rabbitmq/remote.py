"""RabbitMQ members on SSH hosts (``placement: ssh``, hosts with role ``broker``).

The same provisioner interface as the local one, run through :mod:`topologies.ssh`: each member
is ``rabbitmq-server`` started in its own session on its host (under a private epmd, like the
local provisioner), with its files under the host's ``work_dir``, joined by classic peer
discovery, capped by a cgroup CPU quota (v2 or v1, as the host has) where the host allows it (a
warning otherwise), and
stopped by PID. Members fill the broker hosts in blocks; member *i* listens on
``port_base + i`` like a local one, on its host's address. Clients, the management API and the
scrapers reach it there. State (PIDs per host) is kept in a file beside the local provisioner's,
so ``surge down`` works after a crash.

The topology's secrets (:mod:`~topologies.rabbitmq.credentials`: its own Erlang cookie, and the
broker user that replaces guest) are made at its first ``up`` and kept in ``<state root>/
<topology>/credentials.json`` (0600). The cookie goes over SFTP to ``.erlang.cookie`` (0400) in
the topology's directory under each broker host's ``work_dir`` (0700), which is ``HOME`` of the
members and of ``rabbitmqctl``; the password only in the members' ``rabbitmq.conf`` (0600). On a
loopback host the private epmd and the Erlang distribution listen on 127.0.0.1 only; on a real
host they listen on every address (the other hosts' members reach them by node name), behind
the topology's cookie.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import ProvisionError
from orchestrator.specs.hosts import HostSpec
from orchestrator.specs.topology import TopologySpec
from topologies.base import (
    BrokerSample,
    CpuReading,
    Member,
    MemberStats,
    Provisioner,
    default_state_root,
)
from topologies.cgroups import cap_script, remove_script
from topologies.hostcpu import HOST_CPU_COMMAND, parse_host_cpu
from topologies.rabbitmq import credentials, node, ports, queues
from topologies.rabbitmq.credentials import ClusterSecrets, KeptSecrets
from topologies.rabbitmq.management import Management
from topologies.rabbitmq.prometheus import node_stats
from topologies.rabbitmq.sample import broker_sample

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class SshRabbitMQ(KeptSecrets, Provisioner):
    """RabbitMQ members on the broker hosts of a topology, reached over SSH."""

    def __init__(self, topology: TopologySpec, record: Callable[[object], None] | None = None,
                 state_root: Path | None = None):
        self.topology = topology
        self.record = record
        self.placement: list[HostSpec] = [h for h in topology.hosts if "broker" in h.roles
                                          for _ in range(h.members)]
        self.epmd_port = ports.epmd_port(topology.port_base)
        root = state_root or default_state_root()
        self.state_file = root / f"{topology.name}.ssh.json"
        self.secrets_file = root / topology.name / "credentials.json"
        self._secrets: ClusterSecrets | None = None
        self._sessions: dict[str, object] = {}
        self.warnings: list[str] = []

    # -- the provisioner interface ------------------------------------------------------------

    def member(self, index: int, state: dict | None = None) -> Member:
        """Member ``index`` on its host: node ``surge-<topology>-<i>@<host>`` (``@localhost`` for
        a loopback address), ports as a local member's (``state``: the state file, if read)."""
        host = self.placement[index]
        node_host = "localhost" if host.target.startswith("127.") else host.name
        base = self.topology.port_base
        pid = (state or self._state())["members"].get(str(index), {}).get("pid")
        return Member(index, f"surge-{self.topology.name}-{index}@{node_host}", host.target,
                      base + index, base + 10000 + index, base + 10100 + index, pid=pid,
                      endpoint=node.amqp_url(host.target, base + index))

    def up(self) -> list[Member]:
        """Start the first ``start`` members that do not run, one after the other (each later
        one joins the running ones), and declare the queues. The ports of all of them are
        checked first, one listing per host: a busy one is an error and nothing starts."""
        alive = self._alive_indexes()
        self._provision_secrets(alive)
        to_boot = [i for i in range(self.topology.start) if i not in alive]
        self._check_ports(to_boot)
        for index in to_boot:
            self._boot(index)
        self._declare_queues()
        return self.status()

    def status(self) -> list[Member]:
        """Every member of the pool with whether its process is alive on its host."""
        state = self._state()
        alive = self._alive_indexes(state)
        return [Member(**{**self.member(i, state).__dict__, "running": i in alive})
                for i in range(self.topology.members)]

    def start_member(self, index: int | None = None) -> Member:
        """Boot the next member that does not run (or ``index``); it rejoins from its data."""
        alive = self._alive_indexes()
        if index is None:
            idle = [i for i in range(self.topology.members) if i not in alive]
            if not idle:
                raise ProvisionError(f"all {self.topology.members} members already run")
            index = idle[0]
        if index not in alive:
            self._check_ports([index])
            self._boot(index)
        self._declare_queues()
        return self.status()[index]

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Stop member ``index``: SIGTERM and wait (RabbitMQ shuts down cleanly), or SIGKILL."""
        pid = self._state()["members"].get(str(index), {}).get("pid")
        if pid:
            self._stop_pid(self.placement[index], pid, kill)
        self._save_member(index, pid=None)

    def sample(self) -> BrokerSample:
        """Per member its CPU seconds and per broker host its CPU (from /proc on the host,
        stamped with the host's uptime clock); connections and messages: :meth:`member_stats`."""
        members = self.status()
        cpu, hosts = self._cpu_readings([m for m in members if m.running])
        return broker_sample(members, lambda m: cpu.get(m.index), self.topology.cpu_per_member,
                             hosts=hosts)

    asks_members = True  # every member answers for itself

    def member_stats(self, member: Member) -> MemberStats | None:
        """Connections and messages, from the member's own Prometheus endpoint (``None``: it
        did not answer in time, or does not run)."""
        return node_stats(member.metrics_url)

    def settled_queue_depths(self) -> dict[str, int]:
        """Exact depths from ``rabbitmqctl list_queues`` on a running member's host."""
        running = [m for m in self.status() if m.running]
        if not running:
            return {}
        return node.parse_queue_listing(self._ctl(running[0], *node.LIST_QUEUES))

    def down(self) -> list[str]:
        """Stop every member and epmd this topology started (by PID), remove their files and
        cgroups on the hosts, and the state."""
        state = self._state()
        said = []
        for key, entry in state["members"].items():
            host = self.placement[int(key)]
            if entry.get("pid"):
                self._stop_pid(host, entry["pid"], kill=False)
                said.append(f"stopped {self.member(int(key)).name} (pid {entry['pid']}) on "
                            f"{host.name}")
        for host in self._broker_hosts():
            pid = state["epmd"].get(host.name)
            if pid:
                self._run(host, f"kill {int(pid)} 2>/dev/null; true")
            self._run(host, f"rm -rf {shlex.quote(self._root(host))}; "
                            + remove_script(f"surge-ssh-{self.topology.name}-"))
        self.state_file.unlink(missing_ok=True)
        self.secrets_file.unlink(missing_ok=True)
        self._secrets = None
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        return said or [f"{self.topology.name}: nothing to stop"]

    # -- members on hosts ----------------------------------------------------------------------

    def _boot(self, index: int) -> None:
        member, host = self.member(index), self.placement[index]
        self._ensure_epmd(host)
        directory = f"{self._root(host)}/member-{index}"
        joined = self._state()["members"].get(str(index), {}).get("joined")
        seeds = [] if joined else [self.member(i).name for i in self._alive_indexes()
                                   if i != index]
        session = self._on(host)
        self._upload_cookie(host)
        session.upload(node.config_text(member, seeds, self.secrets()),
                       f"{directory}/rabbitmq.conf", mode=0o600)
        session.upload(node.PLUGINS + "\n", f"{directory}/enabled_plugins")
        env = {"RABBITMQ_NODENAME": member.name, "RABBITMQ_NODE_PORT": member.port,
               "RABBITMQ_DIST_PORT": ports.dist_port(self.topology.port_base, index),
               "RABBITMQ_MNESIA_BASE": f"{directory}/mnesia",
               "RABBITMQ_LOG_BASE": f"{directory}/log",
               "RABBITMQ_ENABLED_PLUGINS_FILE": f"{directory}/enabled_plugins",
               "RABBITMQ_CONFIG_FILE": f"{directory}/rabbitmq",
               "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": node.dist_args(_dist_address(host)),
               "ERL_EPMD_PORT": self.epmd_port, "HOME": self._root(host),
               "RUNNING_UNDER_SYSTEMD": 1}
        assignments = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
        pid = int(self._run(host, (
            f"mkdir -p {shlex.quote(directory)}/mnesia {shlex.quote(directory)}/log; "
            f"env {assignments} setsid {node.RABBITMQ_BIN}/rabbitmq-server "
            f"> {shlex.quote(directory)}/console.log 2>&1 < /dev/null & echo $!")).strip())
        self._save_member(index, pid=pid)
        self._cap(host, index, pid)
        self._await(member, host, pid, directory)
        self._save_member(index, pid=pid, joined=True)

    def _upload_cookie(self, host: HostSpec) -> None:
        """The topology's directory on ``host`` made 0700 first (the upload's temporary file is
        not readable by others even for a moment), then its cookie written there (0400)."""
        root = shlex.quote(self._root(host))
        self._run(host, f"mkdir -p {root} && chmod 700 {root}")
        self._on(host).upload(self.secrets().cookie,
                              f"{self._root(host)}/{credentials.COOKIE_FILE}", mode=0o400)

    def _provision_secrets(self, alive: set[int]) -> None:
        """Make the topology's secrets at its first ``up``; live members without them were
        started by an older surge (guest, a shared cookie) and need a ``surge down`` first."""
        if alive and not self.secrets_file.exists():
            raise ProvisionError(f"{self.topology.name}: its members run without the "
                                 f"topology's own credentials ({self.secrets_file} is missing); "
                                 "run surge down on it, then surge up")
        self._secrets = credentials.load_or_create(self.secrets_file)

    def _api(self, member: Member, timeout_s: float = 5.0) -> Management:
        """A management client for ``member``, as the topology's user."""
        secrets = self.secrets()
        return Management(member.host, member.management_port, secrets.user, secrets.password,
                          timeout_s=timeout_s)

    def _await(self, member: Member, host: HostSpec, pid: int, directory: str) -> None:
        api = self._api(member, timeout_s=2.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if (api.request("GET", "/overview") or {}).get("node") == member.name:
                    return
            except ProvisionError:
                pass
            if not self._pids_alive(host, [pid]):
                tail = self._run(host, f"tail -n 5 {shlex.quote(directory)}/console.log; true")
                raise ProvisionError(f"{member.name} on {host.name} exited: "
                                     + " | ".join(tail.strip().splitlines()))
            time.sleep(0.5)
        raise ProvisionError(f"{member.name} on {host.name} did not start within "
                             f"{START_TIMEOUT_S:.0f} s; see {directory}/console.log there")

    def _cap(self, host: HostSpec, index: int, pid: int) -> None:
        """A cgroup CPU quota for the member (v2 or v1, as the host has), where the host lets us
        write one."""
        cores = self.topology.cpu_per_member
        if cores is None:
            return
        group = f"surge-ssh-{self.topology.name}-{index}"
        done = self._run(host, cap_script(group, cores, pid), check=False)
        if done.strip() != "ok":
            self.warnings.append(f"{host.name}: cannot write the CPU cgroup {group}; member "
                                 f"{index} runs without a CPU quota")

    def _check_ports(self, to_boot: list[int]) -> None:
        """Refuse (ProvisionError naming member, port and purpose) if a port of the members
        ``to_boot``, or of epmd where it is to start, is listened on by anything on its host
        (``ss`` once per host; a host without ``ss`` is not checked, with a warning)."""
        state = self._state()
        claims: dict[str, list[ports.Claim]] = {}
        for index in to_boot:
            claims.setdefault(self.placement[index].name, []).extend(
                ports.member_claims(self.member(index, state),
                                    ports.dist_port(self.topology.port_base, index)))
        listening: dict[str, set[int]] = {}
        for host in self._broker_hosts():
            if host.name not in claims:
                continue
            epmd = state["epmd"].get(host.name)
            if not (epmd and self._pids_alive(host, [epmd])):
                claims[host.name].append(ports.epmd_claim(host.target, self.epmd_port))
            listed = self._on(host).run(ports.LISTENING, check=False)
            if listed.ok:
                listening[host.name] = ports.listening_ports(listed.stdout)
            else:
                self.warnings.append(f"{host.name}: cannot list listening ports "
                                     f"({ports.LISTENING}); ports not checked before start")
        host_of = {c: name for name, held in claims.items() for c in held}
        ports.require_free(host_of, lambda c: c.port in listening.get(host_of[c], set()))

    def _ensure_epmd(self, host: HostSpec) -> None:
        state = self._state()
        pid = state["epmd"].get(host.name)
        if pid and self._pids_alive(host, [pid]):
            return
        address = _dist_address(host)
        only = f" -address {address}" if address else ""
        pid = int(self._run(host, f"setsid epmd -port {self.epmd_port}{only} > /dev/null 2>&1 "
                                  "< /dev/null & echo $!").strip())
        state["epmd"][host.name] = pid
        self._write(state)

    def _declare_queues(self) -> None:
        running = {m.index: m for m in self.status() if m.running}
        queues.declare(self.topology, list(running), lambda index: self._api(running[index]))

    def _alive_indexes(self, state: dict | None = None) -> set[int]:
        members = (state or self._state())["members"]
        alive = set()
        for host in self._broker_hosts():
            pids = {int(k): e["pid"] for k, e in members.items()
                    if e.get("pid") and self.placement[int(k)].name == host.name}
            living = self._pids_alive(host, list(pids.values()))
            alive |= {i for i, pid in pids.items() if pid in living}
        return alive

    def _pids_alive(self, host: HostSpec, pids: list[int]) -> set[int]:
        if not pids:
            return set()
        listed = " ".join(str(int(p)) for p in pids)
        out = self._run(host, f"for p in {listed}; do kill -0 $p 2>/dev/null && echo $p; done; "
                              "true")
        return {int(p) for p in out.split()}

    def _cpu_readings(self, running: list[Member]
                      ) -> tuple[dict[int, CpuReading], dict[str, CpuReading | None]]:
        """utime + stime of each running member's VM, and each broker host's busy and total
        CPU time, with the host's uptime as the time of the reading: one command per host."""
        cpu: dict[int, CpuReading] = {}
        hosts: dict[str, CpuReading | None] = {}
        for host in self._broker_hosts():
            mine = [m for m in running if self.placement[m.index].name == host.name and m.pid]
            listed = " ".join(str(m.pid) for m in mine)
            try:
                out = self._run(host, f"{HOST_CPU_COMMAND}; "
                                      f"for p in {listed}; do echo $p $(cut -d' ' -f14,15 "
                                      f"/proc/$p/stat 2>/dev/null); done")
                lines = out.splitlines()
                hosts[host.name], ticks, at = parse_host_cpu(lines)
            except (ProvisionError, ValueError, IndexError):
                hosts[host.name] = None
                continue
            by_pid = {int(f[0]): (int(f[1]) + int(f[2])) / ticks
                      for f in (line.split() for line in lines[3:]) if len(f) == 3}
            cpu.update({m.index: CpuReading(by_pid[m.pid], at) for m in mine if m.pid in by_pid})
        return cpu, hosts

    def _stop_pid(self, host: HostSpec, pid: int, kill: bool) -> None:
        self._run(host, f"kill -{'KILL' if kill else 'TERM'} {int(pid)} 2>/dev/null; true")
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self._pids_alive(host, [pid]):
            if time.monotonic() > deadline:
                self._run(host, f"kill -KILL {int(pid)} 2>/dev/null; true")
                break
            time.sleep(0.5)

    def _ctl(self, member: Member, *args: str) -> str:
        host = self.placement[member.index]
        quoted = " ".join(shlex.quote(a) for a in args)
        # the CLI's own VM only connects out: its listener stays on loopback on any host
        erl_args = shlex.quote(node.dist_args(node.LOOPBACK))
        return self._run(host, f"HOME={shlex.quote(self._root(host))} "
                               f"ERL_EPMD_PORT={self.epmd_port} RABBITMQ_CTL_ERL_ARGS={erl_args} "
                               f"{node.RABBITMQ_BIN}/rabbitmqctl "
                               f"-n {shlex.quote(member.name)} {quoted}")

    # -- plumbing ------------------------------------------------------------------------------

    def _run(self, host: HostSpec, command: str, check: bool = True) -> str:
        return self._on(host).run(command, check=check).stdout

    def _on(self, host: HostSpec):
        if host.name not in self._sessions:
            from topologies.ssh import SshSession
            self._sessions[host.name] = SshSession(host.target, host.ssh, record=self.record)
        return self._sessions[host.name]

    def _broker_hosts(self) -> list[HostSpec]:
        return [h for h in self.topology.hosts if "broker" in h.roles]

    def _root(self, host: HostSpec) -> str:
        return f"{host.work_dir.rstrip('/')}/{self.topology.name}"

    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {"members": {}, "epmd": {}}

    def _write(self, state: dict) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(state, indent=2))

    def _save_member(self, index: int, **fields: object) -> None:
        state = self._state()
        state["members"].setdefault(str(index), {}).update(fields)
        self._write(state)


def _dist_address(host: HostSpec) -> str | None:
    """Where the topology's epmd and Erlang distribution listen on ``host``: 127.0.0.1 on a
    loopback host (its members are ``...@localhost``); every address elsewhere (``None``), as the
    members of other hosts reach them by node name."""
    return node.LOOPBACK if host.target.startswith("127.") else None
