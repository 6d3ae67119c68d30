"""Which member leads which queue: one rule for every RabbitMQ provisioner."""

from orchestrator.specs.topology import QueueSpec
from topologies.rabbitmq import queues


def test_per_member_instances_and_patterns_led_in_turn():
    shared = QueueSpec(name="perf", type="quorum")
    mine = QueueSpec(name="local", per_member=True)
    pairs = QueueSpec(name="pairs-%d", count=3)
    placed = queues.placements([shared, mine, pairs], [0, 2])
    assert [(name, member) for _, name, member in placed] == [
        ("perf", 0), (mine.instance(0), 0), (mine.instance(2), 2),
        ("pairs-1", 0), ("pairs-2", 2), ("pairs-3", 0)]


def test_arguments_keep_the_users_and_add_type_and_leader():
    quorum = QueueSpec(name="q", type="quorum", arguments={"x-max-length": 10})
    assert queues.arguments(quorum) == {"x-max-length": 10, "x-queue-type": "quorum",
                                        "x-queue-leader-locator": "client-local"}
    assert queues.arguments(QueueSpec(name="c")) == {"x-queue-type": "classic"}
