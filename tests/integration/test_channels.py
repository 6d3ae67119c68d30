"""Channels per connection on a real local RabbitMQ member (PerfTest's -X and -Y): an agent's
senders and receivers share connections, a channel each, as the broker lists them; when the
broker closes every connection, each comes back once for all its channels, and every message
is still accounted for exactly."""

import json
import threading

import pyarrow.parquet as pq
import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from tests.integration.conftest import close_connections, cluster_of, wait_until

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "chn", "members": 1, "start": 1, "port_base": 8920,
    "queues": [{"name": "chn"}]})

broker = cluster_of(TOPOLOGY)


def scenario(hold: str) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "chn", "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "chn", "senders": 6, "receivers": 4, "confirms": True,
                     "senders_per_connection": 3, "receivers_per_connection": 2},
        "plan": [{"rate_per_sender": 50, "hold": hold}], "measure": {"drain": "20s"}})


def books_of(tmp_path) -> dict:
    (run_dir,) = tmp_path.iterdir()
    return json.loads((run_dir / "run.json").read_text())["accounting"]


def test_workers_share_connections_a_channel_each(broker, tmp_path):
    api = broker.management()
    seen: list[list[int]] = []

    def watch() -> None:
        def listed() -> list[int]:  # the controller's own probe has one channel
            return sorted(n for c in api.request("GET", "/connections")
                          if (n := c.get("channels", 0)) > 1)
        wait_until(lambda: sum(listed()) >= 10, seconds=30)
        seen.append(listed())

    watcher = threading.Thread(target=watch)
    watcher.start()
    Controller(scenario("6s"), TOPOLOGY, tmp_path, live=False).run()
    watcher.join()
    assert seen == [[2, 2, 3, 3]]  # 6 senders in 2 connections, 4 receivers in 2
    books = books_of(tmp_path)
    assert books["balanced"] and books["lost"] == 0 and books["sent"] > 1000, books["explain"]


def test_a_closed_shared_connection_comes_back_for_all_its_channels(broker, tmp_path):
    closer = threading.Timer(4.0, lambda: close_connections(broker, at_least=4))
    closer.start()
    try:
        Controller(scenario("10s"), TOPOLOGY, tmp_path, live=False).run()
    finally:
        closer.cancel()
        closer.join()
    books = books_of(tmp_path)  # at least once: acks lost with the connection redeliver
    assert books["received"] == books["sent"] > 500 and books["lost"] == 0, books["explain"]
    assert books["still_queued"] == 0 and books["duplicates"] >= 0
    (run_dir,) = tmp_path.iterdir()
    ticks = pq.read_table(run_dir / "metrics" / "ticks").to_pylist()
    assert max(t["reconnects"] or 0 for t in ticks) >= 4  # each connection, once
