"""Campaigns without brokers: expansion and cell ids, validation errors, the requirement, the
resume decision, and the runner's order of topology and cell work (with fakes)."""

import io
import json
import threading
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.campaign.requirement import Requirement, judge
from orchestrator.campaign.runner import (
    CampaignRunner,
    CellRecord,
    recall,
    set_aside,
    summary_text,
    unfresh,
)
from orchestrator.campaign.view import CampaignView, eta_s, recorded_overhead
from orchestrator.errors import SpecError, SurgeError
from orchestrator.run.liveview import ViewState
from orchestrator.specs.campaign import (
    CampaignSpec,
    cell_id,
    expand_cells,
    load_campaign,
    override_text,
    short_names,
)
from orchestrator.specs.kinds import load_any
from results.compare import ranking_text
from results.lake import Lake
from results.rundir.manifest import RunManifest

TOPOLOGY = """\
name: t1
members: 3
start: 1
queues:
  - {name: perf}
"""

SCENARIO = """\
name: s1
topology: topo.yaml
workload: {queue: perf, senders: 4, receivers: 4, message: {size: 2KiB}}
plan:
  - {rate_per_sender: 50, hold: 20s}
"""

CAMPAIGN = """\
name: smoke
repetitions: 2
requirement: {rate_within: 5%}
cells:
  - scenario: specs/scen.yaml
    set: {plan.0.hold: 5s}
    matrix:
      topology.members: [1, 2]
      workload.message.size: [2KiB, 20KiB]
"""


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "topo.yaml").write_text(TOPOLOGY)
    (tmp_path / "specs" / "scen.yaml").write_text(SCENARIO)
    (tmp_path / "smoke.yaml").write_text(CAMPAIGN)
    return tmp_path


# -- expansion and ids --------------------------------------------------------------------------

def test_cells_expand_in_a_fixed_order_with_readable_ids(spec_dir):
    campaign = load_campaign(spec_dir / "smoke.yaml")
    ids = [cell.id for cell in campaign.cells]
    assert ids[:4] == ["001-scen-members=1,size=2KiB-r1", "002-scen-members=1,size=20KiB-r1",
                       "003-scen-members=2,size=2KiB-r1", "004-scen-members=2,size=20KiB-r1"]
    assert ids[4:] == [f"{n:03d}{i[3:-1]}2" for n, i in enumerate(ids[:4], start=5)]
    assert ids[4] == "005-scen-members=1,size=2KiB-r2"
    assert [cell.repetition for cell in campaign.cells] == [1] * 4 + [2] * 4
    assert expand_cells(campaign.spec) == campaign.cells  # deterministic
    cell = campaign.cells[3]
    assert cell.overrides == ["plan.0.hold=5s", "topology.members=2",
                              "workload.message.size=20KiB"]
    scenario, topology = campaign.specs[cell.id]
    assert scenario.plan[0].hold == 5 and scenario.workload.message.size == 20 * 1024
    assert topology.members == 2
    assert campaign.planned_s(cell) == 5
    assert cell.combination == campaign.cells[7].combination != campaign.cells[2].combination


def test_short_names_keep_keys_apart():
    assert short_names(["workload.message.size", "topology.members"]) == {
        "workload.message.size": "size", "topology.members": "members"}
    assert short_names(["plan.0.hold", "plan.1.hold", "plan.0.rate_per_sender"]) == {
        "plan.0.hold": "0.hold", "plan.1.hold": "1.hold",
        "plan.0.rate_per_sender": "rate_per_sender"}


def test_cell_ids_are_safe_directory_names():
    assert cell_id(3, "quickstart", [("members", "5"), ("size", "2KiB")], 1) == \
        "003-quickstart-members=5,size=2KiB-r1"
    assert cell_id(1, "s", [], 2) == "001-s-r2"
    odd = cell_id(7, "s", [("path", "a/b c"), ("rate", "+50")], 1)
    assert odd == "007-s-path=a_b_c,rate=+50-r1"
    long = cell_id(1, "s", [("v", "x" * 400)], 1)
    assert len(long) < 160 and long.endswith("-r1")
    assert long != cell_id(1, "s", [("v", "x" * 399 + "y")], 1)


def test_matrix_values_become_overrides_that_read_back_the_same():
    from orchestrator.specs.loader import PlusSigned
    assert override_text(3) == "3"
    assert override_text(0.5) == "0.5"
    assert override_text(PlusSigned(50)) == "+50"
    assert override_text("2KiB") == "2KiB"
    assert override_text("yes") == "'yes'"
    assert override_text(None) == "null"
    assert override_text([1, 2]) == "[1, 2]"


