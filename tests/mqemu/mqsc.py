"""The admin side of an EMULATED queue manager (tests only; NOT IBM MQ): a small MQSC subset.

Each command is a method registered with :func:`command` under its verb and object types
(``@command("DEFINE", "QLOCAL", "QMODEL")``); :meth:`Mqsc.admin` parses a line with
:func:`mqsc_words` and runs the method registered for it under the queue manager's lock. A
feature adds its commands beside its own code (a mixin of ``qmgr.QueueManager``) instead of
growing one dispatcher.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from objects import MAX_DEPTH, NORMAL, XMITQ, Queue, Subscription


@dataclass(frozen=True)
class Command:
    """One parsed MQSC command: ``DISPLAY QLOCAL(Q*) CURDEPTH`` -> verb DISPLAY, obj QLOCAL,
    name ``Q*``, attrs {CURDEPTH: None}."""

    verb: str
    obj: str
    name: str
    attrs: dict[str, str | None]


Handler = Callable[[Any, Command], list[str]]
COMMANDS: dict[tuple[str, str], Handler] = {}
"""(verb, object type) -> the method running it."""
ALIASES = {"DIS": "DISPLAY", "DEF": "DEFINE", "QL": "QLOCAL", "Q": "QUEUE", "QUEUE": "QLOCAL",
           "CHL": "CHANNEL", "CHS": "CHSTATUS"}
ACCEPTED = {("ALTER", "CHANNEL"): "AMQ8016I: IBM MQ channel changed.",
            ("ALTER", "LISTENER"): "AMQ8623I: IBM MQ listener changed.",
            ("SET", "CHLAUTH"): "AMQ8877I: IBM MQ channel authentication record set."}
"""MQSC the -ic files of surge's provisioners hold that the emulator accepts and ignores."""


def command(verb: str, *objects: str) -> Callable[[Handler], Handler]:
    """Register the decorated method as MQSC ``verb`` of each of ``objects``."""
    def register(method: Handler) -> Handler:
        for obj in objects:
            COMMANDS[verb, obj] = method
        return method
    return register


def mqsc_words(line: str) -> list[tuple[str, str | None]]:
    """``DEFINE QLOCAL(Q1) MAXDEPTH(10) REPLACE`` -> [(DEFINE, None), (QLOCAL, Q1), ...]; a
    value in quotes is taken as written (``''`` is a quote), an unquoted one folded to upper
    case, as MQSC does ("Rules for using MQSC commands": "Generic values ... are folded to
    upper case" unless enclosed in single quotation marks)."""
    words = []
    for token in re.finditer(r"([A-Za-z*]+)(?:\(\s*('(?:[^']|'')*'|[^)]*?)\s*\))?", line):
        key, value = token.group(1), token.group(2)
        if value is not None:
            value = value[1:-1].replace("''", "'") if value.startswith("'") else value.upper()
        words.append((key, value))
    return words


def parse(line: str) -> Command | None:
    """The command of one MQSC line (None: an empty line)."""
    words = mqsc_words(line)
    if not words:
        return None
    verb = words[0][0].upper()
    obj, name = (words[1][0].upper(), words[1][1]) if len(words) > 1 else ("", None)
    verb, obj = ALIASES.get(verb, verb), ALIASES.get(obj, obj)
    return Command(verb, obj, name or ("*" if verb == "DISPLAY" else ""),
                   {k.upper(): v for k, v in words[2:]})


def wanted(pattern: str, candidate: str) -> bool:
    """A name against an MQSC generic name: ``*``, the exact name, or ``prefix*``."""
    return pattern == "*" or candidate == pattern or (
        pattern.endswith("*") and candidate.startswith(pattern[:-1]))


def not_found(name: str) -> list[str]:
    """MQ's answer for an object that does not exist."""
    return [f"AMQ8147E: IBM MQ object {name} not found."]


