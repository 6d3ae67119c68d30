"""Clusters of EMULATED queue managers (tests/mqemu; NOT IBM MQ): a cluster-receiver channel
joins its queue manager to the cluster, and DISPLAY CLUSQMGR lists the running members."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = pytest.mark.timeout(60)


def clusrcvr(cluster: str) -> str:
    return (f"define channel('{cluster}_+QMNAME+') chltype(clusrcvr) trptype(tcp) "
            f"conname('127.0.0.1') cluster('{cluster}') replace")


def members(qmgr) -> list[str]:
    lines = qmgr.admin("DISPLAY CLUSQMGR(*)")[0]
    return sorted(line.split(")")[0].removeprefix("CLUSQMGR(") for line in lines
                  if line.startswith("CLUSQMGR("))


def test_members_of_a_cluster_see_each_other_until_one_ends(qmgrs):
    qm1 = qmgrs.start("QM1", mqsc=[clusrcvr("UC01")])
    qm2 = qmgrs.start("QM2", mqsc=[clusrcvr("UC01")])
    other = qmgrs.start("QM3", mqsc=[clusrcvr("OTHER")])
    assert members(qm1) == ["QM1", "QM2"]
    assert members(qm2) == ["QM1", "QM2"]
    assert members(other) == ["QM3"]
    assert f"CONNAME(127.0.0.1({qm2.port}))" in " ".join(qm1.admin("DISPLAY CLUSQMGR(QM2)")[0])
    qm2.stop()
    assert members(qm1) == ["QM1"]


def test_a_queue_manager_outside_any_cluster_has_no_cluster_queue_managers(qmgrs):
    lone = qmgrs.start("QM1")
    assert lone.admin("DISPLAY CLUSQMGR(*)")[0][0].startswith("AMQ8147E")


# -- cluster queues and workload balancing (tests/mqemu/cluster.py) ----------------------------


def cluster_qmgr(qmgrs, name: str, *queue_attrs: str):
    """A member of cluster UC01 with cluster queue PERF (``queue_attrs`` added to its DEFINE;
    none: no instance of PERF here)."""
    mqsc = [clusrcvr("UC01")]
    if queue_attrs:
        mqsc.append("DEFINE QLOCAL(PERF) CLUSTER(UC01) " + " ".join(queue_attrs))
    return qmgrs.start(name, mqsc=mqsc)


def connect(ibmmq, qmgr):
    cd = ibmmq.CD(ChannelName=b"DEV.APP.SVRCONN", ConnectionName=qmgr.conname.encode(),
                  ChannelType=ibmmq.CMQXC.MQCHT_CLNTCONN, TransportType=ibmmq.CMQXC.MQXPT_TCP)
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options(qmgr.name, cd=cd)
    return qm


def depth(qmgr, queue: str = "PERF") -> int:
    line = next(line for line in qmgr.admin(f"DISPLAY QLOCAL({queue}) CURDEPTH")[0]
                if line.startswith("QUEUE("))
    return int(line.split("CURDEPTH(")[1].split(")")[0])


def depths_once_delivered(members, expected_total: int, timeout_s: float = 10.0,
                          queue: str = "PERF") -> list[int]:
    """Each member's depth of ``queue`` once the channels delivered ``expected_total``
    messages."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [depth(m, queue) for m in members]
        if sum(found) >= expected_total or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def put_many(ibmmq, qmgr, count: int, bind: int, senders: int = 1) -> list[bytes]:
    """``count`` messages put to PERF by ``senders`` handles (each opened with ``bind``) in
    turn; their MsgIds."""
    C = ibmmq.CMQC
    qm = connect(ibmmq, qmgr)
    handles = [ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | bind) for _ in range(senders)]
    ids = []
    for n in range(count):
        md = ibmmq.MD()
        handles[n % senders].put(f"m{n}".encode(), md)
        ids.append(bytes(md.MsgId))
    for handle in handles:
        handle.close()
    qm.disconnect()
    return ids


def drain(ibmmq, qmgr, name: str = "PERF") -> list[bytes]:
    """Every message on ``qmgr``'s queue ``name`` (its instance of PERF); their MsgIds."""
    C = ibmmq.CMQC
    qm = connect(ibmmq, qmgr)
    queue = ibmmq.Queue(qm, name, C.MQOO_INPUT_SHARED)
    ids = []
    while True:
        md = ibmmq.MD()
        try:
            queue.get(None, md, ibmmq.GMO(Options=C.MQGMO_NO_WAIT))
        except ibmmq.MQMIError as error:
            assert error.reason == C.MQRC_NO_MSG_AVAILABLE
            break
        ids.append(bytes(md.MsgId))
    queue.close()
    qm.disconnect()
    return ids


