"""Exchanges and bindings on IBM MQ: the topic strings and subscriptions they map to (checked
against AMQP's routing rules by MQ's own wildcard rules, as the MQI stand-in implements them),
the MQSC of provisioned queue managers, MQSUB on queue managers surge did not start, senders
publishing through the MQ driver with each copy where the accounting expects it, and what
MQ's topics cannot do refused at validate time."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from drivers.header import decode
from drivers.mq.preflight import MqPreflight
from drivers.mq.settings import MqSettings
from drivers.routing import KeyPicker
from orchestrator.errors import ProvisionError, SpecError
from orchestrator.specs.loader import load_scenario, load_topology
from orchestrator.specs.mqtopics import (
    Subscription,
    subscription_topic,
    subscriptions,
    topic_string,
)
from orchestrator.specs.routing import topic_matches
from tests.unit.mqi_standin import CMQC, StandIn
from tests.unit.mqi_standin import topic_matches as mq_matches
from tests.unit.test_mq_driver import QM1, counted, make, sender, until
from topologies.mq import manifests, uniform
from topologies.mq.existing import ExistingQueueManagers

ROOT = Path(__file__).resolve().parents[2]
ROUTING = """
queues: [{name: 'orders%d', count: 3}, {name: audit}]
exchanges: [{name: shop, type: topic}, {name: all, type: fanout}, {name: exact, type: direct}]
bindings:
  - {exchange: shop, queue: orders1, routing_key: 'eu.*'}
  - {exchange: shop, queue: orders2, routing_key: '#.paid'}
  - {exchange: shop, queue: orders3, routing_key: 'us.#'}
  - {exchange: all, queue: audit}
  - {exchange: exact, queue: audit, routing_key: eu.new}
"""


def topology_with(routing: str = ROUTING, base: str = "mq-uc01-uniform.yaml"):
    import yaml
    fields = yaml.safe_load(routing)
    return load_topology(ROOT / "topologies" / base,
                         [f"{name}={yaml.safe_dump(value, default_flow_style=True).strip()}"
                          for name, value in fields.items()])


# -- the mapping --------------------------------------------------------------------------------


def test_keys_become_topic_levels_under_the_exchange():
    assert topic_string("shop", "eu.new") == "shop/eu/new"
    assert topic_string("shop", "") == "shop"
    assert subscription_topic("topic", "shop", "eu.*.#") == "shop/eu/+/#"
    assert subscription_topic("fanout", "all", "ignored") == "all/#"
    assert subscription_topic("direct", "exact", "eu.new") == "exact/eu/new"


def test_mq_wildcards_route_every_key_as_amqp_topic_bindings_do():
    rng = random.Random(7)
    words = ["eu", "us", "new", "paid", "x"]
    for _ in range(3000):
        key = ".".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        pattern = ".".join(rng.choice([*words, "*", "#"]) for _ in range(rng.randint(1, 4)))
        assert mq_matches(subscription_topic("topic", "shop", pattern),
                          topic_string("shop", key)) == topic_matches(pattern, key), \
            (pattern, key)
        assert mq_matches(subscription_topic("fanout", "shop", pattern),
                          topic_string("shop", key))
        assert mq_matches(subscription_topic("direct", "shop", pattern.replace("*", "a")
                                              .replace("#", "b")),
                          topic_string("shop", key)) == (pattern.replace("*", "a")
                                                         .replace("#", "b") == key)


# -- provisioned and existing queue managers ----------------------------------------------------


def test_every_binding_and_bound_queue_is_a_durable_subscription_in_the_mqsc():
    topology = topology_with()
    subs = subscriptions(topology)
    assert [(s.topic, s.queue) for s in subs] == [
        ("shop/eu/+", "orders1"), ("shop/#/paid", "orders2"), ("shop/us/#", "orders3"),
        ("all/#", "audit"), ("exact/eu/new", "audit")]
    assert subs[0].name == "SURGE.shop.1.orders1"
    mqsc = uniform.mqsc_text(topology).splitlines()
    define = "define sub('SURGE.shop.1.orders1') topicstr('shop/eu/+') dest('orders1') replace"
    assert define in mqsc
    assert mqsc.index(define) > mqsc.index("define qlocal('orders1') replace")
    ha = topology_with(base="mq-native-ha.yaml")
    assert "define sub('SURGE.all.4.audit') topicstr('all/#') dest('audit') replace" in \
        manifests.queue_definitions(ha).splitlines()


def test_a_quote_in_a_topic_is_doubled_in_mqsc():
    sub = Subscription("SURGE.o'k.1.q", "o'k/a", "q")
    assert sub.mqsc() == "define sub('SURGE.o''k.1.q') topicstr('o''k/a') dest('q') replace"


EXISTING = """\
name: mq-existing
broker: ibmmq
placement: existing
queues: [{name: orders1}, {name: audit}]
exchanges: [{name: all, type: fanout}]
bindings: [{exchange: all, queue: orders1}, {exchange: all, queue: audit}]
existing: {}
ibmmq:
  channel: PERF.APP.CHL
  queue_managers:
    - {name: QM1, conname: "127.0.0.1(1414)"}
