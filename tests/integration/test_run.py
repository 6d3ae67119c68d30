"""Whole runs through the controller against the real cluster."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from orchestrator.run.controller import Controller
from orchestrator.specs.scenario import ScenarioSpec
from results.rundir.tables import read_table

pytestmark = [pytest.mark.integration, pytest.mark.alone]  # rates within 2 %


def scenario(**overrides) -> ScenarioSpec:
    spec = {
        "name": "it-ramp", "topology": "unused.yaml", "agents": 2,
        "workload": {"queue": "perf", "senders": 10, "receivers": 10,
                     "message": {"size": "2KiB"}},
        "plan": [{"rate_per_sender": 30, "hold": "8s"},
                 {"rate_per_sender": "+30", "hold": "8s"}],
        "measure": {"settle": "3s", "drain": "30s"},
    }
    spec.update(overrides)
    return ScenarioSpec.model_validate(spec)


def agent_pids(run_dir):
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "agents_up":
            return [a["pid"] for a in event["agents"]]
    return []


def test_ramp_on_quorum_queue_is_accurate_and_loses_nothing(cluster, topology, tmp_path):
    result = Controller(scenario(), topology, tmp_path, live=False).run()
    assert result.outcome == "completed"
    assert [round(s.target_rate) for s in result.steps] == [300, 600]
    for step in result.steps:
        assert 0.98 <= step.ratio <= 1.02, step
        assert step.members == 3
    accounting = result.accounting
    assert accounting.sent > 0.9 * (300 + 600) * 8
    assert accounting.lost == 0 and accounting.duplicates == 0 and accounting.balanced
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["outcome"] == "completed" and manifest["accounting"]["balanced"]
    ticks = read_table(result.run_dir, "ticks")
    assert ticks.num_rows >= 16
    assert read_table(result.run_dir, "members").num_rows >= 16 * topology.members
    assert not [p for p in agent_pids(result.run_dir) if psutil.pid_exists(p)]
    assert all(m.running for m in cluster.status()[:3])  # a reused topology is left up
    _spark_agrees_with_the_controller(result)


def _spark_agrees_with_the_controller(result):
    """The Spark analysis of the real run directory gives the controller's step table."""
    if shutil.which("java") is None:
        return
    from results.pipeline import analyze
    summary = analyze([result.run_dir], say=lambda line: None)
    assert summary.analysed == [result.run_dir.resolve()], summary
    analysis = json.loads((result.run_dir / "analysis" / "analysis.json").read_text())
    assert [s["label"] for s in analysis["steps"]] == [s.label for s in result.steps]
    for spark_row, row in zip(analysis["steps"], result.steps):
        assert spark_row["achieved_rate"] == pytest.approx(row.achieved_rate)
        assert spark_row["p99_ms"] == pytest.approx(row.p99_ms)
        assert spark_row["cpu_percent"] == pytest.approx(row.cpu_percent)
    assert analysis["cost"]["broker_us_per_msg"] > 0
    # Deliveries count where the receiver's channel is: receivers are spread over the three
    # serving members, so each carries a share of the one quorum queue's messages.
    shares = sorted(m["message_share"] for m in analysis["members"] if m["message_share"])
    assert len(shares) == 3 and shares[0] > 0.15, analysis["members"]
    assert sum(shares) == pytest.approx(1.0), analysis["members"]
    from results.query import query
    columns, rows = query(result.run_dir.parent, "SELECT s.label, s.achieved_rate, r.scenario "
                          "FROM steps s JOIN runs r USING (run_id) WHERE s.label != 'drain' "
                          f"AND run_id = '{result.run_dir.name}' ORDER BY s.start_s")
    assert columns == ["label", "achieved_rate", "scenario"]
    assert [(label, scenario) for label, _, scenario in rows] == \
        [(s.label, "it-ramp") for s in result.steps]
    assert [rate for _, rate, _ in rows] == pytest.approx([s.achieved_rate for s in result.steps])
    assert (result.run_dir / "analysis" / "rate.png").stat().st_size > 10_000


def test_ctrl_c_stops_cleanly(cluster, topology, tmp_path):
    scen = tmp_path / "long.yaml"
    topo = tmp_path / "topo.yaml"
    topo.write_text(json.dumps(topology.model_dump(mode="json")))
    body = scenario(plan=[{"rate_per_sender": 10, "hold": "5m"}],
                    topology=str(topo)).model_dump(mode="json")
    scen.write_text(json.dumps(body))
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(scen), "--no-live",
         "--runs-dir", str(tmp_path / "runs")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
    run_dir = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and run_dir is None:
        time.sleep(1)
        found = list((tmp_path / "runs").glob("*/metrics/ticks"))
        run_dir = found[0].parents[1] if found else None
    assert run_dir is not None, "run never started ticking"
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=90)
    text = output.decode()
    assert process.returncode == 1, text
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["outcome"] == "interrupted"
    assert manifest["accounting"]["lost"] == 0, manifest["accounting"]
    assert "run interrupted" in text
    assert not [p for p in agent_pids(run_dir) if psutil.pid_exists(p)]