def test_display_qcluster_lists_every_running_members_instance(qmgrs):
    qm1 = cluster_qmgr(qmgrs, "QM1", "DEFBIND(NOTFIXED)")
    qm2 = cluster_qmgr(qmgrs, "QM2")
    cluster_qmgr(qmgrs, "QM3", "CLWLUSEQ(ANY)")
    listed = qm2.admin("DISPLAY QCLUSTER(*)")[0]
    assert [line.split("CLUSQMGR(")[1].split(")")[0] for line in listed] == ["QM1", "QM3"]
    assert all("TYPE(QCLUSTER) CLUSTER(UC01)" in line for line in listed)
    assert "DEFBIND(NOTFIXED)" in listed[0] and "DEFBIND(OPEN)" in listed[1]
    local = qm1.admin("DISPLAY QLOCAL(PERF) CLUSTER")[0][0]
    assert "CLUSTER(UC01) DEFBIND(NOTFIXED) CLWLUSEQ(QMGR)" in local
    assert qm1.admin("DEFINE QLOCAL(PERF) DEFBIND(SOMETIMES) CLUSTER(UC01) REPLACE")[0][0] \
        .startswith("AMQ8405E")


def test_bind_not_fixed_spreads_round_robin_and_bind_on_open_keeps_one_instance(
        emulated_ibmmq, qmgrs):
    """A sender on a member without an instance: not fixed, every message goes to the least
    recently chosen instance (an even spread); bound on open, all of a handle's go to one."""
    C = emulated_ibmmq.CMQC
    members = [cluster_qmgr(qmgrs, name, "") for name in ("QM1", "QM2", "QM3")]
    gateway = cluster_qmgr(qmgrs, "GW")
    ids = put_many(emulated_ibmmq, gateway, 300, C.MQOO_BIND_NOT_FIXED)
    assert depths_once_delivered(members, 300) == [100, 100, 100]
    got = [drain(emulated_ibmmq, m) for m in members]
    assert sorted(i for ids_ in got for i in ids_) == sorted(ids)  # every MsgId, exactly once
    put_many(emulated_ibmmq, gateway, 90, C.MQOO_BIND_ON_OPEN)
    assert sorted(depths_once_delivered(members, 90)) == [0, 0, 90]
    for member in members:
        drain(emulated_ibmmq, member)
    # six senders bound on open over three instances: two handles each
    put_many(emulated_ibmmq, gateway, 600, C.MQOO_BIND_ON_OPEN, senders=6)
    assert depths_once_delivered(members, 600) == [200, 200, 200]
    for member in members:
        drain(emulated_ibmmq, member)
    # four senders bound on open over three instances: 2 + 1 + 1 handles, uneven
    put_many(emulated_ibmmq, gateway, 400, C.MQOO_BIND_ON_OPEN, senders=4)
    assert sorted(depths_once_delivered(members, 400)) == [100, 100, 200]


def test_bind_as_q_def_follows_defbind(emulated_ibmmq, qmgrs):
    C = emulated_ibmmq.CMQC
    members = [cluster_qmgr(qmgrs, name, "DEFBIND(NOTFIXED)") for name in ("QM1", "QM2")]
    gateway = cluster_qmgr(qmgrs, "GW")
    put_many(emulated_ibmmq, gateway, 40, C.MQOO_BIND_AS_Q_DEF)
    assert depths_once_delivered(members, 40) == [20, 20]


def test_clwluseq_local_keeps_puts_on_the_local_instance_and_any_spreads_them(
        emulated_ibmmq, qmgrs):
    C = emulated_ibmmq.CMQC
    local = [cluster_qmgr(qmgrs, "QM1", ""), cluster_qmgr(qmgrs, "QM2", "")]
    put_many(emulated_ibmmq, local[0], 50, C.MQOO_BIND_NOT_FIXED)
    assert depths_once_delivered(local, 50) == [50, 0]  # CLWLUSEQ(QMGR): the qmgr's LOCAL
    for member in local:
        drain(emulated_ibmmq, member)
        member.admin("DEFINE QLOCAL(PERF) CLUSTER(UC01) CLWLUSEQ(ANY) REPLACE")
    put_many(emulated_ibmmq, local[0], 50, C.MQOO_BIND_NOT_FIXED)
    assert depths_once_delivered(local, 50) == [25, 25]


