"""The IBM MQ driver (IBM's ``ibmmq``, or ``pymqi``): one thread and one connection per worker.

MQI calls block, so every worker (sender, receiver, requester, responder) runs on a thread of
its own with its own client connection (MQCONNX with shared handles and ``MQCNO_CLIENT_BINDING``),
as PerfHarness's worker threads do.

Endpoints (``Destination.endpoints``, ``add_*`` and ``move``):

- ``mq://HOST(PORT)[,HOST2(PORT2)]/QMNAME?channel=CHANNEL`` connects through a client channel
  definition of its own (an MQCD: ``CONNAME`` and ``CHANNEL``; ``HOST:PORT`` is accepted too).
  The channel defaults to ``MqSettings.channel``, then ``SYSTEM.DEF.SVRCONN``; an empty
  QMNAME to ``MqSettings.queue_manager``.
- ``QMNAME``, ``*GROUP`` (``*UC01QM``: any queue manager of the CCDT's group, document 000) or
  ``mq:///*GROUP`` looks the queue manager up in the CCDT: ``MqSettings.ccdt_url``
  (``MQCNO.CCDTUrl`` with ``ibmmq``, the ``MQCCDTURL`` environment variable with ``pymqi``),
  else the client's own environment (``MQCCDTURL``, ``MQCHLLIB``/``MQCHLTAB``).

What the workers do:

- A *sender* asks its role what is due (the role keeps the rate schedule), puts that many
  messages (``MQPMO_NO_SYNCPOINT``, a new MsgId each, persistence as ``Destination.persistent``)
  and sleeps until the next is due. A put either succeeds or the message was not put, so
  ``sent`` (and ``confirmed``, where confirms are asked for) counts returned puts; a message
  whose put failed is put again after the reconnect. Publishing to an exchange, it opens the
  topic string of each routing key (:mod:`drivers.mq.topics`) and puts each message to its
  key's topic, picked as the AMQP driver picks it; the subscriptions deliver the copies.
- A *receiver* loops on MQGET with wait (``MQGMO_WAIT``, 500 ms). With ``manual_ack`` it gets
  under syncpoint and commits every ``prefetch // 4`` messages, every 0.1 s and whenever the
  queue is empty, so a broken connection hands the uncommitted ones back (BackoutCount > 0 on
  redelivery); without, ``MQGMO_NO_SYNCPOINT``.
- A *requester* puts each request with ``ReplyToQ`` and a fresh 24-byte id as both MsgId and
  CorrelId (8 random bytes of this driver, producer id, sequence number), then gets the reply
  with ``MQMO_MATCH_CORREL_ID`` from a *shared* reply queue, as document 003 does:
  ``MqSettings.reply_queue``, default the request queue's name with ``request`` replaced by
  ``reply`` (``request3`` -> ``reply3``; ``perf`` -> ``perf.reply``). Shared queues survive a
  reconnect and a move, which temporary dynamic queues do not. Replies carry an expiry of
  ``reply_timeout_s``, so late ones do not pile up on the shared queue.
- A *responder* gets a request, puts a reply (the request's surge header, padded to
  ``reply_size``; CorrelId = the request's MsgId, or its CorrelId under
  ``MQRO_PASS_CORREL_ID``) to the request's ``ReplyToQ``/``ReplyToQMgr``; with
  ``unit_of_work`` the get and the put are under syncpoint and committed together.
- ``set_consumer_delay`` makes every receiver and responder take that long per message.

Counting: roles and the ``Recorder`` are not thread-safe, so every role call and counter
update happens under the driver's lock (``call`` takes it too); MQI calls never hold it. That is
one uncontended acquire per receiver message and one per sender batch (see the unit tests).

Credentials, where the channel asks for them: ``MqSettings.user``/``password`` (a topology's
credentials, sent over the control channel), else ``SURGE_MQ_USER`` and ``SURGE_MQ_PASSWORD``
in the agent's environment, as an MQCSP (:mod:`drivers.mq.connect`).

Reconnects: ``MqSettings.reconnect`` sets ``MQCNO_RECONNECT`` (``yes``, PerfHarness's
``WMQ_CLIENT_RECONNECT``), ``MQCNO_RECONNECT_Q_MGR`` (``qmgr``) or ``MQCNO_RECONNECT_DISABLED``.
The client then reconnects by itself; with ``ibmmq`` an event handler (MQCB) counts each
``MQRC_RECONNECTING`` as a reconnect (``pymqi`` has no MQCB, so those stay invisible). When a
call fails with a connection reason (``MQRC_CONNECTION_BROKEN``, ``MQRC_RECONNECT_FAILED``,
...) the worker reconnects itself with backoff, rotating through the endpoints, counting an
error and a reconnect per attempt as the AMQP driver does.

Moves: uniform clusters rebalance applications themselves; ``move`` reconnects a worker to
another endpoint between two steps: the new connection is made and its queues opened first,
then the old one's unit of work is committed (a receiver finishes its current get and commit),
then the old connection is closed. A requester moves once its outstanding replies are in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from drivers.base import Driver
from drivers.mq.client import (
    CONNECTION_REASONS,
    GET_WAIT_MS,
    RECONNECT_OPTIONS,
    MqClientMissing,
    MqEndpoint,
    load_mqi,
)
from drivers.mq.connect import connect
from drivers.mq.settings import MqSettings
from drivers.mq.workers import ReceiverWorker, RequesterWorker, SenderWorker, Worker
from drivers.protocol import Configure, Destination
from drivers.routing import KeyPicker
from orchestrator.specs.mq import reply_queue_name

__all__ = ["MqClientMissing", "MqDriver", "MqEndpoint", "load_mqi", "reply_queue_name"]
from drivers.workers import ReceiverRole, Recorder, RequesterRole, SenderRole


def driver_for(config: Configure, recorder: Recorder) -> MqDriver:
    """The driver a ``/configure`` asks for (the agent's way in, :data:`drivers.agent.DRIVERS`)."""
    return MqDriver(config.destination, recorder, MqSettings.from_json(config.settings))


class MqDriver(Driver):
    """Senders, receivers, requesters and responders over the MQI, a thread and a connection
    each (see the module docstring). ``mqi`` is the MQI module (default: :func:`load_mqi`)."""

    def __init__(self, destination: Destination, recorder: Recorder,
                 settings: MqSettings | None = None, mqi: Any = None,
                 get_wait_ms: int = GET_WAIT_MS):
        self.destination = destination
        self.settings = settings = settings or MqSettings()
        self.recorder = recorder
        recorder.consuming = 0
        self.mqi = mqi if mqi is not None else load_mqi()
        self.C = C = self.mqi.CMQC
        self.Error = getattr(self.mqi, "Error", self.mqi.MQMIError)
        self.get_wait_ms = get_wait_ms
        self.lock = threading.RLock()
        self.consumer_delay_s = 0.0
        self.receivers_paused = False  # a backlog being built: receivers take nothing
        self.key_picker = KeyPicker(len(destination.routing_keys) or 1, destination.key_order,
                                    destination.zipf_exponent)
        self.workers: list[Worker] = []
        self.started = False
        self.watching = True  # register MQCB event handlers until one fails
        self.requested_moves: set[int] = set()  # connections their queue manager asked to move
        mode = settings.reconnect.strip().lower()
        self.reconnecting = mode in ("yes", "qmgr")
        self.connect_options = (C.MQCNO_CLIENT_BINDING | C.MQCNO_HANDLE_SHARE_BLOCK
                                | getattr(C, RECONNECT_OPTIONS[mode]))
        self.connection_reasons = frozenset(
            getattr(C, name) for name in CONNECTION_REASONS if hasattr(C, name))

    # -- connections ---------------------------------------------------------------------------

    def connect(self, endpoint: str, appltag: str) -> Any:
        """MQCONNX as a client to ``endpoint`` with application name ``appltag``; returns the
        connected ``QueueManager`` (the structures: :mod:`drivers.mq.connect`)."""
        qm = connect(self.mqi, self.settings, endpoint, appltag, self.connect_options)
        if self.reconnecting:
            self._watch(qm)
        return qm

    def _watch(self, qm: Any) -> None:
        """Count the client's own reconnects with an MQCB event handler, where the library
        has MQCB (ibmmq)."""
        if not (self.watching and hasattr(self.mqi, "CBD") and hasattr(qm, "cb")):
            return
        C = self.C
        cbd = self.mqi.CBD()
        cbd.CallbackType = C.MQCBT_EVENT_HANDLER
        cbd.CallbackFunction = self._event
        try:
            qm.cb(operation=C.MQOP_REGISTER, cbd=cbd)
        except self.Error as error:  # not a messaging error: noted once, not counted
            self.watching = False
            with self.lock:
                self.recorder.last_error = f"no MQ event handler, client reconnects go " \
                                           f"uncounted: {error}"

    def _event(self, queue_manager: Any = None, queue: Any = None, md: Any = None,
               gmo: Any = None, msg: Any = None, cbc: Any = None, **_: Any) -> None:
        """MQ's event handler: MQRC_RECONNECTING is the client reconnecting, a lost connection
        (an error) unless the queue manager asked for it just before
        (MQRC_Q_MGR_RECONNECT_REQUESTED: a uniform cluster balancing its applications, which is
        counted as a reconnect only); MQRC_RECONNECT_FAILED one it gave up on."""
        reason = getattr(cbc, "Reason", 0)
        C = self.C
        key = id(queue_manager)
        with self.lock:
            if reason == getattr(C, "MQRC_Q_MGR_RECONNECT_REQUESTED", None):
                self.requested_moves.add(key)
            elif reason == C.MQRC_RECONNECTING:
                self.recorder.reconnects += 1
                if key not in self.requested_moves:
                    self.recorder.error("connection lost, the MQ client is reconnecting")
            elif reason == C.MQRC_RECONNECTED:
                self.requested_moves.discard(key)
            elif reason == C.MQRC_RECONNECT_FAILED:
                self.requested_moves.discard(key)
                self.recorder.error("the MQ client could not reconnect")

    # -- the Driver interface ------------------------------------------------------------------

    def start(self) -> None:
        """Start the threads of workers added so far; later ones start when added."""
        with self.lock:
            self.started = True
            workers = list(self.workers)
        for worker in workers:
            if worker.thread.ident is None:
                worker.thread.start()

    def add_sender(self, role: SenderRole, endpoint: str, queue: str | list[str] | None = None
                   ) -> None:
        """A sender (or requester) thread with its own connection to ``endpoint``."""
        kind = RequesterWorker if isinstance(role, RequesterRole) else SenderWorker
        self._add(kind(self, role, endpoint, queue or self.destination.queue))

    def add_receiver(self, role: ReceiverRole, endpoint: str, queue: str | None = None,
                     start_delay_s: float = 0.0) -> None:
        """A receiver (or responder) thread with its own connection to ``endpoint``."""
        if start_delay_s:
            raise ValueError("a receiver start delay is RabbitMQ's (workload.receiver_spacing)")
        self._add(ReceiverWorker(self, role, endpoint, queue or self.destination.queue))

    def _add(self, worker: Worker) -> None:
        with self.lock:
            self.workers.append(worker)
            start = self.started
        if start:
            worker.thread.start()

    def move(self, role: SenderRole | ReceiverRole, endpoint: str, queue: str | None = None
             ) -> None:
        """Reconnect ``role``'s worker to ``endpoint`` (and ``queue``) between two of its
        steps: new connection first, then commit and close the old one. Returns at once."""
        MqEndpoint.parse(endpoint, self.settings)
        with self.lock:
            worker = next((w for w in self.workers if w.role is role), None)
        if worker is None:
            raise ValueError("no such worker on this driver")
        worker.request_move(endpoint, queue)

    def wake_senders(self) -> None:
        """Lock-free: the agent calls it from inside :meth:`call`."""
        for worker in list(self.workers):
            if isinstance(worker, SenderWorker):
                worker.wake()

    def set_consumer_delay(self, seconds: float, paused: bool = False) -> None:
        """Every receiver and responder takes ``seconds`` per message from now on (none at
        all while ``paused``)."""
        self.consumer_delay_s = max(0.0, float(seconds))
        self.receivers_paused = paused

    def call(self, function: Callable[[], object], timeout_s: float = 10.0) -> object:
        """Run ``function`` under the driver lock, where roles and the recorder are safe (the
        lock is only ever held briefly, so ``timeout_s`` is not needed)."""
        with self.lock:
            return function()

    def stop_senders(self, timeout_s: float = 10.0) -> None:
        """Stop sending: senders put what they took and close; requesters wait for their
        outstanding replies for up to half of ``timeout_s``, then close."""
        workers = [w for w in self.workers if isinstance(w, SenderWorker)]
        deadline = time.monotonic() + timeout_s
        with self.lock:
            for worker in workers:
                worker.role.active = False
                worker.drain_until = time.monotonic() + timeout_s / 2
        self._stop(workers, deadline)

    def stop_receivers(self, timeout_s: float = 10.0) -> None:
        """Stop receiving: each receiver finishes its current get, commits and closes."""
        self._stop([w for w in self.workers if isinstance(w, ReceiverWorker)],
                   time.monotonic() + timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop senders, then receivers; no worker thread is left running."""
        self.stop_senders(timeout_s)
        self.stop_receivers(timeout_s)

    def _stop(self, workers: list[Worker], deadline: float) -> None:
        for worker in workers:
            worker.stopping.set()
            worker.wake()
        for worker in workers:
            if worker.thread.ident is not None:
                worker.thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [w.thread.name for w in workers if w.thread.is_alive()]
        if stuck:
            with self.lock:
                self.recorder.error(f"MQ workers still running after the stop: {stuck}")