def test_a_topology_value_names_a_file_relative_to_the_campaign(spec_dir):
    (spec_dir / "specs" / "other.yaml").write_text(TOPOLOGY.replace("t1", "t2"))
    (spec_dir / "smoke.yaml").write_text(
        "name: topo\ncells:\n  - scenario: specs/scen.yaml\n"
        "    matrix: {topology: [specs/topo.yaml, specs/other.yaml]}\n")
    campaign = load_campaign(spec_dir / "smoke.yaml")
    assert [c.id for c in campaign.cells] == ["001-scen-topology=topo-r1",
                                              "002-scen-topology=other-r1"]
    assert [campaign.specs[c.id][1].name for c in campaign.cells] == ["t1", "t2"]


def test_the_commands_set_goes_to_every_cell_after_its_own(spec_dir):
    (spec_dir / "specs" / "other.yaml").write_text(TOPOLOGY.replace("t1", "t2"))
    campaign = load_campaign(spec_dir / "smoke.yaml",
                             ["plan.0.hold=2s", "workload.senders=3", "topology=other.yaml"])
    assert [c.id for c in campaign.cells] == [c.id for c in load_campaign(
        spec_dir / "smoke.yaml").cells]  # the ids are the file's
    cell = campaign.cells[3]
    assert cell.overrides == ["plan.0.hold=5s", "topology.members=2",
                              "workload.message.size=20KiB", "plan.0.hold=2s",
                              "workload.senders=3", "topology=other.yaml"]  # by the scenario
    scenario, topology = campaign.specs[cell.id]
    assert (scenario.plan[0].hold, scenario.workload.senders) == (2, 3)
    assert (topology.name, topology.members) == ("t2", 2)


def test_a_commands_set_that_is_wrong_is_named_as_given(spec_dir):
    path = spec_dir / "smoke.yaml"
    with pytest.raises(SpecError) as caught:
        load_campaign(path, ["workload.message.size=2KiB", "hold", "topology.members.x=1"])
    assert str(caught.value).splitlines() == [
        f"{path}: --set workload.message.size: cells.0.matrix varies it; a --set would make "
        f"those cells alike (change the campaign instead)",
        f"{path}: --set hold: expected field.path=value, e.g. plan.0.hold=5s or "
        f"topology.members=3",
        f"{path}: --set topology.members.x: cells.0.matrix varies it; a --set would make "
        f"those cells alike (change the campaign instead)"]
    with pytest.raises(SpecError) as caught:
        load_campaign(path, ["workload.senders=0"])
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f"{path}: --set workload.senders: ") and \
        line.endswith("(scenario scen.yaml with workload.senders=0)")


# -- validation ---------------------------------------------------------------------------------

def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_any(path)
    return str(caught.value).splitlines()


def test_load_any_knows_a_campaign(spec_dir):
    assert type(load_any(spec_dir / "smoke.yaml")) is CampaignSpec


def test_unknown_key_names_file_line_and_field(spec_dir):
    path = spec_dir / "smoke.yaml"
    path.write_text(CAMPAIGN.replace("    set:", "    sett:"))
    (line,) = [e for e in errors_of(path) if "sett" in e]
    assert line.startswith(f"{path}:6: cells.0.sett: unknown field; did you mean 'set'?")


def test_matrix_key_that_is_no_valid_override_is_named(spec_dir):
    path = spec_dir / "smoke.yaml"
    path.write_text(CAMPAIGN.replace("workload.message.size", "workload.mesage.size"))
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:9: cells.0.matrix.workload.mesage.size: unknown field; "
                           "did you mean 'message'?")
    path.write_text(CAMPAIGN.replace("plan.0.hold", "plan.3.hold"))
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:6: cells.0.set.plan.3.hold: --set path does not exist")


def test_bad_matrix_value_names_the_value(spec_dir):
    path = spec_dir / "smoke.yaml"
    path.write_text(CAMPAIGN.replace("[1, 2]", "[1, 0]"))
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:8: cells.0.matrix.topology.members:")
    assert "topology.members=0" in line


