"""Two IBM MQ queue managers joined by sender and receiver channels (a topology's ``link`` of
kind ``channel``; document 004's messages moved between queue managers), as text: each queue
manager's ``-ic`` file, the commands that start and stop its sender, and the status command.

Side a's queue manager (QMA, requesters) and side b's (QMB, servers) each hold a transmission
queue named after the other and a sender channel ``<own>.TO.<other>`` emptying it into the
other's receiver channel of that name. On QMA each request queue is a remote queue definition
naming QMB's local queue and its transmission queue, and each reply queue (``PAIR1.REPLY`` of
``PAIR1``, :func:`~orchestrator.specs.mq.reply_queue_name`) is local. QMB holds the request
queues; a responder replies to the requester's ``ReplyToQ`` on its ``ReplyToQMgr`` (QMA, which
the queue manager fills in at the put), which QMB resolves to its transmission queue named QMA
("Name resolution" in the MQ reference). Pure functions of the topology, as
:mod:`topologies.mq.uniform`.
"""

from __future__ import annotations

from typing import Any

from orchestrator.specs.mq import reply_queue_name
from orchestrator.specs.mqtopics import mqsc_lines, mqsc_name
from orchestrator.specs.topology import LINK_SIDES, LinkSpec, TopologySpec
from topologies.mq import uniform
from topologies.mq.uniform import QueueManager

CHSTATUS = "display chstatus(*) status msgs\n"
"""Every channel's status and messages sent (``DISPLAY CHSTATUS``)."""


def link_of(topology: TopologySpec) -> LinkSpec:
    """The topology's link (channels)."""
    if topology.link is None or topology.link.kind != "channel":
        raise ValueError(f"topology {topology.name} has no link of kind channel")
    return topology.link


def pair(topology: TopologySpec) -> tuple[QueueManager, QueueManager]:
    """Side a's queue manager and side b's."""
    qms = uniform.queue_managers(topology)
    return qms[0], qms[1]


def other(topology: TopologySpec, qm: QueueManager) -> QueueManager:
    """The queue manager at the other end of ``qm``'s channels."""
    qma, qmb = pair(topology)
    return qmb if qm.index == qma.index else qma


def sender(qm: QueueManager, far: QueueManager) -> str:
    """The sender channel from ``qm`` to ``far`` (and ``far``'s receiver): ``LQ01.TO.LQ02``."""
    return f"{qm.name}.TO.{far.name}"


def reply_names(topology: TopologySpec) -> set[str]:
    """The topology's queues that are another's reply queue: local on side a, absent on b."""
    names = [name for queue in topology.queues for name in queue.names]
    return {name for name in names if any(reply_queue_name(n) == name for n in names)}


def request_names(topology: TopologySpec) -> list[str]:
    """The topology's other queues: remote on side a, local on side b."""
    replies = reply_names(topology)
    return [name for queue in topology.queues for name in queue.names if name not in replies]


def mqsc_text(topology: TopologySpec, qm: QueueManager) -> str:
    """``qm``'s ``-ic`` file, one command a line: its application channel, the transmission
    queue to the other queue manager, its sender and receiver channels, and its queues."""
    link, mq = link_of(topology), topology.ibmmq
    assert mq is not None
    far = other(topology, qm)
    side_a = qm.index == 0
    lines = [*uniform.application_lines(mq), "* Transmission queue and channels",
             f"define qlocal({far.name}) usage(xmitq) maxdepth({link.xmitq_maxdepth}) replace",
             f"define channel({sender(qm, far)}) chltype(sdr) trptype(tcp) "
             f"conname('{far.conname}') xmitq({far.name}) npmspeed({link.npmspeed}) "
             f"batchsz({link.batch_size}) replace",
             f"define channel({sender(far, qm)}) chltype(rcvr) trptype(tcp) replace",
             f"set chlauth('{sender(far, qm)}') type(blockuser) userlist('nobody') "
             f"action(replace)",
             "* Queues"]
    if side_a:
        lines += [f"define qremote({mqsc_name(name)}) rname({mqsc_name(name)}) "
                  f"rqmname({far.name}) xmitq({far.name}) replace"
                  for name in request_names(topology)]
        lines += [f"define qlocal({mqsc_name(name)}) replace"
                  for name in sorted(reply_names(topology))]
    else:
        lines += [f"define qlocal({mqsc_name(name)}) replace" for name in request_names(topology)]
        lines += mqsc_lines(topology)
    return "\n".join(lines) + "\n"