class Mqsc:
    """The MQSC commands of the queue manager (a mixin of ``QueueManager``, whose ``name``,
    ``cond``, ``queues``, ``subs``, ``conns``, ``peers``, ``new_id`` and ``_settle`` they
    use); channels: channels.py, remote queues and ALTER QMGR: remote.py."""

    def admin(self, line: str) -> list[str]:
        """Run one MQSC-like command; the output lines (errors start with 'AMQ')."""
        cmd = parse(line)
        if cmd is None:
            return []
        if (cmd.verb, cmd.obj) in ACCEPTED:
            return [ACCEPTED[cmd.verb, cmd.obj]]  # one listener, any SVRCONN name: nothing kept
        handler = COMMANDS.get((cmd.verb, cmd.obj))
        if handler is None:
            return [f"AMQ8405E: syntax error or unsupported command: {line.strip()}"]
        with self.cond:
            return handler(self, cmd)

    @command("DISPLAY", "CLUSQMGR")
    def _display_clusqmgrs(self, cmd: Command) -> list[str]:
        """This queue manager and the running ones sharing a cluster with it."""
        me = self.peers.me
        lines = []
        for cluster in me.clusters:
            for qm in [me, *self.peers.others(cluster)]:
                if wanted(cmd.name, qm.name):
                    lines.append(f"CLUSQMGR({qm.name}) CLUSTER({cluster}) "
                                 f"CONNAME({qm.host}({qm.port})) QMTYPE(NORMAL) "
                                 f"STATUS(RUNNING)")
        return lines or not_found(cmd.name)

    @command("DEFINE", "QLOCAL", "QMODEL")
    def _define_queue(self, cmd: Command) -> list[str]:
        """A local or model queue; REPLACE keeps the messages of the queue it replaces, its
        other attributes are the command's (defaults where it gives none), as in MQ."""
        name = cmd.name
        if name in self.queues and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {name} already exists."]
        usage = (cmd.attrs.get("USAGE") or NORMAL).upper()
        if usage not in (NORMAL, XMITQ):
            return [f"AMQ8405E: USAGE(NORMAL|XMITQ) expected: USAGE({usage})."]
        old = self.queues.get(name)
        queue = Queue(name, int(cmd.attrs.get("MAXDEPTH") or MAX_DEPTH), cmd.obj == "QMODEL",
                      usage=usage)
        if old is not None:
            queue.levels, queue.uncommitted = old.levels, old.uncommitted
            queue.opens_in, queue.opens_out = old.opens_in, old.opens_out
        self.queues[name] = queue
        return [f"AMQ8006I: IBM MQ queue created: {name}."]

    @command("DELETE", "QLOCAL", "QMODEL")
    def _delete_queue(self, cmd: Command) -> list[str]:
        queue = self.queues.get(cmd.name)
        if queue is None:
            return not_found(cmd.name)
        if queue.depth() and "PURGE" not in cmd.attrs:
            return [f"AMQ8143E: IBM MQ queue {cmd.name} not empty."]
        del self.queues[cmd.name]
        return [f"AMQ8007I: IBM MQ queue deleted: {cmd.name}."]

    @command("DEFINE", "SUB")
    def _define_sub(self, cmd: Command) -> list[str]:
        topic, dest = cmd.attrs.get("TOPICSTR"), cmd.attrs.get("DEST")
        if not topic or not dest:
            return ["AMQ8405E: TOPICSTR and DEST are required."]
        if cmd.name in self.subs and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {cmd.name} already exists."]
        self.subs[cmd.name] = Subscription(cmd.name, topic, dest, True, False, self.new_id())
        return [f"AMQ8094I: IBM MQ subscription created: {cmd.name}."]

    @command("DELETE", "SUB")
    def _delete_sub(self, cmd: Command) -> list[str]:
        if self.subs.pop(cmd.name, None) is None:
            return not_found(cmd.name)
        return [f"AMQ8095I: IBM MQ subscription deleted: {cmd.name}."]

    @command("STOP", "CONN")
    def _stop_conns(self, cmd: Command) -> list[str]:
        """STOP CONN(id): break the connection (its unit of work is backed out); '*': all."""
        stopped = [c for c in self.conns.values()
                   if cmd.name == "*" or cmd.name.upper() == f"{c.number:016X}"]
        if not stopped:
            return not_found(cmd.name)
        for conn in stopped:
            self._settle(conn, commit=False)
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
        return [f"AMQ8458I: Connection {c.number:016X} stopped." for c in stopped]

    @command("DISPLAY", "QLOCAL")
    def _display_queues(self, cmd: Command) -> list[str]:
        found = [q for q in self.queues.values() if not q.model and wanted(cmd.name, q.name)]
        if not found:
            return not_found(cmd.name)
        usage = {"USAGE", "ALL"} & set(cmd.attrs)
        return [f"QUEUE({q.name}) TYPE(QLOCAL) CURDEPTH({q.depth()}) MAXDEPTH({q.maxdepth}) "
                f"IPPROCS({q.opens_in}) OPPROCS({q.opens_out})"
                + (f" USAGE({q.usage})" if usage or q.usage != NORMAL else "") for q in found]

    @command("RESET", "QSTATS")
    def _reset_qstats(self, cmd: Command) -> list[str]:
        """Messages put to and got from each queue since the previous reset, and reset them
        (MQ also shows HIGHQDPTH and the time since the reset: not kept here)."""
        found = [q for q in self.queues.values() if not q.model and wanted(cmd.name, q.name)]
        if not found:
            return not_found(cmd.name)
        lines = []
        for queue in found:
            lines.append(f"QSTATS({queue.name}) QUEUE({queue.name}) MSGSIN({queue.msgs_in}) "
                         f"MSGSOUT({queue.msgs_out})")
            queue.msgs_in = queue.msgs_out = 0
        return lines

    @command("DISPLAY", "SUB")
    def _display_subs(self, cmd: Command) -> list[str]:
        return [f"SUB({s.name}) TOPICSTR({s.topic}) DEST({s.dest}) "
                f"DURABLE({'YES' if s.durable else 'NO'})"
                for s in self.subs.values() if wanted(cmd.name, s.name)]

    @command("DISPLAY", "CONN")
    def _display_conns(self, cmd: Command) -> list[str]:
        return [f"CONN({c.number:016X}) APPLTAG({c.appl}) USERID({c.user}) "
                f"CONNAME({c.conname}) UOW({len(c.uow_puts) + len(c.uow_gets)})"
                for c in self.conns.values() if wanted(cmd.name, f"{c.number:016X}")]

    @command("DISPLAY", "QMSTATUS")
    def _display_status(self, cmd: Command) -> list[str]:
        return [f"QMNAME({self.name}) STATUS(RUNNING) CONNS({len(self.conns)})"]
