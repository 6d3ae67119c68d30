"""Queues of other queue managers, for an EMULATED queue manager (tests only; NOT IBM MQ):
remote queue definitions (``DEFINE QREMOTE(name) RNAME(queue) RQMNAME(qmgr) [XMITQ(xq)]``, and
with a blank RNAME a queue manager alias), ``ALTER QMGR DEFXMITQ(xq)``, and MQOPEN with an MQOD
ObjectQMgrName naming another queue manager (a reply to a ReplyToQMgr, say).

Which transmission queue a message for another queue manager takes follows MQ's "Name
resolution": a remote queue definition's XMITQ (missing: MQRC_UNKNOWN_XMIT_Q; not
USAGE(XMITQ): MQRC_XMIT_Q_USAGE_ERROR); else the local queue named like the destination queue
manager (not USAGE(XMITQ): MQRC_XMIT_Q_USAGE_ERROR); else DEFXMITQ (MQRC_UNKNOWN_DEF_XMIT_Q,
MQRC_DEF_XMIT_Q_USAGE_ERROR); else MQRC_UNKNOWN_REMOTE_Q_MGR. A put goes onto that queue with its
destination (as MQ's transmission header) and returns MQCC_OK with ResolvedQName/ResolvedQMgrName
the remote ones; a sender channel (channels.py) moves it on, MQMD as put.

A queue manager that defines no transmission queue at all reaches the others as before channels
were emulated: through the cluster channel of cluster.py to a queue manager announced in the
peers directory (none of that name: MQRC_UNKNOWN_OBJECT_Q_MGR). Remote queues are opened for
output (and inquire) only, as in MQ (else MQRC_OPTION_NOT_VALID_FOR_TYPE).
"""

from __future__ import annotations

from dataclasses import dataclass

import mqi
from mqi import PMO, get, put
from mqsc import Command, command, not_found, wanted
from objects import XMITQ, Attributes, Handle, Reply, fail

OUTPUT_OPTIONS = (mqi.MQOO_OUTPUT | mqi.MQOO_INQUIRE | mqi.MQOO_FAIL_IF_QUIESCING
                  | mqi.MQOO_BIND_ON_OPEN | mqi.MQOO_BIND_NOT_FIXED | mqi.MQOO_BIND_ON_GROUP
                  | mqi.MQOO_PASS_IDENTITY_CONTEXT | mqi.MQOO_PASS_ALL_CONTEXT
                  | mqi.MQOO_SET_IDENTITY_CONTEXT | mqi.MQOO_SET_ALL_CONTEXT
                  | mqi.MQOO_ALTERNATE_USER_AUTHORITY)
"""The options a remote queue may be opened with ("MQOPEN options": no input, browse or set)."""
PEERS = ""
"""The transmission queue of a route without one: cluster.py's channel to a peer stands in."""


@dataclass(frozen=True)
class RemoteDefinition:
    """A QREMOTE: RNAME (blank: a queue manager alias), RQMNAME and XMITQ (blank: by name)."""

    rname: str
    rqmname: str
    xmitq: str = ""


@dataclass(frozen=True)
class Route:
    """Where a message for another queue manager goes: its queue and queue manager, and the
    transmission queue named for it ("": found by name resolution)."""

    queue: str
    qmgr: str
    xmitq: str = ""


class RemoteHandle(Handle):
    """An opened queue of another queue manager: which queue, on which, through which
    transmission queue (:data:`PEERS`: the cluster channel)."""

    def __init__(self, name: str, options: int, route: Route):
        super().__init__("queue", name, options)
        self.queue, self.qmgr, self.xmitq = route.queue, route.qmgr, route.xmitq

    def resolved(self, qmgr: str) -> tuple[str, str]:
        """The remote queue and its queue manager."""
        return self.queue, self.qmgr

    @property
    def opened_queue(self) -> str | None:
        """Its transmission queue."""
        return self.xmitq or None


