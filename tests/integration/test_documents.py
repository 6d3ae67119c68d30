"""The documents' tables from real runs at this machine's scale, and each step naming what
saturated on runs built to hit a limit: one member capped at a fifth of a core, two queue
pairs for document 004's request/reply, one queue for the limits."""

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.documents import document_table
from results.rundir.manifest import read_manifest
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def small(state_root):
    """One member at 0.2 core: two queue pairs and a plain queue."""
    topology = TopologySpec.model_validate({
        "name": "docs1", "members": 1, "start": 1, "cpu_per_member": 0.2, "port_base": 9850,
        "queues": [{"name": "pair-%d", "count": 2}, {"name": "plain"}]})
    with local_cluster(topology, state_root) as provisioner:
        yield provisioner


def run(small, tmp_path, scenario: dict):
    spec = ScenarioSpec.model_validate({"topology": "unused.yaml", "agents": 1, **scenario})
    result = Controller(spec, small.topology, tmp_path, live=False, keep_topology=True).run()
    assert result.outcome == "completed" and result.accounting.balanced, result.accounting
    return result.run_dir


def test_queue_pairs_grow_and_the_tables_take_requesters_pairs_and_round_trips(
        small, tmp_path):
    run_dir = run(small, tmp_path, {
        "name": "it-pairs",
        "workload": {"pattern": "request-reply", "queue": "pair-%d", "senders": 4,
                     "receivers": 2, "in_flight": 1, "message": {"size": "1KiB"},
                     "unit_of_work": True},  # each server's get and put in one transaction
        "plan": [{"rate_per_sender": 0, "hold": "6s", "senders": [2, 4]}],
        "measure": {"settle": "2s", "drain": "10s"}})
    manifest = read_manifest(run_dir)
    steps = manifest.steps
    assert [(s.senders, s.queues, s.receivers) for s in steps] == [(2, 1, 2), (4, 2, 2)]
    # a responder sends nothing while its commit is under way (RabbitMQ would close the
    # connection): no error, no reconnect, no request served twice
    assert all(s.errors == 0 and s.reconnects == 0 for s in steps)
    assert manifest.accounting.duplicates == 0
    assert all(s.achieved_rate > 0 and s.broker_us_per_msg > 0 and s.generator_us_per_msg > 0
               for s in steps)
    cost = document_table("004-cost", [run_dir])
    label = run_dir.name
    assert cost.header == ["queue pairs", f"{label} transactions/s",
                           f"{label} broker CPU us/tx", f"{label} requesters+servers CPU us/tx",
                           f"{label} total CPU us/tx"]
    assert [row[0] for row in cost.rows] == ["1", "2"]
    trips = document_table("003-round-trips", [run_dir])
    assert trips.header[:2] == ["requesters", f"{label} round trips/s"]
    assert [row[0] for row in trips.rows] == ["2", "4"]
    assert [row[1] for row in trips.rows] == [f"{s.achieved_rate:,.0f}" for s in steps]


@pytest.mark.alone  # beside other modules the host's cores, not the quota, run out first
def test_a_member_at_its_quota_is_named(small, tmp_path):
    run_dir = run(small, tmp_path, {
        "name": "it-quota",
        "workload": {"queue": "plain", "senders": 2, "receivers": 2,
                     "message": {"size": "1KiB"}},
        "plan": [{"rate_per_sender": 0, "hold": "8s"}],  # as fast as it goes: 0.2 core is less
        "measure": {"settle": "3s", "drain": "15s"}})
    (step,) = read_manifest(run_dir).steps
    assert "at its CPU quota" in step.bottleneck, (step.bottleneck, step.cpu_percent)
    assert step.cpu_quota_cores == {next(iter(step.cpu_percent)): pytest.approx(0.2)}


def test_receivers_that_cannot_keep_up_are_named(small, tmp_path):
    run_dir = run(small, tmp_path, {
        "name": "it-slow-receivers",
        "workload": {"queue": "plain", "senders": 1, "receivers": 1,
                     "message": {"size": "1KiB"}},
        "plan": [{"rate_per_sender": 100, "hold": "8s"}],
        "consumer_profile": [{"delay": "25ms", "hold": "8s"}],  # at most 40 msg/s
        "measure": {"settle": "2s", "drain": "30s"}})
    (step,) = read_manifest(run_dir).steps
    assert step.bottleneck.startswith("receivers behind"), step.bottleneck
    assert "quota" not in step.bottleneck
