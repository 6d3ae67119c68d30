"""Sender and receiver channels of an EMULATED queue manager (tests only; NOT IBM MQ): the
point-to-point link between two queue managers, a mixin of ``qmgr.QueueManager``.

MQSC:

- ``DEFINE CHANNEL(c) CHLTYPE(SDR) CONNAME('host(port)[,host(port)...]') XMITQ(xq)
  [BATCHSZ(n)] [NPMSPEED(FAST|NORMAL)] [TRPTYPE(TCP)] [REPLACE]``, ``CHLTYPE(RCVR)``; other
  types are kept as definitions only (a CLUSRCVR's CLUSTER joins its cluster: peers.py).
  ``DISPLAY CHANNEL(c|prefix*|*)`` shows them.
- ``START CHANNEL(c)`` (``AMQ8018I``): a sender's thread starts; a stopped receiver accepts its
  sender again. ``STOP CHANNEL(c) [STATUS(STOPPED|INACTIVE)]`` (``AMQ8019I``): a sender ends
  once its current batch is answered, STATUS(STOPPED) (or no status: INACTIVE); a stopped
  receiver refuses its sender. Unknown channel: ``AMQ8147E``.
- ``DISPLAY CHSTATUS(c|prefix*|*)``: one ``AMQ8417I`` line per channel with a status, else
  ``AMQ8420I: Channel Status not found.``. A sender has one from its START (STARTING, then
  RUNNING once the receiver accepted it, RETRYING while it cannot deliver, STOPPED); a
  receiver while its sender was heard within :data:`HEARD_S` (RUNNING), or once stopped.

A started sender (:class:`SenderChannel`) sends up to BATCHSZ committed messages of its
transmission queue at a time to the listener its CONNAME names, over the admin protocol of the
queue managers (mca.py), each line answered:

- ``BIND CHANNEL('c') QMNAME('from') CONNAME('host')`` first, and alone every
  :data:`HEARTBEAT_S` while idle (MQ's heartbeats): ``AMQ9002I: Channel 'c' is starting.
  QMNAME(to)`` when ``to`` defines a receiver ``c`` that is not stopped, else ``AMQ9520E``
  (not defined), ``AMQ9547E`` (not a receiver) or ``AMQ9558E`` (stopped).
- ``PUT CHLMSG('queue') QMNAME('to') CHANNEL('c') MD(hex) BODY(hex)`` per message:
  ``AMQ8201I`` once put on ``queue``, MQMD as sent; the same refusals, ``AMQ9544E`` for another
  queue manager (no multi-hop), ``AMQ8147E`` for a missing queue, ``AMQ8101S`` for a full one.

A message leaves the transmission queue only once answered ``AMQ8201I``; anything else, or a
queue manager that cannot be reached, leaves it there and makes the channel RETRYING, trying
again every :data:`RETRY_S`. NPMSPEED(FAST) and NORMAL behave alike (each batch is answered
message by message, nothing is lost).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mca import PUT_OK, MessageChannel, message_line, quoted, receive
from mqsc import Command, command, not_found, wanted
from objects import XMITQ, Message

SDR, RCVR, CLUSRCVR = "SDR", "RCVR", "CLUSRCVR"
STARTING, RUNNING, RETRYING, STOPPED = "STARTING", "RUNNING", "RETRYING", "STOPPED"
HEARTBEAT_S = 1.0  # an idle sender binds again this often
RETRY_S = 1.0  # a sender that could not deliver tries again after this
HEARD_S = 3.0  # a receiver is RUNNING while its sender was heard this recently
BATCHSZ, NPMSPEED, PORT = 50, "FAST", 1414  # MQ's defaults
BOUND = "AMQ9002I"  # the answer to a BIND its receiver accepted
STATUS_HEAD = "AMQ8417I: Display Channel Status details.   "
NO_STATUS = "AMQ8420I: Channel Status not found."


@dataclass(frozen=True)
class ChannelDefinition:
    """A DEFINE CHANNEL: what the emulator uses of it."""

    name: str
    chltype: str
    trptype: str = "TCP"
    conname: str = ""
    xmitq: str = ""
    batchsz: int = BATCHSZ
    npmspeed: str = NPMSPEED
    cluster: str = ""

    def addresses(self) -> list[tuple[str, int]]:
        """CONNAME's entries ``host(port)`` (port 1414 when left out), in order."""
        found = []
        for entry in self.conname.split(","):
            match = re.fullmatch(r"\s*([^(\s]+)\s*(?:\(\s*(\d+)\s*\))?\s*", entry)
            if match:
                found.append((match.group(1), int(match.group(2) or PORT)))
        return found

    def display(self) -> str:
        """Its ``DISPLAY CHANNEL`` line."""
        more = "".join(f" {key}({value})" for key, value in (
            ("CONNAME", self.conname), ("XMITQ", self.xmitq), ("CLUSTER", self.cluster))
            if value)
        return (f"AMQ8414I: Display Channel details.   CHANNEL({self.name}) "
                f"CHLTYPE({self.chltype}) TRPTYPE({self.trptype}){more} "
                f"BATCHSZ({self.batchsz}) NPMSPEED({self.npmspeed})")


