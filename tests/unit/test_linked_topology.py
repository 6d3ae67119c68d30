"""Linked clusters without a broker: how the topology splits into its sides (names, ports,
secrets, the replies' exchange), the shovels it declares, and how depth probes and member
labels see the two sides."""

import pytest

from orchestrator.run.depth import SideProbes
from orchestrator.specs.topology import REPLY_EXCHANGE, REPLY_QUEUE, TopologySpec
from results.rundir.steps import member_index
from topologies.factory import provisioner_for
from topologies.rabbitmq.linked import LinkedLocalRabbitMQ, side_topology
from topologies.rabbitmq.ports import member_claims


def linked(**more) -> TopologySpec:
    return TopologySpec.model_validate({
        "name": "ln", "members": 3, "start": 3, "port_base": 6000,
        "link": {"sides": [1, 2]}, "queues": [{"name": "pair-%d", "count": 2}], **more})


def test_each_side_is_a_cluster_of_its_own_with_the_ports_of_one(tmp_path):
    provisioner = LinkedLocalRabbitMQ(linked(), tmp_path)
    assert isinstance(provisioner_for(linked()), LinkedLocalRabbitMQ)
    members = [provisioner.member(i) for i in range(3)]
    assert [m.name for m in members] == ["surge-ln-a-0@localhost", "surge-ln-b-0@localhost",
                                         "surge-ln-b-1@localhost"]
    assert [(m.index, m.port, m.management_port) for m in members] == [
        (0, 6000, 16000), (1, 6001, 16001), (2, 6002, 16002)]
    sides = [c.topology for c in provisioner.clusters]
    claims = [c.port for side, cluster in zip(sides, provisioner.clusters)
              for i in range(side.members)
              for c in member_claims(cluster.member(i), cluster.dist_port(i))]
    claims += [c.epmd_port for c in provisioner.clusters]
    assert len(claims) == len(set(claims))  # no port taken twice, epmd included
    # one broker user for both: the same settings reach either side
    assert {c.secrets_file for c in provisioner.clusters} == {tmp_path / "ln/credentials.json"}
    assert [(s.name, s.members, s.start, s.warm_pool) for s in sides] == [
        ("ln-a", 1, 1, False), ("ln-b", 2, 2, False)]


def test_side_b_holds_the_replies_and_a_shovel_per_queue_carries_the_requests(tmp_path):
    a, b = side_topology(linked(), 0), side_topology(linked(), 1)
    assert [q.name for q in a.queues] == ["pair-%d"] and not a.exchanges
    assert [q.name for q in b.queues] == ["pair-%d", REPLY_QUEUE]
    assert b.routes(REPLY_EXCHANGE, "amq.gen-anything") == {REPLY_QUEUE}
    routes = LinkedLocalRabbitMQ(linked(), tmp_path).routes()
    assert routes == {"surge-pair-1": {"src-queue": "pair-1", "dest-queue": "pair-1"},
                      "surge-pair-2": {"src-queue": "pair-2", "dest-queue": "pair-2"},
                      "surge-replies": {"src-queue": REPLY_QUEUE, "dest-exchange": ""}}


def test_member_labels_carry_the_side():
    assert member_index("surge-ln-b-1@localhost") == "b1"
    assert member_index("surge-uniform-4-2@localhost") == "2"


class Probe:
    def __init__(self, ready, at):
        self.ready, self.at, self.closed = ready, at, False

    def read(self):
        return dict(self.ready), self.at

    def close(self):
        self.closed = True


def test_a_queue_on_both_sides_is_read_as_the_sum_of_both():
    probes = [Probe({"pair-1": 3, "pair-2": 0}, 10.0), Probe({"pair-1": 4}, 12.0)]
    both = SideProbes(probes)
    assert both.read() == ({"pair-1": 7, "pair-2": 0}, 11.0)
    both.close()
    assert all(p.closed for p in probes)


def test_a_quorum_queue_with_replicas_on_members_standing_by_is_refused_before_any_start(
        tmp_path):
    import pytest

    from orchestrator.errors import ProvisionError
    from topologies.rabbitmq.local import LocalRabbitMQ, standby_replicas
    topology = TopologySpec.model_validate({
        "name": "q", "members": 3, "start": 1, "port_base": 6100, "queues": [
            {"name": "perf", "type": "quorum",
             "arguments": {"x-quorum-initial-group-size": 3}}]})
    with pytest.raises(ProvisionError, match="x-quorum-initial-group-size 3 is more than the 1 "
                                             "members started.*Nothing was started"):
        LocalRabbitMQ(topology, tmp_path).up()
    assert not (tmp_path / "q" / "state.json").exists()
    # without a warm pool, or with as many members started, the queue can be declared
    assert standby_replicas(topology.model_copy(update={"warm_pool": False})) == ""
    assert standby_replicas(topology.model_copy(update={"start": 3})) == ""


def test_a_link_of_its_own_is_one_more_member_after_side_b(tmp_path):
    topology = linked(members=4, start=4, link={"sides": [1, 2], "runs_on": "own"})
    provisioner = LinkedLocalRabbitMQ(topology, tmp_path)
    assert [provisioner.member(i).name for i in range(4)] == [
        "surge-ln-a-0@localhost", "surge-ln-b-0@localhost", "surge-ln-b-1@localhost",
        "surge-ln-link-0@localhost"]
    assert provisioner.member(3).port == 6003 and member_index("surge-ln-link-0@localhost") \
        == "link0"
    own = provisioner.clusters[2].topology
    assert (own.name, own.members, own.queues, own.exchanges) == ("ln-link", 1, [], [])
    # workers and depth probes see the two sides only; the shovels live in the link's member
    assert [len(side) for side in provisioner.sides()] == [1, 2]
    assert provisioner._runs_link is provisioner.clusters[2]


def test_a_link_of_its_own_counts_in_the_members_and_channels_have_none():
    with pytest.raises(ValueError, match="together with the link's own they are the topology's "
                                         r"members \(3\)"):
        linked(link={"sides": [2, 1], "runs_on": "own"})
