"""Which agent hosts which worker, on which member and queue: the rule as a table."""

from types import SimpleNamespace

import pytest

from orchestrator.agents.placement import Seat, place
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec


def members(*indexes):
    return [SimpleNamespace(index=i, endpoint=f"amqp://m{i}") for i in indexes]


def scenario(senders, receivers, **workload):
    return ScenarioSpec.model_validate({
        "name": "p", "topology": "t.yaml", "plan": [{"rate_per_sender": 5, "hold": "1s"}],
        "workload": {"queue": "q", "senders": senders, "receivers": receivers, **workload}})


@pytest.mark.parametrize("senders, receivers, agents, running, expected", [
    # receivers go round the agents, then senders from where they stopped; each kind goes
    # round the members
    (2, 2, 2, (0,), {("s", 1): (0, 0), ("s", 2): (1, 0), ("r", 1): (0, 0), ("r", 2): (1, 0)}),
    (1, 1, 2, (0,), {("s", 1): (1, 0), ("r", 1): (0, 0)}),
    (3, 1, 2, (0, 1), {("s", 1): (1, 0), ("s", 2): (0, 1), ("s", 3): (1, 0), ("r", 1): (0, 0)}),
    (4, 1, 1, (0, 2), {("s", 1): (0, 0), ("s", 2): (0, 2), ("s", 3): (0, 0), ("s", 4): (0, 2),
                       ("r", 1): (0, 0)}),
])
def test_workers_go_round_agents_and_members(senders, receivers, agents, running, expected):
    placement = place(scenario(senders, receivers), "rabbitmq", {}, members(*running), agents,
                      range(agents), range(agents), QueueSpec(name="q"), 5.0)
    assert {s.worker: (s.agent, s.member) for s in placement.seats} == expected
    assert sum(len(c.senders) for c in placement.configs) == senders
    assert all(c.destination.endpoints == tuple(f"amqp://m{i}" for i in running)
               for c in placement.configs)


def test_split_hosts_keep_senders_and_receivers_apart():
    placement = place(scenario(2, 2), "rabbitmq", {}, members(0), 4, [0, 1], [2, 3],
                      QueueSpec(name="q"), 5.0)
    assert {s.agent for s in placement.seats if s.worker[0] == "s"} == {0, 1}
    assert {s.agent for s in placement.seats if s.worker[0] == "r"} == {2, 3}


def test_queues_are_given_in_blocks_and_not_fixed_senders_get_every_instance():
    queue = QueueSpec(name="pairs-%d", count=4)
    placement = place(scenario(4, 4), "ibmmq", {"channel": "C"}, members(0), 1, [0], [0],
                      queue, 5.0)
    config = placement.configs[0]
    assert [s.queue for s in config.senders] == ["pairs-1", "pairs-2", "pairs-3", "pairs-4"]
    assert config.settings == {"channel": "C"} and config.broker == "ibmmq"
    spread = place(scenario(2, 1, bind="not-fixed"), "ibmmq", {}, members(0), 1, [0], [0],
                   queue, 5.0)
    assert spread.configs[0].senders[0].queue == ["pairs-1", "pairs-2", "pairs-3", "pairs-4"]
    assert Seat(("s", 1), 0, 0) in spread.seats


@pytest.mark.parametrize("workload, queue, share", [
    ({}, QueueSpec(name="q"), 500),  # the default bound of 1,000 over 2 senders on one queue
    ({"max_backlog": 90}, QueueSpec(name="q"), 45),
    ({"max_backlog": 100}, QueueSpec(name="pairs-%d", count=4), 100),  # a queue per sender
    ({"max_backlog": 1}, QueueSpec(name="q"), 1),  # never below one message
    ({"max_backlog": None}, QueueSpec(name="q"), None),
    ({"pattern": "request-reply"}, QueueSpec(name="q"), None),  # requesters are closed-loop
])
def test_unlimited_senders_share_the_backlog_bound_of_their_queues(workload, queue, share):
    placement = place(scenario(2, 2, **workload), "rabbitmq", {}, members(0), 1, [0], [0],
                      queue, 0.0)
    assert placement.configs[0].destination.backlog_per_sender == share


def test_a_queue_per_receiver_gives_each_receiver_its_subscription_and_bindings():
    from drivers.protocol import QueueBinding
    from orchestrator.specs.routing import BindingSpec
    bindings = [BindingSpec(exchange="news", queue="own", routing_key="all"),
                BindingSpec(exchange="news", queue="other", routing_key="all"),
                BindingSpec(exchange="log", queue="own", routing_key="x",
                            arguments={"k": 1})]
    placement = place(scenario(2, 3, queue="own", exchange="news", routing_key="all"),
                      "rabbitmq", {}, members(0), 1, [0], [0],
                      QueueSpec(name="own", per_receiver=True), 0.0, bindings)
    config = placement.configs[0]
    assert [(r.queue, r.group) for r in config.receivers] == [
        ("own", "own~1"), ("own", "own~2"), ("own", "own~3")]
    assert config.destination.own_queues == (QueueBinding("news", "all"),
                                             QueueBinding("log", "x", {"k": 1}))
    assert config.destination.queue_arguments == {"x-queue-type": "classic"}
    assert config.senders_paused and config.destination.backlog_per_sender is None
    assert [s.queue for s in config.senders] == [["own"], ["own"]]
    plain = place(scenario(1, 1), "rabbitmq", {}, members(0), 1, [0], [0], QueueSpec(name="q"),
                  5.0)
    assert plain.configs[0].destination.own_queues is None
    assert not plain.configs[0].senders_paused


def test_linked_clusters_seat_senders_on_side_a_and_receivers_on_side_b():
    side_a, side_b = members(0), members(1, 2)
    placement = place(scenario(2, 2, pattern="request-reply"), "rabbitmq", {},
                      side_a + side_b, 2, [0], [1], QueueSpec(name="q"), 5.0,
                      sides=[side_a, side_b])
    assert {s.worker: (s.agent, s.member) for s in placement.seats} == {
        ("s", 1): (0, 0), ("s", 2): (0, 0), ("r", 1): (1, 1), ("r", 2): (1, 2)}
    destination = placement.configs[0].destination
    assert destination.reply_exchange == "surge.replies"
    assert destination.sides == (("amqp://m0",), ("amqp://m1", "amqp://m2"))
    # a worker reconnects within its side only: the other side has other queues
    assert destination.peers("amqp://m2") == ("amqp://m1", "amqp://m2")
    assert destination.peers("amqp://m0") == ("amqp://m0",)
    one = place(scenario(1, 1), "rabbitmq", {}, side_a + side_b, 1, [0], [0],
                QueueSpec(name="q"), 5.0).configs[0].destination
    assert one.reply_exchange == "" and one.peers("amqp://m1") == one.endpoints
