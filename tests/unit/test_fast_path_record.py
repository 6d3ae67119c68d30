"""Whether the agents ran the AMQP fast path: from their snapshots into run.json, the step table
surge run prints and the report."""

from __future__ import annotations

import json

import pytest

from drivers.protocol import FastPath, Snapshot
from drivers.workers import Recorder
from orchestrator.run.fastpath import fast_path_fields
from results.report import headings_text
from results.rundir import compiled
from results.rundir.manifest import FastPathRecord, HotPathRecord, read_manifest
from results.rundir.steps import as_text, fast_path_line
from tests.fakes import FakeClock, MemoryLauncher
from tests.unit.test_controller import run, scenario, topology

ON, OFF = FastPath(True), FastPath(False, "turned off by SURGE_AMQP_FAST_PATH=0")
PIKA = FastPath(False, "pika 1.5.0 is not a version the fast paths were checked against")


def snapshots(*states: FastPath | None) -> dict[int, Snapshot]:
    return {i: Snapshot(monotonic_s=1.0, fast_path=s) for i, s in enumerate(states)}


@pytest.mark.parametrize("states, expected", [
    ((), {}),
    ((None, None), {}),  # MQ agents: no fast path to speak of
    ((ON, ON), {"on": True, "why": ""}),
    ((OFF, OFF), {"on": False, "why": OFF.why}),
    ((ON, OFF, ON), {"on": False, "why": f"agent 1: {OFF.why}; on in agents 0, 2"}),
    ((OFF, PIKA, OFF), {"on": False, "why": f"agents 0, 2: {OFF.why}; agent 1: {PIKA.why}"}),
])
def test_the_agents_states_as_one_record(states, expected):
    fields = fast_path_fields(snapshots(*states))
    assert fields == ({"fast_path": expected} if expected else {})


def test_one_line_says_on_or_off_and_why():
    assert fast_path_line(True) == "AMQP fast path: on"
    assert fast_path_line(False, "x") == "AMQP fast path: off (x)"
    assert FastPathRecord(on=False, why=OFF.why).line() == f"AMQP fast path: off ({OFF.why})"


def test_a_run_records_its_agents_fast_path_and_the_report_and_step_table_show_it(tmp_path):
    clock = FakeClock()
    launcher = MemoryLauncher(2, clock)
    launcher.agents[0].fast_path, launcher.agents[1].fast_path = ON, OFF
    result, controller, *_, recorded = run(scenario([{"rate_per_sender": 100, "hold": "5s"}]),
                                           topology(), tmp_path, launcher=launcher, clock=clock)
    why = f"agent 1: {OFF.why}; on in agent 0"
    assert recorded["fast_path"] == {"on": False, "why": why}
    manifest = read_manifest(result.run_dir)
    assert manifest.fast_path == FastPathRecord(on=False, why=why)
    assert headings_text(manifest) == [f"AMQP fast path: off ({why}).", ""]
    table = as_text(result.steps, heading=controller.manifest.fast_path.line())
    assert table.splitlines()[0] == f"AMQP fast path: off ({why})"
    assert table.splitlines()[1].split()[0] == "step"


def test_a_run_without_fast_path_states_records_none(tmp_path):
    result, _, *_, recorded = run(scenario([{"rate_per_sender": 100, "hold": "3s"}]), topology(),
                                  tmp_path)
    assert "fast_path" not in recorded
    assert headings_text(read_manifest(result.run_dir)) == []
    assert as_text(result.steps).splitlines()[0].split()[0] == "step"


def test_a_later_surge_s_extra_key_in_it_is_ignored(tmp_path):
    result, *_ = run(scenario([{"rate_per_sender": 100, "hold": "3s"}]), topology(), tmp_path)
    data = json.loads((result.run_dir / "run.json").read_text())
    data["fast_path"] = {"on": True, "why": "", "agents": 3}  # a later surge's extra key
    (result.run_dir / "run.json").write_text(json.dumps(data))
    assert read_manifest(result.run_dir).fast_path == FastPathRecord(on=True)



@pytest.mark.parametrize("states, expected", [
    (("", ""), {}),  # agents of an older surge: nothing to say
    (("compiled", "compiled"), {"on": True, "why": ""}),
    (("pure (turned off by SURGE_SPEEDUPS=0)",) * 2,
     {"on": False, "why": "turned off by SURGE_SPEEDUPS=0"}),
    (("compiled", "pure (not built in this install (a pure wheel))"),
     {"on": False, "why": "agent 1: not built in this install (a pure wheel); on in agent 0"}),
])
def test_the_agents_hot_paths_as_one_record(states, expected):
    fields = fast_path_fields({i: Snapshot(monotonic_s=1.0, hot_path=s)
                               for i, s in enumerate(states)})
    assert fields == ({"hot_path": expected} if expected else {})


def test_the_hot_path_line_says_which_ran():
    assert HotPathRecord(on=True).line() == "hot path: compiled"
    assert HotPathRecord(on=False, why="x").line() == "hot path: pure (x)"


def test_an_agent_snapshot_says_which_hot_path_ran():
    assert Recorder().snapshot().hot_path == compiled.state() != ""
