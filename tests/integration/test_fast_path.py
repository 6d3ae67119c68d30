"""Whether the AMQP fast path ran reaches run.json and the step table, on a real member: on by
default, off (and why) with SURGE_AMQP_FAST_PATH=0, every message accounted either way."""

from __future__ import annotations

import json

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from results.rundir.manifest import read_manifest
from results.rundir.steps import as_text
from tests.integration.conftest import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # a 4 s step within 5 % of its rate


@pytest.fixture(scope="module")
def topology(state_root):
    topology = TopologySpec(name="fpt1", members=1, start=1, port_base=8500,
                            queues=[QueueSpec(name="fast", type="classic")])
    with local_cluster(topology, state_root):
        yield topology


@pytest.mark.parametrize("variable, on, why", [
    ("1", True, ""), ("0", False, "turned off by SURGE_AMQP_FAST_PATH=0")])
def test_run_json_and_the_step_table_say_whether_the_fast_path_ran(topology, tmp_path,
                                                                   monkeypatch, variable, on, why):
    monkeypatch.setenv("SURGE_AMQP_FAST_PATH", variable)  # the agents inherit it
    spec = ScenarioSpec.model_validate({
        "name": "fpt-run", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "fast", "senders": 2, "receivers": 2, "message": {"size": 512}},
        "plan": [{"rate_per_sender": 100, "hold": "4s"}], "measure": {"settle": "1s",
                                                                      "drain": "10s"}})
    controller = Controller(spec, topology, tmp_path, live=False)
    result = controller.run()
    assert result.outcome == "completed" and result.accounting.balanced, \
        result.accounting.explain()
    recorded = json.loads((result.run_dir / "run.json").read_text())
    assert recorded["fast_path"] == {"on": on, "why": why}
    line = read_manifest(result.run_dir).fast_path.line()
    assert line == ("AMQP fast path: on" if on else f"AMQP fast path: off ({why})")
    assert as_text(result.steps, heading=line).splitlines()[0] == line


def test_request_reply_on_the_fast_path_answers_and_matches_every_request(topology, tmp_path,
                                                                          monkeypatch):
    """Requesters and responders on the fast path (requests stamped in batches, replies
    written once per read): at a rate, then closed-loop, every request served once and
    answered, every reply matched, none late, each step's round trips timed."""
    monkeypatch.setenv("SURGE_AMQP_FAST_PATH", "1")
    spec = ScenarioSpec.model_validate({
        "name": "fpt-rr", "topology": "unused.yaml", "agents": 2,
        "workload": {"pattern": "request-reply", "queue": "fast", "senders": 2,
                     "receivers": 2, "in_flight": 5, "message": {"size": 512},
                     "reply_size": "1KiB"},
        "plan": [{"rate_per_sender": 200, "hold": "4s"}, {"rate_per_sender": 0, "hold": "3s"}],
        "measure": {"settle": "1s", "drain": "10s"}})
    result = Controller(spec, topology, tmp_path, live=False).run()
    assert result.outcome == "completed"
    recorded = json.loads((result.run_dir / "run.json").read_text())
    assert recorded["fast_path"] == {"on": True, "why": ""}
    details = recorded["accounting_details"]
    assert result.accounting.balanced and result.accounting.lost == 0, \
        result.accounting.explain()
    assert details["round_trips"] == result.accounting.sent == details["served"]
    assert details["unmatched"] == 0 and details["timeouts"] == 0
    rated, closed = result.steps
    assert 0.95 <= rated.ratio <= 1.05, rated
    assert closed.achieved_rate > rated.achieved_rate  # closed-loop: as fast as replies come
    assert all(step.p50_ms > 0 and step.errors == 0 for step in result.steps)
