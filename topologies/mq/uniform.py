"""Document 000's uniform cluster as text: the ``-ii`` qm.ini fragment, the ``-ic`` MQSC file,
the ``crtmqm`` / ``strmqm`` / ``endmqm`` / ``dspmq`` command lines and the JSON CCDT.

Every queue manager is created from the same two files; only its name, host and port differ, so
scaling out is one more ``crtmqm`` line. Pure functions of the topology: nothing here touches a
host (:mod:`topologies.mq.provision` runs the commands).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from orchestrator.specs.mq import MqHostSpec, MqSpec
from orchestrator.specs.mqtopics import mqsc_lines, mqsc_name
from orchestrator.specs.topology import TopologySpec


@dataclass(frozen=True)
class QueueManager:
    """One queue manager of the pool: its name, host, listener port and exporter port."""

    index: int
    name: str
    host: MqHostSpec
    port: int
    exporter_port: int

    @property
    def conname(self) -> str:
        """``MQHost1(1414)``: how other queue managers and clients reach it."""
        return f"{self.host.name}({self.port})"

    @property
    def address(self) -> str:
        """Where SSH (and the metrics scraper) reach its host."""
        return self.host.address or self.host.name


def queue_managers(topology: TopologySpec) -> list[QueueManager]:
    """Every queue manager of the pool, hosts filled in blocks, ports counting up per host."""
    mq = _mq(topology)
    out = []
    for index in range(topology.members):
        host, position = mq.placement(index)
        out.append(QueueManager(index, mq.qm_name(index), host, mq.port_base + position,
                                mq.exporter_port_base + position))
    return out


def ini_text(topology: TopologySpec) -> str:
    """The ``-ii`` file: the AutoCluster stanza naming the two full repositories, then the
    custom stanzas (``Channels: MQIBindType=FASTPATH`` in document 000)."""
    mq = _mq(topology)
    qms = queue_managers(topology)
    lines = ["AutoCluster:"]
    for number, index in enumerate(mq.full_repositories(), start=1):
        lines += [f"   Repository{number}Conname={qms[index].conname}",
                  f"   Repository{number}Name={qms[index].name}"]
    lines += [f"   ClusterName={mq.cluster}", "   Type=Uniform", "#", "# Custom entries"]
    return "\n".join(lines + stanza_lines(mq)) + "\n"


def stanza_lines(mq: MqSpec) -> list[str]:
    """The custom stanzas (:func:`ini_stanzas`) as qm.ini lines."""
    lines = []
    for stanza, entries in ini_stanzas(mq).items():
        lines.append(f"{stanza}:")
        lines += [f"   {key}={value}" for key, value in entries.items()]
    return lines


def ini_stanzas(mq: MqSpec) -> dict[str, dict[str, str]]:
    """The custom stanzas, with the resource publication interval the exporter's CPU figures
    come at (``TuningParameters: MonitorPublishHeartBeat``, seconds) unless the topology sets
    it itself."""
    stanzas = {name: dict(entries) for name, entries in mq.ini.items()}
    stanzas.setdefault("TuningParameters", {}).setdefault(
        "MonitorPublishHeartBeat", f"{mq.statistics_interval:g}")
    return stanzas


def statistics_interval(mq: MqSpec) -> float:
    """Seconds between a queue manager's resource publications as its -ii file sets them."""
    return float(ini_stanzas(mq)["TuningParameters"]["MonitorPublishHeartBeat"])


