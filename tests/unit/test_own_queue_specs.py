"""A queue per receiver in specs: one classic RabbitMQ queue reached through an exchange, never
declared by the provisioner, each receiver a subscription of its own; what cannot hold is
refused in one line per field; the senders wait for the receivers' queues, with fake time."""

import pytest
from pydantic import ValidationError

from drivers import protocol
from orchestrator.errors import SpecError
from orchestrator.run.accounting import copies_each, routing_of
from orchestrator.specs.loader import load_scenario
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.fakes import FakeClock
from topologies.rabbitmq.queues import declare, placements

TOPOLOGY = ("name: t\nmembers: 1\nstart: 1\nqueues:\n"
            "  - {name: mine, per_receiver: true}\n  - {name: plain}\n"
            "exchanges: [{name: news}]\n"
            "bindings: [{exchange: news, queue: mine, routing_key: all},\n"
            "           {exchange: news, queue: plain, routing_key: all}]\n")


def load(tmp_path, workload: str, topology: str = TOPOLOGY, plan: str = "['10:5s']"):
    (tmp_path / "t.yaml").write_text(topology)
    (tmp_path / "s.yaml").write_text(f"name: s\ntopology: t.yaml\nworkload: {workload}\n"
                                     f"plan: {plan}\n")
    return load_scenario(tmp_path / "s.yaml")


def test_the_provisioner_declares_no_such_queue_nor_binds_it():
    topology = TopologySpec.model_validate({
        "name": "t", "queues": [{"name": "mine", "per_receiver": True}, {"name": "plain"}],
        "exchanges": [{"name": "news"}],
        "bindings": [{"exchange": "news", "queue": "mine", "routing_key": "all"},
                     {"exchange": "news", "queue": "plain", "routing_key": "all"}]})
    assert [name for _, name, _ in placements(topology.queues, [0])] == ["plain"]
    done = []

    class Api:
        def declare_queue(self, queue, name):
            done.append(("queue", name))

        def declare_exchange(self, exchange):
            done.append(("exchange", exchange.name))

        def bind(self, binding, target):
            done.append(("bind", target))

    declare(topology, [0], lambda index: Api())
    assert done == [("queue", "plain"), ("exchange", "news"), ("bind", "plain")]
    assert topology.routes("news", "all") == {"mine", "plain"}


def test_each_receiver_is_a_subscription_with_every_copy(tmp_path):
    scenario, topology = load(tmp_path, "{queue: mine, senders: 2, receivers: 3, "
                                        "exchange: news, routing_key: all}")
    routing = routing_of(scenario, topology)
    assert routing.subscriptions == {"mine~1": "mine", "mine~2": "mine", "mine~3": "mine"}
    assert copies_each(scenario, topology) == 3


@pytest.mark.parametrize("queue, said", [
    ({"type": "quorum"}, "a queue per receiver is one classic queue"),
    ({"name": "q-%d", "count": 2}, "a queue per receiver is one classic queue"),
    ({"per_member": True}, "a queue per receiver is one classic queue"),
])
def test_a_queue_per_receiver_is_one_classic_queue(queue, said):
    with pytest.raises(ValidationError, match=said):
        QueueSpec.model_validate({"name": "q", "per_receiver": True, **queue})


@pytest.mark.parametrize("workload, said", [
    ("{queue: mine, senders: 1, receivers: 1}",
     "workload.exchange: queue mine is one per receiver, named by the broker"),
    ("{queue: mine, senders: 1, receivers: 1, pattern: request-reply}",
     "workload.pattern: request-reply takes each request once"),
])
def test_what_a_queue_per_receiver_cannot_do_is_refused_naming_the_field(tmp_path, workload,
                                                                         said):
    with pytest.raises(SpecError) as refused:
        load(tmp_path, workload)
    assert said in str(refused.value)
    unbound = TOPOLOGY.replace("{exchange: news, queue: mine, routing_key: all},\n           ",
                               "")
    with pytest.raises(SpecError, match="no binding of topology t reaches queue mine"):
        load(tmp_path, "{queue: mine, senders: 1, receivers: 1, exchange: news}", unbound)


def test_an_mq_topology_refuses_it():
    from pathlib import Path

    from orchestrator.specs.loader import load_topology
    root = Path(__file__).resolve().parents[2]
    with pytest.raises(SpecError, match="queues.0.per_receiver: RabbitMQ only"):
        load_topology(root / "topologies" / "mq-uc01-uniform.yaml",
                      ["queues=[{name: q, per_receiver: true}]"])


class Agent:
    """Receivers that consume once asked ``ready_after`` times."""

    def __init__(self, ready_after: int, receivers: int):
        self.asked, self.ready_after, self.receivers = 0, ready_after, receivers

    def snapshot(self):
        self.asked += 1
        return protocol.Snapshot(0.0, consuming=self.receivers if self.asked > self.ready_after
                                 else 0)


def crew_of(agents, clock):
    from orchestrator.run.crew import Crew
    events = []
    crew = Crew(None, None, lambda kind, **fields: events.append((kind, fields)), clock)
    crew.all = lambda function, strict=False: [function(a) for a in agents]
    return crew, events


def test_senders_wait_until_every_receiver_consumes_then_go():
    clock = FakeClock()
    crew, events = crew_of([Agent(3, 1), Agent(5, 2)], clock)
    start = clock.monotonic()
    crew._await_consumers(3)
    # asked six times: after 10 ms, then twice as long each time, at most 100 ms
    assert events == [] and clock.monotonic() - start == pytest.approx(
        0.01 + 0.02 + 0.04 + 0.08 + 0.1)


def test_receivers_that_never_consume_are_said_and_the_run_goes_on():
    from orchestrator.run.crew import CONSUMERS_WAIT_S
    clock = FakeClock()
    crew, events = crew_of([Agent(10**9, 2)], clock)
    start = clock.monotonic()
    crew._await_consumers(2)
    assert CONSUMERS_WAIT_S <= clock.monotonic() - start < CONSUMERS_WAIT_S + 1
    assert events[0][0] == "receivers_not_ready" and events[0][1]["consuming"] == 0
