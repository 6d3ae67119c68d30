"""surge's own MQ driver (drivers/mq) running over IBM's real ``ibmmq`` and the MQI emulator
(tests/mqemu; NOT IBM MQ): senders, receivers, requesters and responders through a client
channel with MQCSP credentials, counted exactly; the controller's preflight and MQSUB of
durable subscriptions."""

from __future__ import annotations

import dataclasses
import time

import pytest

from drivers.header import decode
from drivers.message import PayloadBuilder
from drivers.mq.driver import MqDriver
from drivers.mq.preflight import MqPreflight
from drivers.mq.topics import subscribe
from drivers.protocol import Destination
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole
from orchestrator.specs.mqtopics import Subscription
from tests.unit.mqemu_helpers import (  # noqa: F401 (no_mq_threads_left: an autouse fixture)
    PASSWORD,
    SETTINGS,
    USER,
    connections,
    counted,
    depth,
    drain,
    drain_with_md,
    endpoint,
    make,
    no_mq_threads_left,
    sender,
    until,
    write_ccdt,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def qm1(qmgrs):
    return qmgrs.start("QM1", USER, PASSWORD, [
        "DEFINE QLOCAL('perf')", "DEFINE QLOCAL('request1')", "DEFINE QLOCAL('reply1')"])


@pytest.mark.parametrize("manual_ack", [True, False])
def test_senders_and_receivers_move_every_message_once(emulated_ibmmq, qm1, manual_ack):
    driver = make(emulated_ibmmq, qm1, manual_ack=manual_ack, prefetch=8, persistent=True)
    recorder = driver.recorder
    for producer in (1, 2):
        role = driver.call(lambda p=producer: SenderRole(p, 0, PayloadBuilder(300), recorder,
                                                         limit=400))
        driver.add_sender(role, endpoint(qm1))
    for receiver in range(2):
        driver.add_receiver(ReceiverRole(recorder, receiver), endpoint(qm1))
    until(lambda: counted(driver, "received") == 800)
    time.sleep(0.2)  # anything more would be a duplicate
    driver.stop(3)
    assert (recorder.sent, recorder.received, recorder.errors, recorder.redelivered,
            recorder.tracker.duplicates) == (800, 800, 0, 0, 0)
    assert recorder.sent_per_producer() == {1: 400, 2: 400}
    assert depth(qm1, "perf") == 0 and qm1.admin("DISPLAY CONN(*)") == [[]]
    assert recorder.connections == 0


@pytest.mark.parametrize("persistent", [True, False])
def test_a_sender_puts_messages_with_the_surge_header_its_appltag_and_the_persistence_asked(
        emulated_ibmmq, qm1, persistent):
    C = emulated_ibmmq.CMQC
    driver = make(emulated_ibmmq, qm1, persistent=persistent, confirms=True)
    driver.add_sender(sender(driver, 0, limit=25, producer_id=7, size=120), endpoint(qm1))
    until(lambda: counted(driver, "sent") == 25)
    assert depth(qm1, "perf") == 25  # outside syncpoint: there before any commit or MQDISC
    driver.stop(3)
    assert counted(driver, "confirmed") == 25
    got = drain_with_md(emulated_ibmmq, qm1, "perf")
    for body, md in got:
        assert len(body) == 120 and md.PutApplName.rstrip() == b"mqperf.sender"
        assert md.UserIdentifier.rstrip() == USER.encode()  # the MQCSP user
        assert md.Persistence == (C.MQPER_PERSISTENT if persistent else C.MQPER_NOT_PERSISTENT)
        assert md.Format == C.MQFMT_NONE and md.MsgType == C.MQMT_DATAGRAM
    assert [decode(body)[:2] for body, _ in got] == [(7, seq) for seq in range(25)]
    assert len({md.MsgId for _, md in got}) == 25  # a new MsgId each


def test_requests_and_replies_match_exactly_through_a_shared_reply_queue(emulated_ibmmq, qm1):
    driver = make(emulated_ibmmq, qm1, queue="request1", unit_of_work=True, manual_ack=True,
                  reply_size=100)
    recorder = driver.recorder
    for i in range(2):
        driver.add_receiver(ResponderRole(recorder, i), endpoint(qm1))
    for producer in (11, 12):
        role = driver.call(lambda p=producer: RequesterRole(p, 0, PayloadBuilder(64), recorder,
                                                            in_flight=4, limit=60))
        driver.add_sender(role, endpoint(qm1))
    until(lambda: counted(driver, "received") == 120)
    driver.stop(3)
    assert (recorder.sent, recorder.served, recorder.unmatched, recorder.timeouts,
            recorder.errors, recorder.tracker.duplicates) == (120, 120, 0, 0, 0, 0)
    assert depth(qm1, "request1") == 0 and depth(qm1, "reply1") == 0


def test_wrong_credentials_make_the_workers_retry_and_count_errors(emulated_ibmmq, qmgrs):
    qmgr = qmgrs.start("QM1", USER, "another", ["DEFINE QLOCAL('perf')"])
    driver = make(emulated_ibmmq, qmgr)
    driver.add_sender(driver.call(lambda: SenderRole(1, 0, PayloadBuilder(50), driver.recorder,
                                                     limit=5)), endpoint(qmgr))
    until(lambda: counted(driver, "errors") >= 1)
    driver.stop(3)
    assert counted(driver, "sent") == 0 and "2035" in driver.recorder.last_error
    assert depth(qmgr, "perf") == 0


def test_durable_subscriptions_made_by_surge_receive_publications(emulated_ibmmq, qm1):
    ibmmq = emulated_ibmmq
    qm1.admin("DEFINE QLOCAL(EU)", "DEFINE QLOCAL(ALL)")
    probe = MqPreflight([endpoint(qm1)], [], SETTINGS, load=lambda: ibmmq)
    with probe._connected(ibmmq, endpoint(qm1)) as qm:
        missing = subscribe(ibmmq, qm, [Subscription("S.EU", "prices/+/eu", "EU"),
                                        Subscription("S.ALL", "prices/#", "ALL"),
                                        Subscription("S.X", "prices/#", "GONE")])
        again = subscribe(ibmmq, qm, [Subscription("S.EU", "prices/+/eu", "EU")])  # resumed
    assert missing == ["S.X (queue GONE)"] and again == []
    driver = make(ibmmq, qm1, exchange="prices", routing_keys=("fruit.eu", "fruit.us"))
    driver.add_sender(driver.call(lambda: SenderRole(1, 0, PayloadBuilder(80), driver.recorder,
                                                     limit=10)), endpoint(qm1))
    until(lambda: counted(driver, "sent") == 10)
    driver.stop(3)
    assert depth(qm1, "ALL") == 10
    assert 0 < depth(qm1, "EU") < 10


def test_a_queue_manager_group_is_reached_through_the_ccdt(emulated_ibmmq, qmgrs, tmp_path):
    first, second = (qmgrs.start(name, USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
                     for name in ("UC01QM01", "UC01QM02"))
    url = write_ccdt(tmp_path / "ccdt.json", [("PERF.APP.CHL", "UC01QM", first, 0),
                                              ("PERF.APP.CHL", "UC01QM", second, 0)])
    settings = dataclasses.replace(SETTINGS, ccdt_url=url)

    def send_twenty() -> MqDriver:
        driver = MqDriver(Destination(endpoints=("*UC01QM",), queue="perf"), Recorder(),
                          settings, mqi=emulated_ibmmq, get_wait_ms=50)
        driver.start()
        send = driver.call(lambda: SenderRole(1, 0, PayloadBuilder(50), driver.recorder,
                                              limit=20))
        driver.add_sender(send, "*UC01QM")
        until(lambda: counted(driver, "sent") == 20)
        driver.stop(3)
        return driver

    send_twenty()
    assert (depth(first, "perf"), depth(second, "perf")) == (20, 0)  # CLNTWGHT(0): in order
    first.stop()
    assert send_twenty().recorder.errors == 0 and depth(second, "perf") == 20


def test_weighted_ccdt_channels_share_the_connections(emulated_ibmmq, qmgrs, tmp_path,
                                                      monkeypatch):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    one, two = (qmgrs.start(name) for name in ("QMA", "QMB"))
    monkeypatch.setenv("MQCCDTURL", write_ccdt(tmp_path / "w.json", [
        ("CHL.A", "GRP", one, 50), ("CHL.B", "GRP", two, 50), ("CHL.C", "OTHER", one, 0)]))
    reached = []
    for _ in range(40):
        qm = ibmmq.QueueManager(None)
        qm.connect_with_options("*GRP", cno=ibmmq.CNO(Options=C.MQCNO_HANDLE_SHARE_BLOCK))
        reached.append(qm.inquire(C.MQCA_Q_MGR_NAME).rstrip(b"\0 ").decode())
        qm.disconnect()
    assert set(reached) == {"QMA", "QMB"}  # each drawn with probability 1/2 each time
    with pytest.raises(ibmmq.MQMIError) as raised:
        ibmmq.QueueManager(None).connect_with_options("*NOSUCH", cno=ibmmq.CNO())
    assert raised.value.reason == C.MQRC_Q_MGR_NAME_ERROR


def test_a_reconnectable_client_moves_on_by_itself_and_its_reconnects_are_counted(
        emulated_ibmmq, qmgrs, tmp_path, monkeypatch):
    monkeypatch.setenv("MQEMU_RECONNECT_TIMEOUT_S", "10")
    first, second = (qmgrs.start(name, USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
                     for name in ("UC01QM01", "UC01QM02"))
    url = write_ccdt(tmp_path / "ccdt.json", [("PERF.APP.CHL", "UC01QM", first, 0),
                                              ("PERF.APP.CHL", "UC01QM", second, 0)])
    settings = dataclasses.replace(SETTINGS, ccdt_url=url, reconnect="yes",
                                   appltag_sender="mqperf.senders")
    driver = MqDriver(Destination(endpoints=("*UC01QM",), queue="perf"), Recorder(), settings,
                      mqi=emulated_ibmmq, get_wait_ms=50)
    driver.start()
    role = driver.call(lambda: SenderRole(1, 200, PayloadBuilder(50), driver.recorder))
    driver.add_sender(role, "*UC01QM")
    until(lambda: counted(driver, "sent") >= 5)
    driver.call(lambda: role.pause(True))
    time.sleep(0.2)
    before = counted(driver, "sent")
    assert depth(first, "perf") == before and depth(second, "perf") == 0
    first.stop()
    driver.call(lambda: role.pause(False))
    until(lambda: depth(second, "perf") >= 5)
    assert [c["APPLTAG"] for c in connections(second)] == ["mqperf.senders"]
    driver.stop(3)
    recorder = driver.recorder
    assert (recorder.reconnects, recorder.republished, recorder.errors) == (1, 1, 2)
    seqs = [decode(body)[1] for body in drain(emulated_ibmmq, second, "perf")]
    assert seqs == list(range(before, recorder.sent))  # the client reconnected, nothing lost


def test_a_broken_connection_is_reconnected_by_the_driver_to_the_next_endpoint(emulated_ibmmq,
                                                                             qmgrs):
    first, second = (qmgrs.start(name, USER, PASSWORD, ["DEFINE QLOCAL('perf')"])
                     for name in ("QM1", "QM2"))
    driver = MqDriver(Destination(endpoints=(endpoint(first), endpoint(second)), queue="perf"),
                      Recorder(), SETTINGS, mqi=emulated_ibmmq, get_wait_ms=50)
    driver.start()
    role = driver.call(lambda: SenderRole(1, 200, PayloadBuilder(50), driver.recorder))
    driver.add_sender(role, endpoint(first))
    until(lambda: counted(driver, "sent") >= 5)
    driver.call(lambda: role.pause(True))
    time.sleep(0.2)
    before = counted(driver, "sent")
    first.stop()  # the next put: MQRC_CONNECTION_BROKEN; the driver moves to the next endpoint
    driver.call(lambda: role.pause(False))
    until(lambda: depth(second, "perf") >= 5)
    driver.stop(3)
    recorder = driver.recorder
    assert (recorder.reconnects, recorder.errors, recorder.connections) == (1, 1, 0)
    assert "2009" in recorder.last_error or "CONNECTION_BROKEN" in recorder.last_error
    seqs = [decode(body)[1] for body in drain(emulated_ibmmq, second, "perf")]
    assert seqs == list(range(before, recorder.sent))


def test_uncommitted_gets_come_back_after_a_break_and_are_counted_as_redelivered(
        emulated_ibmmq, qm1):
    seeder = make(emulated_ibmmq, qm1)
    seeder.add_sender(seeder.call(lambda: SenderRole(9, 0, PayloadBuilder(100), seeder.recorder,
                                                     limit=6)), endpoint(qm1))
    until(lambda: counted(seeder, "sent") == 6)
    seeder.stop(3)
    driver = make(emulated_ibmmq, qm1, manual_ack=True, prefetch=400)  # commit every 0.1 s
    driver.set_consumer_delay(0.3)  # the first get is still uncommitted when the break comes
    driver.add_receiver(ReceiverRole(driver.recorder, 1), endpoint(qm1))
    until(lambda: counted(driver, "received") >= 1)
    stopped = qm1.admin("STOP CONN(*)")[0]
    assert len(stopped) == 1 and stopped[0].startswith("AMQ8458I")
    until(lambda: driver.call(lambda: driver.recorder.tracker.unique) == 6)
    driver.stop(3)
    recorder = driver.recorder
    assert recorder.redelivered >= 1 and recorder.tracker.duplicates == recorder.redelivered
    assert recorder.reconnects >= 1 and depth(qm1, "perf") == 0