def test_a_stopped_member_is_not_chosen_and_its_waiting_messages_are_not_lost(
        emulated_ibmmq, qmgrs):
    C = emulated_ibmmq.CMQC
    qm1, qm2, qm3 = (cluster_qmgr(qmgrs, name, "") for name in ("QM1", "QM2", "QM3"))
    gateway = cluster_qmgr(qmgrs, "GW")
    put_many(emulated_ibmmq, gateway, 30, C.MQOO_BIND_NOT_FIXED)
    assert depths_once_delivered([qm1, qm2, qm3], 30) == [10, 10, 10]
    qm2.stop()
    ids = put_many(emulated_ibmmq, gateway, 40, C.MQOO_BIND_NOT_FIXED)
    assert depths_once_delivered([qm1, qm3], 60) == [30, 30]
    got = drain(emulated_ibmmq, qm1) + drain(emulated_ibmmq, qm3)
    assert set(ids) <= set(got) and len(got) == len(set(got)) == 60


def test_put1_and_a_put_to_a_slow_member_complete_at_once_with_the_resolved_queue_manager(
        emulated_ibmmq, qmgrs):
    C = emulated_ibmmq.CMQC
    remote = cluster_qmgr(qmgrs, "QM1", "")
    gateway = cluster_qmgr(qmgrs, "GW")
    qm = connect(emulated_ibmmq, gateway)
    pmo = emulated_ibmmq.PMO()
    md = emulated_ibmmq.MD()
    qm.put1("PERF", b"one", md, pmo)
    assert pmo.ResolvedQMgrName.rstrip(b"\0 ") == b"QM1"
    os.kill(remote.process.pid, signal.SIGSTOP)  # slow: it does not answer at all
    try:
        queue = emulated_ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | C.MQOO_BIND_NOT_FIXED)
        started = time.monotonic()
        for n in range(20):
            queue.put(b"later %d" % n)
        assert time.monotonic() - started < 2.0  # onto the transmission queue, MQCC_OK
    finally:
        os.kill(remote.process.pid, signal.SIGCONT)
    assert depths_once_delivered([remote], 21) == [21]
    qm.disconnect()


def test_inquiring_a_cluster_queue_resolved_to_a_remote_instance(emulated_ibmmq, qmgrs):
    """MQINQ and clusters: no local instance, only the cluster queue's own attributes; the
    depth selector completes with a warning and MQIAV_NOT_APPLICABLE."""
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    cluster_qmgr(qmgrs, "QM1", "DEFBIND(NOTFIXED)")
    gateway = cluster_qmgr(qmgrs, "GW")
    local = cluster_qmgr(qmgrs, "QM2", "CLWLUSEQ(ANY)")
    qm = connect(ibmmq, gateway)
    queue = ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | C.MQOO_INQUIRE)
    assert queue.inquire(C.MQIA_Q_TYPE) == C.MQQT_CLUSTER
    assert queue.inquire(C.MQIA_DEF_BIND) == C.MQBND_BIND_NOT_FIXED
    with pytest.raises(ibmmq.MQMIError) as raised:
        queue.inquire(C.MQIA_CURRENT_Q_DEPTH)
    assert (raised.value.comp, raised.value.reason) == (C.MQCC_WARNING,
                                                        C.MQRC_SELECTOR_NOT_FOR_TYPE)
    # opening for input needs a local instance
    with pytest.raises(ibmmq.MQMIError) as raised:
        ibmmq.Queue(qm, "PERF", C.MQOO_INPUT_SHARED)
    assert raised.value.reason == C.MQRC_UNKNOWN_OBJECT_NAME
    qm.disconnect()
    # with a local instance, its attributes (the local queue's depth) whatever CLWLUSEQ says
    qm = connect(ibmmq, local)
    queue = ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | C.MQOO_INQUIRE)
    assert queue.inquire(C.MQIA_Q_TYPE) == C.MQQT_LOCAL
    assert queue.inquire(C.MQIA_CURRENT_Q_DEPTH) == 0
    qm.disconnect()


@pytest.mark.parametrize(("bind", "spread"),
                         [("on-open", [0, 90, 90]), ("not-fixed", [60, 60, 60])])
def test_surges_mq_senders_open_bound_as_the_workload_says(emulated_ibmmq, qmgrs, bind, spread):
    """surge's MQ driver (workload.bind -> MQOO_BIND_ON_OPEN / MQOO_BIND_NOT_FIXED) over a
    uniform cluster's queue instances treated alike (CLWLUSEQ(ANY)): two senders bound on open
    fill two of three instances, not fixed every instance gets a third."""
    from drivers.message import PayloadBuilder
    from drivers.mq.driver import MqDriver
    from drivers.mq.settings import MqSettings
    from drivers.protocol import Destination
    from drivers.workers import Recorder, SenderRole
    members = [cluster_qmgr(qmgrs, name, "CLWLUSEQ(ANY)") for name in ("QM1", "QM2", "QM3")]
    target = f"mq://{members[0].conname}/QM1"
    driver = MqDriver(Destination(endpoints=(target,), queue="PERF", bind=bind), Recorder(),
                      MqSettings(channel="PERF.APP.CHL"), mqi=emulated_ibmmq, get_wait_ms=50)
    driver.start()
    try:
        for producer in (1, 2):
            role = driver.call(lambda p=producer: SenderRole(p, 0, PayloadBuilder(100),
                                                             driver.recorder, limit=90))
            driver.add_sender(role, target)
        assert sorted(depths_once_delivered(members, 180)) == spread
    finally:
        driver.stop()