@dataclass
class ReceiverStatus:
    """What a receiver channel knows of its sender."""

    rqmname: str = ""
    conname: str = ""
    heard: float = float("-inf")  # time.monotonic() of the sender's last line
    msgs: int = 0
    batches: int = 0
    in_batch: bool = False  # a message came since the last BIND
    stopped: bool = False

    def display(self, name: str, now: float) -> str | None:
        """Its ``DISPLAY CHSTATUS`` line (None: no status, its sender is not heard)."""
        running = not self.stopped and now - self.heard <= HEARD_S
        if not running and not self.stopped:
            return None
        return (f"{STATUS_HEAD}CHANNEL({name}) CHLTYPE(RCVR) CONNAME({self.conname}) CURRENT "
                f"RQMNAME({self.rqmname}) STATUS({RUNNING if running else STOPPED}) "
                f"SUBSTATE({'RECEIVE' if running else ''}) MSGS({self.msgs}) "
                f"BATCHES({self.batches})")


@dataclass
class ChannelState:
    """This queue manager's channel definitions, senders and receivers' statuses."""

    definitions: dict[str, ChannelDefinition] = field(default_factory=dict)
    senders: dict[str, SenderChannel] = field(default_factory=dict)
    receivers: dict[str, ReceiverStatus] = field(default_factory=dict)


