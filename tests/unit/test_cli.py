"""The command line as scripts use it: --version, --json documents that are the whole of
stdout, completion, and every SURGE_* variable the code reads documented in --help and the
guide (docs/guide/command-line.md)."""

import json
import re
import socket
from contextlib import closing
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drivers.accounting import Reconciliation
from orchestrator import environment
from orchestrator.cli import app
from orchestrator.run.controller import RunResult
from orchestrator.run.entry import run_document
from results.pipeline import Summary
from results.rundir.manifest import RunManifest
from results.rundir.steps import StepRow

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "drivers", "topologies", "results")


def _invoke(*args: str, **kwargs):
    return CliRunner().invoke(app, list(args), **kwargs)


def test_version():
    result = _invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"surge {version('surge')}\n"


def test_the_top_level_help_teaches_with_examples():
    result = _invoke("--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert "surge run scenarios/quickstart.yaml --no-live --json > result.json" in result.stdout
    assert "127.0.0.1:19420/metrics" in result.stdout
    assert "--install-completion" in result.stdout and "--version" in result.stdout


def _variables_read_by_the_code() -> set[str]:
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path != ROOT / "orchestrator" / "environment.py":
                names |= set(re.findall(r"\bSURGE_[A-Z][A-Z0-9_]*\b", path.read_text()))
    return names


def test_every_surge_variable_is_documented_in_help_and_the_guide():
    read = _variables_read_by_the_code()
    assert "SURGE_MQ_PASSWORD" in read and len(read) >= 9  # the scan finds them
    assert read == set(environment.VARIABLES)  # none undocumented, none documented for nothing
    help_text = _invoke("--help").stdout
    guide = (ROOT / "docs" / "guide" / "command-line.md").read_text()
    for name in read:
        assert name in help_text, name
        assert f"| `{name}` |" in guide, name
    assert environment.markdown_table() in guide  # the guide's table is the list's


def test_shell_completion_completes_commands_and_options():
    commands = _invoke(env={"_SURGE_COMPLETE": "complete_bash", "COMP_WORDS": "surge ana",
                            "COMP_CWORD": "1"}, prog_name="surge")
    assert commands.stdout.split() == ["analyze"]
    options = _invoke(env={"_SURGE_COMPLETE": "complete_bash",
                           "COMP_WORDS": "surge run --metr", "COMP_CWORD": "2"},
                      prog_name="surge")
    assert options.stdout.split() == ["--metrics-port"]


def test_status_json_is_the_whole_of_stdout(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_STATE_DIR", str(tmp_path))
    result = _invoke("status", str(ROOT / "topologies" / "local-1.yaml"), "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["topology"] == "local-1"
    [member] = document["members"]
    assert member["running"] is False and member["pid"] is None
    assert set(member) == {"index", "name", "host", "port", "management_port",
                           "prometheus_port", "running", "pid", "standby", "endpoint"}


def _finished_run(root: Path, name: str, achieved: float | None) -> Path:
    run_dir = root / name
    run_dir.mkdir()
    step = {"step": 1, "label": "1", "target_rate": 1000.0, "achieved_rate": achieved,
            "min_rate": achieved, "sent_rate": 1000.0, "received_rate": achieved, "members": 2,
            "cpu_percent": {"m0": 20.0, "m1": 30.0}, "host_cpu_percent": None, "p99_ms": 9.5}
    RunManifest(run_id=name, scenario={"name": name}, steps=[step],
                accounting={"sent": 1, "received": 1, "balanced": True}).write(run_dir)
    return run_dir


def test_compare_json_lists_each_run_at_its_final_step(tmp_path):
    one, two = _finished_run(tmp_path, "one", 990.0), _finished_run(tmp_path, "two", None)
    result = _invoke("compare", str(one), str(two), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows[0] == {"run_dir": str(one), "test": "one", "target_rate": 1000.0,
                       "achieved_rate": 990.0, "members": 2, "member_cpu_percent_mean": 25.0,
                       "host_cpu_percent": None, "p99_ms": 9.5, "accounting": "balanced"}
    assert rows[1]["achieved_rate"] is None  # unknown is null, never "-"


def test_analyze_json_names_failed_runs_and_keeps_human_lines_off_stdout(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{")
    result = _invoke("analyze", str(broken), "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert list(document["failed"]) == [str(broken)]
    assert "not valid JSON" in document["failed"][str(broken)]
    assert document["analysed"] == [] and document["up_to_date"] == []
    assert "not analysed" in result.stderr and "failed 1" in result.stderr


def test_a_taken_metrics_port_stops_a_run_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("SURGE_STATE_DIR", str(tmp_path / "state"))
    runs = tmp_path / "runs"
    with closing(socket.socket()) as held:
        held.bind(("127.0.0.1", 7721))
        held.listen()
        result = _invoke("run", str(ROOT / "scenarios" / "quickstart.yaml"), "--json",
                         "--set", "topology.port_base=7730", "--runs-dir", str(runs),
                         "--metrics-port", "7721")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--metrics-port 7721: 127.0.0.1:7721 is in use" in result.stderr
    assert not runs.exists() and not (tmp_path / "state").exists()


def test_the_run_document():
    row = StepRow(step=1, label="1", target_rate=1000.0, achieved_rate=998.0, min_rate=990.0,
                  sent_rate=1000.0, received_rate=998.0, members=3, p99_ms=float("nan"))
    books = Reconciliation(sent=10, confirmed=10, nacked=0, received=10, duplicates=0,
                           still_queued=0, lost=0, unexplained=0, balanced=True)
    result = RunResult(Path("runs/20260101-quickstart"), "completed", [row], books)
    summary = Summary(analysed=[Path("runs/20260101-quickstart")])
    document = run_document(result, "quickstart", "msg/s", summary)
    assert set(document) == {"run_id", "run_dir", "outcome", "scenario", "rate_unit", "steps",
                             "drain", "accounting", "analysis"}
    assert document["run_id"] == "20260101-quickstart" and document["drain"] is None
    assert document["steps"][0]["achieved_rate"] == 998.0
    assert document["accounting"]["balanced"] is True
    assert document["accounting"]["explain"] == books.explain()
    assert document["analysis"]["reports"] == {
        "runs/20260101-quickstart": "runs/20260101-quickstart/analysis/report.md"}
    json.dumps(document)  # JSON-ready as it is


def test_json_output_has_no_nan(capsys):
    from orchestrator.cli.common import print_json as _print_json
    _print_json({"p99_ms": float("nan"), "rows": [float("inf"), 1.5], "path": Path("a/b")})
    assert json.loads(capsys.readouterr().out) == {"p99_ms": None, "rows": [None, 1.5],
                                                   "path": "a/b"}


@pytest.mark.parametrize("command", ["run", "compare", "analyze", "status"])
def test_the_scriptable_commands_take_json(command):
    assert "--json" in _invoke(command, "--help").stdout


def test_a_scenario_without_a_plan_is_for_capacity_and_refused_by_run(tmp_path):
    scenario = ROOT / "scenarios" / "uniform-cluster-capacity.yaml"
    refused = _invoke("run", str(scenario), "--no-live", "--runs-dir", str(tmp_path))
    assert refused.exit_code == 2 and not list(tmp_path.iterdir())
    assert f"{scenario}: plan: no steps to run: this scenario is for surge capacity" in \
        refused.stderr
    bad = _invoke("capacity", str(scenario), "--members", "1,x", "--runs-dir", str(tmp_path))
    assert bad.exit_code == 2 and "expected member counts like 1,2,4" in bad.stderr
    too_many = _invoke("capacity", str(scenario), "--members", "1,9", "--runs-dir",
                       str(tmp_path))
    assert too_many.exit_code == 2 and not list(tmp_path.iterdir())
    assert "capacity.members: 9 members asked for; topology uniform-4 has 4" in too_many.stderr