def test_missing_scenario_and_broken_scenario_are_named(spec_dir):
    path = spec_dir / "smoke.yaml"
    path.write_text(CAMPAIGN.replace("specs/scen.yaml", "specs/absent.yaml"))
    (line,) = errors_of(path)
    assert line == f"{path}:5: cells.0.scenario: file not found: {spec_dir}/specs/absent.yaml"
    path.write_text(CAMPAIGN)
    (spec_dir / "specs" / "scen.yaml").write_text(SCENARIO.replace("senders: 4", "senders: -1"))
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:5: cells.0.scenario: {spec_dir}/specs/scen.yaml:3: "
                           "workload.senders:")


def test_campaign_fields_are_checked(spec_dir):
    path = spec_dir / "smoke.yaml"
    path.write_text(CAMPAIGN.replace("[1, 2]", "[]").replace("name: smoke", "name: a/b"))
    lines = errors_of(path)
    assert any(line.startswith(f"{path}:1: name:") for line in lines)
    assert any("cells.0.matrix" in line and "at least one value for topology.members" in line
               for line in lines)


# -- the requirement ----------------------------------------------------------------------------

def step(label, target, achieved, p99=5.0, sent=None):
    return {"step": int(label), "label": label, "target_rate": target, "achieved_rate": achieved,
            "sent_rate": target if sent is None else sent, "p99_ms": p99}


BALANCED = {"sent": 100, "received": 100, "balanced": True, "lost": 0, "duplicates": 0,
            "unexplained": 0, "still_queued": 0}


def manifest(steps, accounting=BALANCED, outcome="completed", **fields) -> RunManifest:
    return RunManifest(run_id="r", scenario={"name": "s"}, outcome=outcome, steps=steps,
                       accounting=accounting, **fields)


def run_json(*args, **fields) -> str:
    return json.dumps(manifest(*args, **fields).to_json())


def test_a_run_within_its_targets_and_balanced_passes():
    verdict = judge(Requirement(), manifest([step("1", 1000, 990), step("2", 2000, 2040)]))
    assert verdict.passed
    assert verdict.reason == "within ±5% (worst +2.0% at step 2); nothing lost"


def test_a_step_out_of_tolerance_fails_with_the_worst_named():
    verdict = judge(Requirement(), manifest(
        [step("1", 1000, 990), step("2", 2000, 1800), step("3", 3000, 2400)]))
    assert not verdict.passed
    assert verdict.reason == ("step 3: achieved 2,400 of 3,000 msg/s (-20.0%, allowed ±5%) "
                              "(and 1 more step)")
    assert not judge(Requirement(), manifest([step("1", 1000, 1100)])).passed  # above too
    slow_consumers = manifest([step("1", 1000, 640, sent=1002)])
    assert not judge(Requirement(), slow_consumers).passed
    assert judge(Requirement(rate="published"), slow_consumers).passed
    final_only = Requirement(steps="final", rate_within="25%")
    assert judge(final_only, manifest([step("1", 1000, 500), step("2", 2000, 1800)])).passed


def test_loss_latency_outcome_and_missing_steps_fail():
    lost = {**BALANCED, "balanced": False, "lost": 12}
    verdict = judge(Requirement(), manifest([step("1", 1000, 1000)], lost))
    assert not verdict.passed and verdict.reason.startswith("messages lost: lost 12")
    redelivered = {**BALANCED, "balanced": False, "duplicates": 6}
    assert judge(Requirement(), manifest([step("1", 1000, 1000)], redelivered)).passed
    assert judge(Requirement(lossless=False), manifest([step("1", 1000, 1000)], lost)).passed
    slow = judge(Requirement(p99_below="10ms"), manifest([step("1", 1000, 1000, p99=25.0)]))
    assert not slow.passed and "p99 25.0 ms" in slow.reason
    stopped = judge(Requirement(), manifest([step("1", 1000, 1000)], outcome="interrupted"))
    assert (stopped.passed, stopped.reason) == (False,
                                                "run not completed (outcome interrupted)")
    assert "no step table" in judge(Requirement(), manifest([])).reason
    assert judge(Requirement(), manifest([step("1", 0, 12345)])).passed  # as fast as possible


# -- resuming -----------------------------------------------------------------------------------

def record_run(root: Path, cell_id_: str, outcome: str | None, steps=None) -> Path:
    run_dir = root / cell_id_
    run_dir.mkdir(parents=True)
    if outcome is not None:
        (run_dir / "run.json").write_text(run_json(steps or [step("1", 100, 100)],
                                                   outcome=outcome))
    return run_dir