def mqsc_text(topology: TopologySpec) -> str:
    """The ``-ic`` file, run by every queue manager at each start: its cluster receiver channel
    (from the built-in ``+AUTOCL+``/``+QMNAME+`` and the ``-iv`` ``+CONNAME+``), the listener
    backlog, the SVRCONN channel with its conversation sharing, and the queues.

    Every queue manager defines every queue. By default each definition is a queue of its own
    (document 000: applications balanced over the members by the uniform cluster, each
    message staying on the member its sender is connected to). With ``ibmmq.cluster_queues``
    each is an instance of one cluster queue (document 002), and ``CLWLUSEQ(ANY)`` makes the
    local instance one candidate among equals: left at MQ's default (LOCAL) a sender's messages
    would never leave its own member, since every member has an instance, and the senders'
    bind (MQOO_BIND_ON_OPEN or MQOO_BIND_NOT_FIXED, from ``workload.bind``) would change
    nothing. MQ, not surge, then spreads the messages; surge measures the spread: each
    member's messages got from its instance (its exporter's MQGET count: the steps'
    ``delivered_per_member`` and balance index) and, at the end, its depth (``runmqsc``)."""
    mq = _mq(topology)
    lines = [
        "* Uniform cluster receiver channel",
        "define channel('+AUTOCL+_+QMNAME+') chltype(clusrcvr) trptype(tcp) "
        "conname('+CONNAME+') cluster('+AUTOCL+') replace",
        *application_lines(mq),
        "* Queues",
    ]
    clustered = f" cluster({mq.cluster}) clwluseq(any)" if mq.cluster_queues else ""
    lines += [f"define qlocal({mqsc_name(name)}){clustered} replace"
              for queue in topology.queues for name in queue.names]
    return "\n".join(lines + mqsc_lines(topology)) + "\n"


def application_lines(mq: MqSpec) -> list[str]:
    """The MQSC of the clients' side: the listener backlog and the SVRCONN channel with its
    conversation sharing."""
    return ["* Listener backlog",
            f"alter LISTENER(SYSTEM.LISTENER.TCP.1) TRPTYPE(TCP) BACKLOG({mq.listener_backlog})",
            "* Application channel",
            f"define channel({mq.channel}) chltype(svrconn) trptype(tcp) replace",
            f"alter channel({mq.channel}) chltype(SVRCONN) sharecnv({mq.sharecnv})"]


def file_paths(topology: TopologySpec) -> dict[str, str]:
    """Where the ``-ii`` and ``-ic`` files and the CCDT live on every host."""
    mq = _mq(topology)
    directory = mq.files_dir.rstrip("/")
    return {"ini": f"{directory}/{mq.ini_file}", "mqsc": f"{directory}/{mq.mqsc_file}",
            "ccdt": f"{directory}/{mq.ccdt_file}"}


def crtmqm_args(topology: TopologySpec, qm: QueueManager,
                files: dict[str, str] | None = None) -> list[str]:
    """``crtmqm -lc -p 1414 -ii /nfs1/uniclus.ini -ic /nfs1/uniclus.mqsc
    -iv CONNAME=MQHost1(1414) UC01QM01`` as arguments: linear logging, the listener port, the
    ``-ii`` and ``-ic`` files (``files``, the shared ones by default) and this queue manager's
    own CONNAME."""
    files = files or file_paths(topology)
    return ["crtmqm", "-lc", "-p", str(qm.port), "-ii", files["ini"], "-ic", files["mqsc"],
            "-iv", f"CONNAME={qm.conname}", qm.name]


def crtmqm(topology: TopologySpec, qm: QueueManager,
           files: dict[str, str] | None = None) -> str:
    """The ``crtmqm`` line as document 000 prints it (a shell needs the CONNAME quoted: run
    ``shlex.join(crtmqm_args(...))``)."""
    return " ".join(crtmqm_args(topology, qm, files))


