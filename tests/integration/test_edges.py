"""A message bigger than the broker takes is refused before any load, with one line naming
the size and the broker's limit: a real local member whose max_message_size is set small."""

import json

import pytest

from drivers.depth import preflight
from orchestrator.errors import ProvisionError
from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import QueueSpec, TopologySpec
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration

LIMIT = 64 * 1024
TOPOLOGY = TopologySpec(name="edg-size", members=1, start=1, port_base=8300,
                        queues=[QueueSpec(name="perf", type="classic")])


@pytest.fixture(scope="module")
def small_limit(state_root):
    with local_cluster(TOPOLOGY, state_root) as provisioner:
        # a channel reads the limit when it opens: set here, it holds for every later one
        provisioner._ctl(provisioner.member(0).name, "eval",
                         f"application:set_env(rabbit, max_message_size, {LIMIT}).")
        yield provisioner


def scenario(size: int) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "edg-size", "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "perf", "senders": 1, "receivers": 1, "message": {"size": size}},
        "plan": [{"rate_per_sender": 10, "hold": "2s"}]})


def test_a_message_over_the_broker_limit_is_refused_before_any_load(small_limit, tmp_path):
    with pytest.raises(ProvisionError) as refused:
        Controller(scenario(2 * LIMIT), TOPOLOGY, tmp_path, live=False).run()
    (line,) = str(refused.value).splitlines()
    assert line.startswith("workload.message.size: amqp://127.0.0.1:8300 refuses a message of "
                           "131,072 bytes (its max_message_size is 65,536 bytes)"), line
    (run_dir,) = tmp_path.iterdir()
    kinds = [json.loads(e)["kind"] for e in (run_dir / "events.jsonl").read_text().splitlines()]
    assert "error" in kinds and "agents_up" not in kinds and "step" not in kinds
    assert json.loads((run_dir / "run.json").read_text())["outcome"] == "failed"
    assert small_limit.status()[0].running  # a topology the run did not start stays up


def test_a_message_at_the_limit_passes_and_the_check_leaves_no_message(small_limit):
    endpoints = [m.endpoint for m in small_limit.status() if m.running]
    probe = preflight("rabbitmq", endpoints, ["perf"], small_limit.client_settings())
    try:
        probe.check_size(LIMIT)
        assert probe.read()[0] == {"perf": 0}
    finally:
        probe.close()
