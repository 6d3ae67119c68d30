"""Scale-out on real members with small CPU quotas: new members start, workers move, nothing is
lost."""

import json

import psutil
import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.tables import read_table
from topologies.rabbitmq.local import LocalRabbitMQ

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # each step within 5 % of its rate


def _steady_rate(ticks: list[dict], phase: int, seconds: int = 10) -> float:
    """End-to-end msg/s over the last ``seconds`` ticks of ``phase``: min of sent and received."""
    inside = [t for t in ticks if t["phase"] == phase][-(seconds + 1):]
    first, last = inside[0], inside[-1]
    span = last["elapsed_s"] - first["elapsed_s"]
    return min(last["sent"] - first["sent"], last["received"] - first["received"]) / span


def test_a_ramp_starts_a_member_per_shortfall_and_each_step_recovers(state_root, tmp_path):
    topology = TopologySpec.model_validate({
        "name": "itscale", "members": 3, "start": 1, "cpu_per_member": 0.25, "port_base": 7600,
        "queues": [{"name": "work", "type": "classic", "per_member": True}]})
    workload = {"queue": "work", "senders": 20, "receivers": 20, "message": {"size": "2KiB"}}
    provisioner = LocalRabbitMQ(topology)
    try:
        # What one member carries here and now: a short saturated run without scaling.
        probe = ScenarioSpec.model_validate({
            "name": "it-scale-probe", "topology": "unused.yaml", "agents": 2, "workload": workload,
            "plan": [{"rate_per_sender": 350, "hold": "18s"}],
            "measure": {"settle": "6s", "drain": "60s"}})
        one = Controller(probe, topology, tmp_path, live=False, keep_topology=True).run()
        capacity = one.steps[0].achieved_rate
        assert one.steps[0].ratio < 0.95, one.steps[0]  # one member really saturated
        # A member without a backlog carries about 1.25x its saturated rate, so step 1 needs two
        # members and step 2 three.
        rates = [1.5 * capacity, 3 * capacity]
        scenario = ScenarioSpec.model_validate({
            "name": "it-scale", "topology": "unused.yaml", "agents": 2, "workload": workload,
            "plan": [{"rate_per_sender": round(r / 20, 1), "hold": "45s"} for r in rates],
            "measure": {"settle": "3s", "drain": "60s"},
            "scaling": {"pool": 3, "scale_out": {"when_any": [{"shortfall": "3%", "for": "4s"}],
                                                 "cooldown": "8s"}}})
        result = Controller(scenario, topology, tmp_path, live=False).run()
        events = [json.loads(line) for line in (result.run_dir / "events.jsonl").open()]
        started = [e for e in events if e["kind"] == "member_started"]
        assert len(started) == 2, [e["kind"] for e in events]
        assert [e["kind"] for e in events].count("rebalanced") == 2
        assert result.steps[0].members == 1 and result.steps[-1].members == 3, result.steps
        ticks = read_table(result.run_dir, "ticks").to_pylist()
        for phase, rate in enumerate(rates, start=1):
            assert _steady_rate(ticks, phase) >= 0.95 * rate, (phase, rate, capacity)
        accounting = result.accounting
        assert accounting.lost == 0 and accounting.duplicates == 0 and accounting.balanced, \
            accounting.explain()
    finally:
        broker_pids = [m.pid for m in provisioner.status() if m.pid]
        provisioner.down()
    pids = [a["pid"] for e in events if e["kind"] == "agents_up" for a in e["agents"]]
    assert not [p for p in pids + broker_pids if psutil.pid_exists(p)]
    assert not list((state_root / "itscale").glob("*")), "topology state left behind"


def test_scale_out_on_cpu_then_scale_in_drains_a_member_without_loss(state_root, tmp_path):
    topology = TopologySpec.model_validate({
        "name": "itscalein", "members": 2, "start": 1, "cpu_per_member": 0.25,
        "port_base": 7700, "queues": [{"name": "work", "type": "classic", "per_member": True}]})
    scenario = ScenarioSpec.model_validate({
        "name": "it-scale-in", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "work", "senders": 20, "receivers": 20,
                     "message": {"size": "2KiB"}},
        "plan": [{"rate_per_sender": 80, "hold": "30s"}, {"rate_per_sender": 5, "hold": "32s"}],
        "measure": {"settle": "3s", "drain": "30s"},
        "scaling": {
            "pool": 2,
            "scale_out": {"when_any": [{"member_cpu": "80%", "for": "4s"}], "cooldown": "5s"},
            "scale_in": {"when_all": [{"member_cpu_below": "60%", "for": "6s"},
                                      {"queue_depth_below": 100, "for": "6s"}],
                         "cooldown": "5s"}}})
    result = Controller(scenario, topology, tmp_path, live=False).run()
    kinds = [json.loads(line)["kind"] for line in (result.run_dir / "events.jsonl").open()]
    scaling = [k for k in kinds if k in ("member_started", "member_draining", "member_stopped")]
    assert scaling == ["member_started", "member_draining", "member_stopped"], kinds
    assert result.steps[-1].members == 1 and result.steps[-1].step == 2
    # 1a is the lone member before the scale-out: it may fall short while the second boots
    assert all(row.ratio >= 0.97 for row in result.steps if row.label != "1a"), result.steps
    accounting = result.accounting
    assert accounting.lost == 0 and accounting.duplicates == 0 and accounting.balanced, \
        accounting.explain()
    assert not list((state_root / "itscalein").glob("*")), "topology state left behind"
