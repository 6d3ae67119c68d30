"""The AMQP 0-9-1 driver (pika): every connection of an agent on one shared select IOLoop.

One loop thread hosts all senders and receivers, so rate changes and snapshots need no locks.
Senders publish on timers that follow their rate schedule; receivers consume with a prefetch and
acknowledge in batches (``multiple=True``). A dropped connection is retried with backoff, moving
to the next endpoint, and counted instead of ending the worker; with publisher confirms, what
was not confirmed on the lost connection is published again on the next one. A consumer the
broker cancels (its queue deleted) is counted and consumes again, with backoff until its queue
is back; a connection the broker blocks (a resource alarm) is recorded while it is blocked.

A nack makes a sender publish the nacked messages again on a new channel, after a backoff that
grows while nothing is confirmed. Never on the channel that nacked them: RabbitMQ (3.10 at
least) keeps, per channel, the quorum queue member it first tried; a channel that first
published while that member was down nacks every later publish too, whoever leads the queue
since. A new channel starts from the queue's current leader.

Requesters declare their own exclusive, auto-delete reply queue and match replies by
correlation id; responders put each reply on the request's ``reply_to`` before acknowledging
the request. A consumer processing time (``set_consumer_delay``) makes each receiver handle one
message per delay, holding the rest of its prefetch unacknowledged, as a slow application does.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime

import pika
from pika.adapters.select_connection import IOLoop

from drivers.amqp import wire as amqp_wire
from drivers.amqp.frames import FrameEncoder, ack_frame, mixed_batch
from drivers.amqp.settings import AmqpSettings
from drivers.backlog import BacklogGate
from drivers.base import Driver, rotation
from drivers.header import HEADER_SIZE
from drivers.message import Bodies
from drivers.protocol import Destination, FastPath, MessageShape
from drivers.rate import on_tick
from drivers.routing import KeyPicker
from drivers.workers import ReceiverRole, RequesterRole, ResponderRole, SenderRole

MAX_BUFFERED_BYTES = 4 * 1024 * 1024  # outbound bytes per connection before a sender waits
PACING_TICK_S = 0.002  # fast rate-limited senders wake on multiples of this (see _again)
ACK_FLUSH_S = 0.1  # manual acks of a quiet receiver are flushed at least this often
RETIRE_GRACE_S = 2.0  # a moved sender's old connection stays open this long for its last publishes
PAUSED_POLL_S = 0.05  # a paused (or closed-loop) sender looks again this often
BACKLOG_WAIT_S = 0.005  # an unlimited sender out of backlog credit looks again this often
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class _Link:
    """One connection with one channel that reconnects with backoff, rotating endpoints."""

    def __init__(self, driver: AmqpDriver, endpoint: str, queue: str):
        self.driver = driver
        self.queue = queue
        self.endpoints = rotation(driver.destination.endpoints, endpoint)
        self.attempt = 0
        self.connection: pika.SelectConnection | None = None
        self.channel = None
        self.closing = False
        self.recorder = driver.recorder

    def connect(self) -> None:
        endpoint = self.endpoints[self.attempt % len(self.endpoints)]
        params = self.driver.settings.parameters(endpoint, self.driver.tls_contexts)
        destination = self.driver.destination
        params.heartbeat = int(destination.heartbeat_s)
        params.frame_max = destination.frame_max
        params.connection_attempts = 1
        self.connection = pika.SelectConnection(
            params, on_open_callback=self._opened, on_open_error_callback=self._failed,
            on_close_callback=self._closed, custom_ioloop=self.driver.ioloop)

    def close(self) -> None:
        self.closing = True
        if self.connection and not (self.connection.is_closed or self.connection.is_closing):
            self.connection.close()

    @property
    def closed(self) -> bool:
        return self.connection is None or self.connection.is_closed

    def _opened(self, connection) -> None:
        self.recorder.connections += 1
        connection.add_on_connection_blocked_callback(self._blocked)
        connection.add_on_connection_unblocked_callback(lambda *_: self._unblocked())
        if self.driver.fast_path_on(connection):
            amqp_wire.install_direct_io(connection)
        connection.channel(on_open_callback=self._channel_opened)

    def _channel_opened(self, channel) -> None:
        self.attempt = 0
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        self.ready(channel)

    def ready(self, channel) -> None:
        """Called with an open channel; roles start work here."""

    def _channel_closed(self, channel, reason) -> None:
        self.channel = None
        if not self.closing:
            self.recorder.error(f"channel closed: {reason}")
            if self.connection and self.connection.is_open:
                self.connection.close()

    def _failed(self, connection, error) -> None:
        self.recorder.error(f"connect failed: {error}")
        self._retry()

    def _blocked(self, _connection, _frame) -> None:
        """The broker holds this connection's publishes (a resource alarm)."""
        self.recorder.blocking.blocked(id(self), time.monotonic())

    def _unblocked(self) -> None:
        """The broker lets this connection publish again (or the connection is gone)."""
        self.recorder.blocking.unblocked(id(self), time.monotonic())

    def _closed(self, connection, reason) -> None:
        self.channel = None
        self.recorder.connections -= 1
        self._unblocked()
        if not self.closing:
            self.recorder.error(f"connection lost: {reason}")
            self._retry()

    def _retry(self) -> None:
        if self.closing:
            return
        self.recorder.reconnects += 1
        delay = BACKOFF_S[min(self.attempt, len(BACKOFF_S) - 1)]
        self.attempt += 1
        self.driver.ioloop.call_later(delay, self.connect)


