"""Uniform-cluster application balancing on EMULATED queue managers (tests/mqemu/rebalance.py;
NOT IBM MQ), with IBM's real ``ibmmq`` over the emulator's library: when a member starts,
reconnectable clients of a QM group move to it per application name through automatic client
reconnection, and no message is lost or duplicated on the way."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.mqemu import mqi

pytestmark = pytest.mark.timeout(90)
CLUSTER, GROUP = "UC01", "UC"
INTERVAL_S = 0.5  # the emulated balancing interval (MQ's own takes tens of seconds)
SETTLE_S = 4 * INTERVAL_S + 2.0  # a round to ask, the clients' next calls, reconnects


def uniform_member(qmgrs, name: str, balance_timeout_s: float = 10.0):
    """A member of uniform cluster UC01 (its cluster-receiver channel, as surge's -ic file
    has it) balancing every INTERVAL_S."""
    return qmgrs.start(name, mqsc=[
        f"DEFINE CHANNEL('{CLUSTER}_{name}') CHLTYPE(CLUSRCVR) TRPTYPE(TCP) "
        f"CONNAME('127.0.0.1') CLUSTER('{CLUSTER}') REPLACE", "DEFINE QLOCAL(Q1)"],
        options=("--uniform", CLUSTER, "--rebalance-interval", str(INTERVAL_S),
                 "--balance-timeout", str(balance_timeout_s)))


def write_ccdt(path: Path, members) -> str:
    """A JSON CCDT with one channel of QM group GROUP per member (document 000's); its URL.
    Rewritten as members start: clients read it again when they reconnect."""
    path.write_text(json.dumps({"channel": [{
        "name": "PERF.APP.CHL", "type": "clientConnection",
        "clientConnection": {"connection": [{"host": "127.0.0.1", "port": qm.port}],
                             "queueManager": GROUP}} for qm in members]}), encoding="utf-8")
    return f"file://{path}"


class Client:
    """One application instance: a connection to ``*GROUP`` through the CCDT with APPLTAG
    ``appl`` and reconnect ``options``, its event handler's events, its queue Q1."""

    def __init__(self, ibmmq, url: str, appl: str, options: int):
        C = self.C = ibmmq.CMQC
        self.ibmmq, self.appl, self.events = ibmmq, appl, []
        cno = ibmmq.CNO(Options=options | C.MQCNO_HANDLE_SHARE_BLOCK)
        cno.CCDTUrl, cno.ApplName, cno.Version = url, appl.encode(), 7
        self.qm = ibmmq.QueueManager(None)
        self.qm.connect_with_options(f"*{GROUP}", cno=cno)
        self.qm.cb(operation=C.MQOP_REGISTER, cbd=ibmmq.CBD(
            CallbackType=C.MQCBT_EVENT_HANDLER,
            CallbackFunction=lambda **kw: self.events.append((kw["cbc"].CompCode,
                                                              kw["cbc"].Reason))))
        self.queue = ibmmq.Queue(self.qm, "Q1", C.MQOO_OUTPUT | C.MQOO_INPUT_SHARED)

    def where(self) -> str:
        """The queue manager this connection is on now."""
        return self.qm.inquire(self.C.MQCA_Q_MGR_NAME).decode().rstrip("\0 ")

    def get(self, wait_ms: int, syncpoint: bool) -> bytes | None:
        C = self.C
        gmo = self.ibmmq.GMO(Options=C.MQGMO_WAIT | (
            C.MQGMO_SYNCPOINT if syncpoint else C.MQGMO_NO_SYNCPOINT), WaitInterval=wait_ms)
        try:
            return self.queue.get(None, self.ibmmq.MD(), gmo)
        except self.ibmmq.MQMIError as error:
            if error.reason == C.MQRC_NO_MSG_AVAILABLE:
                return None
            raise


def send(client: Client, name: str, sent: list[bytes], stop: threading.Event) -> None:
    """Put numbered messages until ``stop``; every put that returned is in ``sent``."""
    C = client.C
    for number in range(100_000):
        if stop.is_set():
            return
        body = f"{name}-{number}".encode()
        client.queue.put(body, client.ibmmq.MD(),
                         client.ibmmq.PMO(Options=C.MQPMO_NO_SYNCPOINT | C.MQPMO_NEW_MSG_ID))
        sent.append(body)
        time.sleep(0.02)


def receive(client: Client, got: list[bytes], stop: threading.Event) -> None:
    """Get under syncpoint, committing up to three at a time (and whenever none came); only
    what a commit kept is in ``got`` (a unit of work backed out in a move comes back)."""
    C, batch = client.C, []
    while not stop.is_set() or batch:
        body = client.get(200, syncpoint=True) if not stop.is_set() else None
        if body is not None:
            batch.append(body)
        if batch and (body is None or len(batch) == 3):
            try:
                client.qm.commit()
                got.extend(batch)
            except client.ibmmq.MQMIError as error:
                assert error.reason == C.MQRC_BACKED_OUT, error
            batch = []


def appltags(qmgr) -> Counter[str]:
    """Connections per APPLTAG on ``qmgr`` (DISPLAY CONN)."""
    return Counter(re.search(r"APPLTAG\(([^)]*)\)", line).group(1)
                   for line in qmgr.admin("DISPLAY CONN(*)")[0] if line.startswith("CONN("))


def wait_for(condition, timeout_s: float) -> float:
    """Seconds until ``condition()`` held (fails after ``timeout_s``)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, "condition not met in time"
        time.sleep(0.05)
    return time.monotonic() - started


def test_the_reconnect_options_the_emulator_reads_are_ibmmqs(emulated_ibmmq):
    C = emulated_ibmmq.CMQC
    assert (mqi.MQCNO_RECONNECT, mqi.MQCNO_RECONNECT_Q_MGR) == (C.MQCNO_RECONNECT,
                                                                C.MQCNO_RECONNECT_Q_MGR)


def test_a_starting_member_gets_half_of_each_application_and_no_message_is_lost(
        emulated_ibmmq, qmgrs, tmp_path):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1 = uniform_member(qmgrs, "QM1")
    ccdt = tmp_path / "ccdt.json"
    url = write_ccdt(ccdt, [qm1])
    senders = [Client(ibmmq, url, "app.sender", C.MQCNO_RECONNECT) for _ in range(6)]
    receivers = [Client(ibmmq, url, "app.receiver", C.MQCNO_RECONNECT) for _ in range(6)]
    pinned = [Client(ibmmq, url, "app.pinned", option) for option in (
        C.MQCNO_RECONNECT_DISABLED, C.MQCNO_RECONNECT_DISABLED, C.MQCNO_RECONNECT_Q_MGR,
        C.MQCNO_RECONNECT_Q_MGR)]
    stop_sending, stop_receiving = threading.Event(), threading.Event()
    sent: list[list[bytes]] = [[] for _ in senders]
    got: list[list[bytes]] = [[] for _ in receivers]
    threads = [threading.Thread(target=send, args=(c, f"s{i}", sent[i], stop_sending))
               for i, c in enumerate(senders)]
    threads += [threading.Thread(target=receive, args=(c, got[i], stop_receiving))
                for i, c in enumerate(receivers)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        assert appltags(qm1) == {"app.sender": 6, "app.receiver": 6, "app.pinned": 4}
        qm2 = uniform_member(qmgrs, "QM2")
        write_ccdt(ccdt, [qm1, qm2])  # as document 000 adds members to the CCDT
        took = wait_for(lambda: appltags(qm2) == {"app.sender": 3, "app.receiver": 3},
                        SETTLE_S)
        time.sleep(3 * INTERVAL_S)  # balanced: nothing else moves
        assert appltags(qm1) == {"app.sender": 3, "app.receiver": 3, "app.pinned": 4}
        assert appltags(qm2) == {"app.sender": 3, "app.receiver": 3}
    finally:
        stop_sending.set()
        for thread in threads[:len(senders)]:
            thread.join(10)
        wait_for(lambda: all(q.admin("DISPLAY QLOCAL(Q1)")[0][0].find("CURDEPTH(0)") > 0
                             for q in qmgrs.running), 20)
        stop_receiving.set()
        for thread in threads:
            thread.join(10)
    assert took < SETTLE_S
    where = {id(c): c.where() for c in senders + receivers + pinned}
    for client in senders + receivers:
        moved = where[id(client)] == "QM2"
        assert client.events == ([(C.MQCC_WARNING, C.MQRC_Q_MGR_RECONNECT_REQUESTED),
                                  (C.MQCC_WARNING, C.MQRC_RECONNECTING),
                                  (C.MQCC_OK, C.MQRC_RECONNECTED)] if moved else [])
    assert all(where[id(c)] == "QM1" and c.events == [] for c in pinned)
    everything_sent = [body for bodies in sent for body in bodies]
    everything_got = [body for bodies in got for body in bodies]
    assert len(everything_sent) > 6 * 50  # every sender put for seconds, moved or not
    assert Counter(everything_got) == Counter(everything_sent)  # none lost, none twice
    for client in senders + receivers + pinned:
        client.qm.disconnect()


def test_a_client_in_a_unit_of_work_moves_only_after_the_balance_timeout_backing_it_out(
        emulated_ibmmq, qmgrs, tmp_path):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1 = uniform_member(qmgrs, "QM1", balance_timeout_s=3.0)
    ccdt = tmp_path / "ccdt.json"
    url = write_ccdt(ccdt, [qm1])
    busy = [Client(ibmmq, url, "app.uow", C.MQCNO_RECONNECT) for _ in range(2)]
    for client in busy:
        client.queue.put(b"uncommitted", ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    qm2 = uniform_member(qmgrs, "QM2", balance_timeout_s=3.0)
    write_ccdt(ccdt, [qm1, qm2])
    wait_for(lambda: "MOVING(QM2)" in " ".join(qm1.admin("DISPLAY APSTATUS(*) TYPE(LOCAL)")[0]),
             SETTLE_S)
    for client in busy:  # calls within the balance timeout: no one moves
        client.queue.put(b"still in it", ibmmq.MD(), ibmmq.PMO(Options=C.MQPMO_SYNCPOINT))
    assert appltags(qm1) == {"app.uow": 2} and not appltags(qm2)
    time.sleep(3.0 + INTERVAL_S)  # past the balance timeout: the next call moves it
    outcomes = []
    for client in busy:
        try:
            client.qm.commit()
            outcomes.append("committed")
        except ibmmq.MQMIError as error:
            outcomes.append((error.comp, error.reason))
    assert sorted(outcomes, key=str) == sorted(
        ["committed", (C.MQCC_WARNING, C.MQRC_BACKED_OUT)], key=str)
    assert [c.where() for c in busy].count("QM2") == 1
    depths = [int(re.search(r"CURDEPTH\((\d+)\)", q.admin("DISPLAY QLOCAL(Q1)")[0][0]).group(1))
              for q in (qm1, qm2)]
    assert depths == [2, 0]  # the committed pair stays; the backed-out pair is gone
    for client in busy:
        client.qm.disconnect()


def test_display_apstatus_tells_movable_connections_from_pinned_ones(
        emulated_ibmmq, qmgrs, tmp_path):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm1 = uniform_member(qmgrs, "QM1")
    url = write_ccdt(tmp_path / "ccdt.json", [qm1])
    clients = [Client(ibmmq, url, "free", C.MQCNO_RECONNECT),
               Client(ibmmq, url, "pinned", C.MQCNO_RECONNECT_Q_MGR)]
    lines = qm1.admin("DISPLAY APSTATUS(*) TYPE(LOCAL)")[0]
    assert sorted(re.sub(r" CONN\(\w+\)", "", line) for line in lines) == [
        "APPLNAME(free) MOVABLE(YES) MOVING()", "APPLNAME(pinned) MOVABLE(NO) MOVING()"]
    for client in clients:
        client.qm.disconnect()
