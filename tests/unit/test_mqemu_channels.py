"""Sender and receiver channels between EMULATED queue managers (tests/mqemu/channels.py; NOT
IBM MQ): two queue managers set up with the MQSC surge's point-to-point provisioner sends, a
request put on LQ01 for LQ02's queue and a reply put on LQ02 for LQ01's, through each one's
transmission queue; starting, stopping and the status of the channels; name resolution."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.unit.mqemu_helpers import connected, depth, drain_with_md, until

pytestmark = pytest.mark.timeout(60)

RUNMQSC = Path(__file__).resolve().parents[1] / "mqemu" / "runmqsc.py"
A_TO_B, B_TO_A = "LQ01.TO.LQ02", "LQ02.TO.LQ01"


def own_lines(me: str, far: str) -> list[str]:
    """What both sides define: the transmission queue to ``far`` and the receiver from it."""
    return [f"define qlocal({far}) usage(xmitq) maxdepth(100000) replace",
            f"define channel({far}.TO.{me}) chltype(rcvr) trptype(tcp) replace",
            f"set chlauth('{far}.TO.{me}') type(blockuser) userlist('nobody') action(replace)"]


def sender_line(me: str, far: str, conname: str) -> str:
    return (f"define channel({me}.TO.{far}) chltype(sdr) trptype(tcp) conname('{conname}') "
            f"xmitq({far}) npmspeed(normal) batchsz(50) replace")


def linked(qmgrs, b_lines: tuple[str, ...] = ("define qlocal(PAIR1) replace",),
           b_receives: bool = True):
    """LQ01 (requesters: PAIR1 remote, PAIR1.REPLY local) and LQ02 (PAIR1 local, no reply
    queue), channels defined but not started; LQ01's sender is defined once LQ02's port is
    known, as runmqsc would."""
    a = qmgrs.start("LQ01", mqsc=[*own_lines("LQ01", "LQ02"),
                                  "define qremote(PAIR1) rname(PAIR1) rqmname(LQ02) xmitq(LQ02) "
                                  "replace",
                                  "define qlocal(PAIR1.REPLY) replace"])
    b_own = [line for line in own_lines("LQ02", "LQ01") if b_receives or "rcvr" not in line]
    b = qmgrs.start("LQ02", mqsc=[*b_own, sender_line("LQ02", "LQ01", a.conname), *b_lines])
    assert a.admin(sender_line("LQ01", "LQ02", b.conname)) == [
        ["AMQ8014I: IBM MQ channel created."]]
    return a, b


def statuses(qmgr, name: str = "*") -> dict[str, dict[str, str]]:
    """``DISPLAY CHSTATUS``: each channel's attributes (none: AMQ8420I)."""
    lines = qmgr.admin(f"display chstatus({name}) status msgs")[0]
    if lines == ["AMQ8420I: Channel Status not found."]:
        return {}
    found = {}
    for line in lines:
        attributes = dict(re.findall(r"(\w+)\(((?:[^()]|\([^()]*\))*)\)", line))
        found[attributes["CHANNEL"]] = attributes
    return found


def status(qmgr, name: str) -> str | None:
    return statuses(qmgr).get(name, {}).get("STATUS")


def put_request(ibmmq, qmgr, body: bytes = b"request"):
    """``body`` put to PAIR1 on ``qmgr`` with ReplyToQ PAIR1.REPLY; its MQMD and MQPMO."""
    md, pmo = ibmmq.MD(ReplyToQ=b"PAIR1.REPLY"), ibmmq.PMO()
    with connected(ibmmq, qmgr, user="") as qm:
        queue = ibmmq.Queue(qm, "PAIR1", ibmmq.CMQC.MQOO_OUTPUT)
        queue.put(body, md, pmo)
        queue.close()
    return md, pmo


def runmqsc(qmgr, *commands: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, str(RUNMQSC), "--port", str(qmgr.port)],
                          input="".join(c + "\n" for c in commands), capture_output=True,
                          text=True, timeout=30)
    return done.returncode, done.stdout


