"""Messages as a PerfTest user shapes them, on a real local RabbitMQ member: a weighted mix of
sizes with JSON bodies and AMQP properties arrives on the broker exactly as the size picker
says, on the fast path and on pika's; a headers exchange routes by the messages' headers; and
mandatory messages no queue takes come back and are counted, as many as the accounting says
were unroutable."""

import json
import time
from collections import Counter

import pika
import pytest

from drivers import protocol
from drivers.amqp.settings import AmqpSettings
from drivers.header import HEADER_SIZE, decode
from drivers.message import Bodies
from orchestrator.agents.local import spawn_local_agents
from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import cluster_of

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "msg", "members": 1, "start": 1, "port_base": 12080,
    "queues": [{"name": "held"}, {"name": "orders"}, {"name": "kept"}],
    "exchanges": [{"name": "by-kind", "type": "headers"}, {"name": "keys", "type": "direct"}],
    "bindings": [{"exchange": "by-kind", "queue": "orders",
                  "arguments": {"x-match": "all", "kind": "order"}},
                 {"exchange": "keys", "queue": "kept", "routing_key": "ok"}]})
SHAPE = protocol.MessageShape(
    sizes=(100, 1000, 5000), weights=(1.0, 2.0, 1.0), fill="json",
    properties={"content_type": "application/json", "priority": 3,
                "headers": {"kind": "order"}})
SENT = 400


broker = cluster_of(TOPOLOGY)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "pika-public-api"])
def test_a_weighted_mix_of_json_messages_with_properties_reaches_the_broker_as_picked(
        broker, tmp_path, fast_path):
    endpoint = broker.running()[0].endpoint
    (agent,) = spawn_local_agents(1, tmp_path, max_lifetime_s=60)
    try:
        agent.configure(protocol.Configure(
            broker="rabbitmq", pattern="point-to-point", message=SHAPE,
            destination=protocol.Destination((endpoint,), "held", fast_path=fast_path),
            senders=[protocol.SenderConfig(7, 2000, endpoint, limit=SENT)],
            settings=broker.client_settings()))
        deadline = time.monotonic() + 20
        while agent.snapshot().sent < SENT and time.monotonic() < deadline:
            time.sleep(0.2)
        assert agent.snapshot().fast_path.on == fast_path
    finally:
        agent.stop()
    got = _drain(broker, "held")
    assert len(got) == SENT
    picks = Bodies(SHAPE).picks(7, 0, SENT)
    expected = Counter(SHAPE.sizes[k] for k in picks)
    assert Counter(len(body) for _, body in got) == expected  # exactly the picker's sizes
    assert expected[1000] > expected[100] and expected[1000] > expected[5000]
    for properties, body in got:
        producer, seq, _, _ = decode(body)
        assert producer == 7 and len(body) == SHAPE.sizes[picks[seq]]
        document = json.loads(body[HEADER_SIZE:])
        assert set(document) == {"id", "text"}
        assert (properties.content_type, properties.priority, properties.headers) == \
            ("application/json", 3, {"kind": "order"})
        assert properties.delivery_mode == 1


def _drain(broker, queue: str) -> list[tuple[pika.BasicProperties, bytes]]:
    """Every message of ``queue``, taken off it with basic.get."""
    parameters = AmqpSettings.from_json(broker.client_settings()).parameters(
        broker.running()[0].endpoint, {})
    connection = pika.BlockingConnection(parameters)
    try:
        channel = connection.channel()
        got = []
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return got
            got.append((properties, body))
    finally:
        connection.close()


def run(tmp_path, workload: dict) -> dict:
    scenario = ScenarioSpec.model_validate({
        "name": "msg", "topology": "unused.yaml", "agents": 2,
        "workload": {"senders": 2, "receivers": 1, "confirms": True, **workload},
        "plan": [{"rate_per_sender": 100, "hold": "4s"}],
        "measure": {"drain": "10s", "settle": 1}})  # a step row of 3 seconds, not 1
    Controller(scenario, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    return json.loads((run_dir / "run.json").read_text())


def test_a_headers_exchange_routes_by_the_messages_headers(broker, tmp_path):
    manifest = run(tmp_path, {"exchange": "by-kind", "queue": "orders",
                              "message": {"sizes": [{"size": 64}, {"size": "4KiB"}],
                                          "properties": {"headers": {"kind": "order"}}}})
    books = manifest["accounting"]
    assert books["published"] > 500 and books["balanced"], books["explain"]
    assert books["subscriptions"]["orders"]["routed"] == books["published"]
    assert books["subscriptions"]["orders"]["received"] == books["published"]


def test_mandatory_messages_no_queue_takes_are_returned_and_counted(broker, tmp_path):
    manifest = run(tmp_path, {"exchange": "keys", "queue": "kept", "routing_keys": ["ok", "lost"],
                              "message": {"size": 256, "mandatory": True}})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["balanced"], books["explain"]
    unroutable = details["unroutable"]
    assert books["published"] // 3 < unroutable < 2 * books["published"] // 3
    assert details["returned"] == unroutable  # each one came back to its sender
    (step,) = manifest["steps"]  # publisher-confirm latency beside the delivery latency
    assert 0 < step["confirm_p50_ms"] <= step["confirm_p99_ms"] < 1000
    assert books["subscriptions"]["kept"]["received"] == books["published"] - unroutable
