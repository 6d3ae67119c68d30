"""Exchanges and bindings on IBM MQ: the topic strings and subscriptions they map to, the MQSC
of provisioned queue managers, subscriptions that cannot be made from the controller, and what
MQ's topics cannot do refused at validate time. What MQ does with them (wildcards routing as
AMQP's bindings, MQSUB on queue managers surge did not start, publications through the MQ
driver landing where the accounting expects) is tested over IBM's real ``ibmmq`` and the MQI
emulator in test_mqemu_topics.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ProvisionError, SpecError
from orchestrator.specs.loader import load_scenario, load_topology
from orchestrator.specs.mqtopics import (
    Subscription,
    subscription_topic,
    subscriptions,
    topic_string,
)
from topologies.mq import manifests, uniform
from topologies.mq.existing import ExistingQueueManagers

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(60)
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
    - {name: QM1, conname: "CONNAME"}
"""


def existing(tmp_path, conname: str = "127.0.0.1(1414)") -> ExistingQueueManagers:
    """The EXISTING topology, its queue manager at ``conname``."""
    path = tmp_path / "mq.yaml"
    path.write_text(EXISTING.replace("CONNAME", conname))
    return ExistingQueueManagers(load_topology(path), reach=lambda host, port: None)


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
    topology.write_text(EXISTING.replace("CONNAME", "127.0.0.1(1414)"))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: fan\ntopology: {topology}\nworkload: {{queue: audit, "
                        f"senders: 1, receivers: 2, exchange: all, routing_keys: [a.b, c]}}\n"
                        f"plan: [{{rate_per_sender: 10, hold: 5s}}]\n")
    spec, _ = load_scenario(scenario)
    assert spec.workload.exchange == "all"
    with pytest.raises(SpecError, match=r"workload.routing_keys: 'a\+b'"):
        load_scenario(scenario, ["workload.routing_keys=[a+b]"])
