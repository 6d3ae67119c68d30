"""Scale-out on real members with small CPU quotas: new members start, workers move, nothing is
lost."""

import json

import psutil
import pytest

from orchestrator.controller import Controller
from orchestrator.specs import ScenarioSpec, TopologySpec
from results.rundir import read_table

pytestmark = pytest.mark.integration


def test_a_rate_one_member_cannot_carry_starts_members_until_it_is_met(state_root, tmp_path):
    topology = TopologySpec.model_validate({
        "name": "itscale", "members": 3, "start": 1, "cpu_per_member": 0.2, "port_base": 7600,
        "queues": [{"name": "work", "type": "classic", "per_member": True}]})
    scenario = ScenarioSpec.model_validate({
        "name": "it-scale", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "work", "senders": 20, "receivers": 20,
                     "message": {"size": "2KiB"}},
        "plan": [{"rate_per_sender": 180, "hold": "90s"}],  # time for two member starts
        "measure": {"settle": "3s", "drain": "60s"},
        "scaling": {"pool": 3, "scale_out": {"when_any": [{"shortfall": "3%", "for": "4s"}],
                                             "cooldown": "5s"}}})
    result = Controller(scenario, topology, tmp_path, live=False).run()
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").open()]
    started = [e for e in events if e["kind"] == "member_started"]
    assert len(started) >= 1, [e["kind"] for e in events]
    assert [e["kind"] for e in events].count("rebalanced") == len(started)
    first, last = result.steps[0], result.steps[-1]
    assert first.members == 1 and first.ratio < 0.97, first  # one member falls short
    assert last.members == 1 + len(started), last
    # Recovered: over the last 10 s of the step, end to end within 5% of the target.
    ticks = [t for t in read_table(result.run_dir, "ticks").to_pylist() if t["phase"] == 1]
    tail = ticks[-10:]
    achieved = sum(t["sent"] - p["sent"] for p, t in zip(ticks[-11:], tail))
    received = sum(t["received"] - p["received"] for p, t in zip(ticks[-11:], tail))
    seconds = tail[-1]["elapsed_s"] - ticks[-11]["elapsed_s"]
    assert min(achieved, received) / seconds >= 0.95 * 3600, (achieved, received, seconds)
    accounting = result.accounting
    assert accounting.lost == 0 and accounting.duplicates == 0 and accounting.balanced, \
        accounting.explain()
    pids = [a["pid"] for e in events if e["kind"] == "agents_up" for a in e["agents"]]
    assert not [p for p in pids if psutil.pid_exists(p)]
    assert not list((state_root / "itscale").glob("*")), "topology state left behind"


def test_scale_out_on_cpu_then_scale_in_drains_a_member_without_loss(state_root, tmp_path):
    topology = TopologySpec.model_validate({
        "name": "itscalein", "members": 2, "start": 1, "cpu_per_member": 0.25,
        "port_base": 7700, "queues": [{"name": "work", "type": "classic", "per_member": True}]})
    scenario = ScenarioSpec.model_validate({
        "name": "it-scale-in", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "work", "senders": 20, "receivers": 20,
                     "message": {"size": "2KiB"}},
        "plan": [{"rate_per_sender": 80, "hold": "40s"}, {"rate_per_sender": 5, "hold": "40s"}],
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
    assert all(row.ratio >= 0.97 for row in result.steps), result.steps
    accounting = result.accounting
    assert accounting.lost == 0 and accounting.duplicates == 0 and accounting.balanced, \
        accounting.explain()
    assert not list((state_root / "itscalein").glob("*")), "topology state left behind"
