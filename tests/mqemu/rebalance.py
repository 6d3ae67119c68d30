"""Uniform-cluster application balancing of an EMULATED queue manager (tests only; NOT IBM MQ).

What MQ does (IBM MQ documentation: "Automatic application balancing", "How automatic
balancing works", "How automatic balancing uses automatic reconnect", "Influencing application
re-balancing in uniform clusters", "Developing flexible and scalable client applications"):
the members of a uniform cluster periodically share how many instances of each application
(connections grouped by application name, the APPLTAG) each holds; a member holding too few
asks for some; the member holding them sends each chosen client a reconnect request whose hint
names the queue manager to go to, and the client reconnects there through its CCDT (automatic
client reconnection: MQRC_RECONNECTING, then MQRC_RECONNECTED to its event handler, its handles
reopened). Only clients connected with MQCNO_RECONNECT (or DefRecon=YES) take part; those with
MQCNO_RECONNECT_Q_MGR or no reconnection stay. A client in a unit of work is not interrupted
until BalanceTimeout (10 s by default) has passed; then the unit of work is backed out. MQ
documents no fixed period: balancing goes on over tens of seconds (document 000).

What the emulator does: a queue manager started with ``--uniform CLUSTER`` runs a
:class:`Balancer` thread. Every ``--rebalance-interval`` seconds (default
:data:`INTERVAL_S`) it asks the running members of CLUSTER (:mod:`peers`) for
``DISPLAY APSTATUS(*) TYPE(LOCAL)`` (one line per movable connection: application name and
the member it is already bound for), adds its own, and for each application name where it
holds at least two fewer than the fullest member, asks that member for
``min((fullest - mine) // 2, ceil(total / members) - mine)`` of them with
``MOVE APPL('name') COUNT(k) QMNAME(me)`` (an emulator command; MQ publishes such requests on
``$SYS/MQ`` system topics). The asked member marks that many of its movable connections,
those without a unit of work first. A marked connection learns it at its next MQI call, or at
once while it waits in MQGET: instead of the verb's reply it gets a move request (CompCode
:data:`MOVE_CC`, the target's name; the verb was not run), the queue manager drops it (backing
out any unit of work) and libmqm.c reconnects as the hint says and runs the verb there. A marked
connection in a unit of work is told only once it has none, or ``--balance-timeout`` seconds
(default MQ's 10) after it was marked.

Movable: connected with MQCNO_RECONNECT (not _Q_MGR), holding no temporary dynamic queue and
no subscription handle (the emulator's reconnection does not carry those over).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass

import mqi
from mqsc import Command, command, not_found, wanted
from objects import Connection, Reply
from peers import ask

INTERVAL_S = 10.0
"""Default seconds between two balancing rounds (MQ documents no figure; tests set less)."""
BALANCE_TIMEOUT_S = 10.0
"""MQ's default BalanceTimeout: how long a marked connection in a unit of work is left."""
MOVE_CC = -1
"""CompCode of a move request in a reply (no MQ CompCode is negative; libmqm.c's CC_MOVE)."""
_FIELD = re.compile(r"(\w+)\(([^)]*)\)")


@dataclass(frozen=True)
class Move:
    """A connection marked to move: where to, and when it was marked (monotonic)."""

    target: str
    marked_s: float


def movable(qm, conn: Connection) -> bool:
    """May ``conn`` be moved: MQCNO_RECONNECT, no temporary dynamic queue, no subscription."""
    if not conn.options & mqi.MQCNO_RECONNECT or conn.options & mqi.MQCNO_RECONNECT_Q_MGR:
        return False
    for handle in conn.handles.values():
        if handle.kind == "sub":
            return False
        queue = qm.queues.get(handle.name) if handle.kind == "queue" else None
        if queue is not None and queue.temporary_of == conn.number:
            return False
    return True