class SenderChannel(MessageChannel):
    """One instance of a sender channel (from START to STOPPED): the thread moving its
    transmission queue's messages to the receiver of its name, and its status. Its state
    changes under the queue manager's lock; the network is used outside it."""

    retry_s = RETRY_S

    def __init__(self, qm: Any, definition: ChannelDefinition):
        super().__init__(f"sdr-{definition.name}")
        self.qm, self.definition = qm, definition
        self.status, self.substate, self.rqmname = STARTING, "", ""
        self.msgs = self.batches = 0
        self.stopping = False
        self.inactive = False  # STOP CHANNEL STATUS(INACTIVE): no status once stopped
        self._complaint = ""  # the last failure logged

    def stop(self, inactive: bool) -> None:
        """End once the current batch is answered (under the queue manager's lock)."""
        self.stopping, self.inactive = True, inactive
        if self.status == STOPPED or not self.thread.is_alive():
            self._stopped()
        else:
            self.qm.cond.notify_all()

    def display(self) -> str:
        """Its ``DISPLAY CHSTATUS`` line."""
        d = self.definition
        return (f"{STATUS_HEAD}CHANNEL({d.name}) CHLTYPE(SDR) CONNAME({d.conname}) CURRENT "
                f"RQMNAME({self.rqmname}) STATUS({self.status}) SUBSTATE({self.substate}) "
                f"XMITQ({d.xmitq}) MSGS({self.msgs}) BATCHES({self.batches})")

    # -- MessageChannel ----------------------------------------------------------------------

    def next_batch(self) -> list[Message] | None:
        """The next BATCHSZ committed messages of the transmission queue, once there are
        any; at once while not RUNNING (to bind), none after HEARTBEAT_S idle (a heartbeat);
        None once stopping."""
        cond = self.qm.cond
        with cond:
            deadline = time.monotonic() + HEARTBEAT_S
            while not self.stopping:
                batch = self._waiting()
                idle = deadline - time.monotonic()
                if batch or self.status != RUNNING or idle <= 0:
                    if self.status == RUNNING:
                        self.substate = "SEND" if batch else "HEARTBEATING"
                    return batch
                self.substate = "MQGET"
                cond.wait(idle)
            self._stopped()
            return None

    def addresses(self) -> list[tuple[str, int]]:
        """CONNAME's entries."""
        return self.definition.addresses()

    def lines(self, batch: list[Message]) -> list[str]:
        """``BIND CHANNEL``, then ``PUT CHLMSG`` of each message."""
        name = quoted(self.definition.name)
        lines = [f"BIND CHANNEL({name}) QMNAME({quoted(self.qm.name)}) "
                 f"CONNAME({quoted(self.qm.peers.me.host)})"]
        for message in batch:
            queue, qmgr = message.destination
            lines.append(message_line("CHLMSG", queue, message,
                                      f"QMNAME({quoted(qmgr)}) CHANNEL({name})"))
        return lines

    def delivered(self, batch: list[Message], answers: list[str]) -> bool:
        """The messages answered as put leave the transmission queue; any other answer makes
        the channel RETRYING, the others staying where they are."""
        with self.qm.cond:
            bind, results = answers[0], answers[1:]
            if not bind.startswith(BOUND):
                self._retrying(bind)
                return False
            found = re.search(r"QMNAME\(([^)]*)\)", bind)
            self.rqmname = found.group(1) if found else ""
            queue = self.qm.queues.get(self.definition.xmitq)
            sent = [m for m, answer in zip(batch, results, strict=True)
                    if answer.startswith(PUT_OK)]
            for message in sent:
                if queue is not None:
                    with contextlib.suppress(ValueError, KeyError):  # got by an application
                        queue.remove(message)
            self.msgs += len(sent)
            self.batches += bool(sent)
            refused = next((answer for answer in results if not answer.startswith(PUT_OK)),
                           None)
            if refused is not None:
                self._retrying(refused)
                return False
            self.status, self._complaint = RUNNING, ""
            return True

    def failed(self, error: OSError) -> None:
        """The receiving queue manager cannot be reached: RETRYING."""
        with self.qm.cond:
            self._retrying(f"{self.definition.conname}: {error}")

    def pause(self) -> None:
        """Wait :data:`RETRY_S`, or less if stopped meanwhile."""
        with self.qm.cond:
            self.qm.cond.wait_for(lambda: self.stopping, self.retry_s)

    # -- its state ---------------------------------------------------------------------------

    def _waiting(self) -> list[Message]:
        """The first BATCHSZ messages of the transmission queue; one without a destination
        (put on it by name) is taken off with a line in the log, where MQ would use the
        dead-letter queue."""
        queue = self.qm.queues.get(self.definition.xmitq)
        if queue is None or queue.usage != XMITQ:
            return []
        batch = queue.peek(self.definition.batchsz)
        for stray in [m for m in batch if m.destination is None]:
            queue.remove(stray)
            self._log("a message without a transmission header discarded")
        return [m for m in batch if m.destination is not None]

    def _retrying(self, reason: str) -> None:
        self.status, self.substate = RETRYING, ""
        if reason != self._complaint:
            self._complaint = reason
            self._log(f"retrying: {reason}")

    def _stopped(self) -> None:
        self.status, self.substate = STOPPED, ""
        if self.inactive and self.qm.channels.senders.get(self.definition.name) is self:
            del self.qm.channels.senders[self.definition.name]
        self.qm.cond.notify_all()

    def _log(self, text: str) -> None:
        print(f"channel {self.definition.name}: {text}", file=sys.stderr, flush=True)


