"""Automatic client reconnection of the MQI emulator (tests/mqemu; NOT IBM MQ) with
subscriptions and temporary dynamic queues: what the reconnect replays besides MQOPENs, through
IBM's ``ibmmq`` over two emulated queue managers."""

from __future__ import annotations

import pytest

from tests.unit.test_mqemu_verbs import get_wait, reason

pytestmark = pytest.mark.timeout(60)


def reconnectable(ibmmq, option: int, *qmgrs):
    C = ibmmq.CMQC
    cd = ibmmq.CD(ChannelName=b"C", ConnectionName=",".join(q.conname for q in qmgrs).encode())
    qm = ibmmq.QueueManager(None)
    qm.connect_with_options("*G", cd=cd, cno=ibmmq.CNO(Options=option
                                                       | C.MQCNO_HANDLE_SHARE_BLOCK))
    return qm


def publish(ibmmq, qm, topic_string: str, body: bytes) -> None:
    topic = ibmmq.Topic(qm, topic_string=topic_string)
    topic.open(open_opts=ibmmq.CMQC.MQOO_OUTPUT)
    topic.pub(body)
    topic.close()


def listed(qmgr, command: str, needle: str) -> list[str]:
    return [line for line in qmgr.admin(command)[0] if needle in line]


def test_a_dynamic_queue_and_non_durable_subscriptions_come_back_on_the_new_queue_manager(
        emulated_ibmmq, qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    first, second = (qmgrs.start(name, mqsc=["DEFINE QLOCAL(EU)"]) for name in ("QMA", "QMB"))
    qm = reconnectable(ibmmq, C.MQCNO_RECONNECT, first, second)
    reply = ibmmq.Queue(qm, ibmmq.OD(ObjectName=b"SYSTEM.DEFAULT.MODEL.QUEUE",
                                     DynamicQName=b"REPLY.*"),
                        C.MQOO_INPUT_EXCLUSIVE | C.MQOO_OUTPUT)
    dynamic = reply.get_name()
    managed = ibmmq.Subscription(qm)
    managed.sub(topic_string="news/+")
    eu = ibmmq.Queue(qm, "EU", C.MQOO_INPUT_SHARED)
    to_queue = ibmmq.Subscription(qm)
    prices = ibmmq.SD(Options=C.MQSO_CREATE | C.MQSO_NON_DURABLE)
    prices.set_vs("ObjectString", "prices/eu")
    to_queue.sub(sub_desc=prices, sub_queue=eu)
    topic = ibmmq.Topic(qm, topic_string="news/today")
    topic.open(open_opts=C.MQOO_OUTPUT)
    reply.put(b"lost with QMA")
    first.stop()
    # the get that meets the break runs again on QMB, where the queue is new and empty
    assert reason(ibmmq, lambda: reply.get(None, ibmmq.MD(), get_wait(ibmmq))) == \
        C.MQRC_NO_MSG_AVAILABLE
    assert listed(second, f"DISPLAY QLOCAL({dynamic})", f"QUEUE({dynamic})")  # same name
    reply.put(b"on QMB")
    assert reply.get(None, ibmmq.MD(), get_wait(ibmmq)) == b"on QMB"
    assert {line.split()[1] for line in second.admin("DISPLAY SUB(*)")[0]} == \
        {"TOPICSTR(news/+)", "TOPICSTR(prices/eu)"}
    topic.pub(b"headline")
    assert managed.get(None, ibmmq.MD(), get_wait(ibmmq, 1000)) == b"headline"
    publish(ibmmq, qm, "prices/eu", b"42")
    assert eu.get(None, ibmmq.MD(), get_wait(ibmmq, 1000)) == b"42"
    managed.close()
    assert listed(second, "DISPLAY SUB(*)", "news/+") == []  # closed: not made again later
    reply.close()
    assert second.admin(f"DISPLAY QLOCAL({dynamic})")[0][0].startswith("AMQ8147E")
    qm.disconnect()


def test_a_durable_subscription_needs_reconnect_q_mgr_and_is_resumed_there(
        emulated_ibmmq, qmgrs):
    ibmmq, C = emulated_ibmmq, emulated_ibmmq.CMQC
    qmgr = qmgrs.start("QMA", mqsc=["DEFINE QLOCAL(DEST)"])
    durable = ibmmq.SD(Options=C.MQSO_CREATE | C.MQSO_RESUME | C.MQSO_DURABLE)
    durable.set_vs("ObjectString", "orders/#")
    durable.set_vs("SubName", "ORDERS")
    anywhere = reconnectable(ibmmq, C.MQCNO_RECONNECT, qmgr)
    dest = ibmmq.Queue(anywhere, "DEST", C.MQOO_INPUT_SHARED)
    assert reason(ibmmq, lambda: ibmmq.Subscription(anywhere).sub(
        sub_desc=durable, sub_queue=dest)) == C.MQRC_RECONNECT_Q_MGR_REQD
    anywhere.disconnect()

    qm = reconnectable(ibmmq, C.MQCNO_RECONNECT_Q_MGR, qmgr)
    dest = ibmmq.Queue(qm, "DEST", C.MQOO_INPUT_SHARED)
    sub = ibmmq.Subscription(qm)
    sub.sub(sub_desc=durable, sub_queue=dest)
    assert qmgr.admin("STOP CONN(*)")[0][0].startswith("AMQ8458I")
    publisher = reconnectable(ibmmq, C.MQCNO_RECONNECT_DISABLED, qmgr)
    publish(ibmmq, publisher, "orders/1", b"kept")
    # back on QMA: the durable subscription was resumed under the same handle
    assert dest.get(None, ibmmq.MD(), get_wait(ibmmq, 1000)) == b"kept"
    assert reason(ibmmq, lambda: ibmmq.Subscription(publisher).sub(sub_desc=durable)) == \
        C.MQRC_SUBSCRIPTION_IN_USE
    sub.close(sub_close_options=C.MQCO_REMOVE_SUB)
    assert listed(qmgr, "DISPLAY SUB(*)", "ORDERS") == []
    publisher.disconnect()
    qm.disconnect()
