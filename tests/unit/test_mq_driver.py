"""The IBM MQ driver under the MQI stand-in (tests/unit/mqi_standin.py, not IBM MQ): paced
senders, receivers' gets and commits, exact request/reply correlation with the responder's unit
of work, APPLTAG, CCDT and reconnect options, reconnects, moves, stops, the missing library."""

from __future__ import annotations

import dataclasses
import importlib
import threading
import time

import pytest

from drivers.header import HEADER_SIZE, decode
from drivers.message import Bodies, PayloadBuilder
from drivers.mq.driver import MqClientMissing, MqDriver, MqEndpoint, reply_queue_name
from drivers.mq.settings import MqSettings
from drivers.protocol import Configure, Destination, MessageShape
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole
from tests.unit.mqi_standin import CMQC, StandIn

MQ_FIELDS = {f.name for f in dataclasses.fields(MqSettings)}
QM1 = "mq://127.0.0.1(1414)/QM1?channel=PERF.APP.CHL"
QM2 = "mq://127.0.0.2(1415)/QM2?channel=PERF.APP.CHL"
C = CMQC


def make(standin: StandIn, endpoints: tuple[str, ...] = (QM1,), **fields) -> MqDriver:
    mq = {name: fields.pop(name) for name in list(fields) if name in MQ_FIELDS}
    driver = MqDriver(Destination(endpoints=endpoints, queue=fields.pop("queue", "perf"),
                                  **fields), Recorder(), MqSettings(**mq), mqi=standin,
                      get_wait_ms=50)
    driver.start()
    return driver


def sender(driver: MqDriver, rate: float, limit: int | None = None, producer_id: int = 1,
           size: int = 100) -> SenderRole:
    return driver.call(lambda: SenderRole(producer_id, rate, PayloadBuilder(size),
                                          driver.recorder, limit=limit))


def until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def counted(driver: MqDriver, name: str) -> int:
    return driver.call(lambda: getattr(driver.recorder, name))


def mq_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("mq-") and t.is_alive()]


def seed(standin: StandIn, queue: str, n: int, size: int = 100, qmgr: str = "QM1",
         producer: int = 9) -> None:
    """Put n surge messages of ``producer`` with a connection of the test's own."""
    qm = standin.QueueManager(None)
    qm.connect_with_options(qmgr, cd=standin.CD(ChannelName=b"X", ConnectionName=b"h(1)"),
                            opts=C.MQCNO_CLIENT_BINDING | C.MQCNO_HANDLE_SHARE_BLOCK)
    out = standin.Queue(qm, queue, C.MQOO_OUTPUT)
    builder = PayloadBuilder(size)
    for seq in range(n):
        out.put(builder.build(producer, seq, time.time_ns()))
    qm.disconnect()


@pytest.fixture(autouse=True)
def no_threads_left():
    yield
    until(lambda: not mq_threads(), timeout_s=3)


# -- senders ------------------------------------------------------------------------------------


@pytest.mark.parametrize("persistent", [True, False])
def test_a_sender_puts_at_its_rate_with_the_header_and_the_persistence_asked(persistent):
    standin = StandIn()
    driver = make(standin, persistent=persistent, confirms=True)
    driver.add_sender(sender(driver, rate=100, limit=30, size=200), QM1)
    until(lambda: counted(driver, "sent") == 30)
    driver.stop(2)
    puts = standin.named("MQPUT")
    assert len(puts) == 30 and counted(driver, "confirmed") == 30
    assert 0.25 <= puts[-1].at - puts[0].at < 0.8  # 29 intervals of 10 ms
    for call in puts:
        assert call.details["options"] == (C.MQPMO_NO_SYNCPOINT | C.MQPMO_NEW_MSG_ID
                                           | C.MQPMO_FAIL_IF_QUIESCING)
        assert call.details["persistence"] == (C.MQPER_PERSISTENT if persistent
                                               else C.MQPER_NOT_PERSISTENT)
        assert call.details["format"] == C.MQFMT_NONE and call.details["length"] == 200
    messages = standin.messages("perf")
    assert [decode(body)[:2] for body, _ in messages] == [(1, seq) for seq in range(30)]
    assert len({md["MsgId"] for _, md in messages}) == 30
    assert standin.named("MQOPEN")[0].details["options"] == C.MQOO_OUTPUT | \
        C.MQOO_FAIL_IF_QUIESCING | C.MQOO_BIND_ON_OPEN  # workload.bind's default