class Channels:
    """The channel commands of the queue manager (a mixin of ``QueueManager``; it uses its
    ``name``, ``cond``, ``queues``, ``peers`` and ``channels``)."""

    channels: ChannelState

    @command("DEFINE", "CHANNEL")
    def _define_channel(self, cmd: Command) -> list[str]:
        """A channel definition; a sender needs CONNAME and XMITQ. A running sender keeps the
        definition it started with until it is started again."""
        if cmd.name in self.channels.definitions and "REPLACE" not in cmd.attrs:
            return [f"AMQ8150E: object {cmd.name} already exists."]
        attrs = {key: (value or "").strip() for key, value in cmd.attrs.items()}
        chltype = attrs.get("CHLTYPE", "").upper()
        if not chltype:
            return ["AMQ8405E: CHLTYPE is required."]
        if chltype == SDR and not (attrs.get("CONNAME") and attrs.get("XMITQ")):
            return ["AMQ8405E: a sender channel needs CONNAME and XMITQ."]
        if not attrs.get("BATCHSZ", str(BATCHSZ)).isdigit():
            return [f"AMQ8405E: BATCHSZ({attrs['BATCHSZ']}) is not a number."]
        definition = ChannelDefinition(
            cmd.name, chltype, attrs.get("TRPTYPE") or "TCP", attrs.get("CONNAME", ""),
            attrs.get("XMITQ", ""), max(1, int(attrs.get("BATCHSZ") or BATCHSZ)),
            (attrs.get("NPMSPEED") or NPMSPEED).upper(), attrs.get("CLUSTER", ""))
        self.channels.definitions[cmd.name] = definition
        if chltype == CLUSRCVR and definition.cluster:
            self.peers.announce(tuple({*self.peers.me.clusters, definition.cluster}))
        return ["AMQ8014I: IBM MQ channel created."]

    @command("DISPLAY", "CHANNEL")
    def _display_channels(self, cmd: Command) -> list[str]:
        found = [d.display() for name, d in sorted(self.channels.definitions.items())
                 if wanted(cmd.name, name)]
        return found or not_found(cmd.name)

    @command("START", "CHANNEL")
    def _start_channel(self, cmd: Command) -> list[str]:
        """A sender starts (a stop not yet done is called off); a receiver accepts again."""
        definition = self.channels.definitions.get(cmd.name)
        if definition is None:
            return not_found(cmd.name)
        if definition.chltype == SDR:
            sender = self.channels.senders.get(cmd.name)
            if sender is not None and sender.status != STOPPED:
                sender.stopping = False
            else:
                self.channels.senders[cmd.name] = SenderChannel(self, definition)
                self.channels.senders[cmd.name].start()
        elif cmd.name in self.channels.receivers:
            self.channels.receivers[cmd.name].stopped = False
        return ["AMQ8018I: Start IBM MQ channel accepted."]

    @command("STOP", "CHANNEL")
    def _stop_channel(self, cmd: Command) -> list[str]:
        """A sender ends after its current batch; a receiver refuses its sender. A sender
        never started shows STOPPED too. STATUS(INACTIVE): no status left."""
        definition = self.channels.definitions.get(cmd.name)
        if definition is None:
            return not_found(cmd.name)
        inactive = (cmd.attrs.get("STATUS") or STOPPED).upper() == "INACTIVE"
        if definition.chltype == SDR:
            if cmd.name not in self.channels.senders:
                self.channels.senders[cmd.name] = SenderChannel(self, definition)
            self.channels.senders[cmd.name].stop(inactive)
        elif definition.chltype == RCVR:
            receiver = self.channels.receivers.setdefault(cmd.name, ReceiverStatus())
            receiver.stopped, receiver.heard = not inactive, float("-inf")
        return ["AMQ8019I: Stop IBM MQ channel accepted."]

    @command("DISPLAY", "CHSTATUS")
    def _display_channel_status(self, cmd: Command) -> list[str]:
        """Every sender and receiver channel with a status, by name."""
        senders, receivers = self.channels.senders, self.channels.receivers
        now = time.monotonic()
        lines = []
        for name in sorted({*senders, *receivers}):
            if not wanted(cmd.name, name):
                continue
            if name in senders:
                lines.append(senders[name].display())
            if name in receivers:
                line = receivers[name].display(name, now)
                lines += [line] if line else []
        return lines or [NO_STATUS]

    # -- the receiving end (the emulator's channel protocol, not MQSC) -------------------------

    @command("BIND", "CHANNEL")
    def _bind_channel(self, cmd: Command) -> list[str]:
        """A sender starting or beating: accepted by a receiver of its name not stopped."""
        receiver, refusal = self._receiver(cmd.name)
        if receiver is None:
            return [refusal]
        receiver.rqmname = cmd.attrs.get("QMNAME") or ""
        receiver.conname = cmd.attrs.get("CONNAME") or ""
        receiver.in_batch = False
        return [f"{BOUND}: Channel '{cmd.name}' is starting. QMNAME({self.name})"]

    @command("PUT", "CHLMSG")
    def _receive_channel_message(self, cmd: Command) -> list[str]:
        """A message a sender delivers: onto the queue it names, on this queue manager."""
        channel = cmd.attrs.get("CHANNEL") or ""
        receiver, refusal = self._receiver(channel)
        if receiver is None:
            return [refusal]
        qmgr = cmd.attrs.get("QMNAME") or ""
        if qmgr != self.name:
            return [f"AMQ9544E: Messages for queue manager {qmgr} not put: channel {channel} "
                    f"ends at {self.name}."]
        answer = receive(self, cmd)
        if answer[0].startswith(PUT_OK):
            receiver.msgs += 1
            receiver.batches += not receiver.in_batch
            receiver.in_batch = True
        return answer

    def _receiver(self, name: str) -> tuple[ReceiverStatus | None, str]:
        """The status of receiver channel ``name``, heard now; or None and the refusal."""
        definition = self.channels.definitions.get(name)
        if definition is None:
            return None, f"AMQ9520E: Channel not defined remotely: {name}."
        if definition.chltype != RCVR:
            return None, f"AMQ9547E: Type of remote channel {name} not suitable."
        receiver = self.channels.receivers.setdefault(name, ReceiverStatus())
        if receiver.stopped:
            return None, f"AMQ9558E: Remote channel {name} is not currently available."
        receiver.heard = time.monotonic()
        return receiver, ""
