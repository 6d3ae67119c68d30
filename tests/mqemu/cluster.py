"""Cluster queues and workload balancing of an EMULATED queue manager (tests only; NOT IBM MQ).

A mixin of ``qmgr.QueueManager`` with its MQSC commands:

- ``DEFINE QLOCAL(Q) CLUSTER(C) [DEFBIND(OPEN|NOTFIXED|GROUP)] [CLWLUSEQ(LOCAL|ANY|QMGR)]``
  makes this queue manager's instance of cluster queue Q; the instances are announced beside
  the queue manager's entry in the peers directory (``<name>.clusq``), the emulator's stand-in
  for the full repositories. ``DISPLAY QCLUSTER`` lists the instances this queue manager can
  see (its own and those of the running members of its clusters), ``DISPLAY QLOCAL ... CLUSTER``
  a local queue's cluster attributes.
- MQOPEN for output of a queue name with cluster instances chooses among them with MQ's
  cluster workload management algorithm, equal weights and priorities ("The cluster workload
  management algorithm"): a local instance is the only target when its CLWLUSEQ (or the queue
  manager's, LOCAL, for QMGR) is LOCAL; otherwise every instance of a running member is a
  candidate and the least recently chosen destination wins (a sequence number per destination
  queue manager, raised at each choice whatever the queue, as document 002's 8.4.3 describes;
  ties by name). mqi.MQOO_BIND_ON_OPEN (and GROUP: no message groups here) chooses once at
  MQOPEN, mqi.MQOO_BIND_NOT_FIXED at every MQPUT, MQOO_BIND_AS_Q_DEF as DEFBIND says.
- A message for another member's instance goes onto that member's transmission queue and the
  MQPUT completes (MQCC_OK, the remote queue manager in the PMO's ResolvedQMgrName); a
  channel thread per member delivers it, MQMD unchanged (MsgId and all), through the member's
  admin port (``PUT CLUSMSG``). A member that stops is no longer chosen; messages put not
  fixed that wait for it are chosen anew ("the exit is called again" in "Writing and compiling
  cluster workload exits"), bound ones wait for it.
- In a uniform cluster a connection made with MQCNO_RECONNECT may not open a cluster queue for
  output bound on open (explicitly or by DEFBIND): MQRC_RECONNECT_INCOMPATIBLE (2547, whose
  page says so), since balancing may move it away from the instance it was bound to.
- MQINQ on a handle resolved to a remote instance only: the attributes MQ keeps for a cluster
  queue ("MQINQ and clusters"): MQIA_Q_TYPE is MQQT_CLUSTER, MQIA_DEF_BIND its DEFBIND, and a
  local-only selector such as MQIA_CURRENT_Q_DEPTH gives MQCC_WARNING with
  MQRC_SELECTOR_NOT_FOR_TYPE and MQIAV_NOT_APPLICABLE.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import mqi
from mca import PUT_OK, MessageChannel, message_line, receive
from mqi import PMO, get, put
from mqsc import COMMANDS, Command, command, not_found, wanted
from objects import Attributes, Handle, Message, Reply, fail
from peers import Peer, running

DEFBINDS = {"OPEN": mqi.MQBND_BIND_ON_OPEN, "NOTFIXED": mqi.MQBND_BIND_NOT_FIXED,
            "GROUP": mqi.MQBND_BIND_ON_GROUP}
REMOTE_SELECTORS = (mqi.MQIA_Q_TYPE, mqi.MQIA_DEF_BIND, mqi.MQCA_Q_NAME, mqi.MQCA_Q_MGR_NAME)
LOCAL = "LOCAL"  # this queue manager's own instance, as a destination
REFRESH_S = 1.0  # how long a lookup of the other members' instances is reused
RETRY_S = 0.5  # a channel that could not deliver tries again after this
BATCH = 200  # messages a channel sends before it reads their answers


@dataclass(frozen=True)
class Instance:
    """One queue manager's instance of a cluster queue."""

    qmgr: str
    cluster: str
    defbind: int
    peer: Peer | None = None  # None: this queue manager's own