def test_a_sender_puts_each_message_at_its_picked_size_and_held_receivers_take_nothing():
    standin = StandIn()
    driver = make(standin)
    bodies = Bodies(MessageShape(sizes=(100, 1000, 5000), weights=(1.0, 2.0, 1.0),
                                 fill="random"))
    role = driver.call(lambda: SenderRole(1, 0, PayloadBuilder(bodies), driver.recorder,
                                          limit=60))
    driver.add_sender(role, QM1)
    until(lambda: counted(driver, "sent") == 60)
    picks = bodies.picks(1, 0, 60)
    assert [len(body) for body, _ in standin.messages("perf")] == \
        [bodies.sizes[k] for k in picks]
    driver.set_consumer_delay(0.0, paused=True)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    time.sleep(0.3)
    assert counted(driver, "received") == 0  # held: a backlog is being built
    driver.set_consumer_delay(0.0, paused=False)
    until(lambda: counted(driver, "received") == 60)
    driver.stop(2)


def test_a_paused_sender_puts_nothing_and_a_rate_change_applies_live():
    standin = StandIn()
    driver = make(standin)
    role = sender(driver, rate=200)
    driver.add_sender(role, QM1)
    until(lambda: counted(driver, "sent") >= 10)
    driver.call(lambda: role.pause(True))
    time.sleep(0.06)
    held = counted(driver, "sent")
    time.sleep(0.2)
    assert counted(driver, "sent") == held
    driver.call(lambda: (role.set_rate(50), role.pause(False)))
    time.sleep(0.3)
    assert 8 <= counted(driver, "sent") - held <= 20  # 50/s for 0.3 s
    driver.stop(2)


def test_a_slow_sender_woken_after_a_rate_change_puts_at_once_not_when_it_planned():
    standin = StandIn()
    driver = make(standin)
    role = sender(driver, rate=0.1)  # first message now, the next planned 10 s ahead
    driver.add_sender(role, QM1)
    until(lambda: counted(driver, "sent") == 1)
    driver.call(lambda: (role.set_rate(100), driver.wake_senders()))
    until(lambda: counted(driver, "sent") >= 5, timeout_s=2.0)
    driver.stop(2)


def test_a_sender_given_several_queues_puts_to_each_in_turn():
    standin = StandIn(queues=("q1", "q2"))
    driver = make(standin, queue="q1")
    driver.add_sender(sender(driver, rate=0, limit=6), QM1, ["q1", "q2"])
    until(lambda: counted(driver, "sent") == 6)
    driver.stop(2)
    assert [decode(b)[1] for b, _ in standin.messages("q1")] == [0, 2, 4]
    assert [decode(b)[1] for b, _ in standin.messages("q2")] == [1, 3, 5]


# -- receivers -----------------------------------------------------------------------------------


def test_a_receiver_gets_with_wait_under_syncpoint_and_commits_in_batches():
    standin = StandIn()
    seed(standin, "perf", 10)
    driver = make(standin, manual_ack=True, prefetch=8)  # commit every 2
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 10)
    driver.stop_receivers(2)
    assert standin.messages("perf") == [] and driver.recorder.tracker.duplicates == 0
    hconn = standin.named("MQOPEN")[-1].hconn
    assert standin.named("MQOPEN")[-1].details["options"] == C.MQOO_INPUT_SHARED | \
        C.MQOO_FAIL_IF_QUIESCING
    gets = [c for c in standin.named("MQGET") if c.hconn == hconn]
    assert {(c.details["options"], c.details["wait"], c.details["match"]) for c in gets} == {
        (C.MQGMO_WAIT | C.MQGMO_FAIL_IF_QUIESCING | C.MQGMO_SYNCPOINT, 50, C.MQMO_NONE)}
    commits = [c for c in standin.named("MQCMIT") if c.hconn == hconn]
    assert len(commits) >= 5
    names = [c.name for c in standin.calls if c.hconn == hconn]
    assert names[-3:] == ["MQCMIT", "MQCLOSE", "MQDISC"] or names[-2:] == ["MQCLOSE", "MQDISC"]
    assert counted(driver, "connections") == 0


