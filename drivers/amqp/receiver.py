"""Receiver and responder links: consuming with a prefetch (deliveries read by the fast path's
decoder), acknowledging in batches, a consumer processing time or hold, streams read from an
offset, a queue of the receiver's own declared and bound, responders putting each reply before
acknowledging its request (on the fast path: the replies and acks of one socket read's
requests as frames of :class:`~drivers.amqp.frames.ReplyEncoder`, in one write)."""

from __future__ import annotations

import time
from collections import deque
from datetime import datetime

import pika

from drivers.amqp import wire as amqp_wire
from drivers.amqp.acks import AckWindow
from drivers.amqp.frames import ReplyEncoder, ack_frame, reply_fields
from drivers.amqp.link import BACKOFF_S, Carrier, Link, LinkHost
from drivers.header import HEADER_SIZE
from drivers.workers import ReceiverRole, ResponderRole

ACK_FLUSH_S = 0.1  # manual acks of a quiet receiver are flushed at least this often


class ReceiverLink(Link):
    # a receiver's backoff starts again only once it consumes: a channel that opens and is
    # closed by the broker because its queue is missing counts as a retry
    resets_backoff = False

    def __init__(self, driver: LinkHost, role: ReceiverRole, endpoint: str, queue: str,
                 carrier: Carrier | None = None):
        super().__init__(driver, endpoint, queue, carrier)
        self.role = role
        destination = driver.destination
        self.manual = destination.manual_ack
        self.ack_every = destination.ack_every or max(1, destination.prefetch // 4)
        self.decoding = False  # deliveries parsed by amqp_wire, acks sent as its frames
        self.consumer_tag: str | None = None
        self.responds = isinstance(role, ResponderRole)
        if self.responds:
            driver.ioloop.never_linger()  # each reply is part of a requester's round trip
        # get the request and put the reply in one transaction (MQ's syncpoint)
        self.transactional = self.responds and self.manual and destination.unit_of_work
        self.commit_every = destination.consume_transaction  # acks committed in transactions
        if self.commit_every:
            self.ack_every = self.commit_every
        self.nack = destination.nack  # "requeue" or "drop": every delivery nacked
        self.interval = 1.0 / destination.consumer_rate if destination.consumer_rate else 0.0
        self.limit = destination.receiver_limit
        self.taken = 0  # messages handled (for the limit)
        self.polling = destination.polling_s
        self.pending: deque[tuple] = deque()  # deliveries waiting for the consumer delay
        self.pending_timer = None
        self.busy_until = 0.0  # a slowed receiver handles its next message from then
        self.consuming_now = False  # its consumer is on (or it polls) on the current channel
        # a tx.commit awaits its commit-ok: RabbitMQ takes no other command on the channel
        # meanwhile (it closes the connection), so deliveries wait and acks are not sent
        self.committing = False
        self.close_after_commit = False
        if self.responds:
            self.padding = bytes(max(0, destination.reply_size - HEADER_SIZE))
            self.reply_mode = 2 if destination.persistent else 1
        self.replies: ReplyEncoder | None = None  # a responder's, on the fast path
        self.outgoing: list[bytes] = []  # its replies and acks not yet written
        self.window = AckWindow(self.ack_every if self.manual else 0, self.recorder,
                                role.on_body, self._ack_up_to)
        self.decoder = None  # the fast path's, while it reads this link's channel
        # never plain, whatever happens: a delivery goes through _arrived
        self.special = bool(self.responds or self.transactional or self.commit_every or
                            self.nack or self.interval or self.limit is not None)


    def _consuming(self, _frame) -> None:
        self.carrier.attempt = 0
        self._mark_consuming(True)

    def _mark_consuming(self, now: bool) -> None:
        """Count this receiver in the recorder's ``consuming`` while it consumes."""
        if now != self.consuming_now:
            self.consuming_now = now
            self.recorder.consumer(self.role, now)

    def _channel_closed(self, channel, reason) -> None:
        self._mark_consuming(False)
        self._forget_deliveries()
        super()._channel_closed(channel, reason)

    def _connection_closed(self, connection, reason) -> None:
        self._mark_consuming(False)
        self._forget_deliveries()
        super()._connection_closed(connection, reason)

    def _forget_deliveries(self) -> None:
        """The channel is gone, and with it every delivery it had not acknowledged: the
        broker puts them back in the queue, so the receiver no longer holds them."""
        self._drop_pending()
        self.window.acked()

    def _cancelled(self, _frame) -> None:
        """The broker cancelled this consumer: count it and consume again after a backoff (the
        channel stays open; if the queue is still missing, the broker closes the channel and
        the link reconnects with backoff until the queue is back)."""
        self.consumer_tag = None
        self._mark_consuming(False)
        self.recorder.cancels += 1
        self.recorder.error(f"consumer of {self.queue} cancelled by the broker")
        if self.closing:
            return
        delay = BACKOFF_S[min(self.carrier.attempt, len(BACKOFF_S) - 1)]
        self.carrier.attempt += 1
        self.driver.ioloop.call_later(delay, self._consume_again)

    def _consume_again(self) -> None:
        channel = self.channel
        if self.closing or channel is None or not channel.is_open or self.consumer_tag:
            return
        self.consumer_tag = channel.basic_consume(
            self.queue, self._delivered, auto_ack=not self.manual, callback=self._consuming,
            arguments=self.driver.consume_arguments or None)

    def ready(self, channel) -> None:
        channel.add_on_cancel_callback(self._cancelled)
        own = self.driver.destination.own_queues
        if own is None:
            self._consume_from(channel)
            return
        channel.queue_declare(  # a queue of its own: named by the broker, gone with the link
            "", durable=False, exclusive=True, auto_delete=True,
            arguments=self.driver.destination.queue_arguments or None,
            callback=lambda frame: self._bind(channel, frame.method.queue, list(own)))

    def _bind(self, channel, queue: str, bindings: list) -> None:
        """Bind the declared ``queue`` as ``bindings`` say, one after the other, then
        consume from it."""
        if self.channel is not channel or self.closing:
            return
        if bindings:
            first = bindings.pop(0)
            channel.queue_bind(queue, first.exchange, first.routing_key,
                               arguments=first.arguments or None,
                               callback=lambda _frame: self._bind(channel, queue, bindings))
            return
        self.queue = queue
        self._consume_from(channel)

    def _consume_from(self, channel) -> None:
        """Consume (or poll) ``self.queue`` on ``channel``."""
        self.committing = False  # a commit on a channel that closed never completes
        self._forget_deliveries()
        # the decoder reads one channel of a connection: a shared one is read by pika; a
        # responder in transactions, at a rate or up to a limit replies through pika too
        self.decoding = not (self.nack or self.polling) and not (self.responds and (
            self.transactional or self.commit_every or self.interval or
            self.limit is not None)) and \
            len(self.carrier.links) == 1 and self.driver.fast_path_on(self.connection)
        self.replies = self.decoder = None
        self.outgoing.clear()
        if self.decoding and self.responds:
            destination = self.driver.destination
            self.replies = ReplyEncoder(channel.channel_number, destination.reply_exchange,
                                        self.reply_mode, self.padding,
                                        self.connection.params.frame_max)
            amqp_wire.install_decoder(self.connection, channel.channel_number, self._arrived,
                                      properties=True, after_read=self._write_out)
        elif self.decoding:
            self.decoder = amqp_wire.install_decoder(self.connection, channel.channel_number,
                                                     self._arrived)
            self.rewire()
        channel.basic_qos(prefetch_count=self.driver.destination.prefetch,
                          global_qos=self.driver.destination.global_qos)
        if self.transactional or self.commit_every:
            channel.tx_select()
        if self.polling is not None:
            channel.add_callback(self._empty, [pika.spec.Basic.GetEmpty], one_shot=False)
            self._mark_consuming(True)
            self._poll()
        else:
            self.consumer_tag = channel.basic_consume(
                self.queue, self._delivered, auto_ack=not self.manual,
                callback=self._consuming, arguments=self.driver.consume_arguments or None)
        if self.manual:
            self.driver.ack_flusher.add(self)

    def _delivered(self, channel, method, properties, body) -> None:
        self._arrived(body, 0, method.delivery_tag, method.redelivered, properties)

    def _poll(self) -> None:
        """Ask for one message (basic.get); the next ask follows its answer."""
        channel = self.channel
        if self.closing or channel is None or not channel.is_open:
            return
        if self.driver.receivers_paused or self.pending:
            self.driver.ioloop.call_later(self.polling or 0.01, self._poll)
            return
        channel.basic_get(self.queue, self._got, auto_ack=not self.manual)

    def _got(self, channel, method, properties, body) -> None:
        if self.closing:
            return  # unacknowledged: back to the queue when the channel closes
        self.carrier.attempt = 0
        self._arrived(body, 0, method.delivery_tag, method.redelivered, properties)
        self._poll()

    def _empty(self, _frame) -> None:
        """The queue had nothing: ask again after the polling interval."""
        self.driver.ioloop.call_later(self.polling or 0.0, self._poll)

    def rewire(self) -> None:
        """Have the decoder hand deliveries straight to :meth:`AckWindow.deliver` while this
        receiver is plain (no consumer delay or hold now, nothing waiting, none of the
        options :attr:`special` names), else to :meth:`_arrived`; after each change of those."""
        if self.decoder is None:
            return
        driver = self.driver
        plain = not (self.special or self.pending or driver.consumer_delay_s > 0 or
                     driver.receivers_paused)
        self.decoder.on_delivery = self.window.deliver if plain else self._arrived

    def _delay(self) -> float:
        """Seconds between two messages this receiver handles now (0: as they come)."""
        return max(self.driver.consumer_delay_s, self.interval)

    def _arrived(self, buffer: bytes, offset: int, tag: int, redelivered: bool,
                 properties=None) -> None:
        driver = self.driver
        if driver.consumer_delay_s > 0 or self.interval or self.pending or \
                driver.receivers_paused or self.committing:
            self.pending.append((buffer, offset, tag, redelivered, properties))
            driver.recorder.held += 1
            if self.pending_timer is None and not driver.receivers_paused and \
                    not self.committing:  # the commit-ok resumes them
                self.pending_timer = self.driver.ioloop.call_later(
                    max(0.0, self.busy_until - time.monotonic()), self._work_pending)
            return
        self._process(buffer, offset, tag, redelivered, properties)

    def _work_pending(self) -> None:
        """Handle the oldest waiting delivery, then wait the consumer delay for the next."""
        self.pending_timer = None
        if self.closing or self.channel is None or self.driver.receivers_paused or \
                self.committing:
            return
        delay = self._delay()
        while self.pending and not self.committing:
            self.driver.recorder.held -= 1
            self._process(*self.pending.popleft())
            if delay > 0:
                self.busy_until = time.monotonic() + delay
                break
        self._write_out()
        if not self.pending:
            self.rewire()
        if self.pending and not self.committing:
            self.pending_timer = self.driver.ioloop.call_later(delay, self._work_pending)

    def _commit(self) -> None:
        """Commit the channel's transaction; nothing more is sent on it until it is done."""
        self.committing = True
        self.channel.tx_commit(callback=self._committed)

    def _committed(self, _frame) -> None:
        """The commit is done: close if closing waited for it, else handle what waited."""
        self.committing = False
        if self.close_after_commit:
            self._closed_out()
        elif self.pending and self.pending_timer is None:
            self.pending_timer = self.driver.ioloop.call_later(
                max(0.0, self.busy_until - time.monotonic()), self._work_pending)

    def _process(self, buffer: bytes, offset: int, tag: int, redelivered: bool,
                 properties) -> None:
        if self.limit is not None and self.taken >= self.limit:
            return  # past its limit: left unacknowledged, back to the queue when it closes
        if self.nack:
            self._nack(tag, buffer, offset, redelivered)
            return
        self.role.on_body(buffer, offset, redelivered)
        if self.limit is not None:  # the count serves the limit alone: off the usual path
            self._took()
        if self.responds:
            self._reply(buffer, offset, properties)
        if self.transactional:
            self.channel.basic_ack(tag)
            self._commit()
        elif self.manual and self.window.took(tag):
            self._ack_up_to(tag)

    def _reply(self, buffer: bytes, offset: int, properties) -> None:
        """Put the reply to a request (one without reply-to gets none): on the fast path
        into :attr:`outgoing` (``properties`` the content header's bytes), else through pika
        (``properties`` pika's)."""
        if self.replies is not None:
            correlation, reply_to = reply_fields(properties)
            if reply_to:
                self.outgoing.append(self.replies.reply(
                    reply_to, correlation, buffer[offset:offset + HEADER_SIZE]))
        elif properties is not None and properties.reply_to:
            self.channel.basic_publish(
                self.driver.destination.reply_exchange, properties.reply_to,
                buffer[offset:offset + HEADER_SIZE] + self.padding,
                pika.BasicProperties(delivery_mode=self.reply_mode,
                                     correlation_id=properties.correlation_id))

    def _nack(self, tag: int, buffer: bytes, offset: int, redelivered: bool) -> None:
        """Nack a delivery: back to its queue (not received), or dropped by the broker
        (received, then rejected)."""
        requeue = self.nack == "requeue"
        self.channel.basic_nack(tag, requeue=requeue)
        if requeue:
            self.recorder.requeued += 1
        else:
            self.role.on_body(buffer, offset, redelivered)
            self.recorder.rejected += 1
            if self.limit is not None:
                self._took()

    def _took(self) -> None:
        """One more message handled; at its limit the receiver stops consuming."""
        self.taken += 1
        if self.taken == self.limit:
            self.recorder.receivers_done += 1
            self.driver.ioloop.call_later(0, self.retire)

    def _drop_pending(self) -> None:
        self.driver.recorder.held -= len(self.pending)
        self.pending.clear()

    def _ack_up_to(self, tag: int) -> None:
        if self.replies is not None:  # after the replies before it, in their write
            self.outgoing.append(ack_frame(self.channel.channel_number, tag, True))
        elif self.decoding:
            amqp_wire.emit(self.connection,
                           ack_frame(self.channel.channel_number, tag, True))
        else:
            self.channel.basic_ack(tag, multiple=True)
        self.window.acked()
        if self.commit_every and not self.closing:  # closing: committed before the close
            self._commit()

    def flush(self) -> None:
        if self.window.unacked and self.channel is not None and self.channel.is_open and \
                not self.committing:
            self._ack_up_to(self.window.last_tag)
        self._write_out()

    def _write_out(self) -> None:
        """Write the replies and acks a responder on the fast path has made since the last
        time (after each socket read, each held delivery handled, each flush), in one write."""
        if self.outgoing:
            data = b"".join(self.outgoing)
            self.outgoing.clear()
            if self.channel is not None:
                amqp_wire.emit(self.connection, data)

    def retire(self) -> None:
        """Stop consuming here without losing or duplicating: cancel, take what is still in
        flight, acknowledge everything, then close."""
        if self.closing:
            return
        self.closing = True
        if self.channel is not None and self.channel.is_open and self.consumer_tag:
            self.channel.basic_cancel(self.consumer_tag, callback=lambda _frame: self._closed_out())
        elif self.channel is not None and self.channel.is_open:  # polling: nothing to cancel
            self._closed_out()
        else:
            self.close()

    def _closed_out(self) -> None:
        self._drop_pending()  # never processed nor acknowledged: back to the queue on close
        if self.committing:  # the commit-ok comes first; then this again
            self.close_after_commit = True
            return
        self.close_after_commit = False
        self.flush()
        if self.commit_every and self.channel is not None and self.channel.is_open:
            self.channel.tx_commit(callback=lambda _frame: self.close())  # acks kept first
        else:
            self.close()



class AckFlusher:
    """Flushes the manual acks of every receiver of a driver at least every
    :data:`ACK_FLUSH_S`, on one timer for all of them (a timer each is a loop turn each: 1,800
    a second for 180 receivers), until each is closing (then once more)."""

    def __init__(self, ioloop) -> None:
        self.ioloop = ioloop
        self.links: dict[int, ReceiverLink] = {}  # by id, in the order they came
        self.timer = None

    def add(self, link: ReceiverLink) -> None:
        """Flush ``link``'s acks from now on (again after a reconnect: still once)."""
        self.links[id(link)] = link
        if self.timer is None:
            self.timer = self.ioloop.call_later(ACK_FLUSH_S, self._flush)

    def _flush(self) -> None:
        self.timer = None
        for key, link in list(self.links.items()):
            link.flush()
            if link.closing:
                del self.links[key]
        if self.links:
            self.timer = self.ioloop.call_later(ACK_FLUSH_S, self._flush)


def stream_offset(offset: int | str) -> int | str | datetime:
    """``x-stream-offset`` as RabbitMQ takes it: first, last, next, an offset, or a time (an
    AMQP timestamp, from ISO 8601 text)."""
    if isinstance(offset, int) or offset in ("first", "last", "next"):
        return offset
    return datetime.fromisoformat(offset.replace("Z", "+00:00"))
