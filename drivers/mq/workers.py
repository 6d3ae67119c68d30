"""The MQ driver's workers: one thread and one connection each, for senders, requesters,
receivers and responders (see :mod:`drivers.mq.driver` for what each does)."""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from collections import Counter
from typing import Any, Protocol

from drivers.base import rotation
from drivers.header import HEADER_SIZE
from drivers.mq.client import (
    BACKOFF_S,
    COMMIT_EVERY_S,
    FIRST_BUFFER,
    PACING_TICK_S,
    PAUSED_POLL_S,
    MqEndpoint,
    Session,
    text_of,
)
from drivers.mq.settings import MqSettings
from drivers.protocol import Destination
from drivers.routing import KeyPicker
from drivers.workers import (
    DESTINATION_SEQUENCE,
    ReceiverRole,
    Recorder,
    RequesterRole,
    ResponderRole,
    SenderRole,
)
from orchestrator.specs.mq import reply_queue_name
from orchestrator.specs.mqtopics import topic_string


class MqDriver(Protocol):
    """What a worker uses of :class:`drivers.mq.driver.MqDriver`: its settings, the MQI
    module, one lock over the recorder, and how to connect."""

    destination: Destination
    settings: MqSettings
    recorder: Recorder
    mqi: Any
    C: Any
    Error: type[Exception]
    lock: threading.RLock
    connection_reasons: frozenset[int]
    consumer_delay_s: float
    receivers_paused: bool
    get_wait_ms: int
    key_picker: KeyPicker

    def connect(self, endpoint: str, appltag: str) -> Any:
        """A new connection to ``endpoint`` carrying ``appltag``."""


