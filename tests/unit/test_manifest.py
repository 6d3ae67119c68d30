"""run.json: one typed model, one reader; what the controller writes reads back, a damaged,
foreign or newer file is named in one line, files of earlier formats still read."""

import json
from dataclasses import asdict, fields
from datetime import datetime, timezone

import pytest

from orchestrator.errors import FileError
from orchestrator.specs.plan import Phase
from results.rundir.manifest import (
    FORMAT_VERSION,
    Accounting,
    HostFacts,
    RunManifest,
    read_manifest,
)
from results.rundir.steps import StepRow
from tests.unit.test_controller import run, scenario, topology

STARTED = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def write(run_dir, data) -> None:
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(data))


def test_what_the_controller_writes_reads_back_typed(tmp_path):
    spec = scenario([{"rate_per_sender": 100, "hold": "5s"}])
    result, controller, *_ = run(spec, topology(), tmp_path)
    manifest = read_manifest(result.run_dir)
    assert manifest.format_version == FORMAT_VERSION and manifest.outcome == "completed"
    assert manifest.scenario_name == "loop" and manifest.settle_s == 1.0
    assert manifest.phases == controller.schedule.phases
    assert manifest.steps == result.steps and manifest.drain == result.drain
    assert manifest.accounting.sent == result.accounting.sent
    assert manifest.accounting.verdict() == "balanced"
    assert manifest.sampling.deadline_s > 0 and manifest.host.cpus
    assert manifest.ended_at >= manifest.started_at


def test_a_manifest_built_and_written_reads_back_the_same(tmp_path):
    spec, topo = scenario([{"rate_per_sender": 100, "hold": "5s"}]), topology()
    started = RunManifest.begin("r1", STARTED, spec, topo, [Phase(1, 100.0, 0.0, 5.0)],
                                {"surge": "0"}, HostFacts(hostname="h", cpus=2))
    row = StepRow(step=1, label="1", target_rate=200.0, achieved_rate=190.0,
                  cpu_percent={"m0": 50.0}, balance=None, delivered_per_member={"m0": 10})
    done = started.replace(outcome="completed", ended_at=STARTED, steps=[row],
                           accounting=Accounting(sent=5, received=5, balanced=True, lost=0))
    done.write(tmp_path)
    again = read_manifest(tmp_path)
    assert again == done and again.steps[0] == row
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert recorded["scenario"] == json.loads(spec.model_dump_json())
    assert recorded["steps"][0]["ratio"] == pytest.approx(0.95)
    assert "drain" not in recorded and "clocks" not in recorded  # only what was given
    assert started.outcome == "running" and started.steps == []  # models are immutable


def test_earlier_formats_read_with_what_they_did_not_record_unknown(tmp_path):
    write(tmp_path, {"format_version": 1, "run_id": "old", "outcome": "completed",
                     "scenario": {"name": "old"}, "accounting": {},
                     "phases": [{"index": 1, "rate_per_sender": 5, "start_s": 0, "end_s": 9}],
                     "steps": [{"step": 1, "target_rate": 10.0, "achieved_rate": 9.0,
                                "min_rate": 8.0, "received_rate": 9.0, "members": 1,
                                "host_cpu_percent": 0.0, "p50_ms": 1.0, "p99_ms": 2.0,
                                "errors": 0, "seconds": 9, "ratio": 0.9}]})
    manifest = read_manifest(tmp_path)
    (step,) = manifest.steps
    assert step.label == "1" and step.sent_rate is None and step.ratio == pytest.approx(0.9)
    assert manifest.accounting is None and manifest.sampling is None
    assert manifest.settle_s == 0.0 and manifest.scale_out_window_s == 0.0


@pytest.mark.parametrize(("data", "message"), [
    ({"format_version": 99, "run_id": "r", "scenario": {"name": "s"}},
     "format_version 99; this surge reads 1 to 3 (a newer surge wrote it?)"),
    ({"format_version": "3", "run_id": "r", "scenario": {"name": "s"}},
     "format_version '3' is not a format version (expected 1 to 3)"),
    ({"run_id": "r", "steps": []},
     "not the run.json of a run (no format_version; expected 1 to 3)"),
    ({"format_version": 3, "scenario": {"name": "s"}},
     "not the run.json of a run: run_id: Field required"),
    ({"format_version": 3, "run_id": "r", "scenario": {"measure": {"settle": 1}}},
     "scenario: name: expected the scenario's name, got None"),
    ({"format_version": 3, "run_id": "r", "scenario": {"name": "s", "measure": {"settle": "x"}}},
     "scenario: measure.settle: expected a number, got 'x'"),
    ({"format_version": 3, "run_id": "r", "scenario": {"name": "s"},
      "steps": [{"step": 1, "label": "1", "target_rate": "fast"}]},
     "steps[0].target_rate: Input should be a valid number, unable to parse string as a "
     "number (got 'fast')"),
    ({"format_version": 3, "run_id": "r", "scenario": {"name": "s"}, "outcome": "won",
      "accounting": {"sent": 1}, "steps": 5, "phases": [1]},
     "; and 2 more"),
])
def test_a_malformed_manifest_is_one_line_naming_the_file_and_the_field(tmp_path, data,
                                                                        message):
    write(tmp_path, data)
    with pytest.raises(FileError) as error:
        read_manifest(tmp_path)
    (line,) = str(error.value).splitlines()
    assert line.startswith(f"{tmp_path / 'run.json'}: ") and message in line


def test_a_missing_manifest_is_named(tmp_path):
    with pytest.raises(FileError, match="run.json: not found; expected a run directory$"):
        read_manifest(tmp_path)


def test_the_scale_out_window_is_the_longest_trigger():
    scaling = {"scale_out": {"when_any": [{"metric": "cpu", "for_s": 10.0},
                                          {"metric": "p99", "for_s": 30.0}]}}
    manifest = RunManifest(run_id="r", scenario={"name": "s", "scaling": scaling})
    assert manifest.scale_out_window_s == 30.0


def test_every_step_field_is_recorded():
    recorded = set(RunManifest(run_id="r", scenario={"name": "s"},
                               steps=[StepRow(step=1, label="1")]).to_json()["steps"][0])
    assert recorded == {f.name for f in fields(StepRow)} | {
        "ratio", "broker_us_per_msg", "generator_us_per_msg", "member_us_per_msg",
        "host_us_per_msg", "bottleneck"}
    assert asdict(StepRow(step=1, label="1")).keys() <= recorded