class ClusterHandle(Handle):
    """An opened cluster queue: how it binds, and (bound on open) to which instance."""

    def __init__(self, name: str, options: int, bind: int, bound: Instance | None):
        super().__init__("queue", name, options)
        self.bind, self.bound = bind, bound

    def resolved(self, qmgr: str) -> tuple[str, str]:
        """Bound on open: the chosen instance's queue manager."""
        return self.name, self.bound.qmgr if self.bound else qmgr


@dataclass
class ClusterState:
    """This queue manager's cluster queues, destination sequence numbers and channels."""

    queues: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # cluster, bind, useq
    sequence: dict[str, int] = field(default_factory=dict)  # per destination queue manager
    seen: dict[str, tuple[float, list[Instance]]] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)


class Cluster:
    """The cluster side of the queue manager (a mixin of ``QueueManager``: it uses its
    ``name``, ``cond``, ``queues``, ``peers``, ``cluster``, ``_message``, ``_enqueue`` and
    ``_new_handle``)."""

    # -- MQSC --------------------------------------------------------------------------------

    def _define_cluster_queue(self, cmd: Command) -> list[str]:
        """DEFINE QLOCAL with CLUSTER/DEFBIND/CLWLUSEQ: the queue, then its cluster part."""
        bind = (cmd.attrs.get("DEFBIND") or "OPEN").upper()
        useq = (cmd.attrs.get("CLWLUSEQ") or "QMGR").upper()
        if bind not in DEFBINDS or useq not in ("LOCAL", "ANY", "QMGR"):
            return [f"AMQ8405E: DEFBIND(OPEN|NOTFIXED|GROUP) and CLWLUSEQ(LOCAL|ANY|QMGR) "
                    f"expected: DEFBIND({bind}) CLWLUSEQ({useq})."]
        out = DEFINE_QUEUE(self, cmd)
        if cmd.obj == "QLOCAL" and out[0].startswith("AMQ8006I"):
            if cmd.attrs.get("CLUSTER"):
                self.cluster.queues[cmd.name] = (cmd.attrs["CLUSTER"], DEFBINDS[bind], useq)
            else:
                self.cluster.queues.pop(cmd.name, None)
            self._publish_cluster_queues()
        return out

    def _delete_cluster_queue(self, cmd: Command) -> list[str]:
        out = DELETE_QUEUE(self, cmd)
        if cmd.name not in self.queues and self.cluster.queues.pop(cmd.name, None):
            self._publish_cluster_queues()
        return out

    def _display_local_queues(self, cmd: Command) -> list[str]:
        """DISPLAY QLOCAL as before, with CLUSTER, DEFBIND and CLWLUSEQ when asked for (or when
        the queue is in a cluster)."""
        lines = DISPLAY_QUEUES(self, cmd)
        asked = {"CLUSTER", "DEFBIND", "CLWLUSEQ", "ALL"} & set(cmd.attrs)
        out = []
        for line in lines:
            name = line[6:line.find(")")] if line.startswith("QUEUE(") else ""
            cluster, bind, useq = self.cluster.queues.get(
                name, ("", mqi.MQBND_BIND_ON_OPEN, "QMGR"))
            if name and (asked or cluster):
                line += (f" CLUSTER({cluster}) DEFBIND({_bind_name(bind)}) CLWLUSEQ({useq})")
            out.append(line)
        return out

    @command("DISPLAY", "QCLUSTER")
    def _display_cluster_queues(self, cmd: Command) -> list[str]:
        """The cluster queue instances this queue manager knows: its own and the running
        members'."""
        names = {name for name in self.cluster.queues if wanted(cmd.name, name)}
        for peer in self._cluster_peers():
            names |= {name for name in _published(self.peers.directory, peer.name)
                      if wanted(cmd.name, name)}
        lines = []
        for name in sorted(names):
            for instance in self._instances(name, fresh=True):
                lines.append(f"QUEUE({name}) TYPE(QCLUSTER) CLUSTER({instance.cluster}) "
                             f"CLUSQMGR({instance.qmgr}) CLUSQT(QLOCAL) "
                             f"DEFBIND({_bind_name(instance.defbind)}) PUT(ENABLED)")
        return lines or not_found(cmd.name)

    @command("PUT", "CLUSMSG")
    def _receive_cluster_message(self, cmd: Command) -> list[str]:
        """A message another member's channel delivers (not an MQSC command: the emulator's
        cluster channel): onto the local instance, MQMD as sent."""
        return receive(self, cmd)

    # -- open, put, inquire (called from qmgr.py) ----------------------------------------------

    def open_cluster(self, conn, od: bytearray, name: str, options: int,
                     wanted_hobj: int) -> Reply | None:
        """MQOPEN of ``name`` resolved by the cluster, or None where it is an ordinary open:
        input, browse or set (the local instance), a local queue outside any cluster, a
        local instance that CLWLUSEQ makes the only target, or no instance anywhere."""
        if options & (mqi.MQOO_INPUT | mqi.MQOO_BROWSE | mqi.MQOO_SET):
            return None
        local = name in self.queues
        if local and (name not in self.cluster.queues or self._local_only(name)):
            return None
        instances = self._instances(name, fresh=True)
        if not instances:
            return None
        bind = options & (mqi.MQOO_BIND_ON_OPEN | mqi.MQOO_BIND_NOT_FIXED | mqi.MQOO_BIND_ON_GROUP)
        if not bind:
            defbind = next((i.defbind for i in instances if i.peer is None), instances[0].defbind)
            bind = mqi.MQOO_BIND_NOT_FIXED if defbind == mqi.MQBND_BIND_NOT_FIXED \
                else mqi.MQOO_BIND_ON_OPEN
        if bind != mqi.MQOO_BIND_NOT_FIXED and options & mqi.MQOO_OUTPUT and \
                conn.options & mqi.MQCNO_RECONNECT and self.balancer.cluster:
            return fail(mqi.MQRC_RECONNECT_INCOMPATIBLE)  # a fixed bind can't follow a move
        if not options & mqi.MQOO_OUTPUT:  # inquire only: no destination to choose
            if local:
                return None
            bind, bound = mqi.MQOO_BIND_ON_OPEN, instances[0]
        else:
            bound = None if bind == mqi.MQOO_BIND_NOT_FIXED else self._choose(instances)
        if local and options & mqi.MQOO_OUTPUT:
            self.queues[name].opens_out += 1  # MQCLOSE takes it back
        return self._new_handle(conn, ClusterHandle(name, options, bind, bound), od,
                                wanted_hobj)

    def put_cluster(self, conn, handle: ClusterHandle, md_in: bytes, pmo_in: bytes,
                    body: bytes) -> Reply:
        """MQPUT to an opened cluster queue: the bound instance, or one chosen now."""
        pmo = bytearray(pmo_in)
        message = self._message(conn, md_in, pmo, body)
        instance = handle.bound
        if instance is None:
            instances = [i for i in self._instances(handle.name) if _running(i)]
            if not instances:
                return fail(2189)  # MQRC_CLUSTER_RESOLUTION_ERROR
            instance = self._choose(instances)
        if instance.peer is None:
            queue = self.queues.get(handle.name)
            if queue is None:
                return fail(mqi.MQRC_UNKNOWN_OBJECT_NAME)
            reason = self._enqueue(conn, queue, message,
                                   bool(get(PMO, pmo, "Options") & mqi.MQPMO_SYNCPOINT))
            if reason:
                return fail(reason)
        else:
            self._channel(instance.peer).send(handle.name, message,
                                              handle.bound is None)
        put(PMO, pmo, "ResolvedQName", handle.name.encode())
        put(PMO, pmo, "ResolvedQMgrName", instance.qmgr.encode())
        return mqi.MQCC_OK, 0, [bytes(message.md[:len(md_in)]), bytes(pmo)]

    def cluster_attributes(self, handle: Handle) -> Attributes | None:
        """What MQINQ answers for a cluster queue with no local instance (else None: the local
        queue's attributes, as MQ gives them)."""
        if not isinstance(handle, ClusterHandle) or handle.name in self.queues:
            return None
        instances = self._instances(handle.name)
        return {mqi.MQCA_Q_NAME: handle.name.encode().ljust(48),
                mqi.MQCA_Q_MGR_NAME: self.name.encode().ljust(48),
                mqi.MQIA_Q_TYPE: mqi.MQQT_CLUSTER,
                mqi.MQIA_DEF_BIND: instances[0].defbind if instances else mqi.MQBND_BIND_ON_OPEN,
                mqi.MQIA_CURRENT_Q_DEPTH: None, mqi.MQIA_MAX_Q_DEPTH: None,
                mqi.MQIA_OPEN_INPUT_COUNT: None, mqi.MQIA_OPEN_OUTPUT_COUNT: None}

    # -- the workload management algorithm -----------------------------------------------------

    def _local_only(self, name: str) -> bool:
        """CLWLUSEQ LOCAL (or QMGR, the queue manager's being LOCAL): MQPUT's only target is
        the local instance."""
        return self.cluster.queues.get(name, ("", 0, "LOCAL"))[2] in ("LOCAL", "QMGR")

    def _choose(self, instances: list[Instance]) -> Instance:
        """The least recently chosen destination (equal weights and priorities), which then
        becomes the most recently chosen."""
        sequence = self.cluster.sequence
        chosen = min(instances, key=lambda i: (sequence.get(i.qmgr, 0), i.qmgr))
        sequence[chosen.qmgr] = max(sequence.values(), default=0) + 1
        return chosen

    def _instances(self, name: str, fresh: bool = False) -> list[Instance]:
        """Every instance of cluster queue ``name`` in this queue manager's clusters: its own
        and the running members' (looked up again after ``REFRESH_S`` or when ``fresh``)."""
        seen = self.cluster.seen.get(name)
        if seen is None or fresh or time.monotonic() - seen[0] > REFRESH_S:
            found = []
            own = self.cluster.queues.get(name)
            if own is not None and name in self.queues:
                found.append(Instance(self.name, own[0], own[1]))
            clusters = set(self.peers.me.clusters)
            for peer in self._cluster_peers():
                published = _published(self.peers.directory, peer.name).get(name)
                if published and published["cluster"] in clusters & set(peer.clusters):
                    found.append(Instance(peer.name, published["cluster"], published["defbind"],
                                          peer))
            seen = self.cluster.seen[name] = (time.monotonic(), found)
        return seen[1]

    def _cluster_peers(self) -> list[Peer]:
        return [p for p in self.peers.others() if set(p.clusters) & set(self.peers.me.clusters)]

    def _publish_cluster_queues(self) -> None:
        """Announce this queue manager's cluster queues to the others (``<name>.clusq``)."""
        directory = self.peers.directory
        self.cluster.seen.clear()
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.name}.clusq"
        spare = path.with_suffix(".clusq-new")
        spare.write_text(json.dumps({name: {"cluster": c, "defbind": b}
                                     for name, (c, b, _) in self.cluster.queues.items()}))
        os.replace(spare, path)

    def _channel(self, peer: Peer) -> Channel:
        channel = self.cluster.channels.get(peer.name)
        if channel is None or channel.peer != peer:
            channel = Channel(self, peer)
            self.cluster.channels[peer.name] = channel
        return channel

    def rechoose(self, name: str, message: Message) -> None:
        """A message put not fixed whose member stopped before it arrived: chosen again among
        the running instances (the local one included); kept for its channel if there is
        none."""
        with self.cond:
            instances = [i for i in self._instances(name, fresh=True) if _running(i)]
            if not instances:
                return
            instance = self._choose(instances)
            queue = self.queues.get(name)
            if instance.peer is None and queue is not None:
                queue.add(message)
                self.cond.notify_all()
            elif instance.peer is not None:
                self._channel(instance.peer).send(name, message, True)