class Worker:
    """One role on its own thread and connection; subclasses do one step of work at a time."""

    kind = "worker"
    consumes = False  # a receiver: counted as consuming while its queue is open

    def __init__(self, driver: MqDriver, role: Any, endpoint: str, queue: Any, number: int):
        self.driver = driver
        self.role = role
        self.queue = queue
        self.endpoints = rotation(driver.destination.peers(endpoint), endpoint)
        self.attempt = 0
        self.session: Session | None = None
        self.stopping = threading.Event()
        self.woken = threading.Event()  # set to end a pacing sleep early (stop, a new rate)
        self.drain_until = 0.0  # a stopping requester waits for replies until then
        self.move_to: tuple[str, Any] | None = None
        self.C = driver.C
        MqEndpoint.parse(endpoint, driver.settings)  # a bad endpoint fails here, not later
        self.thread = threading.Thread(target=self._run, name=f"mq-{self.kind}-{number}",
                                       daemon=True)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` between paced sends, less when woken (stopping, a new rate)."""
        if self.woken.wait(seconds):
            self.woken.clear()

    def wake(self) -> None:
        """End the current pacing sleep, if any."""
        self.woken.set()

    @property
    def appltag(self) -> str:
        return self.driver.settings.appltag_sender

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        driver = self.driver
        try:
            while True:
                if self.session is None:
                    if self.stopping.is_set():
                        break
                    if self.move_to is not None:  # not connected: connect there directly
                        endpoint, queue = self.move_to
                        self.move_to = None
                        self.queue = queue or self.queue
                        self.endpoints = rotation(driver.destination.peers(endpoint), endpoint)
                        self.attempt = 0
                    self._connect()
                    continue
                move = self.move_to
                if move is not None and self._ready_to_move():
                    self._move(*move)
                    continue
                try:
                    if not self._step():
                        break
                except driver.Error as error:
                    self._failed(error)
        except Exception as error:  # noqa: BLE001 - a bug: reported, not a silent dead thread
            with driver.lock:
                driver.recorder.error(f"MQ {self.kind} worker failed: "
                                      f"{type(error).__name__}: {error}")
        finally:
            self._finish()

    def _step(self) -> bool:
        """Do one unit of work; False when the worker is done."""
        raise NotImplementedError

    def _open(self, session: Session, queue: Any) -> None:
        """Open the worker's queues on ``session``."""
        raise NotImplementedError

    def _session(self, endpoint: str, queue: Any) -> Session:
        session = Session(self.driver.mqi, self.driver.connect(endpoint, self.appltag), endpoint)
        try:
            self._open(session, queue)
        except BaseException:
            session.close()
            raise
        return session

    def _connect(self) -> None:
        endpoint = self.endpoints[self.attempt % len(self.endpoints)]
        try:
            self.session = self._session(endpoint, self.queue)
        except self.driver.Error as error:
            self._retry(f"connect to {endpoint} failed: {error}")
            return
        self.attempt = 0
        self._count(1)

    def _count(self, change: int) -> None:
        """A connection (and, for a receiver, a consumer) more or fewer."""
        with self.driver.lock:
            self.driver.recorder.connections += change
            if self.consumes:
                self.driver.recorder.consumer(self.role, change > 0)

    def _retry(self, message: str) -> None:
        """Count an error and a reconnect, then back off before the next attempt."""
        with self.driver.lock:
            self.driver.recorder.error(message)
            self.driver.recorder.reconnects += 1
        delay = BACKOFF_S[min(self.attempt, len(BACKOFF_S) - 1)]
        self.attempt += 1
        self.stopping.wait(delay)

    def _failed(self, error: Exception) -> None:
        reason = getattr(error, "reason", None)
        if reason is None or reason in self.driver.connection_reasons:
            self._drop()
            self._retry(f"connection lost: {error}")
            return
        with self.driver.lock:
            self.driver.recorder.error(f"MQ {self.kind}: {error}")
        self._after_error(reason)
        self.stopping.wait(BACKOFF_S[0])

    def _drop(self) -> None:
        """Let a broken connection go; what was not committed is back in its queue."""
        session, self.session = self.session, None
        if session is not None:
            self._lost()
            session.close()
            self._count(-1)

    def _finish(self) -> None:
        session = self.session
        if session is not None:
            try:
                self._settle()
            except self.driver.Error as error:
                with self.driver.lock:
                    self.driver.recorder.error(f"MQ {self.kind} closing: {error}")
            self.session = None
            session.close()
            self._count(-1)
        self._finished()

    # -- moves ---------------------------------------------------------------------------------

    def request_move(self, endpoint: str, queue: Any) -> None:
        """Ask the worker to move between two steps (see :meth:`MqDriver.move`)."""
        self.move_to = (endpoint, queue)

    def _move(self, endpoint: str, queue: Any) -> None:
        target = queue or self.queue
        try:
            session = self._session(endpoint, target)
        except self.driver.Error as error:
            with self.driver.lock:
                self.driver.recorder.error(f"move to {endpoint} failed: {error}")
            self.stopping.wait(BACKOFF_S[0])  # still here; try again after the next step
            return
        try:
            self._settle()
        except self.driver.Error as error:  # backed out: the messages come again (redelivered)
            self._after_error(getattr(error, "reason", None))
            with self.driver.lock:
                self.driver.recorder.error(f"MQ {self.kind} before moving: {error}")
        old, self.session = self.session, session
        self.queue = target
        self.endpoints = rotation(self.driver.destination.peers(endpoint), endpoint)
        if self.move_to == (endpoint, queue):
            self.move_to = None
        if old is not None:
            old.close()

    # -- hooks -----------------------------------------------------------------------------------

    def _ready_to_move(self) -> bool:
        return True

    def _settle(self) -> None:
        """Commit outstanding syncpoint work."""

    def _after_error(self, reason: int | None) -> None:
        """Clean up after a failed call on a live connection."""

    def _lost(self) -> None:
        """The connection broke (before it is closed)."""

    def _finished(self) -> None:
        """The thread ends."""


class SenderWorker(Worker):
    kind = "sender"
    role: SenderRole

    def __init__(self, driver: MqDriver, role: SenderRole, endpoint: str, queue: Any):
        super().__init__(driver, role, endpoint, queue, role.producer_id)
        mqi, C, destination = driver.mqi, self.C, driver.destination
        self.md = mqi.MD()
        self.md.Persistence = C.MQPER_PERSISTENT if destination.persistent \
            else C.MQPER_NOT_PERSISTENT
        self.md.Format = C.MQFMT_NONE
        self.pmo = mqi.PMO()
        self.pmo.Options = C.MQPMO_NO_SYNCPOINT | C.MQPMO_NEW_MSG_ID | C.MQPMO_FAIL_IF_QUIESCING
        self.next_seq = self.end_seq = 0  # taken from the role, not yet put: [next, end)
        self.topics = [topic_string(destination.exchange, key)
                       for key in destination.routing_keys or ("",)] \
            if destination.exchange else []
        self.picker = driver.key_picker  # which topic each message goes to (queues: _open)
        self.confirms = destination.confirms

    def _open(self, session: Session, queue: Any) -> None:
        """Open a topic per routing key (publishing to an exchange), else the queue or, for
        several, each (put to in turn). Queues are opened bound as ``workload.bind`` says: on
        a cluster queue MQ then picks an instance once for the handle (MQOO_BIND_ON_OPEN) or
        for every message (MQOO_BIND_NOT_FIXED); other queues ignore it."""
        C = self.C
        options = C.MQOO_OUTPUT | C.MQOO_FAIL_IF_QUIESCING
        if self.topics:
            session.outs = [session.open_topic(topic, options) for topic in self.topics]
            session.sends = [topic.pub for topic in session.outs]
            return
        routes = queue if isinstance(queue, list) else [queue]
        options |= C.MQOO_BIND_NOT_FIXED if self.driver.destination.bind == "not-fixed" \
            else C.MQOO_BIND_ON_OPEN
        session.outs = [session.open(r, options) for r in routes]
        session.sends = [out.put for out in session.outs]
        self.picker = KeyPicker(len(routes), "sequential")  # the queue may change in a move

    def _step(self) -> bool:
        role, lock = self.role, self.driver.lock
        with lock:
            if self.next_seq == self.end_seq:
                if self.stopping.is_set() or not role.active or role.done:
                    return False
                n = role.due()
                if n:
                    self.next_seq = role.take(n)
                    self.end_seq = self.next_seq + n
            delay = PAUSED_POLL_S if role.paused else role.delay_s()
            paced = role.paused or role.schedule.rate > 0
        wake = time.monotonic() + delay
        if self.next_seq < self.end_seq:
            self._put_pending()
        pause = wake - time.monotonic()
        if paced:
            pause = max(pause, PACING_TICK_S)
        if pause > 0:
            self.sleep(pause)
        return True

    def _put_pending(self) -> None:
        """Put the numbers taken, noting the queue manager each put resolved to (a cluster
        queue's instance; the PMO says after each put)."""
        role, sends, md, pmo = self.role, self.session.sends, self.md, self.pmo
        first, put, went = self.next_seq, 0, []
        try:
            if len(sends) == 1:
                send = sends[0]
                for seq in range(first, self.end_seq):
                    send(role.body(seq), md, pmo)
                    self.next_seq = seq + 1
                    put += 1
                    went.append(pmo.ResolvedQMgrName)
            else:
                picks = self.picker.picks(role.producer_id, first, self.end_seq - first)
                for seq, pick in zip(range(first, self.end_seq), picks, strict=True):
                    sends[pick](role.body(seq), md, pmo)
                    self.next_seq = seq + 1
                    put += 1
                    went.append(pmo.ResolvedQMgrName)
        finally:
            if put:
                counts = {text: n for name, n in Counter(went).items() if (text := text_of(name))}
                first_ones = [text for name in went[:DESTINATION_SEQUENCE]
                              if (text := text_of(name))]
                with self.driver.lock:
                    recorder = self.driver.recorder
                    recorder.sent += put
                    if self.confirms:
                        recorder.confirmed += put
                    recorder.destined(counts, first_ones)

    def _after_error(self, reason: int | None) -> None:
        if reason == getattr(self.C, "MQRC_CALL_INTERRUPTED", None):
            with self.driver.lock:  # the put's outcome is unknown: put again, maybe twice
                self.driver.recorder.republished += 1

    def _finished(self) -> None:
        left = self.end_seq - self.next_seq
        if not left:
            return
        with self.driver.lock:
            if self.role.seq == self.end_seq:  # hand the unsent numbers back: not sent at all
                self.role.seq = self.next_seq
            else:
                self.driver.recorder.error(f"producer {self.role.producer_id}: {left} "
                                           "messages could not be put")
        self.end_seq = self.next_seq


class RequesterWorker(SenderWorker):
    kind = "requester"
    role: RequesterRole

    def __init__(self, driver: MqDriver, role: RequesterRole, endpoint: str, queue: Any):
        if isinstance(queue, list):
            raise ValueError("a requester puts to one request queue")
        super().__init__(driver, role, endpoint, queue)
        mqi, C = driver.mqi, self.C
        self.nonce = os.urandom(8)  # this driver's requests; replies to others never match
        self.md.MsgType = C.MQMT_REQUEST
        self.pmo.Options = C.MQPMO_NO_SYNCPOINT | C.MQPMO_FAIL_IF_QUIESCING  # MsgId is ours
        self.reply_md = mqi.MD()
        self.reply_gmo = mqi.GMO()
        self.reply_gmo.Options = C.MQGMO_WAIT | C.MQGMO_NO_SYNCPOINT | C.MQGMO_FAIL_IF_QUIESCING
        self.reply_gmo.Version = max(self.reply_gmo.Version, C.MQGMO_VERSION_2)
        self.reply_gmo.MatchOptions = C.MQMO_MATCH_CORREL_ID
        self.buffer = FIRST_BUFFER

    def _open(self, session: Session, queue: Any) -> None:
        C = self.C
        session.outs = [session.open(queue, C.MQOO_OUTPUT | C.MQOO_FAIL_IF_QUIESCING)]
        session.reply_name = reply_queue_name(queue, self.driver.settings.reply_queue)
        session.inq = session.open(session.reply_name,
                                   C.MQOO_INPUT_SHARED | C.MQOO_FAIL_IF_QUIESCING)

    def correl_id(self, correlation: str) -> bytes:
        """The 24-byte MsgId/CorrelId of request ``producer:seq`` (each in hex digits)."""
        producer, seq = correlation.split(":")
        return self.nonce + struct.pack("!IQ4x", int(producer, 16), int(seq, 16))

    def _step(self) -> bool:
        role, driver = self.role, self.driver
        stopping = self.stopping.is_set()
        with driver.lock:
            role.expire(driver.destination.reply_timeout_s)
            if stopping or self.move_to is not None:
                requests = []
            else:
                requests = [role.request() for _ in range(role.room())]
            oldest = next(iter(role.waiting), None)
            free = role.paused or not role.schedule.rate
            delay = PAUSED_POLL_S if free else role.delay_s()
        if stopping and (oldest is None or time.monotonic() > self.drain_until):
            return False
        if requests:
            self._send(requests)
        if oldest is None:
            self.sleep(max(delay, PACING_TICK_S))
            return True
        wait_s = driver.get_wait_ms / 1000 if free or stopping else min(
            driver.get_wait_ms / 1000, max(delay, PACING_TICK_S))
        self._await_reply(oldest, max(1, int(wait_s * 1000)))
        return True

    def _send(self, requests: list[tuple[str, bytes]]) -> None:
        queue, md, pmo = self.session.outs[0], self.md, self.pmo
        md.ReplyToQ = self.session.reply_name.encode()
        md.ReplyToQMgr = b""  # the queue manager puts its own name (it may have moved)
        sent = 0
        try:
            for correlation, body in requests:
                md.MsgId = md.CorrelId = self.correl_id(correlation)
                queue.put(body, md, pmo)
                sent += 1
        finally:
            with self.driver.lock:
                self.driver.recorder.sent += sent
                if self.confirms:
                    self.driver.recorder.confirmed += sent
                if sent < len(requests):  # never put: as if never asked for
                    self._unrequest([c for c, _ in requests[sent:]])

    def _unrequest(self, correlations: list[str]) -> None:
        role = self.role
        for correlation in correlations:
            role.waiting.pop(correlation, None)
        role.seq -= len(correlations)
        role.owed += len(correlations)

    def _await_reply(self, correlation: str, wait_ms: int) -> None:
        C, md, gmo = self.C, self.reply_md, self.reply_gmo
        md.MsgId = C.MQMI_NONE
        md.CorrelId = self.correl_id(correlation)
        gmo.WaitInterval = wait_ms
        try:
            self.session.inq.get(self.buffer, md, gmo)
        except self.driver.mqi.MQMIError as error:
            if error.reason == C.MQRC_NO_MSG_AVAILABLE:
                return
            if error.reason == C.MQRC_TRUNCATED_MSG_FAILED:
                self.buffer = _grown(self.buffer, error)
                return
            raise
        with self.driver.lock:
            self.role.on_reply(correlation)

    def _ready_to_move(self) -> bool:
        with self.driver.lock:
            return not self.role.waiting

    def _lost(self) -> None:
        with self.driver.lock:
            self.role.lost_connection()

    def _after_error(self, reason: int | None) -> None:
        pass

    def _finished(self) -> None:
        with self.driver.lock:
            self.role.lost_connection()  # unanswered at the end: timed out


class ReceiverWorker(Worker):
    kind = "receiver"
    consumes = True
    role: ReceiverRole

    def __init__(self, driver: MqDriver, role: ReceiverRole, endpoint: str, queue: str):
        super().__init__(driver, role, endpoint, queue, role.receiver_id)
        mqi, C, destination = driver.mqi, self.C, driver.destination
        self.responds = isinstance(role, ResponderRole)
        self.syncpoint = destination.manual_ack
        self.unit = self.responds and self.syncpoint and destination.unit_of_work
        self.commit_every = 1 if self.unit else max(1, destination.prefetch // 4)
        self.md = mqi.MD()
        self.gmo = mqi.GMO()
        self.gmo.Options = C.MQGMO_WAIT | C.MQGMO_FAIL_IF_QUIESCING | (
            C.MQGMO_SYNCPOINT if self.syncpoint else C.MQGMO_NO_SYNCPOINT)
        self.gmo.WaitInterval = driver.get_wait_ms
        self.gmo.Version = max(self.gmo.Version, C.MQGMO_VERSION_2)
        self.gmo.MatchOptions = C.MQMO_NONE  # any message: the MD's ids are output only
        self.buffer = FIRST_BUFFER
        self.unacked = 0
        self.last_commit = time.monotonic()
        if self.responds:
            self.padding = bytes(max(0, destination.reply_size - HEADER_SIZE))
            self.reply_md = mqi.MD()
            self.reply_md.MsgType = C.MQMT_REPLY
            self.reply_md.Format = C.MQFMT_NONE
            self.reply_md.Persistence = C.MQPER_PERSISTENT if destination.persistent \
                else C.MQPER_NOT_PERSISTENT
            self.reply_md.Expiry = max(1, int(destination.reply_timeout_s * 10))  # tenths
            self.reply_pmo = mqi.PMO()
            self.reply_pmo.Options = C.MQPMO_NEW_MSG_ID | C.MQPMO_FAIL_IF_QUIESCING | (
                C.MQPMO_SYNCPOINT if self.unit else C.MQPMO_NO_SYNCPOINT)

    @property
    def appltag(self) -> str:
        return self.driver.settings.appltag_receiver

    def _open(self, session: Session, queue: Any) -> None:
        C = self.C
        session.inq = session.open(queue, C.MQOO_INPUT_SHARED | C.MQOO_FAIL_IF_QUIESCING)

    def _step(self) -> bool:
        if self.stopping.is_set():
            return False
        C, md, driver = self.C, self.md, self.driver
        if driver.receivers_paused:
            self._settle()
            time.sleep(PAUSED_POLL_S)
            return True
        try:
            body = self.session.inq.get(self.buffer, md, self.gmo)
        except driver.mqi.MQMIError as error:
            if error.reason == C.MQRC_NO_MSG_AVAILABLE:
                self._settle()
                return True
            if error.reason == C.MQRC_TRUNCATED_MSG_FAILED:
                self.buffer = _grown(self.buffer, error)
                return True
            raise
        if self.syncpoint:
            self.unacked += 1
        with driver.lock:
            self.role.on_body(body, 0, md.BackoutCount > 0)
        delay = driver.consumer_delay_s
        if delay > 0:
            time.sleep(delay)
        if self.responds:
            self._reply(body, md)
        if self.unacked and (self.unacked >= self.commit_every
                             or time.monotonic() - self.last_commit >= COMMIT_EVERY_S):
            self._settle()
        return True

    def _reply(self, body: bytes, request: Any) -> None:
        C = self.C
        reply_to, qmgr = text_of(request.ReplyToQ), text_of(request.ReplyToQMgr)
        if not reply_to:
            with self.driver.lock:
                self.driver.recorder.error("request without ReplyToQ")
            return
        session = self.session
        queue = session.replies.get((reply_to, qmgr))
        if queue is None:
            queue = session.open(reply_to, C.MQOO_OUTPUT | C.MQOO_FAIL_IF_QUIESCING, qmgr)
            session.replies[(reply_to, qmgr)] = queue
        md = self.reply_md
        md.MsgId = C.MQMI_NONE
        md.CorrelId = request.CorrelId if request.Report & C.MQRO_PASS_CORREL_ID \
            else request.MsgId
        queue.put(body[:HEADER_SIZE] + self.padding, md, self.reply_pmo)

    def _settle(self) -> None:
        if self.unacked and self.session is not None:
            self.session.qm.commit()
            self.unacked = 0
            self.last_commit = time.monotonic()

    def _after_error(self, reason: int | None) -> None:
        if self.unacked and self.session is not None:
            with contextlib.suppress(Exception):
                self.session.qm.backout()  # the gets come again, BackoutCount + 1
        self.unacked = 0

    def _lost(self) -> None:
        self.unacked = 0  # backed out by the queue manager


def _grown(buffer: int, error: Exception) -> int:
    """A buffer large enough for the message that did not fit (MQRC_TRUNCATED_MSG_FAILED)."""
    return max(buffer * 2, int(getattr(error, "original_length", 0) or 0))


