"""surge's MQ workers (drivers/mq) over IBM's real ``ibmmq`` and the MQI emulator (tests/mqemu;
NOT IBM MQ), judged by what the queue manager holds and shows: paced, paused and multi-queue
senders, message sizes, held and delayed receivers, gets outside syncpoint, messages larger than
the first buffer, requests and replies, moves between queue managers, and stopping."""

from __future__ import annotations

import time

import pytest

from drivers.header import decode
from drivers.message import Bodies, PayloadBuilder
from drivers.protocol import MessageShape
from drivers.workers import ReceiverRole, RequesterRole, ResponderRole
from tests.unit.mqemu_helpers import (  # noqa: F401 (no_mq_threads_left: an autouse fixture)
    PASSWORD,
    USER,
    connections,
    counted,
    depth,
    drain_with_md,
    endpoint,
    make,
    mq_threads,
    no_mq_threads_left,
    put_messages,
    seed,
    sender,
    until,
)

pytestmark = pytest.mark.timeout(90)


def start(qmgrs, *queues: str, name: str = "QM1"):
    """An emulated queue manager with these local queues (MAXDEPTH 100000: unpaced senders)."""
    return qmgrs.start(name, USER, PASSWORD,
                       [f"DEFINE QLOCAL('{q}') MAXDEPTH(100000)" for q in queues])


# -- senders ------------------------------------------------------------------------------------


def test_a_sender_puts_each_message_at_its_picked_size_and_held_receivers_take_nothing(
        emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "perf")
    driver = make(emulated_ibmmq, qm1)
    bodies = Bodies(MessageShape(sizes=(100, 1000, 5000), weights=(1.0, 2.0, 1.0),
                                 fill="random"))
    driver.add_sender(sender(driver, 0, limit=60, size=bodies), endpoint(qm1))
    until(lambda: counted(driver, "sent") == 60)
    # where each put went, as the queue manager resolved it (the PMO's ResolvedQMgrName)
    snapshot = driver.call(driver.recorder.snapshot)
    assert snapshot.destinations == {"QM1": 60} and snapshot.destination_sequence == ["QM1"] * 24
    driver.set_consumer_delay(0.0, paused=True)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    time.sleep(0.3)
    assert counted(driver, "received") == 0 and depth(qm1, "perf") == 60  # held: a backlog
    got = drain_with_md(emulated_ibmmq, qm1, "perf")
    assert [len(body) for body, _ in got] == [bodies.sizes[k] for k in bodies.picks(1, 0, 60)]
    put_messages(emulated_ibmmq, qm1, "perf", got)
    driver.set_consumer_delay(0.0, paused=False)
    until(lambda: counted(driver, "received") == 60)
    driver.stop(3)
    assert depth(qm1, "perf") == 0 and driver.recorder.tracker.duplicates == 0


def test_a_paused_sender_puts_nothing_and_a_rate_change_applies_live(emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "perf")
    driver = make(emulated_ibmmq, qm1)
    role = sender(driver, rate=200)
    driver.add_sender(role, endpoint(qm1))
    until(lambda: counted(driver, "sent") >= 10)
    driver.call(lambda: role.pause(True))
    time.sleep(0.06)
    held = counted(driver, "sent")
    time.sleep(0.2)
    assert counted(driver, "sent") == held and depth(qm1, "perf") == held
    driver.call(lambda: (role.set_rate(50), role.pause(False)))
    time.sleep(0.3)
    assert 8 <= counted(driver, "sent") - held <= 20  # 50/s for 0.3 s
    driver.stop(3)
    assert depth(qm1, "perf") == counted(driver, "sent")


def test_a_slow_sender_woken_after_a_rate_change_puts_at_once_not_when_it_planned(
        emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "perf")
    driver = make(emulated_ibmmq, qm1)
    role = sender(driver, rate=0.1)  # first message now, the next planned 10 s ahead
    driver.add_sender(role, endpoint(qm1))
    until(lambda: counted(driver, "sent") == 1)
    driver.call(lambda: (role.set_rate(100), driver.wake_senders()))
    until(lambda: depth(qm1, "perf") >= 5, timeout_s=2.0)
    driver.stop(3)