class RemoteQueues:
    """Remote queues (a mixin of ``QueueManager``; it uses its ``name``, ``queues``, ``peers``,
    ``remote_defs``, ``defxmitq``, ``_message``, ``_enqueue``, ``_new_handle`` and the
    cluster's ``_channel``)."""

    remote_defs: dict[str, RemoteDefinition]
    defxmitq: str

    @command("DEFINE", "QREMOTE")
    def _define_remote(self, cmd: Command) -> list[str]:
        rname, rqmname = (cmd.attrs.get("RNAME") or "").strip(), cmd.attrs.get("RQMNAME")
        if not rqmname:
            return ["AMQ8405E: RQMNAME is required."]
        if cmd.name in self.remote_defs and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {cmd.name} already exists."]
        self.remote_defs[cmd.name] = RemoteDefinition(rname, rqmname,
                                                      (cmd.attrs.get("XMITQ") or "").strip())
        return [f"AMQ8006I: IBM MQ queue created: {cmd.name}."]

    @command("DELETE", "QREMOTE")
    def _delete_remote(self, cmd: Command) -> list[str]:
        if self.remote_defs.pop(cmd.name, None) is None:
            return not_found(cmd.name)
        return [f"AMQ8007I: IBM MQ queue deleted: {cmd.name}."]

    @command("DISPLAY", "QREMOTE")
    def _display_remote(self, cmd: Command) -> list[str]:
        found = [f"QUEUE({name}) TYPE(QREMOTE) RNAME({d.rname}) RQMNAME({d.rqmname})"
                 + (f" XMITQ({d.xmitq})" if d.xmitq else "")
                 for name, d in self.remote_defs.items() if wanted(cmd.name, name)]
        return found or not_found(cmd.name)

    @command("ALTER", "QMGR")
    def _alter_qmgr(self, cmd: Command) -> list[str]:
        """DEFXMITQ is kept; the other attributes are accepted and ignored."""
        if "DEFXMITQ" in cmd.attrs:
            self.defxmitq = (cmd.attrs["DEFXMITQ"] or "").strip()
        return ["AMQ8005I: IBM MQ queue manager changed."]

    def open_remote(self, conn, od: bytearray, name: str, qmgr: str, options: int,
                    wanted_hobj: int) -> Reply | None:
        """MQOPEN of a queue on another queue manager (``qmgr`` named, or ``name`` a remote
        queue definition); None for an ordinary local open."""
        route = self._route(name, qmgr)
        if route is None:
            return None
        if isinstance(route, int):
            return fail(route)
        if options & ~OUTPUT_OPTIONS:
            return fail(mqi.MQRC_OPTION_NOT_VALID_FOR_TYPE)
        xmitq = self._transmission_queue(route)
        if isinstance(xmitq, int):
            return fail(xmitq)
        if xmitq == PEERS and self._peer(route.qmgr) is None:
            return fail(mqi.MQRC_UNKNOWN_OBJECT_Q_MGR)
        if xmitq != PEERS and options & mqi.MQOO_OUTPUT:
            self.queues[xmitq].opens_out += 1  # MQCLOSE takes it back
        handle = RemoteHandle(name, options, Route(route.queue, route.qmgr, xmitq))
        return self._new_handle(conn, handle, od, wanted_hobj)

    def put_remote(self, conn, handle: RemoteHandle, md_in: bytes, pmo_in: bytes,
                   body: bytes) -> Reply:
        """MQPUT to a remote queue: onto its transmission queue (under syncpoint if asked)."""
        pmo = bytearray(pmo_in)
        message = self._message(conn, md_in, pmo, body)
        if handle.xmitq == PEERS:
            peer = self._peer(handle.qmgr)
            if peer is None:
                return fail(mqi.MQRC_UNKNOWN_OBJECT_Q_MGR)
            self._channel(peer).send(handle.queue, message, False)
        else:
            queue = self.queues.get(handle.xmitq)
            if queue is None or queue.usage != XMITQ:
                return fail(mqi.MQRC_UNKNOWN_XMIT_Q)  # deleted or redefined since MQOPEN
            message.destination = handle.queue, handle.qmgr
            reason = self._enqueue(conn, queue, message,
                                   bool(get(PMO, pmo, "Options") & mqi.MQPMO_SYNCPOINT))
            if reason:
                return fail(reason)
        put(PMO, pmo, "ResolvedQName", handle.queue.encode())
        put(PMO, pmo, "ResolvedQMgrName", handle.qmgr.encode())
        return mqi.MQCC_OK, 0, [bytes(message.md[:len(md_in)]), bytes(pmo)]

    def remote_attributes(self, handle: Handle) -> Attributes | None:
        """What MQINQ answers for a remote queue (None: not one): its type, names, and no
        depth or open counts (MQIAV_NOT_APPLICABLE)."""
        if not isinstance(handle, RemoteHandle):
            return None
        return {mqi.MQCA_Q_NAME: handle.name.encode().ljust(48),
                mqi.MQCA_Q_MGR_NAME: self.name.encode().ljust(48),
                mqi.MQIA_Q_TYPE: mqi.MQQT_REMOTE,
                mqi.MQIA_CURRENT_Q_DEPTH: None, mqi.MQIA_MAX_Q_DEPTH: None,
                mqi.MQIA_OPEN_INPUT_COUNT: None, mqi.MQIA_OPEN_OUTPUT_COUNT: None}

    def _route(self, name: str, qmgr: str) -> Route | int | None:
        """Where an open of ``name`` on ``qmgr`` goes: another queue manager, a reason code,
        or None (a queue of this one)."""
        if qmgr and qmgr != self.name:
            alias = self.remote_defs.get(qmgr)
            route = Route(name, alias.rqmname, alias.xmitq) if alias and not alias.rname \
                else Route(name, qmgr)
        elif name in self.remote_defs:
            definition = self.remote_defs[name]
            if not definition.rname:
                return mqi.MQRC_UNKNOWN_OBJECT_NAME  # a queue manager alias is not a queue
            route = Route(definition.rname, definition.rqmname, definition.xmitq)
        else:
            return None
        return None if route.qmgr == self.name and not route.xmitq else route

    def _transmission_queue(self, route: Route) -> str | int:
        """The transmission queue ``route`` takes, :data:`PEERS`, or a reason code."""
        if route.xmitq:
            return self._usable(route.xmitq, mqi.MQRC_UNKNOWN_XMIT_Q,
                                mqi.MQRC_XMIT_Q_USAGE_ERROR)
        if route.qmgr in self.queues:
            return self._usable(route.qmgr, mqi.MQRC_UNKNOWN_XMIT_Q, mqi.MQRC_XMIT_Q_USAGE_ERROR)
        if self.defxmitq:
            return self._usable(self.defxmitq, mqi.MQRC_UNKNOWN_DEF_XMIT_Q,
                                mqi.MQRC_DEF_XMIT_Q_USAGE_ERROR)
        if any(queue.usage == XMITQ for queue in self.queues.values()):
            return mqi.MQRC_UNKNOWN_REMOTE_Q_MGR
        return PEERS

    def _usable(self, name: str, missing: int, not_xmitq: int) -> str | int:
        queue = self.queues.get(name)
        if queue is None:
            return missing
        return name if queue.usage == XMITQ else not_xmitq

    def _peer(self, qmgr: str):
        return next((p for p in self.peers.others() if p.name == qmgr), None)
