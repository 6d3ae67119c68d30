"""Members that stop serving without the run stopping them: noticed from the broker samples,
told as an event with the member and the second, recovered from like a scheduled fault, and
never confused with the run's own stops (on a fake clock, with the run loop's fakes)."""

import json

from orchestrator.run.losses import MemberWatch, OwnStops
from tests.fakes import FakeClock, ScriptedProvisioner
from tests.unit.test_controller import run, scenario, topology
from topologies.base import BrokerSample, MemberSample


def sample(*running: bool) -> BrokerSample:
    return BrokerSample([MemberSample(f"m{i}", r, None, None) for i, r in enumerate(running)])


def watch(members: int = 3) -> tuple[MemberWatch, OwnStops, list[tuple[str, dict]]]:
    events: list[tuple[str, dict]] = []
    own = OwnStops(ScriptedProvisioner(topology(members=members, start=members), FakeClock()))
    own.up()
    return MemberWatch(own, lambda kind, **fields: events.append((kind, fields))), own, events


def test_a_member_down_in_a_sample_is_lost_at_that_second_and_back_when_it_serves():
    losses, _, events = watch()
    losses.observe(sample(True, True, True), 1.0)
    losses.observe(sample(True, True, True), 2.0)
    losses.observe(None, 3.0)  # a missed sample says nothing
    losses.observe(sample(False, True, True), 4.0)
    losses.observe(sample(False, True, True), 5.0)  # still down: told once
    losses.observe(sample(True, True, True), 9.0)
    assert [(kind, f["member"], f["elapsed_s"]) for kind, f in events] == [
        ("member_lost", "m0", 4.0), ("member_back", "m0", 9.0)]
    assert "m0 stopped serving at 4 s" in events[0][1]["explain"]
    assert losses.count == 1 and not losses.lost


def test_members_the_run_stops_itself_are_not_lost():
    losses, own, events = watch()
    losses.observe(sample(True, True, True), 1.0)
    own.stop_member(2, kill=True)  # a scheduled fault or a scale-in, through the provisioner
    losses.observe(sample(True, True, False), 2.0)
    own.start_member(2)
    losses.observe(sample(True, True, True), 3.0)
    losses.observe(sample(True, True, False), 4.0)  # down again, and this time not by the run
    assert [(kind, f["member"], f["elapsed_s"]) for kind, f in events] == [
        ("member_lost", "m2", 4.0)]


def test_members_not_serving_from_the_start_are_not_lost():
    losses, _, events = watch()
    losses.observe(sample(True, False, False), 1.0)
    losses.observe(sample(True, False, False), 2.0)
    assert events == []


class KilledByHand(ScriptedProvisioner):
    """Member 0 stops serving at the ``kill_at``-th sample, with nobody in the run asking."""

    kill_at = 6

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.samples = 0

    def sample(self) -> BrokerSample:
        self.samples += 1
        if self.samples == self.kill_at:
            self.running[0] = False
        return super().sample()


def test_a_run_tells_a_member_lost_with_its_second_its_recovery_and_splits_the_step(
        tmp_path, monkeypatch):
    monkeypatch.setattr("tests.unit.test_controller.ScriptedProvisioner", KilledByHand)
    spec = scenario([{"rate_per_sender": 100, "hold": "12s"}])
    result, controller, _, _, manifest = run(spec, topology(members=3, start=3), tmp_path)
    events = [json.loads(line) for line in
              (controller.run_dir / "events.jsonl").read_text().splitlines()]
    lost = [e for e in events if e["kind"] == "member_lost"]
    first_down = next(t for t in controller.ticks if t["members_running"] == 2)
    assert [(e["member"], e["elapsed_s"]) for e in lost] == [("m0", first_down["elapsed_s"])]
    recoveries = manifest["faults"]
    assert [(r["fault"], r["member"], r["at_s"]) for r in recoveries] == [
        ("member_lost", "m0", first_down["elapsed_s"])]
    assert recoveries[0]["recovery_s"] is not None and recoveries[0]["recovery_s"] > 0
    assert [s.label for s in result.steps] == ["1a", "1b"]
    assert [s.members for s in result.steps] == [3, 2]


def test_a_scheduled_kill_is_a_fault_and_not_a_member_lost(tmp_path):
    spec = scenario([{"rate_per_sender": 100, "hold": "12s"}],
                    faults=[{"kind": "kill_member", "member": 1, "at": "4s",
                             "restart_after": "3s"}])
    _, controller, _, _, manifest = run(spec, topology(members=3, start=3), tmp_path)
    kinds = [json.loads(line)["kind"] for line in
             (controller.run_dir / "events.jsonl").read_text().splitlines()]
    assert "member_killed" in kinds and "member_restarted" in kinds
    assert "member_lost" not in kinds and "member_back" not in kinds
    assert [r["fault"] for r in manifest["faults"]] == ["kill_member"]
