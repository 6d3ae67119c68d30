"""What moves messages between EMULATED queue managers (tests only; NOT IBM MQ): the two ends of
a channel, as MQ's message channel agents.

The sending end, :class:`MessageChannel`, is a thread: it takes a batch of messages, sends each
as one line of the admin protocol to the other queue manager's listener (a :class:`Link`),
reads one answer per line, and after a failure reconnects and sends again. Its subclasses are
cluster.py's channel to a cluster member (``PUT CLUSMSG``) and channels.py's sender channel
(``BIND CHANNEL``, ``PUT CHLMSG``). The receiving end, :func:`receive`, puts a message such a
line carries on its queue, MQMD as sent.
"""

from __future__ import annotations

import binascii
import contextlib
import socket
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

import mqi
from mqi import MD, get, put
from mqsc import Command, not_found
from objects import Message

PUT_OK = "AMQ8201I"  # the answer to a message line that was put
CONNECT_TIMEOUT_S = 10.0


def quoted(value: str) -> str:
    """``value`` as a quoted MQSC string (kept as written, ``'`` doubled)."""
    return "'" + value.replace("'", "''") + "'"


def message_line(kind: str, queue: str, message: Message, attributes: str = "") -> str:
    """``PUT <kind>('queue') <attributes> MD(hex) BODY(hex)``: ``message`` for ``queue``, its
    MQMD as put with what is left of its expiry."""
    md = bytearray(message.md)
    if message.expires is not None:
        put(MD, md, "Expiry", max(0, int((message.expires - time.monotonic()) * 10)))
    return (f"PUT {kind}({quoted(queue)}) {attributes + ' ' if attributes else ''}"
            f"MD({binascii.hexlify(bytes(md)).decode().upper()}) "
            f"BODY({binascii.hexlify(message.body).decode().upper()})")


def receive(qm: Any, cmd: Command) -> list[str]:
    """Put the message of a ``PUT ...`` line on the queue ``cmd`` names, MQMD as sent (called
    under ``qm.cond``); a missing or full queue is an error answer (MQ would use the
    dead-letter queue)."""
    queue = qm.queues.get(cmd.name)
    if queue is None:
        return not_found(cmd.name)
    if queue.depth() >= queue.maxdepth:
        return [f"AMQ8101S: queue {cmd.name} full."]
    md = bytearray(binascii.unhexlify(cmd.attrs.get("MD") or ""))
    body = binascii.unhexlify(cmd.attrs.get("BODY") or "")
    expiry = get(MD, md, "Expiry")
    expires = None if expiry == mqi.MQEI_UNLIMITED else time.monotonic() + expiry / 10
    queue.add(Message(md, body, expires))
    qm.cond.notify_all()
    return [f"{PUT_OK}: message put."]


class Link:
    """A connection to another queue manager's admin protocol: the first of ``addresses``
    (host, port) that accepts it, as MQ tries the entries of a CONNAME list in turn."""

    def __init__(self, addresses: list[tuple[str, int]]):
        error: OSError = ConnectionError("no address to connect to")
        for host, port in addresses:
            try:
                self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
                break
            except OSError as refused:
                error = refused
        else:
            raise error
        self.sock.sendall(mqi.ADMIN_MAGIC)
        # apart: a text stream's write drops the lines it read ahead
        self.writer = self.sock.makefile("w", encoding="utf-8", newline="\n")
        self.reader = self.sock.makefile("r", encoding="utf-8", newline="\n")

    def exchange(self, lines: list[str]) -> list[str]:
        """Send ``lines`` at once, then read one answer per line (its output lines joined)."""
        self.writer.write("".join(line + "\n" for line in lines))
        self.writer.flush()
        return [self._answer() for _ in lines]

    def _answer(self) -> str:
        lines = []
        for line in self.reader:
            if line.rstrip("\n") == ".":
                return " ".join(lines)
            lines.append(line.rstrip("\n"))
        raise ConnectionError("the other queue manager closed the channel")

    def close(self) -> None:
        """Close the connection (errors ignored)."""
        with contextlib.suppress(OSError):
            self.sock.close()


class MessageChannel(ABC):
    """The sending end of a channel: a thread sending batches over a :class:`Link` it opens
    when it needs one and drops after a failure, pausing :attr:`retry_s` before trying again."""

    retry_s = 1.0

    def __init__(self, thread_name: str):
        self._link: Link | None = None
        self.thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self.thread.start()

    @abstractmethod
    def next_batch(self) -> list[Any] | None:
        """Wait for the next batch to send (it may be empty); None ends the thread."""

    @abstractmethod
    def addresses(self) -> list[tuple[str, int]]:
        """Where the other queue manager listens, in the order to try."""

    @abstractmethod
    def lines(self, batch: list[Any]) -> list[str]:
        """The admin lines that send ``batch``."""

    @abstractmethod
    def delivered(self, batch: list[Any], answers: list[str]) -> bool:
        """Take the answers to :meth:`lines`; False: the batch failed, pause and retry."""

    @abstractmethod
    def failed(self, error: OSError) -> None:
        """The link could not be opened or broke (``error``); the batch is sent again."""

    def pause(self) -> None:
        """Wait before trying again."""
        time.sleep(self.retry_s)

    def _run(self) -> None:
        try:
            while (batch := self.next_batch()) is not None:
                try:
                    self._link = self._link or Link(self.addresses())
                    answers = self._link.exchange(self.lines(batch))
                except OSError as error:
                    self._drop_link()
                    self.failed(error)
                    self.pause()
                    continue
                if not self.delivered(batch, answers):
                    self._drop_link()
                    self.pause()
        finally:
            self._drop_link()

    def _drop_link(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None
