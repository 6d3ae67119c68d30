"""A RabbitMQ cluster surge did not start (``placement: existing``): members reached by their
URIs as the run's clients (credentials and TLS from the topology), observed through their own
Prometheus endpoints or, where that is all there is, the management API, and never stopped.

What cannot be known here is unknown, never zero, and :meth:`ExistingRabbitMQ.unmeasured` says
why: without a Prometheus endpoint a member's CPU; with one, its system CPU (RabbitMQ exports the
VM's user CPU only); without ``cpu_per_member`` its quota. A member is
started or stopped only through the commands the topology gives (``existing.commands``).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from orchestrator.errors import ProvisionError
from orchestrator.specs.existing import RabbitMemberSpec
from orchestrator.specs.topology import TopologySpec
from orchestrator.tls import TlsMaterial
from topologies.base import BrokerSample, CommandResult, Member, MemberStats, Provisioner
from topologies.commands import run_member_command
from topologies.rabbitmq import node, queues
from topologies.rabbitmq.management import Management, management_stats
from topologies.rabbitmq.prometheus import SCRAPE_TIMEOUT_S, node_stats
from topologies.rabbitmq.sample import broker_sample

IDENTITY = "rabbitmq_identity_info"  # its rabbitmq_node label is the member's node name
READY_POLL_S = 1.0  # a started member is looked at this often until it accepts clients


class ExistingRabbitMQ(Provisioner):
    """Provisioner of a RabbitMQ cluster that runs already (a :class:`topologies.base.
    Provisioner`); ``record`` receives the result of every command it runs."""

    def __init__(self, topology: TopologySpec,
                 record: Callable[[CommandResult], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        if topology.existing is None:
            raise ProvisionError(f"topology {topology.name} has no existing section")
        self.topology, self.spec = topology, topology.existing
        self.record, self.sleep = record, sleep
        self.serving = set(range(topology.start))
        self.names: dict[int, str] = {}  # node names the members gave of themselves
        self._settings: dict[str, Any] | None = None
        self._tls: TlsMaterial | None = None
        self.asks_members = all(m.prometheus for m in self.spec.members)  # each for itself

    # -- the pool ---------------------------------------------------------------------------

    def member(self, index: int) -> Member:
        """Member ``index`` as the topology lists it, named as it calls itself once known."""
        spec = self.spec.members[index]
        return Member(index=index, name=self.names.get(index, f"{spec.host}:{spec.port}"),
                      host=spec.host, port=spec.port, management_port=_port(spec.management),
                      prometheus_port=_port(spec.prometheus),
                      endpoint=node.amqp_url(spec.host, spec.port, spec.tls))

    def status(self) -> list[Member]:
        """Every listed member, serving unless surge's commands took it out of service."""
        return [dataclasses.replace(self.member(i), running=i in self.serving)
                for i in range(self.topology.members)]

    def up(self) -> list[Member]:
        """Nothing to start: read the secrets and certificates now (a missing one is an error
        before any load), learn the members' node names, and declare the queues if asked."""
        self.client_settings()
        for index, spec in enumerate(self.spec.members):
            name = self._node_name(index, spec)
            if name:
                self.names[index] = name
        if self.spec.declare:
            self._declare(sorted(self.serving))
        return self.status()

    def start_member(self, index: int | None = None) -> Member:
        """Bring a member into service with ``existing.commands.start_member``, then wait until
        it accepts connections (up to the commands' timeout)."""
        if index is None:
            idle = [i for i in range(self.topology.members) if i not in self.serving]
            if not idle:
                raise ProvisionError(f"all {self.topology.members} members already serve")
            index = idle[0]
        self._command("start_member", index, len(self.serving | {index}))
        self._await(index)
        self.serving.add(index)
        if self.spec.declare:
            self._declare([index])
        return self.status()[index]

    def stop_member(self, index: int, kill: bool = False) -> None:
        """Take a member out of service with ``existing.commands.stop_member`` (``kill``:
        ``kill_member``)."""
        self._command("kill_member" if kill else "stop_member", index,
                      len(self.serving - {index}))
        self.serving.discard(index)

    def down(self) -> list[str]:
        """Stops nothing: the cluster belongs to someone else."""
        return [f"{self.topology.name}: a cluster surge did not start; nothing stopped"]

    # -- observation ------------------------------------------------------------------------

    def client_settings(self) -> dict[str, Any]:
        """User, password, virtual host and TLS material for the run's clients, read once from
        the variables and files the topology names."""
        if self._settings is None:
            credentials = self.spec.credentials
            if credentials is None and self.spec.mechanism == "PLAIN":
                raise ProvisionError(f"topology {self.topology.name}: existing.credentials is "
                                     f"needed to connect to RabbitMQ")
            self._settings = {"user": "", "password": ""} if credentials is None else {
                "user": credentials.user,
                "password": credentials.password("existing.credentials")}
            self._settings.update(vhost=self.spec.vhost, mechanism=self.spec.mechanism)
            if any(m.tls for m in self.spec.members) or self.spec.tls is not None:
                self._settings["tls"] = dataclasses.asdict(self._tls_material())
        return self._settings

    def sample(self) -> BrokerSample:
        """Every member's CPU is its own figure (:meth:`member_stats`); where members do not all
        have a Prometheus endpoint, connections and messages come from one management call."""
        members = self.status()
        stats = None
        if not self.asks_members:
            stats = management_stats(self._management())
        return broker_sample(members, lambda member: None, self.topology.cpu_per_member,
                             stats=stats)

    def member_stats(self, member: Member) -> MemberStats | None:
        """A member's connections, messages and CPU (the VM's runtime), from its own
        Prometheus endpoint; ``None``: it did not answer in time."""
        url = self.spec.members[member.index].prometheus
        return node_stats(f"{url}/metrics", tls=self._context(url), cpu=True) if url else None

    def unmeasured(self) -> dict[str, str]:
        """What this run cannot know about the members, and why (shown in the report)."""
        out = {}
        if any(m.prometheus for m in self.spec.members):
            out["member system CPU"] = (
                "RabbitMQ's Prometheus endpoint gives the VM's user CPU time only "
                "(erlang_vm_statistics_runtime_milliseconds): member CPU counts user time and "
                "reads low by the system time (network and disk calls)")
        bare = [self.member(i).name for i, m in enumerate(self.spec.members) if not m.prometheus]
        if bare:
            out["member CPU"] = (f"no Prometheus endpoint (existing.members[].prometheus) for "
                                 f"{', '.join(bare)}; the management API does not give CPU")
            if not any(m.management for m in self.spec.members):
                out["member connections and messages"] = (
                    "neither a Prometheus endpoint for every member nor a management URL")
        if self.topology.cpu_per_member is None:
            out["member CPU quota"] = ("a cluster surge did not start: give cpu_per_member (the "
                                       "cores each member has) to see CPU as a share")
        return out

    def settled_queue_depths(self) -> dict[str, int] | None:
        """Messages per queue from the management API, where there is one (the run reads them
        from the queues themselves first); ``None``: no way to know."""
        api = self._management()
        if api is None:
            return None
        return api.queues()[0]

    # -- internals --------------------------------------------------------------------------

    def _tls_material(self) -> TlsMaterial:
        if self._tls is None:
            tls = self.spec.tls
            self._tls = TlsMaterial() if tls is None else TlsMaterial.from_files(
                tls.ca_file, tls.cert_file, tls.key_file, tls.server_name,
                tls.check_server_name, where="existing.tls")
        return self._tls

    def _context(self, url: str) -> ssl.SSLContext | None:
        """The TLS context for an ``https`` URL of a member (``None`` for ``http``)."""
        return self._tls_material().context() if url.startswith("https:") else None

    def _management(self, index: int | None = None) -> Management | None:
        """A management client on member ``index`` if it has one, else on any serving member
        that has; ``None`` where no member has a management URL."""
        order = ([index] if index is not None else []) + sorted(self.serving)
        url = next((self.spec.members[i].management for i in order
                    if self.spec.members[i].management), None)
        settings = self.client_settings()
        if url is None or not settings["user"]:  # EXTERNAL without credentials: AMQP only
            return None
        parts = urlsplit(url)
        return Management(parts.hostname or "", _port(url), settings["user"],
                          settings["password"], tls=self._context(url), vhost=self.spec.vhost)

    def _declare(self, members: list[int]) -> None:
        """Declare the topology's queues (``existing.declare``), each through the management API
        of the member that is to lead it, or of any member that has one."""
        def api(index: int) -> Management:
            found = self._management(index)
            if found is None:
                raise ProvisionError("existing.declare: true needs a management URL on at least "
                                     "one member (existing.members[].management)")
            return found

        queues.declare(self.topology, members, api)

    def _node_name(self, index: int, spec: RabbitMemberSpec) -> str | None:
        """The member's node name, from its Prometheus identity or its management API."""
        if spec.management:
            try:
                overview = self._management(index).request("GET", "/overview") or {}
                return overview.get("node")
            except (ProvisionError, AttributeError):
                return None
        if spec.prometheus:
            try:
                with urllib.request.urlopen(f"{spec.prometheus}/metrics", timeout=SCRAPE_TIMEOUT_S,
                                            context=self._context(spec.prometheus)) as response:
                    text = response.read().decode("utf-8", "replace")
            except (urllib.error.URLError, OSError, ValueError):
                return None
            for family in text_string_to_metric_families(text):
                if family.name == IDENTITY and family.samples:
                    return family.samples[0].labels.get("rabbitmq_node")
        return None

    def _command(self, which: str, index: int, count: int) -> None:
        template = getattr(self.spec.commands, which)
        if template is None:
            raise ProvisionError(f"topology {self.topology.name} is a cluster surge did not "
                                 f"start: existing.commands.{which} is needed to {which} "
                                 f"{self.member(index).name}")
        run_member_command(template, f"existing.commands.{which}", self.spec.commands.timeout,
                           self.record, index=index, name=self.member(index).name, count=count)

    def _await(self, index: int) -> None:
        """Wait until member ``index`` accepts TCP connections on its AMQP port."""
        member = self.member(index)
        deadline = time.monotonic() + self.spec.commands.timeout
        while True:
            try:
                with socket.create_connection((member.host, member.port), timeout=2.0):
                    return
            except OSError as error:
                if time.monotonic() > deadline:
                    raise ProvisionError(f"{member.name} does not accept connections "
                                         f"{self.spec.commands.timeout:g} s after "
                                         f"existing.commands.start_member ({error})") from None
            self.sleep(READY_POLL_S)


def _port(url: str | None) -> int:
    """The port of an HTTP(S) URL (0 for none)."""
    if not url:
        return 0
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)