def ini_text(topology: TopologySpec) -> str:
    """The ``-ii`` file: the custom stanzas only (no cluster)."""
    assert topology.ibmmq is not None
    return "\n".join(["# Custom entries", *uniform.stanza_lines(topology.ibmmq)]) + "\n"


def file_paths(topology: TopologySpec, qm: QueueManager) -> dict[str, str]:
    """Where ``qm``'s files live: the shared ``-ii`` file, its own ``-ic`` file and the MQSC
    that starts its sender."""
    assert topology.ibmmq is not None
    directory = topology.ibmmq.files_dir.rstrip("/")
    return {"ini": uniform.file_paths(topology)["ini"], "mqsc": f"{directory}/{qm.name}.mqsc",
            "link": f"{directory}/{qm.name}.link.mqsc"}


def start_mqsc(topology: TopologySpec, qm: QueueManager) -> str:
    """Start ``qm``'s sender channel."""
    return f"start channel({sender(qm, other(topology, qm))})\n"


def stop_mqsc(topology: TopologySpec, qm: QueueManager) -> str:
    """Stop ``qm``'s sender channel once its current batch is done (messages put meanwhile
    wait on its transmission queue)."""
    return f"stop channel({sender(qm, other(topology, qm))})\n"


def start_command(topology: TopologySpec, qm: QueueManager) -> str:
    """The command that starts ``qm``'s sender, from its uploaded file."""
    return f"runmqsc {qm.name} < {file_paths(topology, qm)['link']}"


def endpoint(topology: TopologySpec, qm: QueueManager) -> str:
    """Where the workers of ``qm``'s side connect: that queue manager by its own listener and
    the application channel (no group, no CCDT: a worker stays on its side)."""
    assert topology.ibmmq is not None
    return f"mq://{qm.conname}/{qm.name}?channel={topology.ibmmq.channel}"


def client_settings(topology: TopologySpec) -> dict[str, Any]:
    """The MQ driver's settings: :func:`uniform.client_settings` without the group and the
    CCDT (each endpoint names its queue manager and its connection)."""
    return {**uniform.client_settings(topology), "queue_manager": "", "ccdt_url": ""}


def route_lines(topology: TopologySpec) -> list[str]:
    """Each channel in words, for ``surge plan``."""
    link = link_of(topology)
    qma, qmb = pair(topology)
    requests = ", ".join(request_names(topology))
    replies = ", ".join(sorted(reply_names(topology))) or "none"
    speed = f"npmspeed {link.npmspeed}, batchsz {link.batch_size}"
    return [f"{sender(qma, qmb)}: side {LINK_SIDES[0]}'s transmission queue {qmb.name} -> "
            f"{qmb.name}'s queues ({requests}; on {qma.name} remote queue definitions), {speed}",
            f"{sender(qmb, qma)}: side {LINK_SIDES[1]}'s transmission queue {qma.name} -> "
            f"{qma.name}'s reply queues ({replies}), named by each reply's ReplyToQMgr, {speed}"]


def parse_chstatus(output: str) -> dict[str, str]:
    """``DISPLAY CHSTATUS`` output -> {channel: status in lower case}; a channel without status
    is absent (``AMQ8420I: Channel Status not found.``)."""
    states, channel = {}, None
    for token in output.replace("\n", " ").split():
        if token.startswith("CHANNEL(") and token.endswith(")"):
            channel = token[8:-1]
        elif token.startswith("STATUS(") and token.endswith(")") and channel:
            states[channel] = token[7:-1].lower()
    return states