def test_without_manual_ack_a_receiver_gets_outside_syncpoint():
    standin = StandIn()
    seed(standin, "perf", 5)
    driver = make(standin, manual_ack=False)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 5)
    driver.stop(2)
    assert all(c.details["options"] & C.MQGMO_NO_SYNCPOINT for c in standin.named("MQGET"))
    assert standin.named("MQCMIT") == []


def test_a_message_larger_than_the_buffer_is_got_whole_with_a_larger_one():
    standin = StandIn()
    seed(standin, "perf", 3, size=10_000)
    driver = make(standin)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 3)
    driver.stop(2)
    reasons = [c.details["reason"] for c in standin.named("MQGET")]
    assert reasons.count(C.MQRC_TRUNCATED_MSG_FAILED) == 1  # 4096, then its original length
    assert counted(driver, "header_errors") == 0 and counted(driver, "errors") == 0


def test_a_consumer_delay_makes_each_message_take_that_long():
    standin = StandIn()
    seed(standin, "perf", 8)
    driver = make(standin)
    driver.set_consumer_delay(0.03)
    started = time.monotonic()
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 8)
    assert time.monotonic() - started >= 7 * 0.03
    driver.stop(2)


# -- request / reply ------------------------------------------------------------------------------


def test_requests_and_replies_match_exactly_and_responders_commit_each_unit_of_work():
    standin = StandIn(queues=("request1", "reply1"))
    driver = make(standin, queue="request1", unit_of_work=True, reply_size=100,
                  persistent=True)
    recorder = driver.recorder
    for i in range(2):
        driver.add_receiver(ResponderRole(recorder, i), QM1)
    for producer in (11, 12):
        role = driver.call(lambda p=producer: RequesterRole(p, 0, PayloadBuilder(64), recorder,
                                                            in_flight=2, limit=25))
        driver.add_sender(role, QM1)
    until(lambda: counted(driver, "received") == 50)
    driver.stop(3)
    assert (recorder.sent, recorder.served, recorder.unmatched, recorder.timeouts,
            recorder.errors, recorder.tracker.duplicates) == (50, 50, 0, 0, 0, 0)
    assert standin.messages("request1") == [] and standin.messages("reply1") == []
    requests = [c.details for c in standin.named("MQPUT") if c.details["queue"] == "request1"]
    replies = [c for c in standin.named("MQPUT") if c.details["queue"] == "reply1"]
    assert len(requests) == 50 and len(replies) == 50
    for request in requests:
        assert request["msg_type"] == C.MQMT_REQUEST and request["reply_to_q"] == "reply1"
        assert request["msg_id"] == request["correl_id"] and len(request["msg_id"]) == 24
        assert request["persistence"] == C.MQPER_PERSISTENT
    assert {r.details["correl_id"] for r in replies} == {r["msg_id"] for r in requests}
    for reply in replies:
        assert reply.details["options"] == (C.MQPMO_SYNCPOINT | C.MQPMO_NEW_MSG_ID
                                            | C.MQPMO_FAIL_IF_QUIESCING)
        assert reply.details["length"] == 100 and reply.details["msg_type"] == C.MQMT_REPLY
    reply_gets = [c.details for c in standin.named("MQGET")
                  if c.details["queue"] == "reply1" and c.details["reason"] == 0]
    assert len(reply_gets) == 50
    assert all(g["match"] == C.MQMO_MATCH_CORREL_ID for g in reply_gets)
    assert {g["correl_id"] for g in reply_gets} == {r["msg_id"] for r in requests}
    responder_hconns = {c.hconn for c in replies}
    for hconn in responder_hconns:  # get, put the reply, commit: one unit of work each
        names = [c.name for c in standin.calls if c.hconn == hconn
                 and (c.name != "MQGET" or c.details["reason"] == 0)
                 and c.name in ("MQGET", "MQPUT", "MQCMIT")]
        assert names == ["MQGET", "MQPUT", "MQCMIT"] * (len(names) // 3)
    gets = [c for c in standin.named("MQGET") if c.hconn in responder_hconns]
    assert all(c.details["options"] & C.MQGMO_SYNCPOINT for c in gets)


def test_a_reply_echoes_the_request_header_and_is_padded_to_the_reply_size():
    standin = StandIn(queues=("REQUEST", "REPLY"))
    driver = make(standin, queue="REQUEST", reply_size=40)
    role = driver.call(lambda: RequesterRole(5, 0, PayloadBuilder(64), driver.recorder,
                                             limit=1))
    driver.add_sender(role, QM1)
    until(lambda: counted(driver, "sent") == 1)
    request_body, request_md = standin.messages("REQUEST")[0]
    assert request_md["ReplyToQ"].rstrip(b"\0") == b"REPLY"
    assert request_md["ReplyToQMgr"].rstrip(b"\0") == b"QM1"  # filled in by the QM
    driver.add_receiver(ResponderRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 1)
    reply = [c for c in standin.named("MQPUT") if c.details["queue"] == "REPLY"][0]
    assert reply.details["length"] == 40 and reply.details["expiry"] == 100  # 10 s, tenths
    driver.stop(2)
    assert decode(request_body)[:2] == (5, 0) and HEADER_SIZE == 28


def test_a_requester_waits_at_most_the_reply_timeout_and_counts_the_rest_as_timeouts():
    standin = StandIn(queues=("request1", "reply1"))
    driver = make(standin, queue="request1", reply_timeout_s=0.2)
    role = driver.call(lambda: RequesterRole(5, 0, PayloadBuilder(64), driver.recorder,
                                             in_flight=3, limit=6))
    driver.add_sender(role, QM1)  # no responder
    until(lambda: counted(driver, "timeouts") == 6)
    driver.stop(2)
    assert counted(driver, "sent") == 6 and counted(driver, "received") == 0


# -- connections: APPLTAG, CCDT, channel, reconnect options -----------------------------------


@pytest.mark.parametrize("flavour", ["pymqi", "ibmmq"])
def test_each_role_connects_with_its_appltag(flavour, monkeypatch):
    monkeypatch.delenv("MQAPPLNAME", raising=False)
    standin = StandIn(flavour)
    driver = make(standin)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    driver.add_sender(sender(driver, rate=0, limit=3), QM1)
    until(lambda: counted(driver, "received") == 3)
    driver.stop(2)
    names = sorted(c.details["appl_name"] for c in standin.named("MQCONNX"))
    assert names == ["mqperf.receiver", "mqperf.sender"]
    if flavour == "ibmmq":  # MQCNO.ApplName, which needs CNO version 7
        assert {c.details["cno_version"] for c in standin.named("MQCONNX")} == {7}
    assert "MQAPPLNAME" not in __import__("os").environ  # put back after the connect
    got = [c for c in standin.named("MQGET") if c.details["reason"] == 0]
    assert len(got) == 3


@pytest.mark.parametrize("flavour", ["pymqi", "ibmmq"])
def test_a_queue_manager_group_is_reached_through_the_ccdt(flavour, monkeypatch):
    monkeypatch.delenv("MQCCDTURL", raising=False)
    standin = StandIn(flavour, qmgrs=("UC01QM01", "UC01QM02"))
    driver = make(standin, endpoints=("*UC01QM",), ccdt_url="file:///nfs1/UC01.json",
                  reconnect="yes", appltag_sender="mqperf.senders")
    driver.add_sender(sender(driver, rate=0, limit=2), "*UC01QM")
    until(lambda: counted(driver, "sent") == 2)
    driver.stop(2)
    connect = standin.named("MQCONNX")[0].details
    assert (connect["qmgr"], connect["conname"], connect["ccdt_url"], connect["appl_name"]) \
        == ("*UC01QM", "", "file:///nfs1/UC01.json", "mqperf.senders")
    assert connect["options"] & C.MQCNO_CLIENT_BINDING and connect["options"] & \
        C.MQCNO_RECONNECT and connect["options"] & C.MQCNO_HANDLE_SHARE_BLOCK
    assert standin.named("MQCB") == ([] if flavour == "pymqi" else standin.named("MQCB"))
    if flavour == "ibmmq":  # CCDTUrl in the MQCNO and an event handler to count reconnects
        assert connect["cno_version"] == 7
        assert [c.details["type"] for c in standin.named("MQCB")] == [C.MQCBT_EVENT_HANDLER]


def test_a_direct_endpoint_gives_a_client_channel_definition(monkeypatch):
    monkeypatch.delenv("MQCCDTURL", raising=False)
    monkeypatch.setenv("SURGE_MQ_USER", "app")
    monkeypatch.setenv("SURGE_MQ_PASSWORD", "secret")
    standin = StandIn()
    driver = make(standin, tls_cipher_spec="ANY_TLS12_OR_HIGHER",
                  tls_key_repository="/var/mqm/ssl/key")
    driver.add_sender(sender(driver, rate=0, limit=1), QM1)
    until(lambda: counted(driver, "sent") == 1)
    driver.stop(2)
    connect = standin.named("MQCONNX")[0].details
    assert connect == {**connect, "qmgr": "QM1", "channel": "PERF.APP.CHL",
                       "conname": "127.0.0.1(1414)", "channel_type": 6, "transport": 2,
                       "cipher": "ANY_TLS12_OR_HIGHER", "key_repository": "/var/mqm/ssl/key",
                       "ccdt_url": "", "user": "app", "password_given": True}
    assert connect["options"] & (C.MQCNO_RECONNECT | C.MQCNO_RECONNECT_Q_MGR) == 0


@pytest.mark.parametrize("mode, option", [
    ("yes", C.MQCNO_RECONNECT), ("qmgr", C.MQCNO_RECONNECT_Q_MGR),
    ("disabled", C.MQCNO_RECONNECT_DISABLED), ("", 0), ("no", 0)])
def test_the_reconnect_option_is_set_as_asked(mode, option):
    driver = MqDriver(Destination(endpoints=(QM1,), queue="perf"), Recorder(),
                      MqSettings(reconnect=mode), mqi=StandIn())
    reconnect_bits = C.MQCNO_RECONNECT | C.MQCNO_RECONNECT_Q_MGR | C.MQCNO_RECONNECT_DISABLED
    assert driver.connect_options & reconnect_bits == option
    assert driver.connect_options & C.MQCNO_CLIENT_BINDING


def test_bad_settings_are_refused_up_front():
    with pytest.raises(ValueError, match="reconnect"):
        MqSettings(reconnect="maybe")
    with pytest.raises(ValueError, match="APPLTAG"):
        MqSettings(appltag_sender="x" * 29)
    with pytest.raises(ValueError, match="unknown field 'bogus'"):
        MqSettings.from_json({"bogus": 1})
    driver = MqDriver(Destination(endpoints=(QM1,), queue="q"), Recorder(), mqi=StandIn())
    with pytest.raises(ValueError, match="not an MQ endpoint"):
        driver.add_sender(sender(driver, 1), "amqp://guest@localhost")


@pytest.mark.parametrize("text, expected", [
    ("mq://mqhost1(1414)/UC01QM01?channel=PERF.APP.CHL",
     MqEndpoint("UC01QM01", "mqhost1(1414)", "PERF.APP.CHL")),
    ("mq://mqhost1:1415/QM1", MqEndpoint("QM1", "mqhost1(1415)", "DEF.CHL")),
    ("mq://h1(1414),h2(1414)/QM1", MqEndpoint("QM1", "h1(1414),h2(1414)", "DEF.CHL")),
    ("mq://h1/", MqEndpoint("*DEFQM", "h1(1414)", "DEF.CHL")),
    ("*UC01QM", MqEndpoint("*UC01QM")),
    ("mq:///*UC01QM", MqEndpoint("*UC01QM")),
    ("", MqEndpoint("*DEFQM")),
])
def test_endpoints(text, expected):
    settings = MqSettings(queue_manager="*DEFQM", channel="DEF.CHL")
    assert MqEndpoint.parse(text, settings) == expected
    assert MqEndpoint.parse("mq://h(1)/Q", MqSettings()).channel == \
        "SYSTEM.DEF.SVRCONN"


@pytest.mark.parametrize("request_queue, configured, expected", [
    ("request1", "", "reply1"), ("REQUEST", "", "REPLY"), ("perf.Request", "", "perf.Reply"),
    ("perf", "", "perf.reply"), ("PERF", "", "PERF.REPLY"), ("request7", "RQ.REPLY", "RQ.REPLY")])
def test_reply_queue_names(request_queue, configured, expected):
    assert reply_queue_name(request_queue, configured) == expected


# -- reconnects and moves -------------------------------------------------------------------------


def test_a_reconnectable_client_moves_on_by_itself_and_its_reconnects_are_counted():
    standin = StandIn("ibmmq", qmgrs=("UC01QM01", "UC01QM02"))
    driver = make(standin, endpoints=("*UC01QM",), ccdt_url="file:///ccdt.json",
                  reconnect="yes")
    driver.add_sender(sender(driver, rate=200), "*UC01QM")
    until(lambda: counted(driver, "sent") >= 5)
    standin.stop_qmgr("UC01QM01")
    until(lambda: len(standin.messages("perf", "UC01QM02")) >= 5)
    driver.stop(2)
    assert counted(driver, "reconnects") == 1 and counted(driver, "errors") == 1
    assert len(standin.named("MQCONNX")) == 1  # the client reconnected, not the driver
    seqs = sorted(decode(b)[1] for q in ("UC01QM01", "UC01QM02")
                  for b, _ in standin.messages("perf", q))
    assert seqs == list(range(counted(driver, "sent")))


def test_a_broken_connection_is_reconnected_by_the_driver_without_losing_a_message():
    standin = StandIn(qmgrs=("QM1", "QM2"))
    driver = make(standin, endpoints=(QM1, QM2))
    driver.add_sender(sender(driver, rate=200), QM1)
    until(lambda: counted(driver, "sent") >= 5)
    standin.stop_qmgr("QM1")  # next put: MQRC_CONNECTION_BROKEN; next endpoint: QM2
    until(lambda: len(standin.messages("perf", "QM2")) >= 5)
    driver.stop(2)
    assert counted(driver, "reconnects") == 1 and counted(driver, "errors") == 1
    assert counted(driver, "connections") == 0
    seqs = sorted(decode(b)[1] for q in ("QM1", "QM2") for b, _ in standin.messages("perf", q))
    assert seqs == list(range(counted(driver, "sent")))
    assert [c.details["resolved"] for c in standin.named("MQCONNX")] == ["QM1", "QM2"]


def test_uncommitted_gets_come_back_after_a_break_and_are_counted_as_redelivered():
    standin = StandIn(qmgrs=("QM1",))
    seed(standin, "perf", 4)
    driver = make(standin, manual_ack=True, prefetch=400)  # commit every 100 or 0.1 s
    driver.set_consumer_delay(0.05)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") >= 1)
    standin.stop_qmgr("QM1")
    standin.start_qmgr("QM1")
    until(lambda: driver.call(lambda: driver.recorder.tracker.unique) == 4)
    driver.stop(2)
    recorder = driver.recorder
    assert recorder.redelivered >= 1 and recorder.tracker.duplicates == recorder.redelivered
    assert recorder.reconnects >= 1 and standin.messages("perf") == []


def test_a_move_connects_anew_then_commits_and_closes_the_old_connection():
    standin = StandIn(qmgrs=("QM1", "QM2"))
    seed(standin, "perf", 3, qmgr="QM1")
    seed(standin, "perf", 3, qmgr="QM2", producer=10)
    driver = make(standin, endpoints=(QM1, QM2), manual_ack=True, prefetch=400)
    role = ReceiverRole(driver.recorder, 1)
    driver.add_receiver(role, QM1)
    until(lambda: counted(driver, "received") == 3)
    before = len(standin.calls)
    driver.move(role, QM2)
    until(lambda: counted(driver, "received") == 6)
    driver.stop(2)
    assert standin.messages("perf", "QM1") == standin.messages("perf", "QM2") == []
    assert driver.recorder.tracker.duplicates == 0 and counted(driver, "connections") == 0
    old, new = (c.hconn for c in standin.named("MQCONNX")[2:])  # after the two seeders
    assert standin.named("MQCONNX")[-1].details["resolved"] == "QM2"
    after = [(c.name, c.hconn) for c in standin.calls[before:] if c.hconn in (old, new)]
    start = after.index(("MQCONNX", new))
    assert after[start + 1] == ("MQOPEN", new)  # the new connection is ready first
    assert [n for n, h in after[start:] if h == old] in (  # no get on the old one after that
        ["MQCLOSE", "MQDISC"], ["MQCMIT", "MQCLOSE", "MQDISC"])
    assert after.index(("MQDISC", old)) < after.index(("MQGET", new))


def test_a_worker_moved_while_it_cannot_connect_connects_to_the_new_endpoint():
    standin = StandIn(qmgrs=("QM1", "QM2"))
    standin.stop_qmgr("QM1")
    driver = make(standin, endpoints=(QM1,))
    role = sender(driver, rate=0, limit=5)
    driver.add_sender(role, QM1)
    until(lambda: counted(driver, "reconnects") >= 1)  # QM1 refuses
    driver.move(role, QM2)
    until(lambda: counted(driver, "sent") == 5)
    driver.stop(2)
    assert len(standin.messages("perf", "QM2")) == 5
    assert [c.details.get("resolved") for c in standin.named("MQCONNX")][-1] == "QM2"


# -- stopping -------------------------------------------------------------------------------


def test_stop_leaves_no_thread_and_no_connection_and_gives_back_unsent_numbers():
    standin = StandIn(queues=("perf", "other", "request1", "reply1"))
    driver = make(standin)
    paused = sender(driver, rate=10, producer_id=1)
    driver.call(lambda: paused.pause(True))
    driver.add_sender(paused, QM1)
    driver.add_sender(sender(driver, rate=0, producer_id=2), QM1)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1, "other")
    waiting = driver.call(lambda: RequesterRole(3, 0, PayloadBuilder(64), driver.recorder,
                                                limit=1))
    driver.add_sender(waiting, QM1, "request1")  # nobody answers
    until(lambda: counted(driver, "sent") > 100 and counted(driver, "connections") == 4)
    started = time.monotonic()
    driver.stop_senders(1)
    driver.stop_receivers(1)
    assert time.monotonic() - started < 2 and mq_threads() == []
    assert counted(driver, "connections") == 0 and counted(driver, "timeouts") == 1
    assert len(standin.named("MQCONNX")) == len(standin.named("MQDISC"))
    assert driver.recorder.sent_per_producer()[2] == sum(
        1 for body, _ in standin.messages("perf") if decode(body)[0] == 2)
    driver.stop(1)  # again: nothing left to do


# -- the library --------------------------------------------------------------------------------


def test_without_an_mq_library_the_error_says_how_to_install_one(monkeypatch):
    real = importlib.import_module

    def no_mq(name, *args):
        if name in ("ibmmq", "pymqi"):
            raise ImportError(f"No module named '{name}'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_mq)
    from drivers.agent import _make_driver
    with pytest.raises(MqClientMissing) as raised:
        _make_driver(Configure("ibmmq", "point-to-point", MessageShape(),
                               Destination(endpoints=(QM1,), queue="perf")), Recorder())
    message = str(raised.value)
    assert "pip install 'surge[mq]'" in message and "MQ_INSTALLATION_PATH" in message
    assert "ibmmq" in message and "pymqi" in message