def test_a_sender_given_several_queues_puts_to_each_in_turn(emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "q1", "q2")
    driver = make(emulated_ibmmq, qm1, queue="q1")
    driver.add_sender(sender(driver, rate=0, limit=6), endpoint(qm1), ["q1", "q2"])
    until(lambda: counted(driver, "sent") == 6)
    driver.stop(3)
    for queue, seqs in (("q1", [0, 2, 4]), ("q2", [1, 3, 5])):
        assert [decode(body)[1] for body, _ in drain_with_md(emulated_ibmmq, qm1, queue)] == seqs


# -- receivers -----------------------------------------------------------------------------------


def test_without_manual_ack_a_got_message_is_gone_at_once_and_never_comes_back(emulated_ibmmq,
                                                                              qmgrs):
    qm1 = start(qmgrs, "perf")
    seed(emulated_ibmmq, qm1, "perf", 4)
    driver = make(emulated_ibmmq, qm1, manual_ack=False)
    driver.set_consumer_delay(0.2)  # the first message is still being handled at the break
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    until(lambda: counted(driver, "received") >= 1)
    assert [c["UOW"] for c in connections(qm1)] == ["0"]  # outside syncpoint: no unit of work
    assert depth(qm1, "perf") == 4 - counted(driver, "received")
    assert len(qm1.admin("STOP CONN(*)")[0]) == 1
    until(lambda: driver.call(lambda: driver.recorder.tracker.unique) == 4)
    driver.stop(3)
    recorder = driver.recorder
    assert (recorder.received, recorder.redelivered, recorder.tracker.duplicates) == (4, 0, 0)
    assert recorder.reconnects >= 1 and depth(qm1, "perf") == 0


def test_a_message_larger_than_the_buffer_is_got_whole_with_a_larger_one(emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "perf")
    seed(emulated_ibmmq, qm1, "perf", 3, size=10_000)  # the first buffer: 4096 bytes
    driver = make(emulated_ibmmq, qm1)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    until(lambda: counted(driver, "received") == 3)
    driver.stop(3)
    assert (counted(driver, "header_errors"), counted(driver, "errors")) == (0, 0)
    assert driver.recorder.tracker.unique == 3 and depth(qm1, "perf") == 0


def test_a_consumer_delay_makes_each_message_take_that_long(emulated_ibmmq, qmgrs):
    qm1 = start(qmgrs, "perf")
    seed(emulated_ibmmq, qm1, "perf", 8)
    driver = make(emulated_ibmmq, qm1)
    driver.set_consumer_delay(0.03)
    started = time.monotonic()
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    until(lambda: counted(driver, "received") == 8)
    assert time.monotonic() - started >= 7 * 0.03
    driver.stop(3)


# -- request / reply ------------------------------------------------------------------------------


def test_requests_carry_their_reply_queue_and_id_and_unanswered_ones_time_out(emulated_ibmmq,
                                                                            qmgrs):
    C = emulated_ibmmq.CMQC
    qm1 = start(qmgrs, "request1", "reply1")
    driver = make(emulated_ibmmq, qm1, queue="request1", reply_timeout_s=0.2, persistent=True)
    role = driver.call(lambda: RequesterRole(5, 0, PayloadBuilder(64), driver.recorder,
                                             in_flight=3, limit=6))
    driver.add_sender(role, endpoint(qm1))  # no responder
    until(lambda: counted(driver, "timeouts") == 6)
    driver.stop(3)
    assert counted(driver, "sent") == 6 and counted(driver, "received") == 0
    requests = drain_with_md(emulated_ibmmq, qm1, "request1")
    assert [decode(body)[:2] for body, _ in requests] == [(5, seq) for seq in range(6)]
    for _, md in requests:
        assert md.MsgType == C.MQMT_REQUEST and md.Persistence == C.MQPER_PERSISTENT
        assert md.ReplyToQ.rstrip(b"\0 ") == b"reply1"
        assert md.ReplyToQMgr.rstrip(b"\0 ") == b"QM1"  # filled in by the queue manager
        assert md.MsgId == md.CorrelId and md.MsgId != C.MQMI_NONE
    assert len({md.MsgId for _, md in requests}) == 6


