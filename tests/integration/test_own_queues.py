"""A queue per receiver on a real local RabbitMQ member, as PerfTest's consumers make when no
queue is named: each receiver declares a server-named, exclusive, auto-delete queue, binds it to
the exchange and gets every message (each a subscription, every copy accounted); nothing of
them is left after the run; and ``surge perftest`` runs such a command line as it is."""

import json

import pytest

from drivers import protocol
from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import cluster_of, one_agent, wait_until

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "own", "members": 1, "start": 1, "port_base": 12060,
    "queues": [{"name": "mine", "per_receiver": True}, {"name": "shared"}],
    "exchanges": [{"name": "news", "type": "direct"}],
    "bindings": [{"exchange": "news", "queue": "mine", "routing_key": "all"},
                 {"exchange": "news", "queue": "shared", "routing_key": "all"}]})

broker = cluster_of(TOPOLOGY)


def queues(broker) -> dict[str, dict]:
    """Every queue on the member, by name, as the management API lists it."""
    return {q["name"]: q for q in broker.management().request("GET", "/queues")}


def test_every_receiver_gets_every_message_on_a_queue_of_its_own(broker, tmp_path):
    scenario = ScenarioSpec.model_validate({
        "name": "own", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "mine", "senders": 2, "receivers": 3, "confirms": True,
                     "exchange": "news", "routing_key": "all"},
        "plan": [{"rate_per_sender": 200, "hold": "4s"}], "measure": {"drain": "15s"}})
    Controller(scenario, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "run.json").read_text())
    books = manifest["accounting"]
    published = books["published"]
    assert published > 1000 and books["balanced"], books["explain"]
    assert (books["received"], books["duplicates"]) == (3 * published, 0)
    assert books["subscriptions"] == {
        f"mine~{i}": {"routed": published, "received": published, "duplicates": 0,
                      "queued": 0, "lost": 0} for i in (1, 2, 3)}
    left = queues(broker)
    assert "mine" not in left  # never declared: each receiver made its own
    assert not [name for name in left if name.startswith("amq.gen-")]  # gone with them
    assert "shared" in left  # declared by the provisioner, bound, holding its own copies
    assert "amq.gen-" not in json.dumps(books)  # the subscriptions are the receivers'


def test_each_receivers_queue_is_exclusive_and_goes_with_its_connection(broker, tmp_path):
    endpoint = broker.running()[0].endpoint
    destination = protocol.Destination((endpoint,), "mine", exchange="news",
                                       routing_keys=("all",),
                                       own_queues=(protocol.QueueBinding("news", "all"),))
    receivers = [protocol.ReceiverConfig(i, endpoint, "mine", group=f"mine~{i}") for i in (1, 2)]
    with one_agent(broker, tmp_path, destination, receivers=receivers):
        wait_until(lambda: len([q for q in queues(broker) if q.startswith("amq.gen-")]) == 2)
        own = [q for name, q in queues(broker).items() if name.startswith("amq.gen-")]
        assert all(q["exclusive"] and q["auto_delete"] and not q["durable"] for q in own)
        bound = broker.management().request("GET", "/exchanges/%2F/news/bindings/source")
        assert {b["destination"] for b in bound} >= {q["name"] for q in own}
    wait_until(lambda: not [q for q in queues(broker) if q.startswith("amq.gen-")])
