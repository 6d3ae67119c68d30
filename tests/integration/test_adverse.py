"""Document 001's adverse conditions done for real on small local clusters: a member stopped,
a publish spike, a rolling restart of every member's VM, queues deleted under their consumers,
a memory alarm blocking publishers. Every run's books must balance exactly."""

import json
import threading
import time

import pytest

from orchestrator.run.controller import Controller
from orchestrator.run.liveview import plain_line
from orchestrator.specs.scenario import ScenarioSpec
from orchestrator.specs.topology import TopologySpec
from results.rundir.tables import read_table
from tests.integration.conftest import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # faults lag on a busy host

QUORUM = {"name": "work", "type": "quorum", "arguments": {"x-quorum-initial-group-size": 3}}


@pytest.fixture(scope="module")
def three(state_root):
    """Three members, one quorum queue over all of them."""
    topology = TopologySpec.model_validate({
        "name": "adv3", "members": 3, "start": 3, "cpu_per_member": None, "port_base": 12000,
        "queues": [QUORUM]})
    with local_cluster(topology, state_root) as provisioner:
        yield provisioner


@pytest.fixture(scope="module")
def one(state_root):
    """One member, one durable classic queue."""
    topology = TopologySpec.model_validate({
        "name": "adv1", "members": 1, "start": 1, "cpu_per_member": None, "port_base": 12020,
        "queues": [{"name": "work", "type": "classic"}]})
    with local_cluster(topology, state_root) as provisioner:
        yield provisioner


def scenario(name: str, hold: str, faults: list[dict], drain: str = "15s", **workload
             ) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": name, "topology": "unused.yaml", "agents": 1,
        "workload": {"queue": "work", "senders": 4, "receivers": 4, "confirms": True,
                     "message": {"size": "512B", "persistent": True}, **workload},
        "plan": [{"rate_per_sender": 25, "hold": hold}], "faults": faults,
        "measure": {"settle": "2s", "drain": drain}})


def run(spec: ScenarioSpec, provisioner, tmp_path):
    return Controller(spec, provisioner.topology, tmp_path, live=False,
                      keep_topology=True).run()


def events(result) -> list[dict]:
    return [json.loads(line) for line in (result.run_dir / "events.jsonl").open()]


def exact(result) -> None:
    """sent = received + still queued, nothing lost; a message received twice only where the
    broker redelivered it (a consumer's connection lost before its batched ack) or its sender
    published it again (a connection lost before its confirm)."""
    accounting = result.accounting
    assert accounting.still_queued is not None, accounting.explain()
    assert accounting.sent == accounting.received + accounting.still_queued, \
        accounting.explain()
    assert accounting.lost == 0 and accounting.unexplained == 0, accounting.explain()
    details = json.loads((result.run_dir / "run.json").read_text())["accounting_details"]
    assert accounting.duplicates <= details["redelivered"] + details["republished"], \
        (accounting.explain(), details)


def test_stop_member_loses_nothing(three, tmp_path):
    result = run(scenario("adv-stop", "20s", [
        {"kind": "stop_member", "member": 2, "at": "4s", "restart_after": "2s"}]),
        three, tmp_path)
    kinds = [e["kind"] for e in events(result)]
    assert "member_stopped" in kinds and "member_restarted" in kinds, kinds
    assert result.accounting.sent >= 0.9 * 100 * 20
    exact(result)
    assert all(m.running for m in three.status())


def test_rolling_restart_restarts_every_vm_keeping_a_leader(three, tmp_path):
    before = {m.name: m.pid for m in three.status()}
    result = run(scenario("adv-rolling", "60s", [
        {"kind": "rolling_restart", "at": "3s", "restart_after": "1s"}]), three, tmp_path)
    after = {m.name: m.pid for m in three.status()}
    happened = events(result)
    restarted = [e for e in happened if e["kind"] == "member_restarted"]
    assert [e["member"] for e in restarted] == sorted(before), restarted
    for event in restarted:  # each member's VM is a new OS process
        assert event["pid_before"] == before[event["member"]]
        assert event["pid_after"] == after[event["member"]] != before[event["member"]]
    restored = [e for e in happened if e["kind"] == "quorum_restored"]
    assert [e["member"] for e in restored] == sorted(before), [e["kind"] for e in happened]
    assert not [e for e in happened if e["kind"] == "fault_failed"]
    # the next member stopped only once the previous one was back in every quorum queue
    stops = [e["t"] for e in happened if e["kind"] == "member_stopped"]
    assert all(stop > done["t"] for stop, done in zip(stops[1:], restored, strict=False))
    ticks = read_table(result.run_dir, "ticks").to_pylist()
    assert result.accounting.sent >= 0.9 * 100 * 60
    # the queue kept a leader: publishing went on through every restart
    loaded = [t for t in ticks if t["phase"] == 1]
    assert max(_longest_zero(loaded, "send_rate"), _longest_zero(loaded, "confirm_rate")) < 5
    exact(result)