class _SenderLink(_Link):
    def __init__(self, driver: AmqpDriver, role: SenderRole, endpoint: str,
                 queue: str | list[str]):
        routes = queue if isinstance(queue, list) else [queue]
        super().__init__(driver, endpoint, routes[0])
        self.routes = routes  # the queues its messages reach, whose depth its gate reads
        self.role = role
        destination = driver.destination
        # where each message is published: an (exchange, routing key) per route, or per key
        self.targets = [("", route) for route in routes] if not destination.exchange else \
            [(destination.exchange, key) for key in destination.routing_keys or ("",)]
        self.picker = driver.key_picker if destination.exchange \
            else KeyPicker(len(self.targets), "sequential")  # queues in turn: bind not-fixed
        self.bodies = role.bodies
        self.properties = driver.properties
        self.timer = None
        self.last_tag = 0
        self.published = 0
        self.templates: list[FrameEncoder] = []
        # [first tag, first seq, count, ever nacked, published at (monotonic ns)]
        self.unconfirmed_batches: deque[list[int]] = deque()
        # (first seq, count, ever nacked, nacked last) to publish again
        self.resend: list[tuple[int, int, bool, bool]] = []
        self.reopening = False  # a nack closes the channel; publishing waits for a new one
        self.nack_rounds = 0  # channels reopened after nacks since the last confirm
        bound = driver.destination.backlog_per_sender
        self.gate = BacklogGate(bound) if bound is not None else None

    def ready(self, channel) -> None:
        self.published = self.last_tag = 0
        self.reopening = False
        destination = self.driver.destination
        if destination.confirms:
            channel.confirm_delivery(self._confirmed)
        if self.driver.message.mandatory:
            channel.add_on_return_callback(self._returned)
        self.templates = []
        if self.driver.fast_path_on(self.connection):
            self.templates = self.driver.templates(channel.channel_number,
                                                   self.connection.params.frame_max,
                                                   tuple(self.targets), self.bodies)
        if self.gate is not None:
            self.gate.forget()
        self._publish()

    @property
    def publishing(self) -> bool:
        """Whether this link still publishes for its role."""
        role = self.role
        return self.channel is not None and not self.closing and not self.reopening \
            and role.active and not role.done

    def _publish(self) -> None:
        self.timer = None
        role = self.role
        if not self.publishing:
            return
        gate = self.gate if not role.schedule.rate else None
        if gate is not None and gate.wants_reading(time.monotonic()):
            self._read_depth()
        if self._may_publish():
            for first, n, ever_nacked, nacked_last in self.resend:
                self._emit(first, n, ever_nacked)
                self.recorder.republished += n
                self.recorder.nacks_republished += n if nacked_last else 0
            self.resend.clear()
            n = role.due() if gate is None else gate.allow(role.due())
            if n:
                self._emit(role.take(n), n)
                self.recorder.sent += n
            delay = PAUSED_POLL_S if role.paused else role.delay_s()
            if gate is not None and gate.credit <= 0:
                delay = BACKLOG_WAIT_S
        else:
            delay = PACING_TICK_S
        self._again(delay)

    def _again(self, delay: float) -> None:
        """Publish again after ``delay``. A rate-limited sender whose next message is due
        within a pacing tick wakes on the agent's tick instead (a few messages at a time, one
        loop turn for all such senders); a slower one wakes when its message is due."""
        if self.role.schedule.rate and delay < PACING_TICK_S:
            delay = on_tick(delay, time.monotonic(), PACING_TICK_S)
        self.timer = self.driver.ioloop.call_later(delay, self._publish)

    def _emit(self, first_seq: int, n: int, nacked_before: bool = False) -> None:
        """Publish messages ``first_seq`` .. ``first_seq + n - 1`` of this sender
        (``nacked_before``: each of them was nacked once already)."""
        role, producer = self.role, self.role.producer_id
        keys = None if self.picker.fixed else self.picker.picks(producer, first_seq, n)
        if self.templates:
            picks = _template_picks(keys, self.bodies, producer, first_seq, n)
            if isinstance(picks, int):
                amqp_wire.emit(self.connection, self.templates[picks].batch(
                    n, producer, first_seq, time.time_ns(), role.lags(first_seq)))
            else:
                amqp_wire.emit(self.connection, mixed_batch(
                    self.templates, picks, producer, first_seq, time.time_ns(),
                    role.lags(first_seq)))
        else:
            publish, props, targets = self.channel.basic_publish, self.properties, self.targets
            mandatory = self.driver.message.mandatory
            for i, seq in enumerate(range(first_seq, first_seq + n)):
                exchange, key = targets[keys[i] if keys else 0]
                publish(exchange, key, role.body(seq), props, mandatory)
        if self.driver.destination.confirms:
            self.unconfirmed_batches.append([self.published + 1, first_seq, n, nacked_before,
                                             time.monotonic_ns()])
        self.published += n

    def _returned(self, _channel, _method, _properties, _body) -> None:
        """The broker returned a mandatory message no queue took."""
        self.recorder.returned += 1

    def _read_depth(self) -> None:
        """Ask for the ready messages in this sender's queues (a passive declare of each); the
        gate gets their sum once every queue has answered."""
        channel, gate = self.channel, self.gate
        gate.asked(self.published)
        answers: list[int] = []

        def answered(frame) -> None:
            answers.append(frame.method.message_count)
            if len(answers) == len(self.routes) and self.channel is channel:
                gate.answered(sum(answers), self.published, time.monotonic())

        for route in self.routes:
            channel.queue_declare(route, passive=True, callback=answered)

    def _may_publish(self) -> bool:
        if self.unconfirmed >= self.driver.destination.confirm_window:
            return False
        return amqp_wire.write_buffer_size(self.connection) < MAX_BUFFERED_BYTES

    def _confirmed(self, frame) -> None:
        method = frame.method
        tag = method.delivery_tag
        count = tag - self.last_tag if method.multiple else 1
        self.last_tag = max(self.last_tag, tag)
        if method.NAME == "Basic.Ack":
            self.recorder.confirmed += count
            self.nack_rounds = 0
            self._settle(tag, nacked=False)
        else:
            self._nacked(tag, count)

    def _nacked(self, tag: int, count: int) -> None:
        """The broker nacked ``count`` publishes up to ``tag``: publish them again on a new
        channel."""
        self._settle(tag, nacked=True)
        self._reopen()

    def _settle(self, tag: int, nacked: bool) -> None:
        """Forget batches confirmed up to ``tag`` (RabbitMQ confirms in order); nacked ones
        are published again, each counted in ``nacked`` the first time only; confirmed ones
        record their confirm latency."""
        batches, recorder = self.unconfirmed_batches, self.recorder
        now = time.monotonic_ns()
        while batches and batches[0][0] <= tag:
            first_tag, first_seq, n, nacked_before, published_ns = batches[0]
            settled = min(n, tag - first_tag + 1)
            if not nacked:
                recorder.confirm_latency.record_many((now - published_ns) // 1000, settled)
            else:
                self.resend.append((first_seq, settled, True, True))
                if nacked_before:
                    recorder.nacks_repeated += settled
                else:
                    recorder.nacked += settled
            if settled == n:
                batches.popleft()
            else:
                batches[0] = [first_tag + settled, first_seq + settled, n - settled,
                              nacked_before, published_ns]

    def _unsettled_to_resend(self) -> None:
        """What the broker neither confirmed nor nacked is published again (its fate is
        unknown: a duplicate if the broker had taken it)."""
        self.resend.extend((seq, n, ever, False)
                           for _, seq, n, ever, _ in self.unconfirmed_batches)
        self.unconfirmed_batches.clear()
        self.published = self.last_tag = 0

    def _reopen(self) -> None:
        """Stop publishing on this channel and close it; a new one opens after a backoff."""
        if self.reopening or self.closing or self.channel is None:
            return
        self.reopening = True
        self._cancel_timer()
        self.channel.close()

    def _channel_closed(self, channel, reason) -> None:
        if not self.reopening or self.closing:
            super()._channel_closed(channel, reason)
            return
        self.channel = None
        self._unsettled_to_resend()
        self.recorder.reconnects += 1
        delay = BACKOFF_S[min(self.nack_rounds, len(BACKOFF_S) - 1)]
        self.nack_rounds += 1
        connection = self.connection
        self.driver.ioloop.call_later(delay, lambda: self._new_channel(connection))

    def _new_channel(self, connection) -> None:
        if connection is self.connection and connection.is_open and not self.closing:
            connection.channel(on_open_callback=self._channel_opened)

    def _closed(self, connection, reason) -> None:
        if not self.closing:
            self._unsettled_to_resend()
        self.unconfirmed_batches.clear()
        super()._closed(connection, reason)

    @property
    def unconfirmed(self) -> int:
        return self.published - self.last_tag if self.driver.destination.confirms else 0

    def stop(self) -> None:
        self.role.active = False
        self._cancel_timer()

    def retire(self) -> None:
        """Hand the role to another link: stop publishing here, close once the last publishes
        have had time to reach the broker (confirmed, where confirms are on)."""
        self._cancel_timer()
        self.closing = True
        self.driver.ioloop.call_later(RETIRE_GRACE_S, self._close_when_confirmed)

    def _close_when_confirmed(self) -> None:
        if self.unconfirmed > 0 and self.connection and self.connection.is_open:
            self.driver.ioloop.call_later(0.1, self._close_when_confirmed)
        else:
            self.close()

    def wake(self) -> None:
        """Publish now what the schedule says, instead of when the waiting timer fires (a
        link without one is not waiting: stopped, retired or between connections)."""
        if self.timer is not None:
            self._cancel_timer()
            self.timer = self.driver.ioloop.call_later(0, self._publish)

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.driver.ioloop.remove_timeout(self.timer)
            self.timer = None


class _RequesterLink(_SenderLink):
    """A requester: its own reply queue, requests with reply_to and a correlation id."""

    role: RequesterRole

    def __init__(self, driver: AmqpDriver, role: RequesterRole, endpoint: str, queue: str):
        super().__init__(driver, role, endpoint, queue)
        self.reply_to = ""

    def ready(self, channel) -> None:
        self.published = self.last_tag = 0
        if self.driver.destination.confirms:
            channel.confirm_delivery(self._confirmed)
        channel.queue_declare("", exclusive=True, auto_delete=True,
                              callback=self._reply_queue_declared)

    def _nacked(self, tag: int, count: int) -> None:
        """A nacked request is not sent again: its requester waits for its reply until the
        reply timeout."""
        self.recorder.nacked += count

    def _reply_queue_declared(self, frame) -> None:
        self.reply_to = frame.method.queue
        self.channel.basic_consume(self.reply_to, self._replied, auto_ack=True)
        self._publish()

    def _replied(self, channel, method, properties, body) -> None:
        self.role.on_reply(properties.correlation_id)
        self._send()

    def _publish(self) -> None:
        self.timer = None
        role = self.role
        if not self.publishing:
            return
        role.expire(self.driver.destination.reply_timeout_s)
        self._send()
        self._again(PAUSED_POLL_S if role.paused or not role.schedule.rate else role.delay_s())

    def _send(self) -> None:
        if self.channel is None or self.closing or not self._may_publish():
            return
        role, publish = self.role, self.channel.basic_publish
        mode = self.properties.delivery_mode
        n = role.room()
        for _ in range(n):
            correlation, body = role.request()
            publish("", self.queue, body, pika.BasicProperties(
                delivery_mode=mode, reply_to=self.reply_to, correlation_id=correlation))
        self.published += n
        self.recorder.sent += n

    def _closed(self, connection, reason) -> None:
        self.role.lost_connection()
        self.unconfirmed_batches.clear()
        _Link._closed(self, connection, reason)


class _ReceiverLink(_Link):
    def __init__(self, driver: AmqpDriver, role: ReceiverRole, endpoint: str, queue: str):
        super().__init__(driver, endpoint, queue)
        self.role = role
        destination = driver.destination
        self.manual = destination.manual_ack
        self.ack_every = destination.ack_every or max(1, destination.prefetch // 4)
        self.unacked = 0
        self.last_tag = 0
        self.decoding = False  # deliveries parsed by amqp_wire, acks sent as its frames
        self.timer = None
        self.consumer_tag: str | None = None
        self.responds = isinstance(role, ResponderRole)
        # get the request and put the reply in one transaction (MQ's syncpoint)
        self.transactional = self.responds and self.manual and destination.unit_of_work
        self.pending: deque[tuple] = deque()  # deliveries waiting for the consumer delay
        self.pending_timer = None
        self.busy_until = 0.0  # a slowed receiver handles its next message from then
        if self.responds:
            self.padding = bytes(max(0, destination.reply_size - HEADER_SIZE))
            self.reply_mode = 2 if destination.persistent else 1

    def _channel_opened(self, channel) -> None:
        # unlike a sender's, a receiver's backoff starts again only once it consumes: a channel
        # that opens and is closed by the broker because its queue is missing counts as a retry
        self.channel = channel
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_cancel_callback(self._cancelled)
        self.ready(channel)

    def _consuming(self, _frame) -> None:
        self.attempt = 0

    def _cancelled(self, _frame) -> None:
        """The broker cancelled this consumer: count it and consume again after a backoff (the
        channel stays open; if the queue is still missing, the broker closes the channel and
        the link reconnects with backoff until the queue is back)."""
        self.consumer_tag = None
        self.recorder.cancels += 1
        self.recorder.error(f"consumer of {self.queue} cancelled by the broker")
        if self.closing:
            return
        delay = BACKOFF_S[min(self.attempt, len(BACKOFF_S) - 1)]
        self.attempt += 1
        self.driver.ioloop.call_later(delay, self._consume_again)

    def _consume_again(self) -> None:
        channel = self.channel
        if self.closing or channel is None or not channel.is_open or self.consumer_tag:
            return
        self.consumer_tag = channel.basic_consume(
            self.queue, self._delivered, auto_ack=not self.manual, callback=self._consuming,
            arguments=self.driver.consume_arguments or None)

    def ready(self, channel) -> None:
        self.unacked = 0
        self._drop_pending()
        self.decoding = not self.responds and self.driver.fast_path_on(self.connection)
        if self.decoding:
            amqp_wire.install_decoder(self.connection, channel.channel_number, self._arrived)
        channel.basic_qos(prefetch_count=self.driver.destination.prefetch,
                          global_qos=self.driver.destination.global_qos)
        if self.transactional:
            channel.tx_select()
        self.consumer_tag = channel.basic_consume(
            self.queue, self._delivered, auto_ack=not self.manual, callback=self._consuming,
            arguments=self.driver.consume_arguments or None)
        if self.manual and self.timer is None:  # one flush timer, whatever the reconnects
            self.timer = self.driver.ioloop.call_later(ACK_FLUSH_S, self._flush_timer)

    def _delivered(self, channel, method, properties, body) -> None:
        self._arrived(body, 0, method.delivery_tag, method.redelivered, properties)

    def _arrived(self, buffer: bytes, offset: int, tag: int, redelivered: bool,
                 properties=None) -> None:
        driver = self.driver
        if driver.consumer_delay_s > 0 or self.pending or driver.receivers_paused:
            self.pending.append((buffer, offset, tag, redelivered, properties))
            driver.recorder.held += 1
            if self.pending_timer is None and not driver.receivers_paused:
                self.pending_timer = self.driver.ioloop.call_later(
                    max(0.0, self.busy_until - time.monotonic()), self._work_pending)
            return
        self._process(buffer, offset, tag, redelivered, properties)

    def _work_pending(self) -> None:
        """Handle the oldest waiting delivery, then wait the consumer delay for the next."""
        self.pending_timer = None
        if self.closing or self.channel is None or self.driver.receivers_paused:
            return
        delay = self.driver.consumer_delay_s
        while self.pending:
            self.driver.recorder.held -= 1
            self._process(*self.pending.popleft())
            if delay > 0:
                self.busy_until = time.monotonic() + delay
                break
        if self.pending:
            self.pending_timer = self.driver.ioloop.call_later(delay, self._work_pending)

    def _process(self, buffer: bytes, offset: int, tag: int, redelivered: bool,
                 properties) -> None:
        self.role.on_body(buffer, offset, redelivered)
        if self.responds and properties is not None and properties.reply_to:
            self.channel.basic_publish(
                "", properties.reply_to, buffer[offset:offset + HEADER_SIZE] + self.padding,
                pika.BasicProperties(delivery_mode=self.reply_mode,
                                     correlation_id=properties.correlation_id))
        if self.transactional:
            self.channel.basic_ack(tag)
            self.channel.tx_commit()
        elif self.manual:
            self.last_tag = tag
            self.unacked += 1
            if self.unacked >= self.ack_every:
                self._ack_up_to(tag)

    def _drop_pending(self) -> None:
        self.driver.recorder.held -= len(self.pending)
        self.pending.clear()

    def _ack_up_to(self, tag: int) -> None:
        if self.decoding:
            amqp_wire.emit(self.connection,
                           ack_frame(self.channel.channel_number, tag, True))
        else:
            self.channel.basic_ack(tag, multiple=True)
        self.unacked = 0

    def flush(self) -> None:
        if self.unacked and self.channel is not None and self.channel.is_open:
            self._ack_up_to(self.last_tag)

    def retire(self) -> None:
        """Stop consuming here without losing or duplicating: cancel, take what is still in
        flight, acknowledge everything, then close."""
        self.closing = True
        if self.channel is not None and self.channel.is_open and self.consumer_tag:
            self.channel.basic_cancel(self.consumer_tag, callback=lambda _frame: self._closed_out())
        else:
            self.close()

    def _closed_out(self) -> None:
        self._drop_pending()  # never processed nor acknowledged: back to the queue on close
        self.flush()
        self.close()

    def _flush_timer(self) -> None:
        self.flush()
        if not self.closing:
            self.timer = self.driver.ioloop.call_later(ACK_FLUSH_S, self._flush_timer)


def stream_offset(offset: int | str) -> int | str | datetime:
    """``x-stream-offset`` as RabbitMQ takes it: first, last, next, an offset, or a time (an
    AMQP timestamp, from ISO 8601 text)."""
    if isinstance(offset, int) or offset in ("first", "last", "next"):
        return offset
    return datetime.fromisoformat(offset.replace("Z", "+00:00"))


def _template_picks(keys: list[int] | None, bodies: Bodies, producer_id: int, first_seq: int,
                    n: int) -> int | list[int]:
    """The template of each of ``n`` messages from ``first_seq`` (templates are laid out key
    by key, each key's size classes together), or the one template all of them take."""
    sizes = bodies.picks(producer_id, first_seq, n)
    classes = bodies.count
    if keys is None:
        return bodies.current if sizes is None else sizes
    if sizes is None:
        current = bodies.current
        return [k * classes + current for k in keys]
    return [k * classes + c for k, c in zip(keys, sizes)]


class AmqpDriver(Driver):
    """Senders and receivers over pika, all on one IOLoop thread."""

    def __init__(self, destination: Destination, recorder, settings: AmqpSettings | None = None,
                 message: MessageShape | None = None):
        self.destination = destination
        self.message = message or MessageShape()
        self.properties = pika.BasicProperties(
            delivery_mode=2 if destination.persistent else 1, **self.message.properties)
        self._templates: dict[tuple, list[FrameEncoder]] = {}
        self.consume_arguments = dict(destination.consumer_arguments)
        if destination.stream_offset is not None:
            self.consume_arguments["x-stream-offset"] = stream_offset(destination.stream_offset)
        self.settings = settings or AmqpSettings()
        self.tls_contexts: dict[str, ssl.SSLContext] = {}
        for endpoint in destination.endpoints:  # bad endpoints or TLS material fail here
            self.settings.parameters(endpoint, self.tls_contexts)
        self.queue = destination.queue
        self.recorder = recorder
        refused = "turned off for this run" if not destination.fast_path \
            else amqp_wire.fast_path_refused()
        recorder.fast_path = FastPath(on=refused is None, why=refused or "")
        self.consumer_delay_s = 0.0
        self.receivers_paused = False  # a backlog being built: receivers hold what they get
        # one for every sender: a Zipf picker's table of many keys is megabytes
        self.key_picker = KeyPicker(len(destination.routing_keys) or 1, destination.key_order,
                                    destination.zipf_exponent)
        self.ioloop = IOLoop()
        self.senders: list[_SenderLink] = []
        self.receivers: list[_ReceiverLink] = []
        self.thread = threading.Thread(target=self.ioloop.start, name="amqp-loop", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def templates(self, channel_number: int, frame_max: int,
                  targets: tuple[tuple[str, str], ...], bodies: Bodies) -> list[FrameEncoder]:
        """The publish templates of ``targets`` (exchange, routing key) on a channel, each
        target's size classes of ``bodies`` together; made once and shared by every sender of
        this agent (a batch copies them before stamping)."""
        key = (channel_number, frame_max, targets, id(bodies))
        if key not in self._templates:
            properties = b"".join(self.properties.encode())
            self._templates[key] = [
                FrameEncoder(channel_number, routing_key, size, self.destination.persistent,
                             frame_max, exchange, filler, properties, self.message.mandatory)
                for exchange, routing_key in targets
                for size, filler in zip(bodies.sizes, bodies.fillers)]
        return self._templates[key]

    def fast_path_on(self, connection) -> bool:
        """Whether ``connection`` may use the fast path (loop thread only). It is off for the
        whole agent, as its snapshots say, once a connection lacks a pika hook it needs."""
        if not self.recorder.fast_path.on:
            return False
        missing = amqp_wire.missing_hooks(connection)
        if missing:
            self.recorder.fast_path = FastPath(
                on=False, why=f"pika connection without {', '.join(missing)}")
        return not missing

    def add_sender(self, role: SenderRole, endpoint: str, queue: str | list[str] | None = None
                   ) -> None:
        kind = _RequesterLink if isinstance(role, RequesterRole) else _SenderLink
        link = kind(self, role, endpoint, queue or self.queue)
        self.senders.append(link)
        self.call(link.connect)

    def add_receiver(self, role: ReceiverRole, endpoint: str, queue: str | None = None) -> None:
        link = _ReceiverLink(self, role, endpoint, queue or self.queue)
        self.receivers.append(link)
        self.call(link.connect)

    def move(self, role: SenderRole | ReceiverRole, endpoint: str, queue: str | None = None
             ) -> None:
        def swap() -> None:
            links = self.senders if isinstance(role, SenderRole) else self.receivers
            target = queue
            for link in links:
                if link.role is role and not link.closing:
                    target = target or link.queue
                    link.retire()
            (self.add_sender if isinstance(role, SenderRole) else self.add_receiver)(
                role, endpoint, target)
        self.call(swap)

    def wake_senders(self) -> None:
        self.call(lambda: [link.wake() for link in self.senders])

    def set_consumer_delay(self, seconds: float, paused: bool = False) -> None:
        def apply() -> None:
            resumed = self.receivers_paused and not paused
            self.consumer_delay_s, self.receivers_paused = seconds, paused
            for link in self.receivers:
                if resumed and link.pending_timer is not None:
                    self.ioloop.remove_timeout(link.pending_timer)
                    link.pending_timer, link.busy_until = None, 0.0
                if link.pending and link.pending_timer is None and not paused:
                    link.pending_timer = self.ioloop.call_later(0, link._work_pending)
        self.call(apply)

    def call(self, function: Callable[[], object], timeout_s: float = 10.0) -> object:
        if threading.current_thread() is self.thread or not self.thread.is_alive():
            return function()
        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(function())
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(error)

        self.ioloop.add_callback_threadsafe(run)
        return future.result(timeout_s)

    def stop_senders(self, timeout_s: float = 10.0) -> None:
        """Stop publishing and wait for confirms; connections stay open until :meth:`stop`,
        because closing a channel can drop publishes the broker has not enqueued yet."""
        self.call(lambda: [link.stop() for link in self.senders])
        self._wait(lambda: all(link.unconfirmed <= 0 or link.closed for link in self.senders),
                   timeout_s)

    def stop_receivers(self, timeout_s: float = 10.0) -> None:
        self.call(lambda: [link.retire() for link in self.receivers if not link.closing])
        self._wait(lambda: all(link.closed for link in self.receivers), timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        if not self.thread.is_alive():
            return
        self.stop_senders(timeout_s)

        def close_all() -> None:
            for link in self.receivers:
                link.flush()
            for link in self.senders + self.receivers:
                link.close()

        self.call(close_all)
        self._wait(lambda: all(link.closed for link in self.senders + self.receivers), timeout_s)
        self.ioloop.add_callback_threadsafe(self.ioloop.stop)
        self.thread.join(timeout_s)

    def _wait(self, condition: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.call(condition):
            time.sleep(0.02)
