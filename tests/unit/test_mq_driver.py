"""The IBM MQ driver's MQI call sequence, recorded by the MQI stand-in
(tests/unit/mqi_standin.py, not IBM MQ), and the driver's parsing and settings.

Why these stay on the stand-in: each asserts what the driver passes in which order, which the
emulated queue manager cannot observe: the pacing of puts in time and their exact PMO and open
options, a receiver's GMO options, wait interval and commit batches, a responder's get-put-commit
unit of work and its MQMO_MATCH_CORREL_ID gets, the order of a move's calls (new connection
ready before the old one's commit and close), and the ``pymqi`` flavour (no ``pymqi`` can be
installed here: its application name and CCDT go through MQAPPLNAME/MQCCDTURL). What the
client and the queue manager do with these calls (messages, counts, syncpoint, reconnects,
APPLTAG, credentials, moves) is tested over IBM's real ``ibmmq`` and the MQI emulator in
test_mqemu_driver.py, test_mqemu_workers.py and test_mqemu_connect.py."""

from __future__ import annotations

import dataclasses
import importlib
import os
import time

import pytest

from drivers.message import PayloadBuilder
from drivers.mq.driver import MqClientMissing, MqDriver, MqEndpoint, reply_queue_name
from drivers.mq.settings import MqSettings
from drivers.protocol import Configure, Destination, MessageShape
from drivers.workers import ReceiverRole, Recorder, RequesterRole, ResponderRole, SenderRole
from tests.unit.mqemu_helpers import counted, mq_threads, until
from tests.unit.mqi_standin import CMQC, StandIn

MQ_FIELDS = {f.name for f in dataclasses.fields(MqSettings)}
QM1 = "mq://127.0.0.1(1414)/QM1?channel=PERF.APP.CHL"
QM2 = "mq://127.0.0.2(1415)/QM2?channel=PERF.APP.CHL"
C = CMQC  # IBM's constants (ibmmq.CMQC), as the stand-in uses them
pytestmark = pytest.mark.timeout(60)


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


def test_a_sender_paces_its_puts_outside_syncpoint_with_a_new_msgid_each():
    standin = StandIn()
    driver = make(standin, confirms=True)
    driver.add_sender(sender(driver, rate=100, limit=30, size=200), QM1)
    until(lambda: counted(driver, "sent") == 30)
    driver.stop(2)
    puts = standin.named("MQPUT")
    assert len(puts) == 30
    assert 0.25 <= puts[-1].at - puts[0].at < 0.8  # 29 intervals of 10 ms
    assert {c.details["options"] for c in puts} == {
        C.MQPMO_NO_SYNCPOINT | C.MQPMO_NEW_MSG_ID | C.MQPMO_FAIL_IF_QUIESCING}
    assert standin.named("MQOPEN")[0].details["options"] == C.MQOO_OUTPUT | \
        C.MQOO_FAIL_IF_QUIESCING | C.MQOO_BIND_ON_OPEN  # workload.bind's default


def test_a_receiver_gets_with_wait_under_syncpoint_and_commits_in_batches():
    standin = StandIn()
    seed(standin, "perf", 10)
    driver = make(standin, manual_ack=True, prefetch=8)  # commit every 2
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    until(lambda: counted(driver, "received") == 10)
    driver.stop_receivers(2)
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


# -- request / reply ------------------------------------------------------------------------------