def test_a_request_waits_on_the_transmission_queue_until_the_sender_starts(emulated_ibmmq,
                                                                            qmgrs):
    ibmmq = emulated_ibmmq
    a, b = linked(qmgrs)
    md, pmo = put_request(ibmmq, a)
    assert (pmo.ResolvedQName.strip(), pmo.ResolvedQMgrName.strip()) == (b"PAIR1", b"LQ02")
    assert depth(a, "LQ02") == 1
    assert "USAGE(XMITQ)" in a.admin("display qlocal(LQ02) curdepth")[0][0]
    time.sleep(0.5)
    assert statuses(a) == {} and depth(b, "PAIR1") == 0  # channels start only when told
    assert a.admin(f"start channel({A_TO_B})") == [["AMQ8018I: Start IBM MQ channel accepted."]]
    until(lambda: depth(b, "PAIR1") == 1, timeout_s=10)
    [(body, got)] = drain_with_md(ibmmq, b, "PAIR1", user="")
    assert body == b"request" and bytes(got.MsgId) == bytes(md.MsgId)
    assert (got.ReplyToQ.rstrip(b" \0"), got.ReplyToQMgr.rstrip(b" \0")) == (b"PAIR1.REPLY",
                                                                             b"LQ01")
    assert depth(a, "LQ02") == 0
    sender = statuses(a, A_TO_B)[A_TO_B]
    assert (sender["CHLTYPE"], sender["STATUS"], sender["MSGS"], sender["RQMNAME"],
            sender["XMITQ"], sender["CONNAME"]) == ("SDR", "RUNNING", "1", "LQ02", "LQ02",
                                                    b.conname)
    receiver = statuses(b)[A_TO_B]
    assert (receiver["CHLTYPE"], receiver["STATUS"], receiver["MSGS"], receiver["RQMNAME"]) == (
        "RCVR", "RUNNING", "1", "LQ01")
    assert B_TO_A not in statuses(a)  # a receiver never contacted has no status


