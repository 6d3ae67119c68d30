"""Queues of other queue managers, for an EMULATED queue manager (tests only; NOT IBM MQ):
remote queue definitions (``DEFINE QREMOTE(name) RNAME(queue) RQMNAME(qmgr)``) and MQOPEN
with an MQOD ObjectQMgrName naming another queue manager (a reply to a ReplyToQMgr, say).

A put to either goes onto the transmission queue of the queue manager it names and returns
MQCC_OK with ResolvedQName/ResolvedQMgrName the remote ones ("Remote queue definitions",
"Name resolution"); the channel delivers it there with its MQMD as put (the cluster channel of
cluster.py). The other queue manager must have announced itself in the peers directory: MQ
needs a transmission queue and sender channel (or a cluster) to reach it, which the emulator
stands in for; an unknown one is MQRC_UNKNOWN_OBJECT_Q_MGR. Remote queues are opened for
output (and inquire) only, as in MQ (else MQRC_OPTION_NOT_VALID_FOR_TYPE).
"""

from __future__ import annotations

import mqi
from mqi import PMO, put
from mqsc import Command, command, not_found, wanted
from objects import Handle, Reply, fail

MQRC_OPTION_NOT_VALID_FOR_TYPE = 2045
OUTPUT_OPTIONS = (mqi.MQOO_OUTPUT | mqi.MQOO_INQUIRE | mqi.MQOO_FAIL_IF_QUIESCING
                  | mqi.MQOO_BIND_ON_OPEN | mqi.MQOO_BIND_NOT_FIXED | mqi.MQOO_BIND_ON_GROUP
                  | mqi.MQOO_PASS_IDENTITY_CONTEXT | mqi.MQOO_PASS_ALL_CONTEXT
                  | mqi.MQOO_SET_IDENTITY_CONTEXT | mqi.MQOO_SET_ALL_CONTEXT
                  | mqi.MQOO_ALTERNATE_USER_AUTHORITY)
"""The options a remote queue may be opened with ("MQOPEN options": no input, browse or set)."""


class RemoteHandle(Handle):
    """An opened queue of another queue manager: which queue, on which."""

    def __init__(self, name: str, options: int, queue: str, qmgr: str):
        super().__init__("queue", name, options)
        self.queue, self.qmgr = queue, qmgr


class RemoteQueues:
    """Remote queues (a mixin of ``QueueManager``; it uses its ``name``, ``peers``,
    ``remote_defs``, ``_message``, ``_new_handle`` and the cluster's ``_channel``)."""

    remote_defs: dict[str, tuple[str, str]]  # QREMOTE name -> (RNAME, RQMNAME)

    @command("DEFINE", "QREMOTE")
    def _define_remote(self, cmd: Command) -> list[str]:
        rname, rqmname = cmd.attrs.get("RNAME"), cmd.attrs.get("RQMNAME")
        if not rname or not rqmname:
            return ["AMQ8405E: RNAME and RQMNAME are required (no queue manager aliases)."]
        if cmd.name in self.remote_defs and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {cmd.name} already exists."]
        self.remote_defs[cmd.name] = (rname, rqmname)
        return [f"AMQ8006I: IBM MQ queue created: {cmd.name}."]

    @command("DELETE", "QREMOTE")
    def _delete_remote(self, cmd: Command) -> list[str]:
        if self.remote_defs.pop(cmd.name, None) is None:
            return not_found(cmd.name)
        return [f"AMQ8007I: IBM MQ queue deleted: {cmd.name}."]

    @command("DISPLAY", "QREMOTE")
    def _display_remote(self, cmd: Command) -> list[str]:
        found = [f"QUEUE({name}) TYPE(QREMOTE) RNAME({rname}) RQMNAME({rqmname})"
                 for name, (rname, rqmname) in self.remote_defs.items()
                 if wanted(cmd.name, name)]
        return found or not_found(cmd.name)

    def open_remote(self, conn, od: bytearray, name: str, qmgr: str, options: int,
                    wanted_hobj: int) -> Reply | None:
        """MQOPEN of a queue on another queue manager (``qmgr`` named, or ``name`` a remote
        queue definition); None for an ordinary local open."""
        if qmgr and qmgr != self.name:
            queue, target = name, qmgr
        elif name in self.remote_defs:
            queue, target = self.remote_defs[name]
        else:
            return None
        if target == self.name:
            return None  # a definition pointing here resolves to the local queue
        if options & ~OUTPUT_OPTIONS:
            return fail(MQRC_OPTION_NOT_VALID_FOR_TYPE)
        if self._peer(target) is None:
            return fail(mqi.MQRC_UNKNOWN_OBJECT_Q_MGR)
        return self._new_handle(conn, RemoteHandle(name, options, queue, target), od,
                                wanted_hobj)

    def put_remote(self, conn, handle: RemoteHandle, md_in: bytes, pmo_in: bytes,
                   body: bytes) -> Reply:
        """MQPUT to a remote queue: onto the transmission queue of its queue manager."""
        pmo = bytearray(pmo_in)
        message = self._message(conn, md_in, pmo, body)
        peer = self._peer(handle.qmgr)
        if peer is None:
            return fail(mqi.MQRC_UNKNOWN_OBJECT_Q_MGR)
        self._channel(peer).send(handle.queue, message, False)
        put(PMO, pmo, "ResolvedQName", handle.queue.encode())
        put(PMO, pmo, "ResolvedQMgrName", handle.qmgr.encode())
        return mqi.MQCC_OK, 0, [bytes(message.md[:len(md_in)]), bytes(pmo)]

    def _peer(self, qmgr: str):
        return next((p for p in self.peers.others() if p.name == qmgr), None)
