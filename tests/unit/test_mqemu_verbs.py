"""IBM's real ``ibmmq`` over the MQI emulator (tests/mqemu: our libmqm_r.so and an emulated
queue manager process; NOT IBM MQ): the library is the real one, and the verbs behave as the MQ
reference documents them where the emulator implements them (tests/mqemu/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.mqemu import mqi

pytestmark = pytest.mark.timeout(60)
USER, PASSWORD = "app", "s3cret"


def connect(ibmmq, qmgr, user: str = USER, password: str = PASSWORD, name: str | None = None):
    C = ibmmq.CMQC
    cd = ibmmq.CD(ChannelName=b"DEV.APP.SVRCONN", ConnectionName=qmgr.conname.encode(),
                  ChannelType=ibmmq.CMQXC.MQCHT_CLNTCONN, TransportType=ibmmq.CMQXC.MQXPT_TCP)
    csp = ibmmq.CSP()
    csp.AuthenticationType = C.MQCSP_AUTH_USER_ID_AND_PWD
    csp.CSPUserId = user
    csp.CSPPassword = password
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options(qmgr.name if name is None else name, cd=cd, csp=csp,
                            cno=ibmmq.CNO(Options=C.MQCNO_HANDLE_SHARE_BLOCK))
    return qm


@pytest.fixture
def qm1(qmgrs):
    return qmgrs.start("QM1", USER, PASSWORD, ["DEFINE QLOCAL(Q1)", "DEFINE QLOCAL(Q2)",
                                               "DEFINE QLOCAL(SMALL) MAXDEPTH(3)"])


def reason(ibmmq, call) -> int:
    with pytest.raises(ibmmq.MQMIError) as raised:
        call()
    return raised.value.reason


def get_wait(ibmmq, wait_ms: int = 0, syncpoint: bool = False, match: int = 0):
    C = ibmmq.CMQC
    return ibmmq.GMO(Options=(C.MQGMO_WAIT if wait_ms else C.MQGMO_NO_WAIT)
                     | (C.MQGMO_SYNCPOINT if syncpoint else C.MQGMO_NO_SYNCPOINT),
                     WaitInterval=wait_ms, MatchOptions=match)


def test_the_real_ibmmq_runs_over_our_library(emulated_ibmmq, mqemu_library):
    import site
    roots = [Path(p).resolve() for p in site.getsitepackages()]
    module = Path(emulated_ibmmq.__file__).resolve()
    assert any(root in module.parents for root in roots), module
    assert hasattr(emulated_ibmmq, "__cmdlevel__") and emulated_ibmmq.__version__.startswith("2.")
    maps = Path("/proc/self/maps").read_text()
    assert str(Path(mqemu_library).resolve()) in maps
    assert "ibmmqc" in maps  # IBM's extension module, linked against our libmqm_r.so


def test_the_emulators_constants_are_ibmmqs(emulated_ibmmq):
    C = emulated_ibmmq.CMQC
    names = [n for n in dir(mqi) if n.startswith(("MQCC_", "MQRC_", "MQOO_", "MQOT_", "MQCO_",
                                                  "MQPMO_", "MQGMO_", "MQMO_", "MQSO_", "MQIA_",
                                                  "MQCA_", "MQQT_", "MQOP_", "MQCBT_", "MQBND_",
                                                  "MQIAV_"))
             and n not in ("MQGMO_UNSUPPORTED", "MQOO_INPUT")]
    assert len(names) > 60
    assert {n: getattr(mqi, n) for n in names} == {n: getattr(C, n) for n in names}
    assert mqi.MD_LENGTH == C.MQMD_CURRENT_LENGTH


def test_connect_with_a_channel_and_credentials_and_a_wrong_password_is_refused(
        emulated_ibmmq, qm1):
    ibmmq = emulated_ibmmq
    qm = connect(ibmmq, qm1)
    assert qm.is_connected
    conns = qm1.admin("DISPLAY CONN(*)")[0]
    assert len(conns) == 1 and "USERID(app)" in conns[0] and qm1.conname in conns[0]
    qm.disconnect()
    assert reason(ibmmq, lambda: connect(ibmmq, qm1, password="wrong")) == \
        ibmmq.CMQC.MQRC_NOT_AUTHORIZED
    assert reason(ibmmq, lambda: connect(ibmmq, qm1, name="QM9")) == \
        ibmmq.CMQC.MQRC_Q_MGR_NAME_ERROR
    assert qm1.admin("DISPLAY CONN(*)") == [[]]


def test_a_connection_name_list_is_tried_in_order(emulated_ibmmq, qmgrs, qm1):
    ibmmq = emulated_ibmmq
    dead = qmgrs.start("QM2")
    dead_conname = dead.conname
    dead.stop()
    cd = ibmmq.CD(ChannelName=b"C", ConnectionName=f"{dead_conname},{qm1.conname}".encode())
    qm = ibmmq.QueueManager(None)
    csp = ibmmq.CSP(CSPUserId=USER, CSPPassword=PASSWORD,
                    AuthenticationType=ibmmq.CMQC.MQCSP_AUTH_USER_ID_AND_PWD)
    qm.connect_with_options("QM1", cd=cd, csp=csp)
    qm.disconnect()
    cd.ConnectionName = dead_conname.encode()
    assert reason(ibmmq, lambda: ibmmq.QueueManager(None).connect_with_options("QM1", cd=cd)) \
        == ibmmq.CMQC.MQRC_HOST_NOT_AVAILABLE


def test_put_and_get_with_msgid_and_correlid_selection(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    queue = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)
    ids = []
    for n in range(3):
        md = ibmmq.MD(CorrelId=f"corr-{n}".encode().ljust(24, b"\0"), Format=C.MQFMT_STRING)
        queue.put(f"body {n}".encode(), md, ibmmq.PMO(Options=C.MQPMO_NEW_MSG_ID))
        ids.append(md.MsgId)
    assert len(set(ids)) == 3 and all(len(i) == 24 and i != C.MQMI_NONE for i in ids)
    md = ibmmq.MD(MsgId=ids[2])
    assert queue.get(None, md, get_wait(ibmmq, match=C.MQMO_MATCH_MSG_ID)) == b"body 2"
    md = ibmmq.MD(CorrelId=b"corr-1".ljust(24, b"\0"))
    assert queue.get(None, md, get_wait(ibmmq, match=C.MQMO_MATCH_CORREL_ID)) == b"body 1"
    assert md.MsgId == ids[1] and md.Format == C.MQFMT_STRING
    assert md.PutApplName.rstrip() != b"" and md.UserIdentifier.rstrip() == USER.encode()
    md = ibmmq.MD()
    assert queue.get(None, md, get_wait(ibmmq)) == b"body 0"
    assert reason(ibmmq, lambda: queue.get(None, ibmmq.MD(), get_wait(ibmmq))) == \
        C.MQRC_NO_MSG_AVAILABLE
    assert reason(ibmmq, lambda: ibmmq.Queue(qm, "NOPE", C.MQOO_OUTPUT)) == \
        C.MQRC_UNKNOWN_OBJECT_NAME
    qm.disconnect()


def test_a_message_too_long_for_the_buffer_fails_unless_truncation_is_accepted(
        emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    queue = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)
    queue.put(bytes(range(100)))
    with pytest.raises(ibmmq.MQMIError) as raised:
        queue.get(10, ibmmq.MD(), get_wait(ibmmq))
    assert raised.value.reason == C.MQRC_TRUNCATED_MSG_FAILED
    assert raised.value.original_length == 100
    gmo = get_wait(ibmmq)
    gmo.Options |= C.MQGMO_ACCEPT_TRUNCATED_MSG
    with pytest.raises(ibmmq.MQMIError) as raised:
        queue.get(10, ibmmq.MD(), gmo)
    assert (raised.value.comp, raised.value.reason) == (C.MQCC_WARNING,
                                                        C.MQRC_TRUNCATED_MSG_ACCEPTED)
    assert qm1.admin("DISPLAY QLOCAL(Q1)")[0][0].count("CURDEPTH(0)") == 1
    qm.disconnect()


def test_a_waiting_get_receives_a_put_from_another_thread(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    getter, putter = connect(ibmmq, qm1), connect(ibmmq, qm1)
    inq = ibmmq.Queue(getter, "Q1", C.MQOO_INPUT_SHARED)
    out = ibmmq.Queue(putter, "Q1", C.MQOO_OUTPUT)
    timer = threading.Timer(0.3, lambda: out.put(b"late"))
    started = time.monotonic()
    timer.start()
    assert inq.get(None, ibmmq.MD(), get_wait(ibmmq, 5000)) == b"late"
    waited = time.monotonic() - started
    timer.join()
    assert 0.25 <= waited < 3
    started = time.monotonic()
    assert reason(ibmmq, lambda: inq.get(None, ibmmq.MD(), get_wait(ibmmq, 200))) == \
        C.MQRC_NO_MSG_AVAILABLE
    assert 0.18 <= time.monotonic() - started < 2
    getter.disconnect()
    putter.disconnect()


def test_syncpoint_puts_appear_at_commit_and_backed_out_gets_come_back(
        emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm, other = connect(ibmmq, qm1), connect(ibmmq, qm1)
    out = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT)
    watcher = ibmmq.Queue(other, "Q1", C.MQOO_INPUT_SHARED | C.MQOO_INQUIRE)
    for n in range(3):
        out.put(f"m{n}".encode(), ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    assert watcher.inquire(C.MQIA_CURRENT_Q_DEPTH) == 3  # MQ counts uncommitted messages
    assert reason(ibmmq, lambda: watcher.get(None, ibmmq.MD(), get_wait(ibmmq))) == \
        C.MQRC_NO_MSG_AVAILABLE
    qm.backout()
    assert watcher.inquire(C.MQIA_CURRENT_Q_DEPTH) == 0
    for n in range(3):
        out.put(f"m{n}".encode(), ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    qm.commit()
    md = ibmmq.MD()
    assert watcher.get(None, md, get_wait(ibmmq, syncpoint=True)) == b"m0"
    assert md.BackoutCount == 0
    other.backout()
    md = ibmmq.MD()
    assert watcher.get(None, md, get_wait(ibmmq, syncpoint=True)) == b"m0"
    assert md.BackoutCount == 1
    other.commit()
    assert watcher.inquire(C.MQIA_CURRENT_Q_DEPTH) == 2
    watcher.get(None, ibmmq.MD(), get_wait(ibmmq, syncpoint=True))
    other.disconnect()  # MQDISC commits (MQ on Multiplatforms does)
    qm.disconnect()
    assert "CURDEPTH(1)" in qm1.admin("DISPLAY QLOCAL(Q1)")[0][0]


def test_put1_a_dynamic_reply_queue_and_queue_full(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    reply = ibmmq.Queue(qm, ibmmq.OD(ObjectName=b"SYSTEM.DEFAULT.MODEL.QUEUE",
                                     DynamicQName=b"REPLY.*"), C.MQOO_INPUT_EXCLUSIVE)
    listed = [line for line in qm1.admin("DISPLAY QLOCAL(REPLY.*)")[0] if "QUEUE(REPLY." in line]
    assert len(listed) == 1
    dynamic = listed[0].split("(")[1].split(")")[0]
    assert reply.get_name() == dynamic  # MQOPEN returned the created name in the MQOD
    md = ibmmq.MD(ReplyToQ=dynamic.encode())
    qm.put1("Q1", b"request", md)
    request_md = ibmmq.MD()
    server = ibmmq.Queue(qm, "Q1", C.MQOO_INPUT_SHARED)
    assert server.get(None, request_md, get_wait(ibmmq)) == b"request"
    assert request_md.ReplyToQ.rstrip(b"\0 ") == dynamic.encode()
    assert request_md.ReplyToQMgr.rstrip() == b"QM1"
    qm.put1(request_md.ReplyToQ.rstrip(b"\0 ").decode(), b"reply",
            ibmmq.MD(CorrelId=request_md.MsgId))
    md = ibmmq.MD(CorrelId=request_md.MsgId)
    assert reply.get(None, md, get_wait(ibmmq, match=C.MQMO_MATCH_CORREL_ID)) == b"reply"
    reply.close()
    assert qm1.admin("DISPLAY QLOCAL(REPLY.*)")[0][0].startswith("AMQ8147E")  # deleted
    small = ibmmq.Queue(qm, "SMALL", C.MQOO_OUTPUT)
    for _ in range(3):
        small.put(b"x")
    assert reason(ibmmq, lambda: small.put(b"x")) == C.MQRC_Q_FULL
    qm.disconnect()


def test_a_publication_reaches_the_matching_subscriptions_only(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1.admin("DEFINE QLOCAL(ALL)", "DEFINE QLOCAL(EU)", "DEFINE QLOCAL(US)",
              "DEFINE SUB(SUB.ALL) TOPICSTR('prices/#') DEST(ALL)")
    qm = connect(ibmmq, qm1)
    eu_queue = ibmmq.Queue(qm, "EU", C.MQOO_OUTPUT)
    sd = ibmmq.SD(Options=C.MQSO_CREATE | C.MQSO_RESUME | C.MQSO_DURABLE)
    sd.set_vs("SubName", "SUB.EU")
    sd.set_vs("ObjectString", "prices/+/eu")
    sub = ibmmq.Subscription(qm)
    sub.sub(sub_desc=sd, sub_queue=eu_queue)
    sub.close(sub_close_options=C.MQCO_KEEP_SUB)
    qm1.admin("DEFINE SUB(SUB.US) TOPICSTR('prices/+/us') DEST(US)")
    topic = ibmmq.Topic(qm, topic_string="prices/fruit/eu")
    topic.open(open_opts=C.MQOO_OUTPUT)
    topic.pub(b"apple 1 EUR")
    topic.close()
    depths = {q: qm1.admin(f"DISPLAY QLOCAL({q})")[0][0] for q in ("ALL", "EU", "US")}
    assert "CURDEPTH(1)" in depths["ALL"] and "CURDEPTH(1)" in depths["EU"]
    assert "CURDEPTH(0)" in depths["US"]
    eu = ibmmq.Queue(qm, "EU", C.MQOO_INPUT_SHARED)
    assert eu.get(None, ibmmq.MD(), get_wait(ibmmq)) == b"apple 1 EUR"
    again = ibmmq.SD(Options=C.MQSO_CREATE | C.MQSO_DURABLE)
    again.set_vs("SubName", "SUB.EU")
    again.set_vs("ObjectString", "prices/+/eu")
    assert reason(ibmmq, lambda: ibmmq.Subscription(qm).sub(sub_desc=again,
                                                            sub_queue=eu_queue)) == \
        C.MQRC_SUB_ALREADY_EXISTS
    assert {line.split()[0] for line in qm1.admin("DISPLAY SUB(*)")[0]} == \
        {"SUB(SUB.ALL)", "SUB(SUB.EU)", "SUB(SUB.US)"}
    qm.disconnect()


def test_topic_objects_name_the_start_of_topic_strings(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    assert qm1.admin("DEFINE TOPIC(PRICES) TOPICSTR('prices')", "DEFINE QLOCAL(EU)",
                     "DISPLAY TOPIC(PRICES)")[2] == ["TOPIC(PRICES) TYPE(LOCAL) TOPICSTR(prices)"]
    qm = connect(ibmmq, qm1)
    sd = ibmmq.SD(Options=C.MQSO_CREATE | C.MQSO_DURABLE)
    sd.set_vs("SubName", "SUB.EU")
    sd.ObjectName = b"PRICES"
    sd.set_vs("ObjectString", "+/eu")  # prices/+/eu
    sub = ibmmq.Subscription(qm)
    sub.sub(sub_desc=sd, sub_queue=ibmmq.Queue(qm, "EU", C.MQOO_OUTPUT))
    assert "TOPICSTR(prices/+/eu)" in qm1.admin("DISPLAY SUB(SUB.EU)")[0][0]
    od = ibmmq.OD(ObjectType=C.MQOT_TOPIC, Version=C.MQOD_VERSION_4, ObjectName=b"PRICES")
    od.set_vs("ObjectString", "fruit/eu")  # (ibmmq's Topic cannot take a name and a string)
    by_object = ibmmq.Topic(qm)
    by_object.open(topic_desc=od, open_opts=C.MQOO_OUTPUT)
    by_object.pub(b"apple 1 EUR")  # to prices/fruit/eu
    by_object.close()
    eu = ibmmq.Queue(qm, "EU", C.MQOO_INPUT_SHARED)
    assert eu.get(None, ibmmq.MD(), get_wait(ibmmq)) == b"apple 1 EUR"
    missing = ibmmq.Topic(qm, topic_name="NOPE")
    assert reason(ibmmq, lambda: missing.open(open_opts=C.MQOO_OUTPUT)) == \
        C.MQRC_UNKNOWN_OBJECT_NAME
    sub.close(sub_close_options=C.MQCO_REMOVE_SUB)
    qm.disconnect()


def test_an_unsupported_verb_says_so(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    assert reason(ibmmq, lambda: qm.begin()) == C.MQRC_FUNCTION_NOT_SUPPORTED
    queue = ibmmq.Queue(qm, "Q1", C.MQOO_INPUT_SHARED | C.MQOO_BROWSE)
    gmo = ibmmq.GMO(Options=C.MQGMO_BROWSE_FIRST)
    assert reason(ibmmq, lambda: queue.get(None, ibmmq.MD(), gmo)) == \
        C.MQRC_FUNCTION_NOT_SUPPORTED
    qm.disconnect()


def test_four_threads_each_put_and_get_two_thousand_messages_exactly(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    per_thread, threads = 2000, 4
    got: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def work(number: int) -> None:
        try:
            qm = connect(ibmmq, qm1)
            queue = ibmmq.Queue(qm, "Q2", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)
            mine = []
            tag = f"t{number}-".encode()
            for seq in range(per_thread):
                md = ibmmq.MD()
                queue.put(tag + str(seq).encode(), md)
                if seq % 2:
                    continue
                for _ in range(2 if seq else 1):
                    mine.append(queue.get(None, ibmmq.MD(), get_wait(ibmmq, 2000)))
            while len(mine) < per_thread:
                mine.append(queue.get(None, ibmmq.MD(), get_wait(ibmmq, 2000)))
            got[number] = mine
            qm.disconnect()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=50)
    assert not errors and all(not w.is_alive() for w in workers)
    everything = [body for bodies in got.values() for body in bodies]
    assert len(everything) == per_thread * threads
    assert sorted(everything) == sorted(f"t{n}-{s}".encode() for n in range(threads)
                                        for s in range(per_thread))
    assert "CURDEPTH(0)" in qm1.admin("DISPLAY QLOCAL(Q2)")[0][0]


def test_nothing_is_left_running(qmgrs):
    qmgr = qmgrs.start("QM3")
    pid = qmgr.process.pid
    qmgrs.stop_all()
    assert not os.path.exists(f"/proc/{pid}") or \
        Path(f"/proc/{pid}/status").read_text().find("zombie") >= 0


def test_mqsc_folds_an_unquoted_name_and_the_mqi_opens_names_exactly(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    assert qm1.admin("DEFINE QLOCAL(orders)", "DEFINE QLOCAL('orders')") == [
        ["AMQ8006I: IBM MQ queue created: ORDERS."], ["AMQ8006I: IBM MQ queue created: orders."]]
    qm = connect(ibmmq, qm1)
    for name in ("ORDERS", "orders"):
        ibmmq.Queue(qm, name, C.MQOO_OUTPUT).put(name.encode())
    exact, folded = (qm1.admin(f"DISPLAY QLOCAL({name})")[0][0] for name in ("'orders'", "orders"))
    assert exact.startswith("QUEUE(orders) ") and folded.startswith("QUEUE(ORDERS) ")
    assert "CURDEPTH(1)" in exact and "CURDEPTH(1)" in folded
    assert reason(ibmmq, lambda: ibmmq.Queue(qm, "Orders", C.MQOO_OUTPUT)) == \
        C.MQRC_UNKNOWN_OBJECT_NAME
    qm.disconnect()


def test_mqsc_commands_define_display_and_end_the_queue_manager(qmgrs):
    qmgr = qmgrs.start("QM4")
    script = Path(__file__).resolve().parents[1] / "mqemu" / "runmqsc.py"

    def runmqsc(text: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), "--port", str(qmgr.port)],
                              input=text, capture_output=True, text=True, timeout=30)

    done = runmqsc("DEFINE QLOCAL(A.Q) MAXDEPTH(7)\nDISPLAY QLOCAL(A.Q) CURDEPTH\n")
    assert done.returncode == 0, done.stdout
    assert "QUEUE(A.Q) TYPE(QLOCAL) CURDEPTH(0) MAXDEPTH(7)" in done.stdout
    done = runmqsc("DEFINE QLOCAL(A.Q)\nDISPLAY QMSTATUS\n")
    assert done.returncode == 10 and "AMQ8150E" in done.stdout and "STATUS(RUNNING)" in done.stdout
    assert runmqsc("END\n").returncode == 0
    assert qmgr.process.wait(timeout=10) == 0
    done = runmqsc("DISPLAY QMSTATUS\n")
    assert done.returncode == 20 and "AMQ8146E" in done.stdout


def test_a_reconnectable_connection_moves_to_another_queue_manager_and_says_so(
        emulated_ibmmq, qmgrs, monkeypatch):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    monkeypatch.setenv("MQEMU_RECONNECT_TIMEOUT_S", "1")
    first, second = (qmgrs.start(name, mqsc=["DEFINE QLOCAL(Q1)"]) for name in ("QMA", "QMB"))
    events: list[tuple[int, int]] = []
    cd = ibmmq.CD(ChannelName=b"C", ConnectionName=f"{first.conname},{second.conname}".encode())
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options("*G", cd=cd, cno=ibmmq.CNO(Options=C.MQCNO_RECONNECT
                                                       | C.MQCNO_HANDLE_SHARE_BLOCK))
    qm.cb(operation=C.MQOP_REGISTER, cbd=ibmmq.CBD(
        CallbackType=C.MQCBT_EVENT_HANDLER,
        CallbackFunction=lambda **kw: events.append((kw["cbc"].CompCode, kw["cbc"].Reason))))
    queue = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)
    queue.put(b"on A")
    first.stop()
    assert reason(ibmmq, lambda: queue.put(b"lost?")) == C.MQRC_CALL_INTERRUPTED
    queue.put(b"on B")
    assert queue.get(None, ibmmq.MD(), get_wait(ibmmq)) == b"on B"  # same hobj, new QM
    assert qm.inquire(C.MQCA_Q_MGR_NAME).rstrip(b"\0 ") == b"QMB"
    until = time.monotonic() + 5
    while len(events) < 2 and time.monotonic() < until:
        time.sleep(0.01)
    assert events == [(C.MQCC_WARNING, C.MQRC_RECONNECTING), (C.MQCC_OK, C.MQRC_RECONNECTED)]
    second.stop()
    assert reason(ibmmq, lambda: queue.get(None, ibmmq.MD(), get_wait(ibmmq))) == \
        C.MQRC_RECONNECT_FAILED
    while len(events) < 4 and time.monotonic() < until + 10:
        time.sleep(0.01)
    assert events[2:] == [(C.MQCC_WARNING, C.MQRC_RECONNECTING),
                          (C.MQCC_FAILED, C.MQRC_RECONNECT_FAILED)]
    assert reason(ibmmq, qm.disconnect) == C.MQRC_RECONNECT_FAILED


def test_a_unit_of_work_lost_in_a_reconnect_is_backed_out_at_commit(
        emulated_ibmmq, qmgrs, monkeypatch):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    first, second = (qmgrs.start(name, mqsc=["DEFINE QLOCAL(Q1)"]) for name in ("QMA", "QMB"))
    cd = ibmmq.CD(ChannelName=b"C", ConnectionName=f"{first.conname},{second.conname}".encode())
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options("*G", cd=cd, cno=ibmmq.CNO(Options=C.MQCNO_RECONNECT))
    queue = ibmmq.Queue(qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED | C.MQOO_INQUIRE)
    queue.put(b"in a unit of work", ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    first.stop()
    assert queue.inquire(C.MQIA_CURRENT_Q_DEPTH) == 0  # on QMB now
    with pytest.raises(ibmmq.MQMIError) as raised:
        qm.commit()
    assert (raised.value.comp, raised.value.reason) == (C.MQCC_WARNING, C.MQRC_BACKED_OUT)
    queue.put(b"next", ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    qm.commit()
    assert queue.inquire(C.MQIA_CURRENT_Q_DEPTH) == 1
    qm.disconnect()


@pytest.mark.parametrize("layout, structure", [
    ("MD", "MD"), ("OD", "OD"), ("PMO", "PMO"), ("GMO", "GMO"), ("CNO", "CNO"), ("CD", "CD"),
    ("SD", "SD")])
def test_the_emulators_layouts_are_where_ibmmq_packs_the_fields(emulated_ibmmq, layout,
                                                                structure):
    fields = getattr(mqi, layout)
    values = {}
    for number, (name, (_, fmt)) in enumerate(fields.items()):
        values[name] = (b"%02d" % number * 200)[:int(fmt[:-1])] if fmt.endswith("s") \
            else 1000 + number
    values.pop("Version", None)  # ibmmq keeps its own
    packed = getattr(emulated_ibmmq, structure)(**values).pack()
    for name, value in values.items():
        assert mqi.get(fields, packed, name) == value, name


def test_a_managed_non_durable_subscription_lives_as_long_as_its_handle(emulated_ibmmq, qm1):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm = connect(ibmmq, qm1)
    sub = ibmmq.Subscription(qm)
    sub.sub(topic_string="news/+")  # ibmmq: MQSO_CREATE + MQSO_NON_DURABLE + MQSO_MANAGED
    topic = ibmmq.Topic(qm, topic_string="news/today")
    topic.open(open_opts=C.MQOO_OUTPUT)
    topic.pub(b"headline")
    assert sub.get(None, ibmmq.MD(), get_wait(ibmmq, 1000)) == b"headline"
    assert [line for line in qm1.admin("DISPLAY SUB(*)")[0] if "TOPICSTR(news/+)" in line]
    sub.close()
    assert qm1.admin("DISPLAY SUB(*)") == [[]]
    assert qm1.admin("DISPLAY QLOCAL(SYSTEM.MANAGED.*)")[0][0].startswith("AMQ8147E")
    topic.pub(b"nobody listens")  # no subscription matches: the put still completes
    topic.close()
    qm.disconnect()


def test_mqconn_finds_its_queue_manager_through_mqserver(emulated_ibmmq, qmgrs, qm1,
                                                         monkeypatch):
    ibmmq = emulated_ibmmq
    open_qmgr = qmgrs.start("QM5")  # started without --user: any or no credentials
    monkeypatch.setenv("MQSERVER", f"DEV.APP.SVRCONN/TCP/{open_qmgr.conname}")
    qm = ibmmq.QueueManager("QM5")  # MQCONN
    assert qm.is_connected and qm.inquire(ibmmq.CMQC.MQCA_Q_MGR_NAME).startswith(b"QM5")
    qm.disconnect()
    monkeypatch.setenv("MQSERVER", f"DEV.APP.SVRCONN/TCP/{qm1.conname}")
    assert reason(ibmmq, lambda: ibmmq.QueueManager("QM1")) == \
        ibmmq.CMQC.MQRC_NOT_AUTHORIZED  # MQCONN carries no MQCSP; QM1 checks users
    monkeypatch.delenv("MQSERVER")
    assert reason(ibmmq, lambda: ibmmq.QueueManager("QM1")) == ibmmq.CMQC.MQRC_Q_MGR_NAME_ERROR
