"""A quorum member SIGKILLed by hand mid-run (no scheduled fault), each of the three in turn:
with publisher confirms nothing confirmed is lost, the senders go on at the target rate on the
members left, and the run tells which member stopped serving and when, how long the rate took
to recover, and splits the step there."""

import json
import os
import signal
import threading
import time

import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.tables import read_table
from tests.integration.conftest import local_cluster

pytestmark = pytest.mark.integration

KILL_AT_S = 8.0  # elapsed second of the run at which the member is killed
TOPOLOGY = TopologySpec.model_validate({
    "name": "loskill", "members": 3, "start": 3, "cpu_per_member": 0.5, "port_base": 8120,
    "queues": [{"name": "lq", "type": "quorum",
                "arguments": {"x-quorum-initial-group-size": 3}}]})
SCENARIO = ScenarioSpec.model_validate({
    "name": "los-kill", "topology": "unused.yaml", "agents": 2,
    "workload": {"queue": "lq", "senders": 10, "receivers": 10, "confirms": True,
                 "message": {"size": "1KiB", "persistent": True}},
    "plan": [{"rate_per_sender": 20, "hold": "24s"}],
    "measure": {"settle": "3s", "drain": "30s"}})


@pytest.fixture(scope="module")
def members(state_root):
    with local_cluster(TOPOLOGY, state_root) as provisioner:
        yield provisioner


def _leader(provisioner) -> str:
    """The node leading the quorum queue now, as any running member's management API says."""
    for member in provisioner.status():
        if member.running:
            return provisioner._api(member.management_port).request(
                "GET", "/queues/%2F/lq")["leader"]
    return "?"


def _kill_when(controller: Controller, pid: int, at_s: float, stop: threading.Event) -> None:
    """SIGKILL ``pid`` once the run has ticked past ``at_s`` (bounded: gives up after 120 s)."""
    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        if any(t["phase"] == 1 and t["elapsed_s"] >= at_s for t in list(controller.ticks)):
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.05)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_member_killed_by_hand_loses_nothing_and_is_told(members, tmp_path, index):
    members.up()  # the member killed by the previous case serves again
    target = members.status()[index]
    leader = _leader(members)
    controller = Controller(SCENARIO, TOPOLOGY, tmp_path, live=False)
    stop = threading.Event()
    killer = threading.Thread(target=_kill_when, args=(controller, target.pid, KILL_AT_S, stop),
                              daemon=True)
    killer.start()
    try:
        result = controller.run()
    finally:
        stop.set()
        killer.join(5)
    accounting = result.accounting
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").open()]
    ticks = read_table(result.run_dir, "ticks").to_pylist()
    manifest = json.loads((result.run_dir / "run.json").read_text())
    lost = [e for e in events if e["kind"] == "member_lost"]
    recoveries = manifest["faults"]
    print(f"\nkilled {target.name} (queue leader {leader}): {accounting.explain()}; "
          f"recovery {recoveries}; steps "
          f"{[(s.label, s.members, round(s.achieved_rate)) for s in result.steps]}")
    # nothing confirmed is lost: every message sent was received (duplicates are messages the
    # broker had taken but could not confirm before the member went, published again)
    assert accounting.lost == 0 and accounting.unexplained == 0, accounting.explain()
    assert accounting.not_republished == 0, accounting.explain()
    # told: the member and the second it stopped serving, its recovery, the step split there
    first_down = next(t for t in ticks if t["members_running"] == 2)
    assert [(e["member"], e["elapsed_s"]) for e in lost] == [
        (target.name, pytest.approx(first_down["elapsed_s"], abs=0.01))]
    assert KILL_AT_S <= lost[0]["elapsed_s"] <= KILL_AT_S + 3
    assert [(r["fault"], r["member"]) for r in recoveries] == [("member_lost", target.name)]
    assert recoveries[0]["recovery_s"] is not None, recoveries
    assert [(s.label, s.members) for s in result.steps] == [("1a", 3), ("1b", 2)]
    # the senders went on at the target rate on the members left
    assert result.steps[1].ratio >= 0.95, result.steps[1]
    assert result.outcome == "completed"