def strmqm(topology: TopologySpec, qm: QueueManager) -> str:
    """Start a queue manager in its own systemd slice capped at ``cpu_per_member`` cores (the
    document's cgroup per QM); the slice's quota is set first, idempotently. Both need root:
    with ``ibmmq.sudo`` they run through ``sudo -n`` (never a password prompt) and the queue
    manager is started as ``ibmmq.mq_user``."""
    if topology.cpu_per_member is None:
        return f"strmqm {qm.name}"
    mq = _mq(topology)
    slice_ = mq.cgroup_slice.format(qm=qm.name)
    quota = f"CPUQuota={topology.cpu_per_member * 100:g}%"
    root, user = ("sudo -n ", f" --uid={mq.mq_user}") if mq.sudo else ("", "")
    return (f"{root}systemctl set-property --runtime {slice_} {quota} && "
            f"{root}systemd-run --scope --slice={slice_} "
            f"--unit={shlex.quote(qm.name + '-start')}{user} strmqm {qm.name}")


def endmqm(qm: QueueManager, kill: bool = False) -> str:
    """``endmqm -r``: end and tell reconnectable clients to move to the other members (the
    document's scale-in); ``kill``: ``endmqm -i`` (immediate, for fault injection)."""
    return f"endmqm {'-i' if kill else '-r'} {qm.name}"


def dspmq(qm: QueueManager) -> str:
    """The status command whose ``STATUS(...)`` says whether the queue manager runs."""
    return f"dspmq -m {qm.name}"


def dltmqm(qm: QueueManager) -> str:
    """Delete a queue manager (after ``endmqm -i``), for ``surge down``."""
    return f"dltmqm {qm.name}"


def parse_dspmq(output: str) -> str | None:
    """``QMNAME(UC01QM01)   STATUS(Running)`` -> ``Running`` (None if there is no status)."""
    marker = "STATUS("
    start = output.find(marker)
    if start < 0:
        return None
    end = output.find(")", start)
    return output[start + len(marker):end] if end > start else None


def ccdt(topology: TopologySpec) -> dict:
    """The JSON CCDT: one ``clientConnection`` channel entry per queue manager, all with the
    application channel's name and the QM group as ``queueManager`` (applications connect to
    ``*UC01QM`` and any running member will do), with only the documented keys."""
    mq = _mq(topology)
    management = {"affinity": mq.affinity, "clientWeight": mq.client_weight,
                  "defaultReconnect": mq.reconnect, "sharingConversations": mq.sharecnv}
    return {"channel": [{
        "name": mq.channel,
        "type": "clientConnection",
        "clientConnection": {"connection": [{"host": qm.host.name, "port": qm.port}],
                             "queueManager": mq.qm_group},
        "connectionManagement": management,
    } for qm in queue_managers(topology)]}


def ccdt_text(topology: TopologySpec) -> str:
    """The CCDT as the file clients read (``MQCCDTURL=file:///nfs1/UC01.json``)."""
    return json.dumps(ccdt(topology), indent=2) + "\n"


def _mq(topology: TopologySpec) -> MqSpec:
    if topology.ibmmq is None:
        raise ValueError(f"topology {topology.name} has no ibmmq section")
    return topology.ibmmq


def group_endpoint(mq: MqSpec) -> str:
    """What every worker connects to: ``*<qm_group>`` (``*UC01QM``), any queue manager of the
    group that the CCDT lists, as document 000's applications do; with reconnect the queue
    managers of a uniform cluster move the applications between them."""
    return f"*{mq.qm_group}"


def client_settings(topology: TopologySpec) -> dict[str, Any]:
    """The MQ driver's connection settings (:class:`drivers.mq.settings.MqSettings` fields)
    for an ``ibmmq`` topology: the queue manager group, its channel, the CCDT the SSH
    placement writes, reconnect and the APPLTAGs."""
    mq = topology.ibmmq
    if mq is None:
        return {}
    ccdt = f"file://{mq.files_dir.rstrip('/')}/{mq.ccdt_file}" if topology.placement == "ssh" \
        else ""
    return {"queue_manager": f"*{mq.qm_group}", "channel": mq.channel, "ccdt_url": ccdt,
            "reconnect": mq.reconnect, "appltag_sender": mq.appltag_sender,
            "appltag_receiver": mq.appltag_receiver}
