"""An EMULATED queue manager for tests (NOT IBM MQ): one process, listening on a loopback port,
serving the MQI verbs libmqm.c forwards and an admin line protocol (a small MQSC subset).

Run: ``python tests/mqemu/qmgr.py --name QM1 --port 9401 --data DIR [--user U --password P]
[--mqsc FILE]``. What it does and where it differs from MQ: tests/mqemu/README.md.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import mqi  # noqa: E402  (run as a script: the module beside this file)
from channels import Channels, ChannelState  # noqa: E402
from cluster import Cluster, ClusterHandle, ClusterState  # noqa: E402
from mqi import CD, CNO, GMO, MD, OD, PMO, SD, get, put, text  # noqa: E402
from mqsc import Mqsc  # noqa: E402
from objects import (  # noqa: E402
    FAILED,
    Attributes,
    Connection,
    Handle,
    Message,
    Queue,
    Reply,
    Subscription,
    answer_inquiry,
    fail,
    topic_matches,
)
from peers import Peer, Peers  # noqa: E402
from properties import PropertyVerbs  # noqa: E402
from rebalance import BALANCE_TIMEOUT_S, INTERVAL_S, MOVE_CC, Balancer  # noqa: E402
from remote import RemoteDefinition, RemoteHandle, RemoteQueues  # noqa: E402
from topics import TopicObjects  # noqa: E402

DESCRIPTION = "EMULATED queue manager for tests, NOT IBM MQ"
"""Its DESCR (MQCA_Q_MGR_DESC): how surge tells a run on the emulator from one on MQ."""
VERSION, COMMAND_LEVEL = "09040000", 940  # the MQ level whose behaviour it follows


class QueueManager(Cluster, RemoteQueues, Channels, Mqsc, PropertyVerbs, TopicObjects):
    """The emulated queue manager's state; every verb runs under one condition's lock. Its
    MQSC commands: :class:`mqsc.Mqsc`; cluster queues: :class:`cluster.Cluster`; other
    queue managers' queues: :class:`remote.RemoteQueues`; sender and receiver channels:
    :class:`channels.Channels`; message handles and properties:
    :class:`properties.PropertyVerbs`; topic objects: :class:`topics.TopicObjects`."""

    def __init__(self, name: str, user: str = "", password: str = "",
                 peers: Peers | None = None):
        self.name = name
        self.peers = peers or Peers("", Peer(name, "127.0.0.1", 0, os.getpid()))
        self.balancer = Balancer(self)  # uniform-cluster application balancing (rebalance.py)
        self.user, self.password = user, password
        self.cond = threading.Condition()
        self.queues: dict[str, Queue] = {}
        self.subs: dict[str, Subscription] = {}
        self.topic_objects: dict[str, str] = {"SYSTEM.BASE.TOPIC": ""}
        self.remote_defs: dict[str, RemoteDefinition] = {}
        self.defxmitq = ""  # ALTER QMGR DEFXMITQ
        self.channels = ChannelState()
        self.conns: dict[int, Connection] = {}
        self.cluster = ClusterState()
        self.numbers = itertools.count(1)
        self.ids = itertools.count(1)
        self.boot = struct.pack(">I", int(time.time()) & 0xFFFFFFFF)
        self.queues["SYSTEM.DEFAULT.LOCAL.QUEUE"] = Queue("SYSTEM.DEFAULT.LOCAL.QUEUE")
        self.queues["SYSTEM.DEFAULT.MODEL.QUEUE"] = Queue("SYSTEM.DEFAULT.MODEL.QUEUE", model=True)

    # -- ids and names -----------------------------------------------------------------------

    def new_id(self) -> bytes:
        """A 24-byte MsgId/CorrelId unique in this queue manager: 'AMQ ', name, boot, counter."""
        return (b"AMQ " + self.name.encode()[:12].ljust(12, b"\0") + self.boot
                + struct.pack(">I", next(self.ids)))

    def dynamic_name(self, template: str) -> str:
        prefix = template[:-1] if template.endswith("*") else template
        if template.endswith("*") or not template:
            return (prefix or "AMQ.") + f"{int(time.time()):08X}{next(self.ids):08X}"
        return template

    # -- connections -------------------------------------------------------------------------

    def connx(self, conn_number: int, f: list[bytes]) -> tuple[Reply, Connection | None]:
        name, cno, cd, user, password, _ccdt, conname = f[:7]
        wanted = name.decode("latin-1").rstrip(" \0")
        if wanted and not wanted.startswith("*") and wanted != self.name:
            return fail(mqi.MQRC_Q_MGR_NAME_ERROR), None
        if self.user and (user.decode() != self.user or password.decode() != self.password):
            return fail(mqi.MQRC_NOT_AUTHORIZED), None
        appl = text(get(CNO, cno, "ApplName")) if (get(CNO, cno, "Version") or 0) >= 7 else ""
        conn = Connection(conn_number, appl or "python", user.decode() or "emulated",
                          conname.decode(), options=get(CNO, cno, "Options") or 0)
        if cd and get(CD, cd, "ChannelType") not in (None, 6):
            return fail(2277), None  # MQRC_CD_ERROR: not a client-connection channel
        with self.cond:
            self.conns[conn.number] = conn
        return (mqi.MQCC_OK, 0, [self.name.encode()]), conn

    def disconnect(self, conn: Connection, commit: bool) -> None:
        """MQDISC (commit, as MQ on Multiplatforms does) or a lost connection (back out)."""
        with self.cond:
            self._settle(conn, commit)
            for hobj in list(conn.handles):
                self._close(conn, hobj, 0)
            for sub in [s for s in self.subs.values() if not s.durable and s.owner == conn.number]:
                self._drop_sub(sub)
            self.conns.pop(conn.number, None)

    # -- dispatch ----------------------------------------------------------------------------

    def call(self, conn: Connection, verb: str, f: list[bytes]) -> Reply:
        handler = getattr(self, "verb_" + verb.lower(), None)
        if handler is None:
            return fail(mqi.MQRC_FUNCTION_NOT_SUPPORTED)
        with self.cond:
            return self.balancer.move_request(conn) or handler(conn, f)

    def _handle(self, conn: Connection, hobj: int) -> Handle | None:
        return conn.handles.get(hobj)

    # -- open / close ------------------------------------------------------------------------

    def verb_open(self, conn: Connection, f: list[bytes]) -> Reply:
        od, objstring, (options,) = bytearray(f[0]), f[1], struct.unpack("<i", f[2])
        # A reconnecting client reopens its handles under their old numbers (4th field).
        wanted = struct.unpack("<i", f[3])[0] if len(f) > 3 else 0
        if wanted in conn.handles:
            return fail(mqi.MQRC_HOBJ_ERROR)
        kind = get(OD, od, "ObjectType")
        if kind == mqi.MQOT_TOPIC:
            topic, reason = self.topic_string(text(get(OD, od, "ObjectName")),
                                              objstring.decode("utf-8"))
            if topic is None:
                return fail(reason)
            if options & (mqi.MQOO_INPUT | mqi.MQOO_BROWSE):
                return fail(mqi.MQRC_FUNCTION_NOT_SUPPORTED)  # managed subscription via MQOPEN
            return self._new_handle(conn, Handle("topic", topic, options), od, wanted)
        if kind == mqi.MQOT_Q_MGR:
            return self._new_handle(conn, Handle("qmgr", self.name, options), od, wanted)
        if kind != mqi.MQOT_Q:
            return fail(mqi.MQRC_OBJECT_TYPE_ERROR)
        qmgr, name = text(get(OD, od, "ObjectQMgrName")), text(get(OD, od, "ObjectName"))
        routed = self.open_remote(conn, od, name, qmgr, options, wanted) or \
            self.open_cluster(conn, od, name, options, wanted)
        if routed is not None:
            return routed
        queue = self.queues.get(name)
        if queue is None:
            return fail(mqi.MQRC_UNKNOWN_OBJECT_NAME)
        if queue.model:
            dynamic = self.dynamic_name(text(get(OD, od, "DynamicQName")))
            if dynamic in self.queues:
                return fail(2100)  # MQRC_OBJECT_ALREADY_EXISTS
            queue = self.queues[dynamic] = Queue(dynamic, temporary_of=conn.number)
            put(OD, od, "ObjectName", dynamic.encode())
        if options & mqi.MQOO_INPUT:
            queue.opens_in += 1
        if options & mqi.MQOO_OUTPUT:
            queue.opens_out += 1
        return self._new_handle(conn, Handle("queue", queue.name, options), od, wanted)

    def _new_handle(self, conn: Connection, handle: Handle, od: bytearray,
                    wanted: int = 0) -> Reply:
        hobj = wanted or next(conn.next_handle)
        while not wanted and hobj in conn.handles:
            hobj = next(conn.next_handle)
        conn.handles[hobj] = handle
        if handle.kind == "queue":
            queue, qmgr = handle.resolved(self.name)
            put(OD, od, "ResolvedQName", queue.encode())
            put(OD, od, "ResolvedQMgrName", qmgr.encode())
        put(OD, od, "ResolvedType", {"queue": mqi.MQOT_Q, "topic": mqi.MQOT_TOPIC,
                                     "qmgr": mqi.MQOT_Q_MGR}[handle.kind])
        return mqi.MQCC_OK, 0, [struct.pack("<i", hobj), bytes(od)]

    def verb_close(self, conn: Connection, f: list[bytes]) -> Reply:
        (hobj,), (options,) = struct.unpack("<i", f[0]), struct.unpack("<i", f[1])
        if hobj not in conn.handles:
            return fail(mqi.MQRC_HOBJ_ERROR)
        self._close(conn, hobj, options)
        return mqi.MQCC_OK, 0, []

    def _close(self, conn: Connection, hobj: int, options: int) -> None:
        handle = conn.handles.pop(hobj)
        if handle.kind == "sub":
            sub = self.subs.get(handle.name)
            if sub and (not sub.durable or options & mqi.MQCO_REMOVE_SUB):
                self._drop_sub(sub)
            return
        queue = self.queues.get(handle.opened_queue or "")
        if queue is None:
            return
        if handle.options & mqi.MQOO_INPUT:
            queue.opens_in -= 1
        if handle.options & mqi.MQOO_OUTPUT:
            queue.opens_out -= 1
        if queue.temporary_of == conn.number and not any(
                h.kind == "queue" and h.name == queue.name for h in conn.handles.values()):
            self.queues.pop(queue.name, None)  # a temporary dynamic queue ends with its creator

    def _drop_sub(self, sub: Subscription) -> None:
        self.subs.pop(sub.name, None)
        if sub.managed:
            self.queues.pop(sub.dest, None)

    # -- put ---------------------------------------------------------------------------------

    def _message(self, conn: Connection, md_in: bytes, pmo: bytes, body: bytes) -> Message:
        md = bytearray(md_in.ljust(mqi.MD_LENGTH, b"\0"))
        options = get(PMO, pmo, "Options")
        if options & mqi.MQPMO_NEW_MSG_ID or get(MD, md, "MsgId") == mqi.MQMI_NONE:
            put(MD, md, "MsgId", self.new_id())
        if options & mqi.MQPMO_NEW_CORREL_ID:
            put(MD, md, "CorrelId", self.new_id())
        if get(MD, md, "Priority") == mqi.MQPRI_PRIORITY_AS_Q_DEF:
            put(MD, md, "Priority", 0)
        if get(MD, md, "Persistence") == mqi.MQPER_PERSISTENCE_AS_Q_DEF:
            put(MD, md, "Persistence", 0)
        if text(get(MD, md, "ReplyToQ")) and not text(get(MD, md, "ReplyToQMgr")):
            put(MD, md, "ReplyToQMgr", self.name.encode())
        now = time.time()
        put(MD, md, "PutDate", time.strftime("%Y%m%d", time.gmtime(now)).encode())
        put(MD, md, "PutTime", (time.strftime("%H%M%S", time.gmtime(now))
                                + f"{int(now * 100) % 100:02d}").encode())
        put(MD, md, "PutApplName", conn.appl.encode()[:28])
        put(MD, md, "PutApplType", 6)  # MQAT_UNIX
        put(MD, md, "UserIdentifier", conn.user.encode()[:12])
        put(MD, md, "BackoutCount", 0)
        expiry = get(MD, md, "Expiry")
        expires = None if expiry == mqi.MQEI_UNLIMITED else time.monotonic() + expiry / 10
        return Message(md, body, expires)

    def _enqueue(self, conn: Connection, queue: Queue, message: Message, syncpoint: bool) -> int:
        if queue.depth() >= queue.maxdepth:
            return mqi.MQRC_Q_FULL
        if syncpoint:
            queue.uncommitted += 1
            conn.uow_puts.append((queue, message))
        else:
            queue.add(message)
            self.cond.notify_all()
        return 0

    def _put(self, conn: Connection, handle: Handle, md_in: bytes, pmo_in: bytes,
             body: bytes) -> Reply:
        if isinstance(handle, ClusterHandle):
            return self.put_cluster(conn, handle, md_in, pmo_in, body)
        if isinstance(handle, RemoteHandle):
            return self.put_remote(conn, handle, md_in, pmo_in, body)
        pmo = bytearray(pmo_in)
        options = get(PMO, pmo, "Options")
        syncpoint = bool(options & mqi.MQPMO_SYNCPOINT)
        message = self._message(conn, md_in, pmo, body)
        message.properties, reason = self.properties_to_put(conn, pmo)
        if reason:
            return fail(reason)
        if handle.kind == "topic":
            for sub in [s for s in self.subs.values() if topic_matches(s.topic, handle.name)]:
                queue = self.queues.get(sub.dest)
                if queue is None:
                    continue
                copy = Message(bytearray(message.md), body, message.expires, message.properties)
                put(MD, copy.md, "MsgId", self.new_id())
                put(MD, copy.md, "CorrelId", sub.correl_id)
                self._enqueue(conn, queue, copy, syncpoint)
        else:
            queue = self.queues.get(handle.name)
            if queue is None:
                return fail(mqi.MQRC_UNKNOWN_OBJECT_NAME)
            reason = self._enqueue(conn, queue, message, syncpoint)
            if reason:
                return fail(reason)
            put(PMO, pmo, "ResolvedQName", queue.name.encode())
            put(PMO, pmo, "ResolvedQMgrName", self.name.encode())
        self.after_put(conn, pmo, message.properties)
        return mqi.MQCC_OK, 0, [bytes(message.md[:len(md_in)]), bytes(pmo)]

    def verb_put(self, conn: Connection, f: list[bytes]) -> Reply:
        (hobj,) = struct.unpack("<i", f[0])
        handle = self._handle(conn, hobj)
        if handle is None or handle.kind not in ("queue", "topic"):
            return fail(mqi.MQRC_HOBJ_ERROR)
        if not handle.options & mqi.MQOO_OUTPUT:
            return fail(mqi.MQRC_NOT_OPEN_FOR_OUTPUT)
        return self._put(conn, handle, f[1], f[2], f[3])

    def verb_put1(self, conn: Connection, f: list[bytes]) -> Reply:
        cc, rc, fields = self.verb_open(conn, [f[0], f[1], struct.pack("<i", mqi.MQOO_OUTPUT)])
        if cc == FAILED:
            return cc, rc, fields
        (hobj,) = struct.unpack("<i", fields[0])
        try:
            return self._put(conn, conn.handles[hobj], f[2], f[3], f[4])
        finally:
            self._close(conn, hobj, 0)

    # -- get ---------------------------------------------------------------------------------

    def verb_get(self, conn: Connection, f: list[bytes]) -> Reply:
        (hobj,), md_in, gmo, (buflen,) = struct.unpack("<i", f[0]), f[1], bytearray(f[2]), \
            struct.unpack("<i", f[3])
        handle = self._handle(conn, hobj)
        if handle is None or handle.kind != "queue":
            return fail(mqi.MQRC_HOBJ_ERROR)
        if not handle.options & mqi.MQOO_INPUT:
            return fail(mqi.MQRC_NOT_OPEN_FOR_INPUT)
        options = get(GMO, gmo, "Options")
        if options & mqi.MQGMO_UNSUPPORTED:
            return fail(mqi.MQRC_FUNCTION_NOT_SUPPORTED)
        msg_handle, reason = self.get_handle(conn, gmo)
        if reason:
            return fail(reason)
        match = self._matcher(md_in, gmo)
        wait_ms = get(GMO, gmo, "WaitInterval") if options & mqi.MQGMO_WAIT else 0
        deadline = None if wait_ms == mqi.MQWI_UNLIMITED else time.monotonic() + wait_ms / 1000
        while True:
            queue = self.queues.get(handle.name)
            if queue is None:
                return fail(mqi.MQRC_HOBJ_ERROR)  # a deleted dynamic queue
            message = queue.take(match)
            if message is not None:
                reply = self._got(conn, queue, message, md_in, gmo, buflen, options)
                if reply[0] != FAILED:
                    self.deliver_properties(msg_handle, message.properties)
                return reply
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return fail(mqi.MQRC_NO_MSG_AVAILABLE)
            moving = self.balancer.move_request(conn)
            if moving:
                return moving
            self.cond.wait(left)

    @staticmethod
    def _matcher(md_in: bytes, gmo: bytes) -> Callable[[Message], bool] | None:
        msg_id, correl_id = get(MD, md_in, "MsgId"), get(MD, md_in, "CorrelId")
        if (get(GMO, gmo, "Version") or 1) >= 2:
            match_options = get(GMO, gmo, "MatchOptions")
            by_msg = bool(match_options & mqi.MQMO_MATCH_MSG_ID) and msg_id != mqi.MQMI_NONE
            by_correl = bool(match_options & mqi.MQMO_MATCH_CORREL_ID) and \
                correl_id != mqi.MQMI_NONE
        else:  # GMO Version 1: the MD's non-null ids select
            by_msg, by_correl = msg_id != mqi.MQMI_NONE, correl_id != mqi.MQMI_NONE
        if not (by_msg or by_correl):
            return None
        return lambda m: ((not by_msg or get(MD, m.md, "MsgId") == msg_id)
                          and (not by_correl or get(MD, m.md, "CorrelId") == correl_id))

    def _got(self, conn: Connection, queue: Queue, message: Message, md_in: bytes,
             gmo: bytearray, buflen: int, options: int) -> Reply:
        md = bytearray(message.md)
        if message.expires is not None:
            put(MD, md, "Expiry", max(0, int((message.expires - time.monotonic()) * 10)))
        put(GMO, gmo, "ResolvedQName", queue.name.encode())
        length = len(message.body)
        cc, rc = mqi.MQCC_OK, 0
        if length > buflen:
            if not options & mqi.MQGMO_ACCEPT_TRUNCATED_MSG:
                return (FAILED, mqi.MQRC_TRUNCATED_MSG_FAILED,
                        [bytes(md[:len(md_in)]), bytes(gmo), b"", struct.pack("<i", length)])
            cc, rc = mqi.MQCC_WARNING, mqi.MQRC_TRUNCATED_MSG_ACCEPTED
        queue.remove(message)
        persistent = get(MD, md, "Persistence") == mqi.MQPER_PERSISTENT
        if options & mqi.MQGMO_SYNCPOINT or (
                options & mqi.MQGMO_SYNCPOINT_IF_PERSISTENT and persistent):
            queue.uncommitted += 1
            conn.uow_gets.append((queue, message))
        data = message.body[:max(0, buflen)]
        put(GMO, gmo, "ReturnedLength", len(data))
        return cc, rc, [bytes(md[:len(md_in)]), bytes(gmo), data, struct.pack("<i", length)]

    # -- units of work -----------------------------------------------------------------------

    def verb_cmit(self, conn: Connection, f: list[bytes]) -> Reply:
        self._settle(conn, commit=True)
        return mqi.MQCC_OK, 0, []

    def verb_back(self, conn: Connection, f: list[bytes]) -> Reply:
        self._settle(conn, commit=False)
        return mqi.MQCC_OK, 0, []

    def _settle(self, conn: Connection, commit: bool) -> None:
        for queue, message in conn.uow_puts:
            queue.uncommitted -= 1
            if commit and self.queues.get(queue.name) is queue:
                queue.add(message)
        for queue, message in reversed(conn.uow_gets):
            queue.uncommitted -= 1
            if not commit and self.queues.get(queue.name) is queue:
                put(MD, message.md, "BackoutCount", get(MD, message.md, "BackoutCount") + 1)
                queue.add(message, front=True)
        if conn.uow_puts or conn.uow_gets:
            self.cond.notify_all()
        conn.uow_puts.clear()
        conn.uow_gets.clear()

    # -- inquire -----------------------------------------------------------------------------

    def verb_inq(self, conn: Connection, f: list[bytes]) -> Reply:
        (hobj,) = struct.unpack("<i", f[0])
        selectors = list(struct.unpack(f"<{len(f[1]) // 4}i", f[1]))
        int_count, char_length = struct.unpack("<ii", f[2])
        handle = self._handle(conn, hobj)
        if handle is None or handle.kind not in ("queue", "qmgr"):
            return fail(mqi.MQRC_HOBJ_ERROR)
        if not handle.options & mqi.MQOO_INQUIRE:
            return fail(mqi.MQRC_NOT_OPEN_FOR_INQUIRE)
        return answer_inquiry(self._inquirable(handle), selectors, int_count, char_length)

    def _inquirable(self, handle: Handle) -> Attributes:
        """What MQINQ answers for the queue manager or a queue: integer attributes, and
        character ones blank-padded to their MQ lengths (a cluster queue resolved to other
        members only, or another queue manager's queue: what MQ keeps of those)."""
        for elsewhere in (self.cluster_attributes, self.remote_attributes):
            attributes = elsewhere(handle)
            if attributes is not None:
                return attributes
        queue = self.queues.get(handle.name)
        if handle.kind == "qmgr":
            return {mqi.MQCA_Q_MGR_NAME: self.name.encode().ljust(48),
                    mqi.MQCA_Q_MGR_DESC: DESCRIPTION.encode().ljust(64),
                    mqi.MQCA_VERSION: VERSION.encode(),
                    mqi.MQIA_COMMAND_LEVEL: COMMAND_LEVEL, mqi.MQIA_PLATFORM: mqi.MQPL_UNIX}
        if queue is None:
            return {}
        return {mqi.MQCA_Q_MGR_NAME: self.name.encode().ljust(48),
                mqi.MQCA_Q_NAME: queue.name.encode().ljust(48),
                mqi.MQIA_CURRENT_Q_DEPTH: queue.depth(), mqi.MQIA_MAX_Q_DEPTH: queue.maxdepth,
                mqi.MQIA_Q_TYPE: mqi.MQQT_LOCAL, mqi.MQIA_OPEN_INPUT_COUNT: queue.opens_in,
                mqi.MQIA_OPEN_OUTPUT_COUNT: queue.opens_out}

    # -- subscribe ---------------------------------------------------------------------------

    def verb_sub(self, conn: Connection, f: list[bytes]) -> Reply:
        sd, topic, name = bytearray(f[0]), f[1].decode("utf-8"), f[2].decode("utf-8")
        (hobj,) = struct.unpack("<i", f[4])
        # A reconnecting client makes its subscriptions again under their old hsub (and
        # managed queue hobj) numbers (6th and 7th fields).
        wanted_hsub, wanted_hobj = (struct.unpack("<i", x)[0] for x in (f[5:7] or [bytes(4)] * 2))
        options = get(SD, sd, "Options")
        durable, managed = bool(options & mqi.MQSO_DURABLE), bool(options & mqi.MQSO_MANAGED)
        if wanted_hsub in conn.handles or (managed and wanted_hobj in conn.handles):
            return fail(mqi.MQRC_HOBJ_ERROR)
        if options & (mqi.MQSO_WILDCARD_CHAR | mqi.MQSO_ALTER):
            return fail(mqi.MQRC_FUNCTION_NOT_SUPPORTED)  # character wildcards, altering
        object_name = text(get(SD, sd, "ObjectName"))
        if object_name or topic:
            topic, reason = self.topic_string(object_name, topic)
            if topic is None:
                return fail(reason)
        if durable and not name:
            return fail(mqi.MQRC_SUB_NAME_ERROR)
        key = name or f"NDURABLE.{conn.number}.{next(self.ids)}"
        sub = self.subs.get(key)
        if sub is not None:
            if not options & mqi.MQSO_RESUME:
                return fail(mqi.MQRC_SUB_ALREADY_EXISTS)
            if any(h.kind == "sub" and h.name == key for c in self.conns.values()
                   for h in c.handles.values()):
                return fail(mqi.MQRC_SUBSCRIPTION_IN_USE)
        else:
            if not options & mqi.MQSO_CREATE:
                return fail(mqi.MQRC_NO_SUBSCRIPTION)
            if not topic:
                return fail(mqi.MQRC_TOPIC_STRING_ERROR)
            if managed:
                kind = "DURABLE" if durable else "NDURABLE"
                dest = self.dynamic_name(f"SYSTEM.MANAGED.{kind}.*")
                self.queues[dest] = Queue(dest)
            else:
                handle = self._handle(conn, hobj)
                if handle is None or handle.kind != "queue":
                    return fail(mqi.MQRC_HOBJ_ERROR)
                dest = handle.name
            sub = Subscription(key, topic, dest, durable, managed, self.new_id(),
                               0 if durable else conn.number)
            self.subs[key] = sub
        if sub.managed:
            reply = self._new_handle(conn, Handle("queue", sub.dest, mqi.MQOO_INPUT_SHARED),
                                     bytearray(424), wanted_hobj)
            (hobj,) = struct.unpack("<i", reply[2][0])
            self.queues[sub.dest].opens_in += 1
        hsub = wanted_hsub or next(conn.next_handle)
        while not wanted_hsub and hsub in conn.handles:
            hsub = next(conn.next_handle)
        conn.handles[hsub] = Handle("sub", key)
        return mqi.MQCC_OK, 0, [bytes(sd), struct.pack("<i", hobj), struct.pack("<i", hsub)]

    # -- callbacks ---------------------------------------------------------------------------

    def verb_cb(self, conn: Connection, f: list[bytes]) -> Reply:
        operation, kind, hobj = (struct.unpack("<i", x)[0] for x in f[:3])
        if kind != mqi.MQCBT_EVENT_HANDLER or hobj != mqi.MQHO_NONE or operation not in (
                mqi.MQOP_REGISTER, mqi.MQOP_DEREGISTER):
            return fail(mqi.MQRC_FUNCTION_NOT_SUPPORTED)  # message consumers are not emulated
        conn.events = operation == mqi.MQOP_REGISTER
        return mqi.MQCC_OK, 0, []


# -- the network side -------------------------------------------------------------------------


def read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Server(socketserver.ThreadingTCPServer):
    """The listener: MQI frames from libmqm.c, or admin lines after the MQSC magic."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, qm: QueueManager, port: int, host: str = "127.0.0.1"):
        self.qm = qm
        self.numbers = itertools.count(1)
        super().__init__((host, port), Handler)


class Handler(socketserver.BaseRequestHandler):
    """One client or admin connection."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = read_exact(sock, 4)
        if head is None:
            return
        if head == mqi.ADMIN_MAGIC:
            self._admin(sock)
            return
        self._mqi(sock, head)

    def _mqi(self, sock: socket.socket, head: bytes) -> None:
        qm: QueueManager = self.server.qm
        conn: Connection | None = None
        clean = False
        try:
            while head is not None:
                payload = read_exact(sock, struct.unpack("<I", head)[0])
                if payload is None:
                    break
                verb_number, fields = mqi.unpack_request(payload)
                verb = mqi.VERBS.get(verb_number, "?")
                if conn is None:
                    if verb != "CONNX":
                        break
                    reply, conn = qm.connx(next(self.server.numbers), fields)
                    sock.sendall(mqi.pack_reply(*reply))
                    if conn is None:
                        break
                    conn.sock = sock
                elif verb == "DISC":
                    qm.disconnect(conn, commit=True)
                    clean = True
                    sock.sendall(mqi.pack_reply(mqi.MQCC_OK, 0, []))
                    break
                else:
                    reply = qm.call(conn, verb, fields)
                    sock.sendall(mqi.pack_reply(*reply))
                    if reply[0] == MOVE_CC:
                        break  # asked to move: the client reconnects elsewhere
                head = read_exact(sock, 4)
        except OSError:
            pass
        finally:
            if conn is not None and not clean:
                qm.disconnect(conn, commit=False)  # a broken connection backs out

    def _admin(self, sock: socket.socket) -> None:
        qm: QueueManager = self.server.qm
        # apart: a text stream's write drops the lines it read ahead (pipelined commands)
        stream = sock.makefile("w", encoding="utf-8", newline="\n")
        for line in sock.makefile("r", encoding="utf-8", newline="\n"):
            command = line.strip()
            if command.upper() in ("END", "ENDMQM"):
                stream.write(f"AMQ8004I: queue manager {qm.name} ending.\n.\n")
                stream.flush()
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return
            for out in qm.admin(command):
                stream.write(out + "\n")
            stream.write(".\n")
            stream.flush()


def main(argv: list[str] | None = None) -> int:
    """Start one emulated queue manager and serve until END or SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="queue manager name, e.g. QM1")
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--data", required=True, help="directory for qmgr.pid and qmgr.log")
    parser.add_argument("--user", default="", help="the one MQCSP user accepted (none: any)")
    parser.add_argument("--password", default="", help="that user's password")
    parser.add_argument("--mqsc", default="", help="file of admin commands run at start")
    parser.add_argument("--peers", default="", help="directory where running queue managers "
                                                    "announce themselves (clusters)")
    parser.add_argument("--uniform", default="", metavar="CLUSTER",
                        help="balance applications over this uniform cluster's members")
    parser.add_argument("--rebalance-interval", type=float, default=INTERVAL_S, metavar="S",
                        help=f"seconds between balancing rounds (default {INTERVAL_S:g})")
    parser.add_argument("--balance-timeout", type=float, default=BALANCE_TIMEOUT_S, metavar="S",
                        help="seconds a connection in a unit of work may finish it before it "
                             f"is moved anyway (default MQ's {BALANCE_TIMEOUT_S:g})")
    args = parser.parse_args(argv)
    os.makedirs(args.data, exist_ok=True)
    peers = Peers(args.peers, Peer(args.name, args.host, args.port, os.getpid()))
    qm = QueueManager(args.name, args.user, args.password, peers)
    qm.balancer.timeout_s = args.balance_timeout
    if args.mqsc:
        with open(args.mqsc, encoding="utf-8") as commands:
            for line in commands:
                if line.strip() and not line.lstrip().startswith("*"):
                    qm.admin(line)
    server = Server(qm, args.port, args.host)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    with open(os.path.join(args.data, "qmgr.pid"), "w", encoding="utf-8") as pid:
        pid.write(f"{os.getpid()}\n")
    qm.peers.announce()
    if args.uniform:
        qm.balancer.start(args.uniform, args.rebalance_interval)
    print(f"READY {args.name} {args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        qm.balancer.stop()
        qm.peers.withdraw()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

