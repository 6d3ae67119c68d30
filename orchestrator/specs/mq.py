"""Typed models of the IBM MQ part of a topology (``ibmmq:``).

Document 000's uniform cluster: cluster ``UC01``, QM group ``UC01QM``, queue managers
``UC01QM01``..``UC01QM12`` spread over hosts in blocks (6 on ``QMHost1`` on ports 1414..1419, 6 on
``QMHost2``), created with ``crtmqm -ii/-ic/-iv`` from one qm.ini fragment and one MQSC file.
Document 003's Native HA queue manager is the ``native_ha`` part, rendered as a ``QueueManager``
for the MQ operator. Queue managers surge did not start (``placement: existing``) are listed in
``queue_managers`` (by ``host(port)`` and channel) or reached through ``ccdt_url`` and the QM
group, with TLS in ``tls``. Renderers live in :mod:`topologies.mq`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from orchestrator.specs.base import Loc, Seconds, Spec
from orchestrator.specs.existing import HttpUrl
from orchestrator.specs.hosts import SshSpec
from orchestrator.specs.secrets import refuse_userinfo

MQ_NAME = r"^[A-Za-z0-9._%/]{1,48}$"  # queue manager and object names (MQ_Q_MGR_NAME_LENGTH)
CHANNEL_NAME = r"^[A-Za-z0-9._%/]{1,20}$"  # MQ_CHANNEL_NAME_LENGTH
_CONNAME = re.compile(r"^[A-Za-z0-9.:\-\[\]]+\(\d{1,5}\)$")


def _conname(text: str) -> str:
    """``host(port)``, comma-separated for a multi-instance queue manager."""
    if not all(_CONNAME.match(part.strip()) for part in text.split(",")):
        raise ValueError(f"expected HOST(PORT), e.g. qm1.example.com(1414), or several "
                         f"separated by commas (got {text!r})")
    return text


def _ccdt_url(text: str) -> str:
    refuse_userinfo(text)
    if urlsplit(text).scheme not in ("file", "http", "https", "ftp"):
        raise ValueError(f"expected a CCDT URL such as file:///var/mqm/UC01.json or "
                         f"https://host/ccdt.json (got {text!r})")
    return text


Conname = Annotated[str, AfterValidator(_conname)]
CcdtUrl = Annotated[str, AfterValidator(_ccdt_url)]


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

    namespace: str = Field("mq", description="Kubernetes namespace of the QueueManager")
    version: str = Field("9.3.3.0-r2", description="operator's spec.version")
    license: str = Field("L-YBXJ-ADJNSM", description="spec.license.license")
    use: Literal["Production", "NonProduction", "Development"] = Field(
        "Production", description="the operator's spec.license.use")
    storage_class: str = Field("san", description="spec.queueManager.storage.defaultClass")
    memory: str = Field("16Gi", description="memory request and limit per queue manager")
    log_file_pages: int = Field(16384, ge=1, description="spec.queueManager.recoveryLogs")
    tls_secret: str | None = Field("mqcert", description="key and trust secret; null: no TLS")
    image_log_length: int = Field(25000, ge=0, description="IMGLOGLN, the nha.mqsc")
    max_message_length: int = Field(104857600, ge=1, description="MAXMSGL everywhere")
    max_depth: int = Field(5000, ge=1, description="MAXDEPTH of each defined queue")
    ready_timeout: Seconds = Field(600.0, gt=0, description="wait for status Running")


class MqQueueManagerSpec(Spec):
    """A queue manager of a cluster surge did not start (``placement: existing``)."""

    name: str = Field(pattern=MQ_NAME, description="the queue manager's name")
    conname: Conname | None = Field(
        None, description="HOST(PORT) of its listener; may be left out with ibmmq.ccdt_url "
                          "(the CCDT says where it is)")
    channel: str | None = Field(None, pattern=CHANNEL_NAME,
                                description="its SVRCONN channel; default ibmmq.channel")
    exporter: HttpUrl | None = Field(
        None, description="its mq_prometheus endpoint, e.g. http://qm1.example.com:9157/metrics; "
                          "without one its CPU, connections and messages are unknown")
    cpus: int | None = Field(None, ge=1, description="its host's cores: the exporter gives "
                                                     "the queue manager's CPU as a share of the "
                                                     "host; without them its CPU is unknown")


class MqTlsSpec(Spec):
    """TLS between surge's MQ clients and the queue managers (the client side of a channel
    with an SSLCIPH): the cipher spec and the key repository on the load hosts."""

    cipher_spec: str = Field(min_length=1, max_length=32,
                             description="the channel's SSLCIPH, e.g. ANY_TLS12_OR_HIGHER")
    key_repository: str = Field(
        min_length=1, description="key repository stem on every load host (MQSCO "
                                  "KeyRepository), e.g. /var/mqm/ssl/client for client.kdb; "
                                  "its password in the stash file beside it (client.sth)")
    certificate_label: str | None = Field(None, min_length=1, max_length=64,
                                          description="the client certificate's label")
    key_repository_password_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the key repository's password, where "
                    "there is no stash file (sent to the agents over their control channel)")


class MqSpec(Spec):
    """The IBM MQ side of a topology: queue managers, their cluster and how clients reach them."""

    cluster: str = Field(
        "UC01", pattern=r"^[A-Z0-9._%]{1,48}$", description="name of the uniform cluster")
    qm_group: str = Field("UC01QM", description="the CCDT's queue manager group; clients "
                                                "connect to *<group>")
    qm_prefix: str = Field("UC01QM", description="queue managers are <prefix>01, <prefix>02, ...")
    qm_first: int = Field(1, ge=0, description="number of the first queue manager")
    qm_digits: int = Field(2, ge=1, le=4, description="digits of queue manager numbers")
    port_base: int = Field(1414, ge=1, le=65000, description="listener of a host's first QM; "
                                                             "the next ones count up")
    hosts: list[MqHostSpec] = Field(
        default_factory=list, min_length=0,
        description="the machines the queue managers run on")
    repositories: list[str] = Field(
        default_factory=list, max_length=2,
        description="the two full repositories; default the first QM of the first two hosts")
    bin_dir: str = Field("", description="directory of the MQ commands (e.g. /opt/mqm/bin) "
                                         "put first on PATH for every remote command; empty: "
                                         "the login's PATH (setmqenv)")
    files_dir: str = Field("/nfs1", description="where the -ii/-ic files and the CCDT go on "
                                                "every host (an NFS mount in document 000)")
    ini_file: str = Field(
        "uniclus.ini", description="name of the -ii file (qm.ini stanzas) written into files_dir")
    mqsc_file: str = Field(
        "uniclus.mqsc", description="name of the -ic file (MQSC commands) written into files_dir")
    ccdt_file: str = Field("UC01.json", description="name of the JSON CCDT written into files_dir")
    ini: dict[str, dict[str, str]] = Field(
        default_factory=lambda: {"Channels": {"MQIBindType": "FASTPATH"}},
        description="custom qm.ini stanzas added by -ii after the AutoCluster stanza")
    channel: str = Field("PERF.APP.CHL", description="the SVRCONN channel clients use")
    sharecnv: int = Field(
        1, ge=0, le=999999999,
        description="SHARECNV of the client channel: conversations that share one TCP "
                    "connection")
    listener_backlog: int = Field(5000, ge=1, description="connection requests a listener queues")
    cluster_queues: bool = Field(
        False, description="define the topology's queues as cluster queues of the uniform "
                           "cluster, an instance on every queue manager treated alike "
                           "(CLUSTER(<cluster>) CLWLUSEQ(ANY)): MQ's cluster workload balancing "
                           "then picks the instance of each sender's handle (workload.bind "
                           "on-open) or of each message (not-fixed), document 002; without it "
                           "a message stays on the queue manager its sender is connected to")
    client_weight: int = Field(1, ge=0, le=99, description="CCDT connectionManagement")
    affinity: Literal["preferred", "none"] = Field(
        "none",
        description="CCDT connection affinity: preferred reconnects to the same queue manager")
    reconnect: Literal["yes", "no", "qmgr", "disabled"] = Field(
        "yes", description="client reconnect (WMQ_CLIENT_RECONNECT in document 000)")
    appltag_sender: str = Field(
        "mqperf.sender", max_length=28,
        description="APPLTAG of senders and requesters (a queue manager keeps 28 characters)")
    appltag_receiver: str = Field(
        "mqperf.receiver", max_length=28,
        description="APPLTAG of receivers and responders (28 characters at most)")
    cgroup_slice: str = Field("mq-{qm}.slice", description="per-QM systemd slice, {qm} = name")
    sudo: bool = Field(
        False, description="start queue managers in their CPU-limited slices as root through "
                           "`sudo -n` (systemctl set-property, systemd-run --uid=<mq_user>); "
                           "the SSH user needs passwordless sudo for systemctl and systemd-run")
    mq_user: str = Field("mqm", pattern=r"^[a-z_][a-z0-9_-]{0,31}$",
                         description="user the queue managers run as (with sudo)")
    statistics_interval: Seconds = Field(
        10.0, ge=1, le=3600,
        description="seconds between the queue managers' resource publications (qm.ini "
                    "TuningParameters MonitorPublishHeartBeat, set by -ii where surge creates "
                    "them; MQ's default is 10): how often the exporter has a new CPU figure")
    exporter_port_base: int = Field(
        9157, ge=1, le=65000,
        description="mq_prometheus (ibmmq_* metrics) of a host's first QM; the next count up")
    ssh: SshSpec = Field(default_factory=SshSpec, description="how surge reaches the hosts")
    native_ha: NativeHaSpec | None = Field(
        None, description="a Native HA queue manager on Kubernetes instead of hosts")
    queue_managers: list[MqQueueManagerSpec] = Field(
        default_factory=list, max_length=64,
        description="placement existing: the queue managers, by name and HOST(PORT)")
    ccdt_url: CcdtUrl | None = Field(
        None, description="placement existing: the CCDT clients use to reach *<qm_group>, "
                          "e.g. file:///var/mqm/UC01.json (as the load hosts see it)")
    tls: MqTlsSpec | None = Field(None, description="TLS towards the queue managers")

    def cross_problems(self) -> list[tuple[Loc, str]]:
        """The full repositories named are queue managers of the hosts; listed queue managers
        have distinct names and, without a CCDT, a CONNAME each."""
        found: list[tuple[Loc, str]] = []
        names = {self.qm_name(i) for i in range(sum(h.members for h in self.hosts))}
        unknown = [r for r in self.repositories if r not in names]
        if unknown and self.hosts:
            found.append((("repositories",), f"repositories {unknown} are not queue managers "
                                             f"of the hosts ({min(names)} to {max(names)})"))
        seen: set[str] = set()
        for i, qm in enumerate(self.queue_managers):
            if qm.name in seen:
                found.append((("queue_managers", i, "name"), f"{qm.name} is listed twice"))
            seen.add(qm.name)
            if qm.conname is None and self.ccdt_url is None:
                found.append((("queue_managers", i, "conname"),
                              f"{qm.name} needs its HOST(PORT) (or give ibmmq.ccdt_url, and "
                              f"the CCDT says where it is)"))
        return found

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


def reply_queue_name(request_queue: str, configured: str = "") -> str:
    """The shared reply queue of requests to ``request_queue``: ``configured``, else the name
    with ``request`` replaced by ``reply`` in its case (``REQUEST1`` -> ``REPLY1``), else the
    name with ``.reply`` appended."""
    if configured:
        return configured
    at = request_queue.lower().rfind("request")
    if at < 0:
        return request_queue + (".REPLY" if request_queue.isupper() else ".reply")
    word = request_queue[at:at + 7]
    reply = "REPLY" if word.isupper() else "Reply" if word[0].isupper() else "reply"
    return request_queue[:at] + reply + request_queue[at + 7:]
