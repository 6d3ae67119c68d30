"""Exchanges and bindings on IBM MQ over IBM's real ``ibmmq`` and the MQI emulator
(tests/mqemu; NOT IBM MQ): MQ's topic wildcards deliver every key as AMQP's topic, fanout and
direct bindings route it, surge's own DEFINE SUB lines deliver publications, MQSUB makes the
subscriptions on queue managers surge did not start, and senders publishing through the MQ
driver land each copy where the accounting expects it."""

from __future__ import annotations

import random

import pytest

from drivers.header import decode
from drivers.mq.preflight import MqPreflight
from drivers.mq.settings import MqSettings
from drivers.routing import KeyPicker
from orchestrator.specs.mqtopics import subscription_topic, subscriptions, topic_string
from orchestrator.specs.routing import topic_matches
from tests.unit.mqemu_helpers import (  # noqa: F401 (no_mq_threads_left: an autouse fixture)
    connected,
    connections,
    counted,
    drain,
    endpoint,
    make,
    no_mq_threads_left,
    sender,
    until,
)
from tests.unit.test_mq_topics import existing, topology_with

pytestmark = pytest.mark.timeout(90)
BOUND = ("orders1", "orders2", "orders3", "audit")


def bound_qmgr(qmgrs, topology):
    """QM1 with the bound queues and the topology's subscriptions, as surge's MQSC defines
    them (``Subscription.mqsc``)."""
    return qmgrs.start("QM1", mqsc=[f"DEFINE QLOCAL('{q}')" for q in BOUND]
                       + [sub.mqsc() for sub in subscriptions(topology)])


def publish(ibmmq, qmgr, topics: list[str]) -> None:
    """Publish message ``i`` (its body: ``i``) to ``topics[i]`` with the test's own
    connection."""
    C = ibmmq.CMQC
    with connected(ibmmq, qmgr, "", "") as qm:
        for i, topic in enumerate(topics):
            opened = ibmmq.Topic(qm, topic_string=topic, open_opts=C.MQOO_OUTPUT)
            opened.pub(str(i).encode())
            opened.close()


def test_mq_wildcards_deliver_every_key_as_amqp_bindings_route_it(emulated_ibmmq, qmgrs):
    rng = random.Random(7)
    words = ["eu", "us", "new", "paid", "x"]
    keys = sorted({".".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
                   for _ in range(80)})
    patterns = sorted({".".join(rng.choice([*words, "*", "#"]) for _ in range(rng.randint(1, 4)))
                       for _ in range(40)})
    bindings = [("topic", p) for p in patterns] + [("fanout", "ignored")] + \
        [("direct", k) for k in keys[::9]] + [("direct", "eu.none")]
    qmgr = qmgrs.start("QM1", mqsc=[line for i, (kind, key) in enumerate(bindings) for line in (
        f"DEFINE QLOCAL('Q{i}')",
        f"DEFINE SUB('S{i}') TOPICSTR('{subscription_topic(kind, 'shop', key)}') DEST('Q{i}')")])
    publish(emulated_ibmmq, qmgr, [topic_string("shop", key) for key in keys])
    partial = 0  # topic bindings that route some keys and not others
    for i, (kind, pattern) in enumerate(bindings):
        routed = {n for n, key in enumerate(keys)
                  if kind == "fanout" or (kind == "direct" and pattern == key)
                  or (kind == "topic" and topic_matches(pattern, key))}
        got = {int(body) for body in drain(emulated_ibmmq, qmgr, f"Q{i}")}
        assert got == routed, (kind, pattern)
        partial += kind == "topic" and 0 < len(routed) < len(keys)
    assert partial >= 10


def test_on_queue_managers_surge_did_not_start_the_subscriptions_are_made_with_mqsub(
        emulated_ibmmq, qmgrs, tmp_path):
    qmgr = qmgrs.start("QM1", mqsc=["DEFINE QLOCAL('orders1')"])
    provisioner = existing(tmp_path, qmgr.conname)
    subs = provisioner.subscriptions()
    endpoints = [m.endpoint for m in provisioner.up()]
    check = MqPreflight(endpoints, ["audit"], MqSettings.from_json(
        provisioner.client_settings()), load=lambda: emulated_ibmmq)
    with pytest.raises(LookupError, match=r"SURGE\.all\.2\.audit \(queue audit\)"):
        check.subscribe(subs)
    qmgr.admin("DEFINE QLOCAL('audit')")
    check.subscribe(subs)
    check.subscribe(subs)  # made once, resumed after
    assert sorted(qmgr.admin("DISPLAY SUB(*)")[0]) == [
        "SUB(SURGE.all.1.orders1) TOPICSTR(all/#) DEST(orders1) DURABLE(YES)",
        "SUB(SURGE.all.2.audit) TOPICSTR(all/#) DEST(audit) DURABLE(YES)"]  # kept at close
    assert connections(qmgr) == []
    publish(emulated_ibmmq, qmgr, ["all/x"])
    assert drain(emulated_ibmmq, qmgr, "orders1") == drain(emulated_ibmmq, qmgr, "audit") == \
        [b"0"]


def test_a_sender_publishes_each_message_to_its_keys_topic_and_every_copy_lands(
        emulated_ibmmq, qmgrs):
    topology = topology_with()
    qmgr = bound_qmgr(qmgrs, topology)
    keys = ("eu.new", "eu.paid", "us.new.paid", "ca.new")
    driver = make(emulated_ibmmq, qmgr, queue="orders1", exchange="shop", routing_keys=keys,
                  key_order="random")
    driver.add_sender(sender(driver, rate=0, limit=400, producer_id=3), endpoint(qmgr),
                      ["orders1"])
    until(lambda: counted(driver, "sent") == 400)
    driver.stop(3)
    picker = KeyPicker(len(keys), "random")
    expected: dict[str, list[int]] = {q: [] for q in BOUND}
    for seq in range(400):
        for queue in topology.routes("shop", keys[picker.pick(3, seq)]):
            expected[queue].append(seq)
    for queue, seqs in expected.items():
        assert [decode(body)[1] for body in drain(emulated_ibmmq, qmgr, queue)] == seqs, queue
    assert expected["orders1"] and expected["orders2"] and expected["orders3"]
    assert not expected["audit"]  # shop is not bound to audit


def test_a_fanout_exchange_gives_every_bound_queue_each_message(emulated_ibmmq, qmgrs):
    qmgr = bound_qmgr(qmgrs, topology_with())
    driver = make(emulated_ibmmq, qmgr, queue="audit", exchange="all")
    driver.add_sender(sender(driver, rate=0, limit=25), endpoint(qmgr))
    until(lambda: counted(driver, "sent") == 25)
    driver.stop(3)
    assert [decode(body)[1] for body in drain(emulated_ibmmq, qmgr, "audit")] == list(range(25))
    assert drain(emulated_ibmmq, qmgr, "orders1") == []