def test_resume_skips_completed_cells_only(spec_dir, tmp_path):
    campaign = load_campaign(spec_dir / "smoke.yaml")
    root = tmp_path / "runs"
    ids = [cell.id for cell in campaign.cells]
    record_run(root, ids[0], "completed")
    record_run(root, ids[1], "completed", [step("1", 100, 50)])
    record_run(root, ids[2], "interrupted")
    record_run(root, ids[3], "running")  # the campaign crashed during it: interrupted
    record_run(root, ids[4], None)  # a directory without run.json
    records = recall(root, campaign.cells, campaign.spec.requirement)
    assert [(r.status, r.passed) for r in records] == [
        ("done", True), ("done", False), ("interrupted", None), ("interrupted", None),
        ("failed", None), ("pending", None), ("pending", None), ("pending", None)]
    assert records[4].reason == "left no run.json"


def test_an_unfinished_attempt_is_renamed_aside_never_deleted(tmp_path):
    run_dir = record_run(tmp_path, "001-s-r1", "interrupted")
    assert set_aside(run_dir) == tmp_path / "001-s-r1.attempt-1"
    assert not run_dir.exists()
    record_run(tmp_path, "001-s-r1", "failed")
    assert set_aside(run_dir) == tmp_path / "001-s-r1.attempt-2"
    assert (tmp_path / "001-s-r1.attempt-1" / "run.json").exists()
    assert set_aside(run_dir) is None


def test_time_left_uses_planned_durations_and_measured_overhead():
    assert eta_s([60, 60], None, 0, []) == 2 * (60 + 20)  # default overhead until measured
    assert eta_s([60], 30, 10, [8, 12]) == (30 + 10 - 10) + (60 + 10)
    assert eta_s([], 30, 100, [10]) == 0
    run = manifest([], started_at="2026-11-22T12:00:00+00:00",
                   ended_at="2026-11-22T12:01:10+00:00")
    assert recorded_overhead(run, 60) == 10
    assert recorded_overhead(manifest([]), 60) is None and recorded_overhead(None, 60) is None


def test_the_page_shows_every_cell_with_its_status_verdict_and_the_time_left(spec_dir,
                                                                           tmp_path):
    campaign = load_campaign(spec_dir / "smoke.yaml")
    root = tmp_path / "runs"
    ids = [cell.id for cell in campaign.cells]
    record_run(root, ids[0], "completed")
    records = recall(root, campaign.cells, campaign.spec.requirement)
    view = CampaignView(campaign, records, Console(file=io.StringIO()))
    view.start(records[1].cell, ViewState())
    page = view.page()
    assert (page["done"], page["running"], page["left"]) == (1, 1, len(ids) - 2)
    assert [c["status"] for c in page["cells"][:3]] == ["done", "running", "pending"]
    assert page["cells"][0]["verdict"] == "pass" and page["cells"][1]["verdict"] is None
    assert page["cells"][2]["run_id"] is None and page["eta_s"] > 0
    view.finish(records[1], 42.0)
    assert view.page()["cells"][1]["seconds"] == 42.0


def test_a_topology_is_reused_only_as_a_run_starts_it():
    clean = manifest([step("1", 100, 100)], {**BALANCED, "still_queued": 0})
    assert unfresh([0, 1], 2, clean) == ""
    assert unfresh([0, 1, 2], 2, clean) == "members [0, 1, 2] serve; a run starts with [0, 1]"
    assert unfresh([0, 1], 2, manifest([], {**BALANCED, "still_queued": 1500})) == \
        "the last run left 1,500 messages queued"
    assert "no accounting" in unfresh([0, 1], 2, None)


# -- the runner, with fakes for the provisioner and the controller ------------------------------