def test_a_reply_to_the_requesters_queue_manager_takes_its_transmission_queue(emulated_ibmmq,
                                                                               qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    a, b = linked(qmgrs)
    with connected(ibmmq, b, user="") as responder:
        pmo = ibmmq.PMO()
        responder.put1(ibmmq.OD(ObjectName=b"PAIR1.REPLY", ObjectQMgrName=b"LQ01"), b"reply",
                       ibmmq.MD(CorrelId=b"C" * 24), pmo)
        assert (pmo.ResolvedQName.strip(), pmo.ResolvedQMgrName.strip()) == (b"PAIR1.REPLY",
                                                                             b"LQ01")
        with pytest.raises(ibmmq.MQMIError) as unknown:  # LQ02 defines a transmission queue
            responder.put1(ibmmq.OD(ObjectName=b"PAIR1.REPLY", ObjectQMgrName=b"QM9"), b"x")
        assert unknown.value.reason == C.MQRC_UNKNOWN_REMOTE_Q_MGR
    assert depth(b, "LQ01") == 1
    b.admin(f"start channel({B_TO_A})")
    until(lambda: depth(a, "PAIR1.REPLY") == 1, timeout_s=10)
    [(body, md)] = drain_with_md(ibmmq, a, "PAIR1.REPLY", user="")
    assert (body, bytes(md.CorrelId)) == (b"reply", b"C" * 24)
    until(lambda: status(a, B_TO_A) == "RUNNING", timeout_s=5)
    b.admin(f"stop channel({B_TO_A})")
    until(lambda: status(b, B_TO_A) == "STOPPED", timeout_s=5)
    until(lambda: B_TO_A not in statuses(a), timeout_s=6)  # its sender no longer heard


def test_a_stopped_sender_holds_what_is_put_and_a_new_start_delivers_it_once(emulated_ibmmq,
                                                                            qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    a, b = linked(qmgrs)
    a.admin(f"start channel({A_TO_B})")
    with connected(ibmmq, a, user="") as qm:
        queue = ibmmq.Queue(qm, "PAIR1", C.MQOO_OUTPUT)
        queue.put(b"in a unit of work", ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
        time.sleep(0.5)
        assert (depth(a, "LQ02"), depth(b, "PAIR1")) == (1, 0)  # counted, not sent before MQCMIT
        qm.commit()
        queue.close()
    until(lambda: depth(b, "PAIR1") == 1, timeout_s=10)
    assert a.admin(f"stop channel({A_TO_B})") == [["AMQ8019I: Stop IBM MQ channel accepted."]]
    until(lambda: status(a, A_TO_B) == "STOPPED", timeout_s=5)
    sent = [bytes(put_request(ibmmq, a, f"held {n}".encode())[0].MsgId) for n in range(60)]
    assert depth(a, "LQ02") == 60
    time.sleep(1.5)
    assert depth(b, "PAIR1") == 1 and status(a, A_TO_B) == "STOPPED"
    a.admin(f"start channel({A_TO_B})")
    until(lambda: depth(b, "PAIR1") == 61, timeout_s=10)
    got = [bytes(md.MsgId) for _, md in drain_with_md(ibmmq, b, "PAIR1", user="")]
    assert got[1:] == sent and depth(a, "LQ02") == 0  # in order, each once
    sender = statuses(a)[A_TO_B]
    assert (sender["STATUS"], sender["MSGS"]) == ("RUNNING", "60")  # this instance's
    assert int(sender["BATCHES"]) >= 1


def test_a_sender_retries_while_the_far_side_refuses_or_is_down_and_loses_nothing(
        emulated_ibmmq, qmgrs):
    ibmmq = emulated_ibmmq
    a, b = linked(qmgrs, b_receives=False)
    a.admin(f"start channel({A_TO_B})")
    put_request(ibmmq, a, b"first")
    until(lambda: status(a, A_TO_B) == "RETRYING", timeout_s=5)  # no receiver of its name
    time.sleep(1.5)
    assert depth(a, "LQ02") == 1 and depth(b, "PAIR1") == 0 and statuses(b) == {}
    b.admin(f"define channel({A_TO_B}) chltype(rcvr) trptype(tcp) replace")
    until(lambda: depth(b, "PAIR1") == 1, timeout_s=10)
    until(lambda: status(a, A_TO_B) == "RUNNING", timeout_s=5)
    b.admin(f"stop channel({A_TO_B})")  # a stopped receiver refuses its sender
    put_request(ibmmq, a, b"second")
    until(lambda: status(a, A_TO_B) == "RETRYING", timeout_s=5)
    assert depth(a, "LQ02") == 1 and statuses(b)[A_TO_B]["STATUS"] == "STOPPED"
    b.admin(f"start channel({A_TO_B})")
    until(lambda: depth(b, "PAIR1") == 2, timeout_s=10)
    b.stop()
    put_request(ibmmq, a, b"third")
    until(lambda: status(a, A_TO_B) == "RETRYING", timeout_s=5)
    time.sleep(1.5)
    assert depth(a, "LQ02") == 1


def test_a_message_the_far_queue_cannot_take_waits_for_room(emulated_ibmmq, qmgrs):
    ibmmq = emulated_ibmmq
    a, b = linked(qmgrs, b_lines=("define qlocal(PAIR1) maxdepth(1) replace",))
    a.admin(f"start channel({A_TO_B})")
    sent = [bytes(put_request(ibmmq, a, f"m{n}".encode())[0].MsgId) for n in range(2)]
    until(lambda: status(a, A_TO_B) == "RETRYING", timeout_s=5)
    assert (depth(b, "PAIR1"), depth(a, "LQ02")) == (1, 1)
    got = [bytes(md.MsgId) for _, md in drain_with_md(ibmmq, b, "PAIR1", user="")]
    until(lambda: depth(b, "PAIR1") == 1, timeout_s=10)
    got += [bytes(md.MsgId) for _, md in drain_with_md(ibmmq, b, "PAIR1", user="")]
    assert got == sent and depth(a, "LQ02") == 0


def test_name_resolution_refuses_what_mq_refuses(emulated_ibmmq, qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    a, _ = linked(qmgrs)
    a.admin("define qremote(NO.XMITQ) rname(Q) rqmname(LQ02) xmitq(MISSING)",
            "define qremote(NOT.XMITQ) rname(Q) rqmname(LQ02) xmitq(PAIR1.REPLY)",
            "define qlocal(LQ02) usage(xmitq) maxdepth(1) replace")
    with connected(ibmmq, a, user="") as qm:
        for name, qmgr, reason in ((b"NO.XMITQ", b"", C.MQRC_UNKNOWN_XMIT_Q),
                                   (b"NOT.XMITQ", b"", C.MQRC_XMIT_Q_USAGE_ERROR),
                                   (b"Q", b"QM9", C.MQRC_UNKNOWN_REMOTE_Q_MGR),
                                   (b"Q", b"PAIR1.REPLY", C.MQRC_XMIT_Q_USAGE_ERROR)):
            with pytest.raises(ibmmq.MQMIError) as refused:
                qm.put1(ibmmq.OD(ObjectName=name, ObjectQMgrName=qmgr), b"x")
            assert refused.value.reason == reason, name
        remote = ibmmq.Queue(qm, "PAIR1", C.MQOO_OUTPUT | C.MQOO_INQUIRE)
        assert remote.inquire(C.MQIA_Q_TYPE) == C.MQQT_REMOTE
        with pytest.raises(ibmmq.MQMIError) as raised:
            remote.inquire(C.MQIA_CURRENT_Q_DEPTH)
        assert (raised.value.comp, raised.value.reason) == (C.MQCC_WARNING,
                                                            C.MQRC_SELECTOR_NOT_FOR_TYPE)
        assert "OPPROCS(1)" in a.admin("display qlocal(LQ02)")[0][0]
        remote.put(b"one")
        with pytest.raises(ibmmq.MQMIError) as full:
            remote.put(b"two")
        assert full.value.reason == C.MQRC_Q_FULL
        remote.close()
        with pytest.raises(ibmmq.MQMIError) as refused:
            ibmmq.Queue(qm, "PAIR1", C.MQOO_INPUT_SHARED)
        assert refused.value.reason == C.MQRC_OPTION_NOT_VALID_FOR_TYPE
    assert "OPPROCS(0)" in a.admin("display qlocal(LQ02)")[0][0]


def test_a_default_transmission_queue_and_a_queue_manager_alias(emulated_ibmmq, qmgrs):
    ibmmq = emulated_ibmmq
    a, b = linked(qmgrs)
    a.admin("alter qmgr defxmitq(LQ02)",
            "define qremote(TO.B) rname(' ') rqmname(LQ02) xmitq(LQ02) replace")
    with connected(ibmmq, a, user="") as qm:
        pmo = ibmmq.PMO()
        qm.put1(ibmmq.OD(ObjectName=b"PAIR1", ObjectQMgrName=b"ELSEWHERE"), b"default", None,
                pmo)
        assert pmo.ResolvedQMgrName.strip() == b"ELSEWHERE"
        pmo = ibmmq.PMO()
        qm.put1(ibmmq.OD(ObjectName=b"PAIR1", ObjectQMgrName=b"TO.B"), b"aliased", None, pmo)
        assert pmo.ResolvedQMgrName.strip() == b"LQ02"
    assert depth(a, "LQ02") == 2
    a.admin(f"start channel({A_TO_B})")
    until(lambda: depth(b, "PAIR1") == 1 and depth(a, "LQ02") == 1, timeout_s=10)
    until(lambda: status(a, A_TO_B) == "RETRYING", timeout_s=5)  # LQ02 is not ELSEWHERE


def test_runmqsc_answers_and_exit_codes(qmgrs):
    a, b = linked(qmgrs)
    assert runmqsc(a, "display chstatus(*) status msgs") == (
        0, "     1 : display chstatus(*) status msgs\nAMQ8420I: Channel Status not found.\n")
    code, out = runmqsc(a, f"start channel({A_TO_B})")
    assert code == 0 and "AMQ8018I: Start IBM MQ channel accepted." in out
    until(lambda: status(a, A_TO_B) == "RUNNING", timeout_s=5)
    code, out = runmqsc(a, f"display chstatus({A_TO_B}) status msgs")
    assert code == 0 and re.search(
        rf"^AMQ8417I: Display Channel Status details\.\s+CHANNEL\({re.escape(A_TO_B)}\) "
        rf"CHLTYPE\(SDR\) CONNAME\({re.escape(b.conname)}\) CURRENT RQMNAME\(LQ02\) "
        rf"STATUS\(RUNNING\) SUBSTATE\(\w+\) XMITQ\(LQ02\) MSGS\(0\) BATCHES\(0\)$", out, re.M)
    code, out = runmqsc(a, f"stop channel({A_TO_B})")
    assert code == 0 and "AMQ8019I: Stop IBM MQ channel accepted." in out
    code, out = runmqsc(a, "start channel(NO.SUCH)", "stop channel(NO.SUCH)")
    assert code == 10 and out.count("AMQ8147E") == 2
    code, out = runmqsc(a, "display channel(*)")
    assert code == 0 and f"CHANNEL({A_TO_B}) CHLTYPE(SDR)" in out and \
        f"CHANNEL({B_TO_A}) CHLTYPE(RCVR)" in out