def test_a_uniform_clusters_reconnectable_client_may_not_bind_on_open(emulated_ibmmq, qmgrs):
    """MQRC_RECONNECT_INCOMPATIBLE (2547): the cluster's balancing may move the client away from
    the instance it is bound to; bound not fixed, or reconnecting to its own queue manager only,
    it may open the queue."""
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    mqsc = [clusrcvr("UC01"), "DEFINE QLOCAL(PERF) CLUSTER(UC01) CLWLUSEQ(ANY)"]
    member = qmgrs.start("QM1", mqsc=mqsc, options=("--uniform", "UC01"))
    qmgrs.start("QM2", mqsc=mqsc, options=("--uniform", "UC01"))
    cd = ibmmq.CD(ChannelName=b"APP.SVRCONN", ConnectionName=member.conname.encode())
    for reconnect, bind, refused in ((C.MQCNO_RECONNECT, C.MQOO_BIND_ON_OPEN, True),
                                     (C.MQCNO_RECONNECT, C.MQOO_BIND_NOT_FIXED, False),
                                     (C.MQCNO_RECONNECT_Q_MGR, C.MQOO_BIND_ON_OPEN, False)):
        qm = ibmmq.QueueManager(None)
        qm.connect_with_options("QM1", cd=cd, opts=reconnect)
        if refused:
            with pytest.raises(ibmmq.MQMIError) as error:
                ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | bind)
            assert error.value.reason == C.MQRC_RECONNECT_INCOMPATIBLE
        else:
            ibmmq.Queue(qm, "PERF", C.MQOO_OUTPUT | bind).close()
        qm.disconnect()


# -- other queue managers' queues (tests/mqemu/remote.py) ---------------------------------------


def test_remote_queues_and_replies_to_another_queue_manager_arrive_there_once(emulated_ibmmq,
                                                                              qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qm2 = qmgrs.start("QM2", mqsc=["DEFINE QLOCAL(TARGET)"])
    qm1 = qmgrs.start("QM1", mqsc=["DEFINE QREMOTE(TO.QM2) RNAME(TARGET) RQMNAME(QM2)",
                                   "DEFINE QLOCAL(REPLY)"])
    assert qm1.admin("DISPLAY QREMOTE(*)")[0] == [
        "QUEUE(TO.QM2) TYPE(QREMOTE) RNAME(TARGET) RQMNAME(QM2)"]
    conn = connect(ibmmq, qm1)
    by_definition = ibmmq.Queue(conn, "TO.QM2", C.MQOO_OUTPUT)
    sent = []
    for n in range(5):
        md = ibmmq.MD(ReplyToQ=b"REPLY")
        by_definition.put(f"d{n}".encode(), md)
        sent.append(bytes(md.MsgId))
    by_definition.close()
    direct = ibmmq.OD(ObjectName=b"TARGET", ObjectQMgrName=b"QM2")
    for n in range(5):
        md = ibmmq.MD()
        conn.put1(direct, f"q{n}".encode(), md)
        sent.append(bytes(md.MsgId))
    assert depths_once_delivered([qm2], 10, queue="TARGET") == [10]
    assert sorted(drain(ibmmq, qm2, "TARGET")) == sorted(sent)  # each once, MsgId as put
    with pytest.raises(ibmmq.MQMIError) as refused:
        ibmmq.Queue(conn, "TO.QM2", C.MQOO_INPUT_SHARED)
    assert refused.value.reason == 2045  # MQRC_OPTION_NOT_VALID_FOR_TYPE
    with pytest.raises(ibmmq.MQMIError) as unknown:
        conn.put1(ibmmq.OD(ObjectName=b"TARGET", ObjectQMgrName=b"QM9"), b"x")
    assert unknown.value.reason == C.MQRC_UNKNOWN_OBJECT_Q_MGR
    conn.disconnect()
    # a responder on QM2 answers to the ReplyToQ/ReplyToQMgr of a request put on QM1
    responder = connect(ibmmq, qm2)
    reply = ibmmq.OD(ObjectName=b"REPLY", ObjectQMgrName=b"QM1")
    responder.put1(reply, b"answer", ibmmq.MD(CorrelId=sent[0]))
    responder.disconnect()
    assert depths_once_delivered([qm1], 1, queue="REPLY") == [1]