class Fakes:
    """Stand-ins that record what the runner does, in order."""

    def __init__(self):
        self.log: list[str] = []
        self.outcomes: dict[str, str] = {}  # cell number -> outcome or "raise"/"ctrl-c"
        self.up: set[str] = set()  # names of the topologies up now
        fakes = self

        class Provisioner:
            def __init__(self, topology, state_root=None):
                self.topology = topology

            def status(self):
                from topologies.base import Member
                running = self.topology.name in fakes.up
                return [Member(index=0, name="m0", host="h", port=1, management_port=2,
                               prometheus_port=3, running=running, pid=1 if running else None)]

            def up(self):
                assert self.topology.name not in fakes.up, "two topologies of one name up"
                fakes.up.add(self.topology.name)
                fakes.log.append(f"up {self.topology.name}/{self.topology.members}")

            def down(self):
                fakes.up.discard(self.topology.name)
                fakes.log.append(f"down {self.topology.name}/{self.topology.members}")
                return []

        class Controller:
            def __init__(self, scenario, topology, runs_dir, live, keep_topology, run_id,
                         metrics_port, schedule, board):
                assert live is False and keep_topology is True
                assert board is not None  # the campaign's page shows each cell's run
                assert schedule is None  # a plan of steps, not a capacity search
                assert metrics_port is None  # the default port, or any free one
                self.run_dir = runs_dir / run_id
                self.run_id = run_id
                self.state = ViewState()
                self.stop_requested = threading.Event()

            def run(self):
                fakes.log.append(f"run {self.run_id[:3]}")
                outcome = fakes.outcomes.get(self.run_id[:3], "completed")
                self.run_dir.mkdir(parents=True)
                if outcome == "ctrl-c at the end":  # the run finished as Ctrl-C came
                    outcome = "completed"
                    self.stop_requested.set()
                written = "aborted" if outcome == "ctrl-c" else \
                    "failed" if outcome == "raise" else outcome
                (self.run_dir / "run.json").write_text(run_json([step("1", 100, 100)],
                                                                outcome=written))
                if outcome == "raise":
                    raise RuntimeError("agent 0 did not answer")
                if outcome == "ctrl-c":
                    raise KeyboardInterrupt

        self.Provisioner, self.Controller = Provisioner, Controller


@pytest.fixture
def fakes(monkeypatch):
    made = Fakes()
    monkeypatch.setattr("topologies.rabbitmq.local.LocalRabbitMQ", made.Provisioner)
    monkeypatch.setattr("orchestrator.run.controller.Controller", made.Controller)
    return made


def run(spec_dir, tmp_path, output: io.StringIO | None = None):
    campaign = load_campaign(spec_dir / "smoke.yaml")
    result = CampaignRunner(campaign, tmp_path / "out",
                            Console(file=output or io.StringIO(), width=80)).run()
    state = json.loads((tmp_path / "out" / "smoke" / "campaign.json").read_text())
    return result, state


def statuses(state):
    return [cell["status"] for cell in state["cells"]]


def test_cells_run_by_topology_and_each_topology_is_torn_down(fakes, spec_dir, tmp_path):
    (spec_dir / "smoke.yaml").write_text(CAMPAIGN.replace("repetitions: 2", "repetitions: 1"))
    output = io.StringIO()
    result, state = run(spec_dir, tmp_path, output)
    assert fakes.log == ["up t1/1", "run 001", "run 002", "down t1/1",
                         "up t1/2", "run 003", "run 004", "down t1/2"]
    lines = output.getvalue().splitlines()  # not a terminal: a line as each cell starts, ends
    assert lines[0].startswith("0 done, 1 running, 3 left (0 failed), ~1m40s left: "
                               "001-scen-members=1,size=2KiB-r1 starting (5 s planned)")
    assert lines[1].startswith("001-scen-members=1,size=2KiB-r1: done, pass: within ±5%")
    assert len(lines) == 8
    assert result.stopped is None and statuses(state) == ["done"] * 4
    assert [cell["passed"] for cell in state["cells"]] == [True] * 4
    assert state["topology_up"] is None and state["campaign"]["name"] == "smoke"
    assert state["cells"][3]["overrides"][-1] == "workload.message.size=20KiB"
    fakes.log.clear()
    again, _ = run(spec_dir, tmp_path)
    assert fakes.log == [] and again.ran == []  # all done: nothing runs, nothing starts


def test_ctrl_c_stops_the_campaign_and_resuming_runs_the_rest(fakes, spec_dir, tmp_path):
    (spec_dir / "smoke.yaml").write_text(CAMPAIGN.replace("repetitions: 2", "repetitions: 1"))
    fakes.outcomes["002"] = "interrupted"
    result, state = run(spec_dir, tmp_path)
    assert fakes.log == ["up t1/1", "run 001", "run 002", "down t1/1"]
    assert result.stopped == "interrupted"
    assert statuses(state) == ["done", "interrupted", "pending", "pending"]
    first = (tmp_path / "out" / "smoke" / result.records[0].cell.id / "run.json").read_text()
    fakes.log.clear()
    fakes.outcomes.clear()
    result, state = run(spec_dir, tmp_path)
    assert fakes.log == ["up t1/1", "run 002", "down t1/1", "up t1/2", "run 003", "run 004",
                         "down t1/2"]
    assert statuses(state) == ["done"] * 4 and result.ran == [r.cell.id for r in
                                                              result.records[1:]]
    root = tmp_path / "out" / "smoke"
    assert (root / f"{result.records[1].cell.id}.attempt-1" / "run.json").exists()
    assert (root / result.records[0].cell.id / "run.json").read_text() == first