class Channel(MessageChannel):
    """A cluster-sender channel to one member: its transmission queue (kept by the channel,
    not a queue of the queue manager's) and the thread that delivers it, in order."""

    retry_s = RETRY_S

    def __init__(self, qm: Any, peer: Peer):
        super().__init__(f"clussdr-{peer.name}")
        self.qm, self.peer = qm, peer
        self.pending: deque[tuple[str, Message, bool]] = deque()
        self.cond = threading.Condition()
        self.start()

    def send(self, queue: str, message: Message, not_fixed: bool) -> None:
        """Put ``message`` for ``queue`` on the transmission queue."""
        with self.cond:
            self.pending.append((queue, message, not_fixed))
            self.cond.notify()

    def depth(self) -> int:
        """Messages waiting to be delivered."""
        with self.cond:
            return len(self.pending)

    def next_batch(self) -> list[tuple[str, Message, bool]]:
        """The first :data:`BATCH` messages waiting, once there are any."""
        with self.cond:
            while not self.pending:
                self.cond.wait()
            return list(itertools.islice(self.pending, BATCH))

    def addresses(self) -> list[tuple[str, int]]:
        """The member's listener."""
        return [(self.peer.host, self.peer.port)]

    def lines(self, batch: list[tuple[str, Message, bool]]) -> list[str]:
        """``PUT CLUSMSG`` of each message."""
        return [message_line("CLUSMSG", queue, message) for queue, message, _ in batch]

    def delivered(self, batch: list[tuple[str, Message, bool]], answers: list[str]) -> bool:
        """Answered, so off the transmission queue; one the member could not take is dropped
        with a line in the log (MQ would use the dead-letter queue)."""
        for (queue, _, _), answer in zip(batch, answers, strict=True):
            if not answer.startswith(PUT_OK):
                print(f"cluster channel to {self.peer.name}: {queue}: {answer}",
                      file=sys.stderr, flush=True)
        with self.cond:
            for _ in batch:
                self.pending.popleft()
        return True

    def failed(self, error: OSError) -> None:
        """The member ended: its messages put not fixed are chosen again; bound ones wait."""
        if running(self.peer.pid):
            return
        with self.cond:
            moving = [(q, m) for q, m, not_fixed in self.pending if not_fixed]
            kept = [entry for entry in self.pending if not entry[2]]
            self.pending.clear()
            self.pending.extend(kept)
        for queue, message in moving:
            self.qm.rechoose(queue, message)


def _published(directory, qmgr: str) -> dict[str, dict]:
    """The cluster queues member ``qmgr`` announced."""
    if directory is None:
        return {}
    with contextlib.suppress(OSError, ValueError):
        return json.loads((directory / f"{qmgr}.clusq").read_text(encoding="utf-8"))
    return {}


def _running(instance: Instance) -> bool:
    return instance.peer is None or running(instance.peer.pid)


def _bind_name(bind: int) -> str:
    return {v: k for k, v in DEFBINDS.items()}[bind]


# The commands this module takes over from mqsc.Mqsc, which its own versions call.
DEFINE_QUEUE = COMMANDS["DEFINE", "QLOCAL"]
DELETE_QUEUE = COMMANDS["DELETE", "QLOCAL"]
DISPLAY_QUEUES = COMMANDS["DISPLAY", "QLOCAL"]
command("DEFINE", "QLOCAL")(Cluster._define_cluster_queue)
command("DELETE", "QLOCAL")(Cluster._delete_cluster_queue)
command("DISPLAY", "QLOCAL")(Cluster._display_local_queues)
