"""surge capacity under an adverse condition on real members: three members carrying a quorum
queue are searched ideal and with a member killed at the start of every probe and started again
when it ends. Every probe of the second search runs with the member down, the next probe waits
until it serves again, each search's run accounts for its messages (or says it cannot), and the
answer shows both conditions side by side."""

import json
from pathlib import Path

import pytest

from orchestrator.capacity.runner import search_all
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.manifest import read_manifest
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration


def test_a_member_down_over_every_probe_is_searched_beside_ideal(state_root, tmp_path):
    topology = TopologySpec.model_validate({
        "name": "itcond3", "members": 3, "start": 3, "cpu_per_member": None,
        "port_base": 10200, "queues": [{"name": "work", "type": "quorum", "arguments": {
            "x-quorum-initial-group-size": 3}}]})
    scenario = ScenarioSpec.model_validate({
        "name": "it-conditions", "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "work", "senders": 4, "receivers": 4, "confirms": True,
                     "message": {"size": "512B", "persistent": True}},
        "slo": {"p99": "2s", "backlog": 5000},
        "capacity": {"members": [3], "start_rate": 100, "growth": 2, "max_probes": 3,
                     "hold_min": "3s", "hold_max": "3s", "confirm": "3s", "drain": "10s",
                     "target": 100, "price": {"per_member_hour": 0.34},
                     "conditions": [{"name": "ideal"}, {"name": "member-down", "faults": [
                         {"kind": "kill_member", "member": 2, "at": "0s"}]}]},
        "measure": {"settle": "1s", "drain": "20s"}})
    said: list[str] = []
    with local_cluster(topology, state_root):
        result = search_all(scenario, topology, "it-conditions", tmp_path, said.append,
                            live=False, project=[])
    assert result.complete, said
    ideal, down = result.searches
    assert (ideal.condition, down.condition) == ("ideal", "member-down")
    manifest = read_manifest(Path(down.run_dir))
    assert manifest.capacity.condition == "member-down"
    events = [json.loads(line) for line in
              Path(down.run_dir, "events.jsonl").read_text().splitlines()]
    faults = [e for e in events if e["kind"] == "fault"]
    t0 = faults[0]["t"] - faults[0]["elapsed_s"]  # the load's start, on the wall clock
    killed = [e["t"] - t0 for e in events if e["kind"] == "member_killed"]
    back = [e["t"] - t0 for e in events if e["kind"] == "member_restarted"]
    phases = manifest.phases
    assert len(faults) == len(killed) == len(back) == len(phases) == len(down.probes) >= 2
    for phase, at, up in zip(phases, killed, back, strict=True):
        assert phase.start_s - 1 <= at <= phase.start_s + 2  # down from the probe's start
        assert up >= phase.end_s - 1  # ... to its end
    for up, following in zip(back, phases[1:], strict=False):
        assert up <= following.start_s  # the next probe waits until the member serves
    # every search's run balanced its books, or the answer says where it did not
    for search in result.searches:
        accounting = read_manifest(Path(search.run_dir)).accounting
        exact = accounting.unexplained == 0 and accounting.unknown is None
        assert search.accounting.startswith("exact: " if exact else "inexact: "), search
    report = (result.directory / "report.md").read_text()
    assert "| condition | rank | members | sustainable msg/s | of ideal % | per 1,000 msg/s per " \
        "month | passes all at 100 msg/s | accounting |" in report
    assert "| ideal | 1 | 3 |" in report and "| member-down | 1 | 3 |" in report
    assert " USD | yes |" in report or " USD | no |" in report
    print("\n".join(said))
    print(report)