def test_a_ctrl_c_as_a_cell_finishes_stops_the_campaign(fakes, spec_dir, tmp_path):
    fakes.outcomes["001"] = "ctrl-c at the end"
    result, state = run(spec_dir, tmp_path)
    assert result.stopped == "interrupted" and statuses(state)[0] == "done"
    assert [line for line in fakes.log if line.startswith("run")] == ["run 001"]
    assert fakes.up == set()  # torn down all the same


def test_a_second_ctrl_c_still_tears_down(fakes, spec_dir, tmp_path):
    fakes.outcomes["001"] = "ctrl-c"
    result, state = run(spec_dir, tmp_path)
    assert fakes.log == ["up t1/1", "run 001", "down t1/1"]
    assert result.stopped == "forced" and statuses(state)[0] == "interrupted"


def test_a_broken_cell_is_recorded_and_the_campaign_goes_on(fakes, spec_dir, tmp_path):
    (spec_dir / "smoke.yaml").write_text(CAMPAIGN.replace("repetitions: 2", "repetitions: 1"))
    fakes.outcomes["001"] = "raise"
    result, state = run(spec_dir, tmp_path)
    assert fakes.log[:5] == ["up t1/1", "run 001", "down t1/1", "up t1/1", "run 002"]
    assert statuses(state) == ["failed", "done", "done", "done"]
    assert state["cells"][0]["reason"] == "RuntimeError: agent 0 did not answer"
    assert result.stopped is None


def test_a_topology_a_crashed_campaign_left_up_is_stopped_first(fakes, spec_dir, tmp_path):
    root = tmp_path / "out" / "smoke"
    root.mkdir(parents=True)
    (root / "campaign.json").write_text(json.dumps(
        {"topology_up": {"name": "t1", "members": 2, "start": 1}}))
    fakes.up.add("t1")
    run(spec_dir, tmp_path)
    assert fakes.log[:2] == ["down t1/2", "up t1/1"]


def test_a_topology_up_before_the_campaign_is_left_alone(fakes, spec_dir, tmp_path):
    fakes.up.add("t1")
    with pytest.raises(SurgeError, match="already up, not started by this campaign"):
        run(spec_dir, tmp_path)
    assert fakes.log == []


# -- the summary --------------------------------------------------------------------------------

def analysed(run_dir: Path, achieved: float, cost: float | None) -> None:
    Lake(run_dir.parent).commit({
        "steps": [{"run_id": run_dir.name, "label": "1", "start_s": 0.0, "target_rate": 100,
                   "achieved_rate": achieved, "p99_ms": 5.0, "members": 1}],
        "cost": [{"run_id": run_dir.name, "broker_us_per_msg": cost, "generator_us_per_msg": 1.0,
                  "broker_cost_per_1k_msg_s_month": cost}]}, {run_dir.name: "fingerprint"})


def test_ranking_keeps_only_the_runs_that_passed(tmp_path):
    dirs = [tmp_path / name for name in ("a", "b", "c")]
    for run_dir, cost in zip(dirs, (3.0, 1.0, 2.0)):
        run_dir.mkdir()
        analysed(run_dir, 100, cost)
    default = [line.split()[1] for line in ranking_text(dirs).splitlines()[1:]]
    assert default == ["b", "c", "a"]
    chosen = [line.split()[1] for line in ranking_text(dirs, passed=[dirs[0], dirs[2]])
              .splitlines()[1:]]
    assert chosen == ["c", "a"]


def test_a_passed_run_of_unknown_cost_is_named_not_ranked(tmp_path):
    dirs = [tmp_path / name for name in ("a", "b")]
    for run_dir in dirs:
        run_dir.mkdir()
    analysed(dirs[0], 100, 2.0)
    analysed(dirs[1], 100, None)  # e.g. Kubernetes: no member CPU, so no broker cost
    lines = [line.split() for line in ranking_text(dirs, passed=dirs).splitlines()[1:]]
    assert lines == [["1", "a", "100", "1", "2.00"], ["-", "b", "100", "1", "cost", "unknown"]]


