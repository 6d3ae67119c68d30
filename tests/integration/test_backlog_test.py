"""OpenMessaging Benchmark's backlog test on a real local RabbitMQ member: receivers are held
until the queue holds the backlog, then drain it while senders go on at half the rate; the run
times both parts, gives the drain rate, and accounts for every message."""

import json

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.report import backlog_tests_text
from results.rundir.manifest import RunManifest
from tests.integration.conftest import cluster_of

pytestmark = pytest.mark.integration

TOPOLOGY = TopologySpec.model_validate({
    "name": "bkl", "members": 1, "start": 1, "port_base": 12040,
    "queues": [{"name": "orders"}]})


broker = cluster_of(TOPOLOGY)


def test_a_backlog_is_built_with_receivers_held_and_drained_at_a_measured_rate(broker, tmp_path):
    scenario = ScenarioSpec.model_validate({
        "name": "bkl", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "orders", "senders": 2, "receivers": 2, "confirms": True,
                     "message": {"size": 512}},
        "plan": ["200:2s", {"rate_per_sender": 200, "hold": "20s",
                            "backlog": {"messages": 2000, "publish_ratio": 0.5}}],
        "measure": {"drain": "10s"}})
    Controller(scenario, TOPOLOGY, tmp_path, live=False).run()
    (run_dir,) = tmp_path.iterdir()
    manifest = json.loads((run_dir / "run.json").read_text())
    (test,) = manifest["backlogs"]
    assert test["step"] == 2 and test["target_messages"] == 2000
    assert 2000 <= test["built_messages"] < 2600  # built in whole seconds of 400 msg/s
    assert 4 <= test["build_s"] <= 8 and 0 < test["drain_s"] < 10
    assert test["drain_rate"] > 200  # the receivers took the backlog faster than it came
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events if e["kind"].startswith("backlog")]
    assert kinds == ["backlog_building", "backlog_built", "backlog_drained"]
    books = manifest["accounting"]
    assert books["balanced"] and books["lost"] == 0, books["explain"]
    (line,) = backlog_tests_text(RunManifest.model_validate(manifest))
    assert line.startswith("- backlog test of step 2: 2,000 messages built (")