def test_requesters_get_by_correl_id_and_responders_get_put_and_commit_as_one_unit_of_work():
    standin = StandIn(queues=("request1", "reply1"))
    driver = make(standin, queue="request1", unit_of_work=True, reply_size=100)
    recorder = driver.recorder
    for i in range(2):
        driver.add_receiver(ResponderRole(recorder, i), QM1)
    for producer in (11, 12):
        role = driver.call(lambda p=producer: RequesterRole(p, 0, PayloadBuilder(64), recorder,
                                                            in_flight=2, limit=25))
        driver.add_sender(role, QM1)
    until(lambda: counted(driver, "received") == 50)
    driver.stop(3)
    requests = [c.details for c in standin.named("MQPUT") if c.details["queue"] == "request1"]
    replies = [c for c in standin.named("MQPUT") if c.details["queue"] == "reply1"]
    for reply in replies:
        assert reply.details["options"] == (C.MQPMO_SYNCPOINT | C.MQPMO_NEW_MSG_ID
                                            | C.MQPMO_FAIL_IF_QUIESCING)
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
        assert names == ["MQGET", "MQPUT", "MQCMIT"] * (len(names) // 3) and names
    gets = [c for c in standin.named("MQGET") if c.hconn in responder_hconns]
    assert all(c.details["options"] & C.MQGMO_SYNCPOINT for c in gets)


# -- connections: APPLTAG, CCDT, channel, reconnect options -----------------------------------


def test_with_pymqi_each_role_connects_with_its_appltag_through_mqapplname(monkeypatch):
    monkeypatch.delenv("MQAPPLNAME", raising=False)
    standin = StandIn("pymqi")
    driver = make(standin)
    driver.add_receiver(ReceiverRole(driver.recorder, 1), QM1)
    driver.add_sender(sender(driver, rate=0, limit=3), QM1)
    until(lambda: counted(driver, "received") == 3)
    driver.stop(2)
    names = sorted(c.details["appl_name"] for c in standin.named("MQCONNX"))
    assert names == ["mqperf.receiver", "mqperf.sender"]
    assert {c.details["cno_version"] for c in standin.named("MQCONNX")} == {None}  # no MQCNO
    assert "MQAPPLNAME" not in os.environ  # put back after the connect


def test_with_pymqi_a_queue_manager_group_is_reached_through_mqccdturl(monkeypatch):
    monkeypatch.delenv("MQCCDTURL", raising=False)
    standin = StandIn("pymqi", qmgrs=("UC01QM01", "UC01QM02"))
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
    assert standin.named("MQCB") == [] and "MQCCDTURL" not in os.environ


@pytest.mark.parametrize("mode, option", [
    ("yes", "MQCNO_RECONNECT"), ("qmgr", "MQCNO_RECONNECT_Q_MGR"),
    ("disabled", "MQCNO_RECONNECT_DISABLED"), ("", "MQCNO_RECONNECT_AS_DEF"),
    ("no", "MQCNO_RECONNECT_AS_DEF")])
def test_the_reconnect_option_is_set_as_asked(emulated_ibmmq, mode, option):
    C = emulated_ibmmq.CMQC  # IBM's values
    driver = MqDriver(Destination(endpoints=(QM1,), queue="perf"), Recorder(),
                      MqSettings(reconnect=mode), mqi=emulated_ibmmq)
    option = getattr(C, option)
    reconnect_bits = C.MQCNO_RECONNECT | C.MQCNO_RECONNECT_Q_MGR | C.MQCNO_RECONNECT_DISABLED
    assert driver.connect_options & reconnect_bits == option
    assert driver.connect_options & C.MQCNO_CLIENT_BINDING


def test_bad_settings_are_refused_up_front(emulated_ibmmq):
    with pytest.raises(ValueError, match="reconnect"):
        MqSettings(reconnect="maybe")
    with pytest.raises(ValueError, match="APPLTAG"):
        MqSettings(appltag_sender="x" * 29)
    with pytest.raises(ValueError, match="unknown field 'bogus'"):
        MqSettings.from_json({"bogus": 1})
    driver = MqDriver(Destination(endpoints=(QM1,), queue="q"), Recorder(), mqi=emulated_ibmmq)
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


# -- moves -------------------------------------------------------------------------


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
    old, new = (c.hconn for c in standin.named("MQCONNX")[2:])  # after the two seeders
    assert standin.named("MQCONNX")[-1].details["resolved"] == "QM2"
    after = [(c.name, c.hconn) for c in standin.calls[before:] if c.hconn in (old, new)]
    start = after.index(("MQCONNX", new))
    assert after[start + 1] == ("MQOPEN", new)  # the new connection is ready first
    assert [n for n, h in after[start:] if h == old] in (  # no get on the old one after that
        ["MQCLOSE", "MQDISC"], ["MQCMIT", "MQCLOSE", "MQDISC"])
    assert after.index(("MQDISC", old)) < after.index(("MQGET", new))


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
