"""Publisher confirms as RabbitMQ sends them: out of order (a moment's nacks before its acks,
a multiple ack covering only what is below the lowest open publish), read off the sender's own
connection on the fast path and through pika's callback alike; every publish settled exactly
once, a nacked one published again, nothing counted twice or lost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pika import frame, spec

from drivers.amqp.sender import RequesterLink, SenderLink
from drivers.message import PayloadBuilder
from drivers.workers import RequesterRole, SenderRole
from tests.unit.test_amqp_request_reply import ENDPOINT, driver, opened


def confirm(method) -> bytes:
    return frame.Method(1, method).marshal()


def sender(**destination) -> tuple[SenderLink, object]:
    """An unlimited sender with confirms, on an open channel: it has published its first batch
    (64 messages, tags 1-64, sequence numbers 0-63)."""
    amqp = driver(confirms=True, **destination)
    link = SenderLink(amqp, SenderRole(1, 0.0, PayloadBuilder(100), amqp.recorder), ENDPOINT,
                      "requests")
    connection, _ = opened(link)
    assert link.published == link.unsettled == 64
    return link, connection


def arrive(link: SenderLink, connection, methods: list, fast: bool) -> None:
    """The broker's confirms, read off the wire (``fast``) or handed over by pika."""
    if fast:
        connection._on_data_available(b"".join(confirm(m) for m in methods))
        return
    for method in methods:
        link._confirmed(SimpleNamespace(method=method))


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "pika"])
def test_a_nack_before_the_acks_below_it_settles_only_its_own_publish(fast):
    link, connection = sender()
    arrive(link, connection, [spec.Basic.Nack(delivery_tag=7), spec.Basic.Nack(delivery_tag=9),
                              spec.Basic.Ack(delivery_tag=6, multiple=True),
                              spec.Basic.Ack(delivery_tag=8),
                              spec.Basic.Ack(delivery_tag=40, multiple=True)], fast)
    recorder = link.recorder
    assert (recorder.confirmed, recorder.nacked) == (38, 2)
    assert link.resend == [(6, 1, True, True), (8, 1, True, True)]  # sequence numbers 6 and 8
    assert link.unsettled == 24 and [b[:3] for b in link.unconfirmed_batches] == [[41, 40, 24]]
    assert link.reopening  # the channel closes once the rest is settled
    arrive(link, connection, [spec.Basic.Ack(delivery_tag=64, multiple=True),
                              spec.Basic.Ack(delivery_tag=64, multiple=True)], fast)
    assert (recorder.confirmed, link.unsettled, len(link.unconfirmed_batches)) == (62, 0, 0)
    assert recorder.confirm_latency.count == 62


def test_single_acks_in_any_order_settle_each_publish_once():
    link, connection = sender()
    tags = [3, 1, 64, 2, 33, 32, 34, 1, 64]  # the last two again: nothing more to settle
    arrive(link, connection, [spec.Basic.Ack(delivery_tag=t) for t in tags], True)
    assert link.recorder.confirmed == 7 and link.unsettled == 57
    assert [b[:3] for b in link.unconfirmed_batches] == [[4, 3, 28], [35, 34, 29]]
    arrive(link, connection, [spec.Basic.Ack(delivery_tag=63, multiple=True)], True)
    assert link.recorder.confirmed == 64 and link.unsettled == 0


def test_a_confirm_of_another_channel_is_not_this_sender_s():
    link, connection = sender()
    connection._on_data_available(frame.Method(2, spec.Basic.Ack(delivery_tag=64,
                                                                 multiple=True)).marshal())
    assert link.recorder.confirmed == 0 and link.unsettled == 64


def test_a_requester_counts_nacked_requests_once_and_sends_none_again():
    amqp = driver(confirms=True)
    role = RequesterRole(4, 0.0, PayloadBuilder(100), amqp.recorder, in_flight=5)
    link = RequesterLink(amqp, role, ENDPOINT, "requests")
    opened(link)
    assert link.unsettled == 5
    for method in (spec.Basic.Nack(delivery_tag=3), spec.Basic.Ack(delivery_tag=2, multiple=True),
                   spec.Basic.Ack(delivery_tag=5, multiple=True)):
        link._confirmed(SimpleNamespace(method=method))
    assert (amqp.recorder.nacked, amqp.recorder.confirmed, link.unsettled) == (1, 4, 0)
    assert link.resend == [] and not link.reopening