class Balancer:
    """The queue manager's marked connections, and its balancing thread (``start``)."""

    def __init__(self, qm, timeout_s: float = BALANCE_TIMEOUT_S):
        self.qm = qm
        self.timeout_s = timeout_s
        self.marked: dict[int, Move] = {}  # connection number -> where it is asked to go
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.cluster = ""
        self.interval_s = INTERVAL_S

    # -- this queue manager's side (called under qm.cond) --------------------------------------

    def move_request(self, conn: Connection) -> Reply | None:
        """The move request to answer ``conn``'s verb with, if it is marked and it is time."""
        move = self.marked.get(conn.number)
        if move is None:
            return None
        in_uow = bool(conn.uow_puts or conn.uow_gets)
        if in_uow and time.monotonic() - move.marked_s < self.timeout_s:
            return None
        del self.marked[conn.number]
        return MOVE_CC, mqi.MQRC_RECONNECTING, [move.target.encode()]

    def mark(self, appl: str, count: int, target: str) -> int:
        """Mark up to ``count`` movable, unmarked connections of ``appl`` to move to
        ``target`` (those without a unit of work first); how many were marked."""
        self.marked = {n: m for n, m in self.marked.items() if n in self.qm.conns}
        free = [c for c in self.qm.conns.values() if c.appl == appl
                and c.number not in self.marked and movable(self.qm, c)]
        free.sort(key=lambda c: (bool(c.uow_puts or c.uow_gets), c.number))
        now = time.monotonic()
        for conn in free[:max(0, count)]:
            self.marked[conn.number] = Move(target, now)
        self.qm.cond.notify_all()  # a marked connection waiting in MQGET hears it now
        return len(free[:max(0, count)])

    def local_status(self) -> list[tuple[Connection, bool, str]]:
        """Each connection, whether it is movable, and the member it is bound for ('')."""
        return [(c, movable(self.qm, c), getattr(self.marked.get(c.number), "target", ""))
                for c in self.qm.conns.values()]

    # -- the balancing rounds ------------------------------------------------------------------

    def start(self, cluster: str, interval_s: float) -> None:
        """Balance applications over the running members of uniform cluster ``cluster``."""
        self.cluster, self.interval_s = cluster, interval_s
        self.thread = threading.Thread(target=self._run, name="balancer", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End the balancing thread."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=5)

    def _run(self) -> None:
        while not self.stopping.wait(self.interval_s):
            self.round()
            with self.qm.cond:
                if self.marked:
                    self.qm.cond.notify_all()  # a marked unit of work may have timed out

    def round(self) -> dict[str, int]:
        """One balancing round: ask the fullest member for what this one lacks, per
        application name; the connections asked for, by application name."""
        me = self.qm.name
        holding: dict[str, Counter[str]] = {}  # appl -> member -> movable connections
        members = [me]
        with self.qm.cond:
            for conn, can_move, bound in self.local_status():
                if can_move:
                    holding.setdefault(conn.appl, Counter())[bound or me] += 1
        peers = {p.name: p for p in self.qm.peers.others(self.cluster)}
        for name, peer in peers.items():
            answer = ask(peer, "DISPLAY APSTATUS(*) TYPE(LOCAL)")
            if answer is None:
                continue
            members.append(name)
            for line in answer[0]:
                fields = dict(_FIELD.findall(line))
                if fields.get("MOVABLE") == "YES":
                    holding.setdefault(fields["APPLNAME"], Counter())[
                        fields.get("MOVING") or name] += 1
        asked: dict[str, int] = {}
        for appl, counts in holding.items():
            mine = counts[me]
            fullest, most = max(((m, counts[m]) for m in members if m != me),
                                key=lambda pair: pair[1], default=(None, 0))
            share = math.ceil(sum(counts[m] for m in members) / len(members))
            want = min((most - mine) // 2, share - mine)
            if fullest is None or most - mine < 2 or want <= 0:
                continue
            answer = ask(peers[fullest], f"MOVE APPL('{appl.replace(chr(39), chr(39) * 2)}') "
                                         f"COUNT({want}) QMNAME({me})")
            if answer:
                asked[appl] = want
        return asked


@command("DISPLAY", "APSTATUS")
def _display_apstatus(qm, cmd: Command) -> list[str]:
    """``DISPLAY APSTATUS(name|*) TYPE(LOCAL)``: one line per connection of this queue manager
    with its application name, whether it is movable, and where it is asked to move."""
    if (cmd.attrs.get("TYPE") or "LOCAL").upper() != "LOCAL":
        return ["AMQ8405E: only TYPE(LOCAL) is emulated."]
    lines = [f"APPLNAME({conn.appl}) CONN({conn.number:016X}) "
             f"MOVABLE({'YES' if can_move else 'NO'}) MOVING({bound})"
             for conn, can_move, bound in qm.balancer.local_status()
             if wanted(cmd.name, conn.appl)]
    return lines or not_found(cmd.name)


@command("MOVE", "APPL")
def _move_appl(qm, cmd: Command) -> list[str]:
    """``MOVE APPL('name') COUNT(k) QMNAME(QM)`` (emulator only): ask up to k connections of
    the application to move to queue manager QM."""
    target = cmd.attrs.get("QMNAME") or ""
    try:
        count = int(cmd.attrs.get("COUNT") or "1")
    except ValueError:
        return [f"AMQ8405E: COUNT must be a whole number, not {cmd.attrs.get('COUNT')}."]
    if not target:
        return ["AMQ8405E: QMNAME is required."]
    marked = qm.balancer.mark(cmd.name, count, target)
    return [f"MOVING({marked}) APPLNAME({cmd.name}) QMNAME({target})"]
