"""Exchanges, bindings and routing keys on a real local RabbitMQ member: a message published
once to a fanout exchange is received once per subscription, and a topic exchange with keys
drawn from a Zipf distribution delivers each queue exactly the copies its bindings route to
it, every copy accounted for per subscription (routed = received + queued + lost)."""

import json

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import cluster_of

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "rte", "members": 1, "start": 1, "port_base": 8720,
    "queues": [{"name": "sub-%d", "count": 3}, {"name": "region-%d", "count": 2}],
    "exchanges": [{"name": "fan", "type": "fanout"}, {"name": "orders", "type": "topic"}],
    "bindings": [{"exchange": "fan", "queue": "sub-%d"},
                 {"exchange": "orders", "queue": "region-%d", "routing_key": "nothing"},
                 {"exchange": "orders", "queue": "region-1", "routing_key": "eu.*"},
                 {"exchange": "orders", "queue": "region-2", "routing_key": "*.paid"}]})
ZIPF_KEYS = ["eu.new", "us.paid", "eu.paid", "ap.new"]  # region-1, region-2, both, none


broker = cluster_of(TOPOLOGY)


def run(tmp_path, workload: dict) -> dict:
    scenario = ScenarioSpec.model_validate({
        "name": "rte", "topology": "unused.yaml", "agents": 2,
        "workload": {"senders": 2, "confirms": True, **workload},
        "plan": [{"rate_per_sender": 100, "hold": "4s"}], "measure": {"drain": "10s"}})
    Controller(scenario, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    return json.loads((run_dir / "run.json").read_text())


def test_a_fanout_exchange_delivers_every_message_once_per_subscription(broker, tmp_path):
    manifest = run(tmp_path, {"exchange": "fan", "queue": "sub-%d", "receivers": 3})
    books = manifest["accounting"]
    published = books["published"]
    assert published > 500
    assert (books["sent"], books["received"], books["still_queued"], books["lost"]) == \
        (3 * published, 3 * published, 0, 0)
    assert books["balanced"] and books["duplicates"] == 0, books["explain"]
    assert books["subscriptions"] == {
        f"sub-{i}": {"routed": published, "received": published, "duplicates": 0,
                     "queued": 0, "lost": 0} for i in (1, 2, 3)}
    assert books["explain"].startswith(f"published {published} messages as "
                                       f"{3 * published} copies to subscriptions: ")
    assert manifest["outcome"] == "completed"


def test_topic_keys_from_a_zipf_distribution_reach_exactly_their_bound_queues(broker,
                                                                              tmp_path):
    manifest = run(tmp_path, {"exchange": "orders", "queue": "region-%d", "receivers": 2,
                              "routing_keys": ZIPF_KEYS, "key_order": "zipf"})
    books, details = manifest["accounting"], manifest["accounting_details"]
    assert books["balanced"], books["explain"]
    published = books["published"]
    subs = books["subscriptions"]
    region_1, region_2 = subs["region-1"], subs["region-2"]
    assert region_1["received"] == region_1["routed"] and region_1["lost"] == 0
    assert region_2["received"] == region_2["routed"] and region_2["lost"] == 0
    # n(key) messages took each key: region-1 gets eu.new and eu.paid, region-2 us.paid and
    # eu.paid, ap.new goes nowhere; Zipf makes eu.new the most frequent, ap.new the least
    assert 0 < details["unroutable"] < published // 4
    assert books["sent"] == region_1["routed"] + region_2["routed"]
    assert published - details["unroutable"] < books["sent"] < 2 * published
    assert region_1["routed"] > region_2["routed"] > 0


def test_the_connection_knobs_hold_a_run_exactly(broker, tmp_path):
    """Small frames (a 10 KB body in three), a confirm window of 5, acks every 3 deliveries
    and a 5 s heartbeat: the run completes and balances."""
    manifest = run(tmp_path, {"queue": "sub-%d", "receivers": 3, "frame_max": 4096,
                              "confirm_window": 5, "ack_every": 3, "heartbeat": "5s",
                              "message": {"size": 10_000}})
    books = manifest["accounting"]
    assert manifest["outcome"] == "completed" and books["balanced"], books["explain"]
    assert books["sent"] > 300 and books.get("published") is None