"""


def existing(tmp_path) -> ExistingQueueManagers:
    path = tmp_path / "mq.yaml"
    path.write_text(EXISTING)
    return ExistingQueueManagers(load_topology(path), reach=lambda host, port: None)


def test_on_queue_managers_surge_did_not_start_the_subscriptions_are_made_with_mqsub(tmp_path):
    provisioner = existing(tmp_path)
    subs = provisioner.subscriptions()
    assert [(s.name, s.topic, s.queue) for s in subs] == [
        ("SURGE.all.1.orders1", "all/#", "orders1"), ("SURGE.all.2.audit", "all/#", "audit")]
    standin = StandIn(queues=("orders1",))
    endpoints = [m.endpoint for m in provisioner.up()]
    check = MqPreflight(endpoints, ["audit"], MqSettings.from_json(
        provisioner.client_settings()), load=lambda: standin)
    with pytest.raises(LookupError, match=r"SURGE\.all\.2\.audit \(queue audit\)"):
        check.subscribe(subs)
    standin.define("audit")
    check.subscribe(subs)
    check.subscribe(subs)  # made once, resumed after
    assert standin.qmgrs["QM1"].subscriptions == {
        "SURGE.all.1.orders1": ("all/#", "orders1"), "SURGE.all.2.audit": ("all/#", "audit")}
    made = standin.named("MQSUB")
    assert {c.details["options"] for c in made} == {
        CMQC.MQSO_CREATE | CMQC.MQSO_RESUME | CMQC.MQSO_DURABLE | CMQC.MQSO_FAIL_IF_QUIESCING}
    kept = [c for c in standin.named("MQCLOSE") if "subscription" in c.details]
    assert {c.details["options"] for c in kept} == {CMQC.MQCO_KEEP_SUB}
    assert len(standin.named("MQDISC")) == 3 and not standin.connections


def test_subscriptions_that_cannot_be_made_from_here_stop_the_run_before_the_load(tmp_path):
    from drivers.base import Unchecked
    from orchestrator.run.depth import QueueDepth

    class NoLibrary:
        def check(self):
            raise Unchecked("no MQI library here")

        def close(self):
            pass

    provisioner = existing(tmp_path)
    depth = QueueDepth("ibmmq", provisioner.topology.queues[1], provisioner, None,
                       probes=None, preflights=lambda *args: NoLibrary())
    with pytest.raises(ProvisionError, match="bindings are subscriptions .* no MQI library"):
        depth.check(provisioner.up())


# -- the driver -----------------------------------------------------------------------------------


def test_a_sender_publishes_each_message_to_its_keys_topic_and_every_copy_lands():
    topology = topology_with()
    standin = StandIn(queues=("orders1", "orders2", "orders3", "audit"))
    for sub in subscriptions(topology):
        standin.subscribe(sub.name, sub.topic, sub.queue)
    keys = ("eu.new", "eu.paid", "us.new.paid", "ca.new")
    driver = make(standin, queue="orders1", exchange="shop", routing_keys=keys,
                  key_order="random")
    driver.add_sender(sender(driver, rate=0, limit=400, producer_id=3), QM1, ["orders1"])
    until(lambda: counted(driver, "sent") == 400)
    driver.stop(2)
    picker = KeyPicker(len(keys), "random")
    expected: dict[str, list[int]] = {q: [] for q in ("orders1", "orders2", "orders3", "audit")}
    for seq in range(400):
        for queue in topology.routes("shop", keys[picker.pick(3, seq)]):
            expected[queue].append(seq)
    for queue, seqs in expected.items():
        assert [decode(body)[1] for body, _ in standin.messages(queue)] == seqs, queue
    assert expected["orders1"] and expected["orders2"] and expected["orders3"]
    assert not expected["audit"]  # shop is not bound to audit
    opened = [c.details.get("topic") for c in standin.named("MQOPEN")]
    assert opened == ["shop/eu/new", "shop/eu/paid", "shop/us/new/paid", "shop/ca/new"]


def test_a_fanout_exchange_gives_every_bound_queue_each_message():
    topology = topology_with()
    standin = StandIn(queues=("orders1", "orders2", "orders3", "audit"))
    for sub in subscriptions(topology):
        standin.subscribe(sub.name, sub.topic, sub.queue)
    driver = make(standin, queue="audit", exchange="all")
    driver.add_sender(sender(driver, rate=0, limit=25), QM1)
    until(lambda: counted(driver, "sent") == 25)
    driver.stop(2)
    assert [decode(b)[1] for b, _ in standin.messages("audit")] == list(range(25))
    assert standin.messages("orders1") == []


# -- what MQ's topics cannot do -------------------------------------------------------------------


@pytest.mark.parametrize("routing, field, words", [
    ("exchanges: [{name: h, type: headers}]", "exchanges.0.type", "headers exchange"),
    ("exchanges: [{name: a}, {name: b}]\nbindings: [{exchange: a, to_exchange: b}]",
     "bindings.0.to_exchange", "bind a queue"),
    ("exchanges: [{name: a, arguments: {alternate-exchange: b}}]", "exchanges.0.arguments",
     "RabbitMQ only"),
    ("exchanges: [{name: a}]\nbindings: [{exchange: a, queue: request1, routing_key: 'x/y'}]",
     "bindings.0.routing_key", "topic levels"),
    ("exchanges: [{name: a, type: direct}]\n"
     "bindings: [{exchange: a, queue: request1, routing_key: 'x.#'}]",
     "bindings.0.routing_key", "topic levels"),
])
def test_what_topics_cannot_do_is_refused_naming_the_field(routing, field, words):
    with pytest.raises(SpecError) as refused:
        topology_with(routing)
    assert field in str(refused.value) and words in str(refused.value)


def test_an_mq_scenario_publishes_to_an_exchange_and_refuses_a_key_mq_cannot_carry(tmp_path):
    topology = tmp_path / "mq.yaml"
    topology.write_text(EXISTING)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: fan\ntopology: {topology}\nworkload: {{queue: audit, "
                        f"senders: 1, receivers: 2, exchange: all, routing_keys: [a.b, c]}}\n"
                        f"plan: [{{rate_per_sender: 10, hold: 5s}}]\n")
    spec, _ = load_scenario(scenario)
    assert spec.workload.exchange == "all"
    with pytest.raises(SpecError, match=r"workload.routing_keys: 'a\+b'"):
        load_scenario(scenario, ["workload.routing_keys=[a+b]"])
