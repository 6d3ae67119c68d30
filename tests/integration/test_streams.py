"""Streams on a real local RabbitMQ member, over AMQP 0-9-1 as PerfTest reads them: every
receiver reads every message from its own offset (each a subscription, every copy accounted),
the stream keeps what was read, and a receiver that reads again from the start after its
connection is closed counts re-reads, never duplicates."""

import json

import pytest

from drivers import protocol
from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import close_connections, cluster_of, one_agent, wait_until

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "stm", "members": 1, "start": 1, "port_base": 8780,
    "queues": [{"name": "events", "type": "stream", "max_length_bytes": "1GiB",
                "max_age": "1h", "segment_size": "10MiB"},
               {"name": "replayed", "type": "stream"}]})


broker = cluster_of(TOPOLOGY)


def test_every_receiver_of_a_stream_reads_every_message_once(broker, tmp_path):
    scenario = ScenarioSpec.model_validate({
        "name": "stm", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "events", "senders": 2, "receivers": 3, "confirms": True,
                     "stream_offset": "first", "prefetch": 500},
        "plan": [{"rate_per_sender": 200, "hold": "4s"}], "measure": {"drain": "15s"}})
    Controller(scenario, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "run.json").read_text())
    books, details = manifest["accounting"], manifest["accounting_details"]
    published = books["published"]
    assert published > 1000 and books["balanced"], books["explain"]
    assert (books["sent"], books["received"], books["duplicates"]) == \
        (3 * published, 3 * published, 0)
    assert books["subscriptions"] == {
        f"events~{i}": {"routed": published, "received": published, "duplicates": 0,
                        "queued": 0, "lost": 0} for i in (1, 2, 3)}
    assert details["rereads"] == 0


def test_a_reader_that_subscribes_again_from_the_start_counts_rereads(broker, tmp_path):
    endpoint = broker.running()[0].endpoint
    destination = protocol.Destination((endpoint,), "replayed", confirms=True,
                                       stream_offset="first")
    with one_agent(broker, tmp_path, destination, size=256,
                   senders=[protocol.SenderConfig(1, 500, endpoint, limit=1000)],
                   receivers=[protocol.ReceiverConfig(1, endpoint, group="replayed~1")]
                   ) as agent:
        wait_until(lambda: agent.snapshot().received >= 1000)
        # the broker closes the connections: the reader subscribes again from the first
        # message and reads all 1000 again (the sender, done, has nothing to send again)
        close_connections(broker, at_least=2)
        wait_until(lambda: agent.snapshot().rereads >= 1000)
        last = agent.snapshot()
        assert (last.received, last.duplicates, last.rereads) == (1000, 0, 1000)
        assert last.reconnects >= 1
        report = agent.accounting()
        assert "replayed~1" in report.bitmaps  # its subscription, kept by the agent


