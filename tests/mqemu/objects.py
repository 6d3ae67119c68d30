"""What an EMULATED queue manager holds (tests only; NOT IBM MQ): messages, queues,
subscriptions, handles and connections, MQ's topic wildcard matching, and the MQINQ answer built
from a handle's attributes."""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import mqi
from mqi import MD, get
from properties import Property

MAX_DEPTH = 5000  # MQ's default MAXDEPTH
NORMAL, XMITQ = "NORMAL", "XMITQ"  # a local queue's USAGE
FAILED = mqi.MQCC_FAILED
Reply = tuple[int, int, list[bytes]]
Attributes = dict[int, int | bytes | None]
"""What MQINQ may answer for an object: selector -> integer, blank-padded characters, or None
(an attribute of local queues that this object does not have: MQIAV_NOT_APPLICABLE)."""


def fail(reason: int) -> Reply:
    """A failed call with ``reason``."""
    return FAILED, reason, []


@dataclass
class Message:
    """One message: its MQMD (always Version 2, 364 bytes), body, expiry and properties."""

    md: bytearray
    body: bytes
    expires: float | None  # time.monotonic() deadline, None = unlimited
    properties: dict[str, Property] = field(default_factory=dict)
    destination: tuple[str, str] | None = None
    """On a transmission queue: the queue and queue manager it goes to (MQXQH's RemoteQName
    and RemoteQMgrName)."""

    @property
    def priority(self) -> int:
        return get(MD, self.md, "Priority")

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires


@dataclass
class Queue:
    """A local (or temporary dynamic) queue: per-priority FIFO lists of committed messages; a
    transmission queue has USAGE(XMITQ)."""

    name: str
    maxdepth: int = MAX_DEPTH
    model: bool = False
    usage: str = NORMAL
    temporary_of: int = 0  # the connection that created this temporary dynamic queue
    levels: dict[int, deque[Message]] = field(default_factory=dict)
    uncommitted: int = 0  # put or got under syncpoint, not yet committed (counted in CURDEPTH)
    opens_in: int = 0
    opens_out: int = 0
    msgs_in: int = 0  # put (committed) since the last RESET QSTATS
    msgs_out: int = 0  # taken by destructive gets (not backed out) since then

    def depth(self) -> int:
        return sum(len(level) for level in self.levels.values()) + self.uncommitted

    def add(self, message: Message, front: bool = False) -> None:
        """A message put (at the back), or one a backed-out get returns (at the front)."""
        level = self.levels.setdefault(message.priority, deque())
        if front:
            level.appendleft(message)
            self.msgs_out -= 1
        else:
            level.append(message)
            self.msgs_in += 1

    def take(self, match: Callable[[Message], bool] | None) -> Message | None:
        """The first matching message of the highest priority (expired ones are dropped)."""
        found = self._in_order()
        try:
            return next((m for m in found if match is None or match(m)), None)
        finally:
            found.close()

    def peek(self, count: int) -> list[Message]:
        """The first ``count`` messages in the order MQGET takes them, left on the queue."""
        found = self._in_order()
        try:
            return list(itertools.islice(found, count))
        finally:
            found.close()

    def _in_order(self) -> Generator[Message, None, None]:
        """Committed messages, highest priority first, FIFO within one; the expired ones met
        are dropped once the caller has stopped reading."""
        now = time.monotonic()
        for priority in sorted(self.levels, reverse=True):
            level = self.levels[priority]
            expired = []
            try:
                for message in level:
                    if message.expired(now):
                        expired.append(message)
                    else:
                        yield message
            finally:
                for message in expired:
                    level.remove(message)

    def remove(self, message: Message) -> None:
        """A destructive get of ``message``."""
        self.levels[message.priority].remove(message)
        self.msgs_out += 1


@dataclass
class Subscription:
    """A subscription: topic string (with '#'/'+' wildcards) and where publications go."""

    name: str
    topic: str
    dest: str
    durable: bool = True
    managed: bool = False
    correl_id: bytes = bytes(24)
    owner: int = 0  # connection of a non-durable subscription


@dataclass
class Handle:
    """What an hobj names: a queue, a topic (for publishing), the queue manager, or an hsub."""

    kind: str  # "queue" | "topic" | "qmgr" | "sub"
    name: str
    options: int = 0

    def resolved(self, qmgr: str) -> tuple[str, str]:
        """The queue and queue manager an MQOPEN of it resolved to (MQOD ResolvedQName,
        ResolvedQMgrName), ``qmgr`` being the local queue manager."""
        return self.name, qmgr

    @property
    def opened_queue(self) -> str | None:
        """The local queue whose IPPROCS/OPPROCS count this handle."""
        return self.name if self.kind == "queue" else None


@dataclass
class Connection:
    """One client connection: its handles and its unit of work."""

    number: int
    appl: str
    user: str
    conname: str
    handles: dict[int, Handle] = field(default_factory=dict)
    next_handle: itertools.count = field(default_factory=lambda: itertools.count(101))
    uow_puts: list[tuple[Queue, Message]] = field(default_factory=list)
    uow_gets: list[tuple[Queue, Message]] = field(default_factory=list)
    events: bool = False
    sock: socket.socket | None = None  # for STOP CONN
    msg_handles: dict = field(default_factory=dict)  # hmsg -> properties.MessageHandle
    options: int = 0  # MQCNO Options (reconnection: rebalance.py)


def topic_matches(pattern: str, topic: str) -> bool:
    """MQ's topic-based wildcards: '+' one level, '#' any number of levels (including none)."""
    def match(p: list[str], t: list[str]) -> bool:
        if not p:
            return not t
        if p[0] == "#":
            return any(match(p[1:], t[i:]) for i in range(len(t) + 1))
        if not t:
            return False
        return (p[0] == "+" or p[0] == t[0]) and match(p[1:], t[1:])
    return match(pattern.split("/"), topic.split("/"))


def answer_inquiry(known: Attributes, selectors: list[int], int_count: int,
                   char_length: int) -> Reply:
    """MQINQ's reply for ``selectors`` of an object with ``known`` attributes: unknown ones fail
    (MQRC_SELECTOR_ERROR); a None one is MQIAV_NOT_APPLICABLE with MQCC_WARNING and
    MQRC_SELECTOR_NOT_FOR_TYPE ("MQINQ and clusters", and remote queues)."""
    ints: list[int] = []
    chars = b""
    cc, rc = mqi.MQCC_OK, mqi.MQRC_NONE
    for selector in selectors:
        if selector not in known:
            return fail(mqi.MQRC_SELECTOR_ERROR)
        value = known[selector]
        if value is None:
            ints.append(mqi.MQIAV_NOT_APPLICABLE)
            cc, rc = mqi.MQCC_WARNING, mqi.MQRC_SELECTOR_NOT_FOR_TYPE
        elif isinstance(value, int):
            ints.append(value)
        else:
            chars += value
    if len(ints) > int_count:
        return fail(mqi.MQRC_INT_ATTR_COUNT_TOO_SMALL)
    if len(chars) > char_length:
        return fail(mqi.MQRC_CHAR_ATTRS_TOO_SHORT)
    return cc, rc, [struct.pack(f"<{len(ints)}i", *ints), chars]