def _longest_zero(ticks: list[dict], column: str) -> int:
    longest = run_ = 0
    for tick in ticks:
        run_ = run_ + 1 if tick[column] == 0 else 0
        longest = max(longest, run_)
    return longest


def test_publish_spike_is_carried_exactly(one, tmp_path):
    result = run(scenario("adv-spike", "20s", [
        {"kind": "publish_spike", "at": "5s", "duration": "8s", "factor": 3}]), one, tmp_path)
    ticks = read_table(result.run_dir, "ticks").to_pylist()
    targets = {round(t["target_rate"]) for t in ticks if t["phase"] == 1}
    assert {100, 300} <= targets, targets
    kinds = [e["kind"] for e in events(result)]
    assert kinds.count("fault") == 1 and "fault_cleared" in kinds
    assert result.accounting.sent >= 0.9 * (100 * 12 + 300 * 8)
    exact(result)


def test_consumers_cancelled_by_the_broker_consume_again(one, tmp_path):
    result = run(scenario("adv-cancel", "24s", [
        {"kind": "delete_queues", "at": "6s", "restart_after": "4s"}], drain="8s"), one, tmp_path)
    # (what was lost never arrives: the drain always lasts its whole time)
    happened = events(result)
    deleted = next(e for e in happened if e["kind"] == "queues_deleted")
    redeclared = next(e for e in happened if e["kind"] == "fault_cleared")
    ticks = read_table(result.run_dir, "ticks").to_pylist()
    assert ticks[-1]["cancels"] == 4  # every receiver's consumer, once
    t0 = next(e["t"] for e in happened if e["kind"] == "step")
    during = [t for t in ticks if deleted["t"] - t0 + 1 < t["elapsed_s"]
              <= redeclared["t"] - t0]
    assert during and all(t["receive_rate"] == 0 for t in during), during  # the gap
    after = [t for t in ticks if t["phase"] == 1 and t["elapsed_s"] > redeclared["t"] - t0 + 6]
    assert after and all(t["receive_rate"] > 0 for t in after), after  # consuming again
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["faults"][0]["receive_gap_s"] >= len(during)
    accounting = result.accounting  # what the deleted queue held, or got meanwhile, is lost
    assert accounting.sent == accounting.received + accounting.still_queued + accounting.lost
    assert accounting.lost > 0 and accounting.duplicates == 0, accounting.explain()


def test_memory_alarm_shows_as_blocked_live_and_in_the_rows(one, tmp_path):
    spec = scenario("adv-alarm", "22s", [{"kind": "memory_alarm", "at": "5s", "duration": "8s"}])
    controller = Controller(spec, one.topology, tmp_path, live=False, keep_topology=True)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(controller.run()), daemon=True)
    worker.start()
    seen_live, seen_page = [], []
    while worker.is_alive():
        if controller.state.blocked:
            seen_live.append(plain_line(controller.state))
            page = controller.feed.since()
            columns = page["tick_columns"]
            seen_page.append(page["ticks"][-1][columns.index("blocked")])
        time.sleep(0.5)
    worker.join()
    result = done[0]
    assert seen_live and "BLOCKED by the broker" in seen_live[-1], seen_live
    assert seen_page and max(seen_page) >= 4, seen_page
    ticks = read_table(result.run_dir, "ticks").to_pylist()
    assert 5 <= ticks[-1]["blocked_s"] <= 8 + 3, ticks[-1]["blocked_s"]
    blocked = [t for t in ticks if t["blocked"]]
    assert len(blocked) >= 4 and all(t["send_rate"] == 0 or t["confirm_rate"] == 0
                                     for t in blocked[1:]), blocked
    assert ticks[-1]["blocked"] == 0
    kinds = [e["kind"] for e in events(result)]
    assert "memory_alarm" in kinds and "fault_cleared" in kinds, kinds
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["faults"][0]["blocked_s"] >= 5
    exact(result)  # held, not lost