def test_a_reply_goes_to_the_reply_queue_with_the_request_id_and_its_header_padded(
        emulated_ibmmq, qmgrs):
    C = emulated_ibmmq.CMQC
    qm1 = start(qmgrs, "REQUEST", "REPLY")
    request = emulated_ibmmq.MD(MsgType=C.MQMT_REQUEST, ReplyToQ=b"REPLY",
                                MsgId=b"surge-request-0000000001")
    body = PayloadBuilder(64).build(5, 0, time.time_ns())
    put_messages(emulated_ibmmq, qm1, "REQUEST", [(body, request)])
    driver = make(emulated_ibmmq, qm1, queue="REQUEST", reply_size=40, unit_of_work=True)
    driver.add_receiver(ResponderRole(driver.recorder, 1), endpoint(qm1))
    until(lambda: depth(qm1, "REPLY") == 1)
    driver.stop(3)
    [(reply, md)] = drain_with_md(emulated_ibmmq, qm1, "REPLY")
    assert md.CorrelId == b"surge-request-0000000001" and md.MsgType == C.MQMT_REPLY
    assert len(reply) == 40 and reply[:28] == body[:28]  # the request's surge header
    assert 90 <= md.Expiry <= 100  # 10 s in tenths, less the time it spent on the queue
    assert depth(qm1, "REQUEST") == 0 and counted(driver, "served") == 1


# -- moves and stopping ---------------------------------------------------------------------------


def test_a_moved_receiver_takes_from_the_new_queue_manager_and_lets_go_of_the_old(
        emulated_ibmmq, qmgrs):
    qm1, qm2 = start(qmgrs, "perf"), start(qmgrs, "perf", name="QM2")
    seed(emulated_ibmmq, qm1, "perf", 3)
    seed(emulated_ibmmq, qm2, "perf", 3, producer=10)
    driver = make(emulated_ibmmq, qm1, endpoints=(endpoint(qm1), endpoint(qm2)),
                  manual_ack=True, prefetch=400)
    role = ReceiverRole(driver.recorder, 1)
    driver.add_receiver(role, endpoint(qm1))
    until(lambda: counted(driver, "received") == 3)
    driver.move(role, endpoint(qm2))
    until(lambda: counted(driver, "received") == 6)
    until(lambda: not connections(qm1))  # the old connection is closed
    assert [c["APPLTAG"] for c in connections(qm2)] == ["mqperf.receiver"]
    driver.stop(3)
    assert depth(qm1, "perf") == depth(qm2, "perf") == 0  # committed on both
    assert driver.recorder.tracker.duplicates == 0 and counted(driver, "connections") == 0
    assert not connections(qm2)


def test_a_worker_moved_while_it_cannot_connect_connects_to_the_new_endpoint(emulated_ibmmq,
                                                                           qmgrs):
    qm1, qm2 = start(qmgrs, "perf"), start(qmgrs, "perf", name="QM2")
    qm1.stop()  # nothing listens at its address any more
    driver = make(emulated_ibmmq, qm1)
    role = sender(driver, rate=0, limit=5)
    driver.add_sender(role, endpoint(qm1))
    until(lambda: counted(driver, "reconnects") >= 1)
    assert "2538" in driver.recorder.last_error  # MQRC_HOST_NOT_AVAILABLE
    driver.move(role, endpoint(qm2))
    until(lambda: counted(driver, "sent") == 5)
    driver.stop(3)
    assert depth(qm2, "perf") == 5


def test_stop_leaves_no_thread_and_no_connection_and_gives_back_unsent_numbers(emulated_ibmmq,
                                                                             qmgrs):
    qm1 = start(qmgrs, "perf", "other", "request1", "reply1")
    target = endpoint(qm1)
    driver = make(emulated_ibmmq, qm1)
    paused = sender(driver, rate=10, producer_id=1)
    driver.call(lambda: paused.pause(True))
    driver.add_sender(paused, target)
    driver.add_sender(sender(driver, rate=0, producer_id=2), target)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), target, "other")
    waiting = driver.call(lambda: RequesterRole(3, 0, PayloadBuilder(64), driver.recorder,
                                                limit=1))
    driver.add_sender(waiting, target, "request1")  # nobody answers
    until(lambda: counted(driver, "sent") > 100 and len(connections(qm1)) == 4)
    started = time.monotonic()
    driver.stop_senders(1)
    driver.stop_receivers(1)
    assert time.monotonic() - started < 5 and mq_threads() == []  # 1 s grace, a busy host
    assert counted(driver, "connections") == 0 and counted(driver, "timeouts") == 1
    assert connections(qm1) == []  # every connection disconnected
    put = [decode(body)[0] for body, _ in drain_with_md(emulated_ibmmq, qm1, "perf")]
    assert driver.recorder.sent_per_producer()[2] == put.count(2) and 1 not in put
    driver.stop(1)  # again: nothing left to do