def test_summary_has_cells_comparison_and_ranking(spec_dir, tmp_path):
    campaign = load_campaign(spec_dir / "smoke.yaml")
    root = tmp_path / "runs"
    records = [CellRecord(cell) for cell in campaign.cells]
    for record, achieved in zip(records[:2], (100, 50)):
        run_dir = record_run(root, record.cell.id, "completed", [step("1", 100, achieved)])
        (run_dir / "run.json").write_text(json.dumps(
            manifest([{**step("1", 100, achieved), "min_rate": achieved, "sent_rate": 100,
                       "received_rate": achieved, "members": 1}]).replace(
                scenario={"name": "s1"}).to_json()))
        analysed(run_dir, achieved, 1.0)
    records[0].status, records[0].passed, records[0].reason = "done", True, "ok"
    records[1].status, records[1].passed, records[1].reason = "done", False, "too slow"
    from orchestrator.campaign.runner import CampaignResult
    text = summary_text(campaign, CampaignResult(root, records))
    assert text.startswith("campaign smoke: 8 cells, 2 done (1 passed the requirement), "
                           "0 failed, 6 not run")
    table = text.split("\n\n")[2].splitlines()
    assert table[1].split() == [records[0].cell.id, "done", "pass", "100", "100", "balanced"]
    assert table[3].split()[1:] == ["pending", "-", "-", "-", "-"]
    assert f"  {records[1].cell.id}: too slow" in text
    ranking = text.split("ranking by cost")[1].splitlines()[2:]
    assert [line.split()[1] for line in ranking] == [records[0].cell.id]


def test_unknown_figures_never_meet_a_requirement():
    from orchestrator.campaign.requirement import Requirement, judge
    requirement = Requirement.model_validate({"rate_within": 0.05, "p99_below": "50ms",
                                              "lossless": True})
    step = {"label": "1", "target_rate": 100.0, "achieved_rate": 100.0, "sent_rate": 100.0,
            "p99_ms": 5.0}
    accounting = {"sent": 100, "received": 100, "balanced": True, "lost": 0,
                  "unexplained": 0, "duplicates": 0}

    def verdict(**changes):
        return judge(requirement, manifest([{**step, **changes.get("step", {})}],
                                           {**accounting, **changes.get("accounting", {})}))
    assert verdict().passed
    assert "unknown" in verdict(step={"achieved_rate": None}).reason
    assert "p99 unknown" in verdict(step={"p99_ms": None}).reason
    assert "loss unknown" in verdict(accounting={"lost": None, "unexplained": None}).reason


def test_summary_prints_the_campaigns_document_tables(spec_dir, tmp_path):
    from orchestrator.campaign.runner import CampaignResult
    from orchestrator.errors import SpecError
    path = spec_dir / "smoke.yaml"
    path.write_text(path.read_text() + "tables: [000-table2]\n")
    campaign = load_campaign(path)
    root = tmp_path / "runs"
    records = [CellRecord(cell) for cell in campaign.cells]
    run_dir = record_run(root, records[0].cell.id, "completed", [step("1", 100, 90)])
    (run_dir / "run.json").write_text(json.dumps(manifest(
        [{**step("1", 100, 90), "members": 2, "host_cpu_percent": 12.5}]).replace(
            scenario={"name": "s1"}).to_json()))
    records[0].status, records[0].passed = "done", True
    text = summary_text(campaign, CampaignResult(root, records))
    table = text.split("000 (IBM MQ uniform cluster scaling), Table 2:\n")[1].splitlines()
    assert table[0].split() == ["Test", "Rate", "Achieved", "msg/s", "#members", "host",
                                "CPU%", "(controller's)"]
    assert table[1].split() == [records[0].cell.id, "90", "2", "12.50"]
    path.write_text(path.read_text().replace("000-table2", "000-tabel2"))
    with pytest.raises(SpecError, match=r"smoke.yaml:\d+: tables.0: Input should be "
                                        r"'000-table1'.*\(got '000-tabel2'\)"):
        load_campaign(path)


def test_every_table_a_campaign_may_name_is_built():
    from typing import get_args

    from orchestrator.specs.tables import DocumentTable
    from results.documents import TABLES
    assert set(TABLES) == set(get_args(DocumentTable))
