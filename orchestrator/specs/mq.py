"""Typed models of the IBM MQ part of a topology (``ibmmq:``).

Document 000's uniform cluster: cluster ``UC01``, QM group ``UC01QM``, queue managers
``UC01QM01``..``UC01QM12`` spread over hosts in blocks (6 on ``QMHost1`` on ports 1414..1419, 6 on
``QMHost2``), created with ``crtmqm -ii/-ic/-iv`` from one qm.ini fragment and one MQSC file.
Document 003's Native HA queue manager is the ``native_ha`` part, rendered as a ``QueueManager``
for the MQ operator. Renderers live in :mod:`topologies.mq`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.specs.base import Loc, Seconds, Spec
from orchestrator.specs.hosts import SshSpec


class MqHostSpec(Spec):
    """A host that runs queue managers (document 000: QMHost1, QMHost2)."""

    name: str = Field(min_length=1, description="the name in CONNAMEs, e.g. QMHost1")
    address: str | None = Field(None, description="where SSH connects; default the name")
    members: int = Field(ge=1, le=64, description="queue managers on this host")
    cpus: int | None = Field(None, ge=1, description="the host's cores: the exporter publishes "
                                                     "QM CPU as a share of the host")
    ssh: SshSpec | None = Field(None, description="default: ibmmq.ssh")


class NativeHaSpec(Spec):
    """Document 003's Native HA queue manager, run by the MQ operator on Kubernetes."""

    namespace: str = "mq"
    version: str = Field("9.3.3.0-r2", description="operator's spec.version")
    license: str = Field("L-YBXJ-ADJNSM", description="spec.license.license")
    use: Literal["Production", "NonProduction", "Development"] = "Production"
    storage_class: str = Field("san", description="spec.queueManager.storage.defaultClass")
    memory: str = Field("16Gi", description="memory request and limit per queue manager")
    log_file_pages: int = Field(16384, ge=1, description="spec.queueManager.recoveryLogs")
    tls_secret: str | None = Field("mqcert", description="key and trust secret; null: no TLS")
    image_log_length: int = Field(25000, ge=0, description="IMGLOGLN, the nha.mqsc")
    max_message_length: int = Field(104857600, ge=1, description="MAXMSGL everywhere")
    max_depth: int = Field(5000, ge=1, description="MAXDEPTH of each defined queue")
    ready_timeout: Seconds = Field(600.0, gt=0, description="wait for status Running")


class MqSpec(Spec):
    """The IBM MQ side of a topology: queue managers, their cluster and how clients reach them."""

    cluster: str = Field("UC01", pattern=r"^[A-Z0-9._%]{1,48}$")
    qm_group: str = Field("UC01QM", description="the CCDT's queue manager group; clients "
                                                "connect to *<group>")
    qm_prefix: str = Field("UC01QM", description="queue managers are <prefix>01, <prefix>02, ...")
    qm_first: int = Field(1, ge=0, description="number of the first queue manager")
    qm_digits: int = Field(2, ge=1, le=4, description="digits of queue manager numbers")
    port_base: int = Field(1414, ge=1, le=65000, description="listener of a host's first QM; "
                                                             "the next ones count up")
    hosts: list[MqHostSpec] = Field(default_factory=list, min_length=0)
    repositories: list[str] = Field(
        default_factory=list, max_length=2,
        description="the two full repositories; default the first QM of the first two hosts")
    bin_dir: str = Field("", description="directory of the MQ commands (e.g. /opt/mqm/bin) "
                                         "put first on PATH for every remote command; empty: "
                                         "the login's PATH (setmqenv)")
    files_dir: str = Field("/nfs1", description="where the -ii/-ic files and the CCDT go on "
                                                "every host (an NFS mount in document 000)")
    ini_file: str = "uniclus.ini"
    mqsc_file: str = "uniclus.mqsc"
    ccdt_file: str = "UC01.json"
    ini: dict[str, dict[str, str]] = Field(
        default_factory=lambda: {"Channels": {"MQIBindType": "FASTPATH"}},
        description="custom qm.ini stanzas added by -ii after the AutoCluster stanza")
    channel: str = Field("PERF.APP.CHL", description="the SVRCONN channel clients use")
    sharecnv: int = Field(1, ge=0, le=999999999)
    listener_backlog: int = Field(5000, ge=1)
    client_weight: int = Field(1, ge=0, le=99, description="CCDT connectionManagement")
    affinity: Literal["preferred", "none"] = "none"
    reconnect: Literal["yes", "no", "qmgr", "disabled"] = Field(
        "yes", description="client reconnect (WMQ_CLIENT_RECONNECT in document 000)")
    appltag_sender: str = Field(
        "mqperf.sender", max_length=28,
        description="APPLTAG of senders and requesters (a queue manager keeps 28 characters)")
    appltag_receiver: str = Field(
        "mqperf.receiver", max_length=28,
        description="APPLTAG of receivers and responders (28 characters at most)")
    cgroup_slice: str = Field("mq-{qm}.slice", description="per-QM systemd slice, {qm} = name")
    exporter_port_base: int = Field(
        9157, ge=1, le=65000,
        description="mq_prometheus (ibmmq_* metrics) of a host's first QM; the next count up")
    ssh: SshSpec = Field(default_factory=SshSpec)
    native_ha: NativeHaSpec | None = None

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """The full repositories named are queue managers of the hosts."""
        names = {self.qm_name(i) for i in range(sum(h.members for h in self.hosts))}
        unknown = [r for r in self.repositories if r not in names]
        if unknown and self.hosts:
            return [(("repositories",), f"repositories {unknown} are not queue managers of "
                                        f"the hosts ({min(names)} to {max(names)})")]
        return []

    def qm_name(self, index: int) -> str:
        """Queue manager ``index`` (0-based): ``UC01QM01`` for 0 (``PERF0`` with ``qm_first``
        0 and ``qm_digits`` 1)."""
        return f"{self.qm_prefix}{index + self.qm_first:0{self.qm_digits}d}"

    def placement(self, index: int) -> tuple[MqHostSpec, int]:
        """The host of queue manager ``index`` and its position on that host (hosts in blocks)."""
        position = index
        for host in self.hosts:
            if position < host.members:
                return host, position
            position -= host.members
        raise IndexError(f"queue manager {index} is beyond the hosts' {index - position} members")

    def full_repositories(self) -> list[int]:
        """Indexes of the two full repositories."""
        if self.repositories:
            return [int(name[len(self.qm_prefix):]) - self.qm_first for name in self.repositories]
        starts, first = [], 0
        for host in self.hosts[:2]:
            starts.append(first)
            first += host.members
        return starts
