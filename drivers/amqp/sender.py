"""Sender and requester links: publishing on a rate schedule (templates stamped in batches on
the fast path), publisher confirms, nacks and republishing, the backlog gate; requesters
matching replies by correlation id (on the fast path: requests stamped in batches, their
correlation ids too, replies read by the decoder, the requests they free sent once per read)."""

from __future__ import annotations

import time
from collections import deque

import pika

from drivers.amqp import wire as amqp_wire
from drivers.amqp.frames import (
    CORRELATION_AT,
    SEQUENCE_DIGITS,
    Templates,
    basic_properties,
    passive_declare_frame,
    reply_fields,
)
from drivers.amqp.link import BACKOFF_S, Carrier, Link, LinkHost
from drivers.backlog import BacklogGate
from drivers.message import Bodies
from drivers.rate import on_tick
from drivers.routing import KeyPicker
from drivers.workers import RequesterRole, SenderRole

MAX_BUFFERED_BYTES = 4 * 1024 * 1024  # outbound bytes per connection before a sender waits
PACING_TICK_S = 0.002  # fast rate-limited senders wake on multiples of this (see _again)
RETIRE_GRACE_S = 2.0  # a moved sender's old connection stays open this long for its last publishes
PAUSED_POLL_S = 0.05  # a paused (or closed-loop) sender looks again this often
BACKLOG_WAIT_S = 0.005  # an unlimited sender out of backlog credit looks again this often
SETTLE_WAIT_S = 2.0  # a channel closed after a nack waits this long at most for its confirms
SETTLE_POLL_S = 0.01  # ... looking this often whether they came


