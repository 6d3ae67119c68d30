"""Worker roles: requesters match replies by correlation id within their in-flight window,
senders pause for client-count sweeps and stop at their message limit."""

import time

import pytest

from drivers.header import decode
from drivers.message import PayloadBuilder
from drivers.workers import (
    DESTINATION_SEQUENCE,
    Blocking,
    ReceiverRole,
    Recorder,
    RequesterRole,
    ResponderRole,
    SenderRole,
)


def requester(rate=0.0, in_flight=2, limit=None):
    recorder = Recorder()
    return RequesterRole(7, rate, PayloadBuilder(64), recorder, in_flight=in_flight,
                         limit=limit), recorder


def test_closed_loop_requester_keeps_its_window_full_and_matches_replies():
    role, recorder = requester(in_flight=2)
    assert role.room() == 2
    first, body = role.request()
    second, _ = role.request()
    assert (first, second) == ("00000007:0000000000000000", "00000007:0000000000000001")
    assert decode(body)[:2] == (7, 0)
    assert role.room() == 0
    role.on_reply(second)
    role.on_reply("00000007:0000000000000063")  # nobody waits for it
    assert recorder.received == 1 and recorder.unmatched == 1 and recorder.latency.count == 1
    assert role.room() == 1


def test_unanswered_requests_time_out_and_a_lost_connection_gives_up_on_all():
    role, recorder = requester(in_flight=3)
    for _ in range(role.room()):
        role.request()
    role.expire(timeout_s=60)
    assert recorder.timeouts == 0
    sent, intended = role.waiting[role.correlation(0)]
    role.waiting[role.correlation(0)] = (sent - int(61e9), intended)
    role.expire(timeout_s=60)
    assert recorder.timeouts == 1 and len(role.waiting) == 2
    role.lost_connection()
    assert recorder.timeouts == 3 and not role.waiting


def test_correlation_ids_have_a_fixed_width_whatever_the_numbers():
    for producer, seq in [(0, 0), (7, 255), (2**32 - 1, 2**64 - 1)]:
        role = RequesterRole(producer, 0.0, PayloadBuilder(64), Recorder())
        correlation = role.correlation(seq)
        assert len(correlation) == 25 and correlation.startswith(role.correlation_prefix)
        assert (int(correlation[:8], 16), int(correlation[9:], 16)) == (producer, seq)


def test_a_batch_of_requests_waits_for_each_reply_and_stops_at_the_limit():
    role, recorder = requester(in_flight=5, limit=4)
    assert role.room() == 4 and role.take_requests(3) == 0
    assert list(role.waiting) == [role.correlation(seq) for seq in range(3)]
    role.on_reply(role.correlation(1))
    assert recorder.received == 1 and role.room() == 1
    with pytest.raises(ValueError, match="past its message limit"):
        role.take_requests(2)
    assert role.take_requests(1) == 3 and role.done


def test_requester_stops_at_its_limit():
    role, _ = requester(in_flight=5, limit=3)
    assert role.room() == 3
    for _ in range(3):
        role.request()
    assert role.done and role.room() == 0


def test_paused_sender_sends_nothing_and_owes_nothing_after_the_pause():
    recorder = Recorder()
    sender = SenderRole(1, 1000.0, PayloadBuilder(64), recorder, now=time.monotonic() - 1)
    sender.pause(True)
    assert sender.due() == 0
    assert recorder.snapshot().target_rate == 0
    time.sleep(0.05)
    sender.pause(False)
    assert sender.due() <= 2  # a fresh start, not the 50 messages of the pause


def test_responder_tracks_requests_but_leaves_latency_to_the_requester():
    recorder = Recorder()
    responder = ResponderRole(recorder, 1)
    responder.on_body(PayloadBuilder(64).build(3, 0, time.time_ns()))
    assert recorder.served == 1 and recorder.received == 0 and recorder.latency.count == 0
    assert recorder.tracker.unique == 1


def test_blocked_seconds_count_while_any_connection_is_blocked():
    blocking = Blocking()
    blocking.blocked(1, 10.0)
    blocking.blocked(2, 11.0)
    assert blocking.seconds(12.0) == 2.0
    blocking.unblocked(1, 13.0)
    assert blocking.links == {2} and blocking.seconds(14.0) == 4.0
    blocking.unblocked(2, 15.0)
    blocking.unblocked(2, 16.0)  # a closed connection that was not blocked any more
    assert blocking.seconds(20.0) == 5.0 and not blocking.links
    blocking.blocked(3, 30.0)
    assert blocking.seconds(31.5) == 6.5


def test_a_snapshot_carries_cancels_and_blocked_connections():
    recorder = Recorder()
    recorder.cancels = 3
    recorder.blocking.blocked(7, time.monotonic() - 2.0)
    snapshot = recorder.snapshot()
    assert snapshot.cancels == 3 and snapshot.blocked == 1 and 2.0 <= snapshot.blocked_s < 3.0


def test_a_receiver_moved_to_another_queue_counts_its_deliveries_in_that_subscription():
    recorder = Recorder()
    receiver = ReceiverRole(recorder, 1, group="sub-1")
    body = PayloadBuilder(64)
    receiver.on_body(body.build(1, 0, time.time_ns()))
    receiver.moved_to("sub-2")  # a scale-out moved it to another member's instance
    receiver.on_body(body.build(1, 1, time.time_ns()))
    assert {group: tracker.unique for group, tracker in recorder.trackers.items()} == \
        {"": 0, "sub-1": 1, "sub-2": 1}
    reader = ReceiverRole(recorder, 2, group="events~2", stream=True)
    reader.moved_to("events")  # a stream's reader keeps its own subscription
    assert reader.group == "events~2"


def test_snapshot_counts_the_senders_publishing_and_the_queues_they_use():
    recorder = Recorder()
    roles = [SenderRole(i, 10.0, PayloadBuilder(64), recorder, limit=5) for i in (1, 2, 3)]
    for role, queues in zip(roles, [("pair-1",), ("pair-1",), ("pair-2", "pair-3")]):
        role.queues = queues
    snapshot = recorder.snapshot()
    assert snapshot.sending == 3
    assert snapshot.sending_queues == ["pair-1", "pair-2", "pair-3"]
    roles[2].pause(True)
    roles[1].seq = 5  # sent its limit: done
    snapshot = recorder.snapshot()
    assert (snapshot.sending, snapshot.sending_queues) == (1, ["pair-1"])
    roles[0].active = False
    assert (recorder.snapshot().sending, recorder.snapshot().sending_queues) == (0, [])


def test_a_receiver_moved_make_before_break_is_counted_once():
    recorder = Recorder()
    first, second = object(), object()
    recorder.consumer(first, True)
    recorder.consumer(second, True)
    recorder.consumer(first, True)  # its new link consumes before the old one stops
    assert recorder.consuming == 2
    recorder.consumer(first, False)
    assert recorder.consuming == 2
    recorder.consumer(first, False)
    assert recorder.snapshot().consuming == 1


def test_destinations_are_counted_and_only_the_first_ones_kept_in_order():
    recorder = Recorder()
    recorder.destined({"QM1": 20, "QM2": 10}, ["QM1", "QM2"] * 10)
    recorder.destined({"QM3": 5}, ["QM3"] * 5)
    snapshot = recorder.snapshot()
    assert snapshot.destinations == {"QM1": 20, "QM2": 10, "QM3": 5}
    assert snapshot.destination_sequence == ["QM1", "QM2"] * 10 + ["QM3"] * 4
    assert len(snapshot.destination_sequence) == DESTINATION_SEQUENCE