class SenderLink(Link):
    def __init__(self, driver: LinkHost, role: SenderRole, endpoint: str,
                 queue: str | list[str], carrier: Carrier | None = None):
        routes = queue if isinstance(queue, list) else [queue]
        super().__init__(driver, endpoint, routes[0], carrier)
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
        self.published = 0  # publishes on this channel: the last one's delivery tag
        self.unsettled = 0  # of them, neither confirmed (or committed) nor nacked yet
        self.templates: Templates | None = None  # the fast path's, on this channel
        # [first tag, first seq, count, ever nacked, published at (monotonic ns)]
        self.unconfirmed_batches: deque[list[int]] = deque()
        # (first seq, count, ever nacked, nacked last) to publish again
        self.resend: list[tuple[int, int, bool, bool]] = []
        self.reopening = False  # a nack closes the channel; publishing waits for a new one
        self.nack_rounds = 0  # channels reopened after nacks since the last confirm
        self.commit_every = driver.destination.publish_transaction  # publishes per transaction
        self.commit_asked = 0  # the last publish (its tag) of the latest commit asked for
        self.committing = False  # a commit is on its way: nothing more is sent until it is ok
        # (first seq, count, ever nacked) taken but not sent: they belong to the next
        # transaction, which opens once the commit before it is ok
        self.waiting: list[tuple[int, int, bool]] = []
        # publishes are tracked until confirmed, or committed: both say the broker has them
        self.tracked = driver.destination.confirms or bool(self.commit_every)
        bound = driver.destination.backlog_per_sender
        self.gate = BacklogGate(bound) if bound is not None else None
        self.answers: list[int] = []  # ready messages of the routes answered so far
        # the passive declares of its routes as frames, where their answers skip pika too;
        # the connection whose answers and confirms this link reads itself
        self.depth_asks: bytes | None = None
        self.reading_on = None

    def ready(self, channel) -> None:
        self.published = self.unsettled = self.commit_asked = 0
        self.reopening = self.committing = False
        destination = self.driver.destination
        if destination.confirms:
            channel.confirm_delivery(self._confirmed)
        if self.commit_every:
            channel.tx_select()
        if self.driver.message.mandatory:
            channel.add_on_return_callback(self._returned)
        self.templates = self.depth_asks = None
        if self.driver.fast_path_on(self.connection):
            self.templates = self.driver.templates(channel.channel_number,
                                                   self.connection.params.frame_max,
                                                   tuple(self.targets), self.bodies)
        if self.gate is not None:
            self.gate.forget()
        self._read_own_frames(channel)
        self._publish()

    def _read_own_frames(self, channel) -> None:
        """Read the answers to its depth questions and its confirms itself, and ask for the
        depth with frames of its own, where its connection is its alone and on the fast path
        (:func:`~drivers.amqp.wire.install_sender_reader`)."""
        confirms = self.driver.destination.confirms
        if self.templates is None or len(self.carrier.links) != 1 or \
                (self.gate is None and not confirms):
            return
        if self.reading_on is not self.connection:
            amqp_wire.install_sender_reader(self.connection, self._depth_read,
                                            self._confirm_read)
            self.reading_on = self.connection
        if self.gate is not None:
            self.depth_asks = b"".join(passive_declare_frame(channel.channel_number, route)
                                       for route in self.routes)

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
            self._send_waiting()
        if self._may_publish():
            for first, n, ever_nacked, nacked_last in self.resend:
                self._send(first, n, ever_nacked)
                self.recorder.republished += n
                self.recorder.nacks_republished += n if nacked_last else 0
            self.resend.clear()
            n = role.due() if gate is None else gate.allow(role.due())
            if n:
                self._send(role.take(n), n)
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

    def _send(self, first_seq: int, n: int, nacked_before: bool = False) -> None:
        """Publish messages ``first_seq`` .. ``first_seq + n - 1``; in transactions, what
        fills the open one, then its commit, the rest waiting for the commit to be ok (a
        channel takes no other command while it commits)."""
        if not self.commit_every:
            self._emit(first_seq, n, nacked_before)
            return
        if self.committing:
            self.waiting.append((first_seq, n, nacked_before))
            return
        room = self.commit_every - (self.published - self.commit_asked)
        chunk = min(n, room)
        self._emit(first_seq, chunk, nacked_before)
        if chunk == room:
            self._commit()
        if n > chunk:
            self.waiting.append((first_seq + chunk, n - chunk, nacked_before))

    def _send_waiting(self) -> None:
        """Send what waited for a commit, transaction by transaction."""
        while self.waiting and not self.committing and self.channel is not None:
            self._send(*self.waiting.pop(0))

    def _commit(self) -> None:
        """Commit the publishes since the last commit; the broker has them once it says so."""
        tag = self.commit_asked = self.published
        self.committing = True
        self.channel.tx_commit(callback=lambda _frame: self._committed(tag))

    def _committed(self, tag: int) -> None:
        self.committing = False
        self.recorder.committed += self._settle(tag, multiple=True, nacked=False)
        if not self.role.active or self.role.done:  # stopped: what it took goes out too
            self._send_waiting()
            self._commit_open()

    def _emit(self, first_seq: int, n: int, nacked_before: bool = False) -> None:
        """Publish messages ``first_seq`` .. ``first_seq + n - 1`` of this sender
        (``nacked_before``: each of them was nacked once already)."""
        role, producer = self.role, self.role.producer_id
        keys = None if self.picker.fixed else self.picker.picks(producer, first_seq, n)
        if self.templates is not None:
            picks = _template_picks(keys, self.bodies, producer, first_seq, n)
            if isinstance(picks, int):
                amqp_wire.emit(self.connection, self.templates.encoder(picks).batch(
                    n, producer, first_seq, time.time_ns(), role.lags(first_seq)))
            else:
                amqp_wire.emit(self.connection, self.templates.mixed(
                    picks, producer, first_seq, time.time_ns(), role.lags(first_seq)))
        else:
            publish, props, targets = self.channel.basic_publish, self.properties, self.targets
            mandatory = self.driver.message.mandatory
            for i, seq in enumerate(range(first_seq, first_seq + n)):
                exchange, key = targets[keys[i] if keys else 0]
                publish(exchange, key, role.body(seq), props, mandatory)
        self._track(first_seq, n, nacked_before)
        self.published += n

    def _track(self, first_seq: int, n: int, nacked_before: bool = False) -> None:
        """Keep the ``n`` publishes about to be counted in ``published`` until the broker
        settles them, where it will (confirms, transactions)."""
        if self.tracked:
            self.unconfirmed_batches.append([self.published + 1, first_seq, n, nacked_before,
                                             time.monotonic_ns()])
            self.unsettled += n

    def _returned(self, _channel, _method, _properties, _body) -> None:
        """The broker returned a mandatory message no queue took."""
        self.recorder.returned += 1

    def _read_depth(self) -> None:
        """Ask for the ready messages in this sender's queues (a passive declare of each); the
        gate gets their sum once every queue has answered."""
        self.gate.asked(self.published)
        self.answers.clear()
        if self.depth_asks is not None:  # every declare in one write, answers read here
            amqp_wire.emit(self.connection, self.depth_asks)
            return
        channel = self.channel

        def answered(frame) -> None:
            if self.channel is channel:
                self._answered(frame.method.message_count)

        for route in self.routes:
            channel.queue_declare(route, passive=True, callback=answered)

    def _depth_read(self, channel_number: int, ready: int) -> None:
        """A passive declare's answer read off the fast path (one of a closed channel is
        dropped)."""
        if self.channel is not None and self.channel.channel_number == channel_number:
            self._answered(ready)

    def _answered(self, ready: int) -> None:
        """One queue's ready messages; the gate gets the sum once every queue has answered."""
        self.answers.append(ready)
        if len(self.answers) == len(self.routes):
            self.gate.answered(sum(self.answers), self.published, time.monotonic())

    def _may_publish(self) -> bool:
        if self.committing:
            return False
        destination = self.driver.destination
        if destination.confirms and self.unconfirmed >= destination.confirm_window:
            return False
        return amqp_wire.write_buffer_size(self.connection) < MAX_BUFFERED_BYTES

    def _confirmed(self, frame) -> None:
        """A confirm pika read."""
        method = frame.method
        self._settle_confirm(method.delivery_tag, method.multiple, method.NAME != "Basic.Ack")

    def _confirm_read(self, channel_number: int, tag: int, multiple: bool, nack: bool) -> None:
        """A confirm read off the fast path (one of a closed channel is dropped)."""
        if self.channel is not None and self.channel.channel_number == channel_number:
            self._settle_confirm(tag, multiple, nack)

    def _settle_confirm(self, tag: int, multiple: bool, nack: bool) -> None:
        if nack:
            self._nacked(tag, multiple)
            return
        self.recorder.confirmed += self._settle(tag, multiple, nacked=False)
        self.nack_rounds = 0

    def _nacked(self, tag: int, multiple: bool) -> None:
        """The broker nacked the publish ``tag`` (``multiple``: and every earlier one not
        settled yet): publish them again on a new channel."""
        self._settle(tag, multiple, nacked=True)
        self._reopen()

    def _settle(self, tag: int, multiple: bool, nacked: bool) -> int:
        """Forget the publish ``tag`` (``multiple``: and every earlier one not settled yet):
        nacked ones are published again, each counted in ``nacked`` the first time only;
        confirmed ones record their confirm latency. Returns how many it settled.

        RabbitMQ settles a channel's publishes out of order: it nacks one by one, and sends
        the nacks of a moment before the acks, each multiple ack covering only what is below
        the lowest publish still open (or nacked in the same moment)."""
        batches = self.unconfirmed_batches
        settled, now = 0, time.monotonic_ns()
        if multiple:
            while batches and batches[0][0] <= tag:
                batch = batches[0]
                n = min(batch[2], tag - batch[0] + 1)
                self._settled(batch, 0, n, nacked, now)
                settled += n
                if n == batch[2]:
                    batches.popleft()
                else:
                    batches[0] = [batch[0] + n, batch[1] + n, batch[2] - n, *batch[3:]]
        else:
            for i, batch in enumerate(batches):
                first, count = batch[0], batch[2]
                if first > tag:
                    break
                if tag < first + count:
                    at = tag - first
                    self._settled(batch, at, 1, nacked, now)
                    settled = 1
                    del batches[i]  # what is left of it, before and after the tag
                    if at + 1 < count:
                        batches.insert(i, [tag + 1, batch[1] + at + 1, count - at - 1,
                                           *batch[3:]])
                    if at:
                        batches.insert(i, [first, batch[1], at, *batch[3:]])
                    break
        self.unsettled -= settled
        return settled

    def _settled(self, batch: list[int], at: int, n: int, nacked: bool, now_ns: int) -> None:
        """``n`` publishes of ``batch`` from its ``at``-th are settled: ``nacked`` or not."""
        recorder = self.recorder
        _, first_seq, _, nacked_before, published_ns = batch
        if not nacked:
            if not self.commit_every:  # a commit's latency is not a confirm's
                recorder.confirm_latency.record_many((now_ns - published_ns) // 1000, n)
            return
        self.resend.append((first_seq + at, n, True, True))
        if nacked_before:
            recorder.nacks_repeated += n
        else:
            recorder.nacked += n

    def _unsettled_to_resend(self) -> None:
        """What the broker neither confirmed nor nacked is published again (its fate is
        unknown: a duplicate if the broker had taken it)."""
        self.resend.extend((seq, n, ever, False)
                           for _, seq, n, ever, _ in self.unconfirmed_batches)
        self.unconfirmed_batches.clear()
        self.published = self.unsettled = 0

    def _reopen(self) -> None:
        """Stop publishing on this channel and close it once the broker has settled what was
        published on it (a close cuts off the confirms still to come, and a publish whose
        confirm is cut off has an unknown fate: published again, it is a duplicate where the
        broker had it); a new channel opens after a backoff."""
        if self.reopening or self.closing or self.channel is None:
            return
        self.reopening = True
        self._cancel_timer()
        self._close_when_settled(self.channel, time.monotonic() + SETTLE_WAIT_S)

    def _close_when_settled(self, channel, deadline: float) -> None:
        if channel is not self.channel or not channel.is_open or self.closing:
            return  # gone meanwhile: what closed it reopens or ends it
        if self.unconfirmed_batches and time.monotonic() < deadline:
            self.driver.ioloop.call_later(
                SETTLE_POLL_S, lambda: self._close_when_settled(channel, deadline))
            return
        channel.close()

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

    def _connection_closed(self, connection, reason) -> None:
        if not self.closing:
            self._unsettled_to_resend()
        self.unconfirmed_batches.clear()
        super()._connection_closed(connection, reason)

    @property
    def unconfirmed(self) -> int:
        if not self.tracked:
            return 0
        return self.unsettled + sum(n for _, n, _ in self.waiting)

    def stop(self) -> None:
        self.role.active = False
        self._cancel_timer()
        self._commit_open()

    def _commit_open(self) -> None:
        """Commit what the open transaction holds (the last publishes before a stop)."""
        if self.commit_every and not self.committing and \
                self.published > self.commit_asked and \
                self.channel is not None and self.channel.is_open:
            self._commit()

    def retire(self) -> None:
        """Hand the role to another link: stop publishing here, close once the last publishes
        have had time to reach the broker (confirmed or committed, where they are)."""
        self._cancel_timer()
        self._commit_open()
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


class RequesterLink(SenderLink):
    """A requester: its own reply queue, requests with reply_to and a correlation id.

    On the fast path (a connection of its own), requests are :class:`Templates` stamped in
    batches, as a sender's publishes, each one's correlation id digits too; replies are read
    by the decoder, and what their room lets go is sent once per socket read."""

    role: RequesterRole

    def __init__(self, driver: LinkHost, role: RequesterRole, endpoint: str, queue: str,
                 carrier: Carrier | None = None):
        super().__init__(driver, role, endpoint, queue, carrier)
        self.reply_to = ""
        driver.ioloop.never_linger()  # a requester's rate is its in-flight over the round trip

    def ready(self, channel) -> None:
        self.published = self.unsettled = 0
        self.templates = None
        if self.driver.destination.confirms:
            channel.confirm_delivery(self._confirmed)
        channel.queue_declare("", exclusive=True, auto_delete=True,
                              callback=self._reply_queue_declared)

    def _nacked(self, tag: int, multiple: bool) -> None:
        """A nacked request is not sent again: its requester waits for its reply until the
        reply timeout."""
        self._settle(tag, multiple, nacked=True)

    def _settled(self, batch: list[int], at: int, n: int, nacked: bool, now_ns: int) -> None:
        if nacked:
            self.recorder.nacked += n
        else:
            super()._settled(batch, at, n, nacked, now_ns)

    def _reply_queue_declared(self, frame) -> None:
        self.reply_to = frame.method.queue
        channel = self.channel
        # the decoder reads one channel of a connection: a shared one is read by pika
        if len(self.carrier.links) == 1 and self.driver.fast_path_on(self.connection):
            self.templates = self._request_templates(channel)
            amqp_wire.install_decoder(self.connection, channel.channel_number,
                                      self._reply_arrived, properties=True,
                                      after_read=self._send)
        channel.basic_consume(self.reply_to, self._replied, auto_ack=True)
        self._publish()

    def _request_templates(self, channel) -> Templates:
        """This requester's requests on ``channel``: to its queue, with its reply queue and
        correlation ids whose sequence digits each request gets stamped."""
        correlation = self.role.correlation(0).encode()
        properties = basic_properties(self.properties.delivery_mode, correlation,
                                      self.reply_to.encode())
        return Templates(channel.channel_number, self.connection.params.frame_max,
                         [("", self.queue)], list(self.bodies.sizes), list(self.bodies.fillers),
                         self.driver.destination.persistent, properties,
                         sequence_at=CORRELATION_AT + len(correlation) - SEQUENCE_DIGITS)

    def _replied(self, channel, method, properties, body) -> None:
        self.role.on_reply(properties.correlation_id)
        self._send()

    def _reply_arrived(self, _buffer: bytes, _offset: int, _tag: int, _redelivered: bool,
                       properties: bytes) -> None:
        """A reply read by the decoder (the requests it frees go once the read is done)."""
        correlation = reply_fields(properties)[0]
        self.role.on_reply(None if correlation is None else correlation.decode("latin-1"))

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
        role = self.role
        n = role.room()
        if not n:
            return
        if self.templates is not None:
            first, producer = role.take_requests(n), role.producer_id
            picks = _template_picks(None, self.bodies, producer, first, n)
            lags = role.lags(first)
            amqp_wire.emit(self.connection, self.templates.encoder(picks).batch(
                n, producer, first, time.time_ns(), lags) if isinstance(picks, int)
                else self.templates.mixed(picks, producer, first, time.time_ns(), lags))
        else:
            publish, mode = self.channel.basic_publish, self.properties.delivery_mode
            for _ in range(n):
                correlation, body = role.request()
                publish("", self.queue, body, pika.BasicProperties(
                    delivery_mode=mode, reply_to=self.reply_to, correlation_id=correlation))
        self._track(0, n)
        self.published += n
        self.recorder.sent += n

    def _connection_closed(self, connection, reason) -> None:
        self.role.lost_connection()
        self.unconfirmed_batches.clear()
        Link._connection_closed(self, connection, reason)


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
