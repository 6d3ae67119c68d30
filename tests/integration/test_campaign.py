"""A real campaign of 2x2 short cells on its own one-member RabbitMQ: stopped by Ctrl-C after
the first cell, then resumed to the end."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.specs.topology import TopologySpec
from topologies.rabbitmq.local import LocalRabbitMQ

pytestmark = pytest.mark.integration

PORT_BASE = 9000  # clear of the session cluster (7200) and of the other tests

TOPOLOGY = f"""\
name: itcamp
members: 1
start: 1
cpu_per_member: null
port_base: {PORT_BASE}
queues: [{{name: camp, type: classic}}]
"""

SCENARIO = """\
name: itcamp
topology: topo.yaml
agents: 1
workload: {queue: camp, senders: 2, receivers: 2, message: {size: 256}}
plan: [{rate_per_sender: 50, hold: 3s}]
measure: {settle: 1s, drain: 2s}  # the drain waits on lagging broker statistics
"""

CAMPAIGN = """\
name: itc
description: 2x2 short cells, stopped after the first and resumed
requirement: {rate_within: 20%, lossless: true}
cells:
  - scenario: scen.yaml
    matrix:
      plan.0.rate_per_sender: [50, 100]
      workload.message.size: [256, 1024]
"""


def campaign(tmp_path: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "campaign", str(tmp_path / "camp.yaml"),
         "--campaigns-dir", str(tmp_path / "out"), "--no-analyze"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "SURGE_STATE_DIR": str(state)})


def broker_pids(state: Path) -> set[int]:
    """PIDs the provisioner recorded for the topology (members and its epmd), if up now."""
    try:
        recorded = json.loads((state / "itcamp" / "state.json").read_text())
    except (OSError, ValueError):
        return set()
    pids = {entry.get("pid") for entry in recorded.get("members", {}).values()}
    return {pid for pid in (*pids, recorded.get("epmd_pid")) if pid}


def left_behind(seen: set[int]) -> list[int]:
    """Processes of this topology still alive: those seen, and any naming it or its epmd."""
    alive = {pid for pid in seen if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE}
    for process in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "surge-itcamp-" in line or f"-port {PORT_BASE + 30000}" in line:
            alive.add(process.info["pid"])
    return sorted(alive)


def statuses(root: Path) -> list[str]:
    return [cell["status"] for cell in json.loads((root / "campaign.json").read_text())["cells"]]


def test_a_campaign_stopped_by_sigterm_resumes_where_it_stopped(tmp_path):
    for name, text in (("topo.yaml", TOPOLOGY), ("scen.yaml", SCENARIO),
                       ("camp.yaml", CAMPAIGN)):
        (tmp_path / name).write_text(text)
    state = tmp_path / "state"
    root = tmp_path / "out" / "itc"
    seen: set[int] = set()
    process = campaign(tmp_path, state)
    try:
        first = _stop_after_first_cell(process, root, state, seen)
        text = process.communicate(timeout=90)[0].decode()
        assert process.returncode == 130, text
        assert "resume with: surge campaign" in text
        assert json.loads(first.read_text())["outcome"] == "completed"
        done = statuses(root)
        assert done[0] == "done" and done.count("done") < 4, text
        recorded = first.read_bytes(), first.stat().st_mtime_ns
        assert not left_behind(seen)

        process = campaign(tmp_path, state)
        while process.poll() is None:
            seen |= broker_pids(state)
            time.sleep(0.5)
        text = process.communicate(timeout=10)[0].decode()
        assert process.returncode == 0, text
        assert (first.read_bytes(), first.stat().st_mtime_ns) == recorded  # skipped
        cells = sorted(p for p in root.iterdir() if (p / "run.json").exists()
                       and ".attempt-" not in p.name)
        assert len(cells) == 4
        for cell in cells:
            manifest = json.loads((cell / "run.json").read_text())
            assert manifest["outcome"] == "completed", cell
            assert manifest["accounting"]["lost"] == 0, manifest["accounting"]
        assert statuses(root) == ["done"] * 4
        assert all(c["passed"] is not None for c in
                   json.loads((root / "campaign.json").read_text())["cells"])
        assert "ranking by cost" not in text and "no analysed runs" in text
        assert (root / "summary.md").read_text().count("-r1 ") >= 4
        assert not left_behind(seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        LocalRabbitMQ(TopologySpec(name="itcamp", members=1, start=1,
                                   port_base=PORT_BASE), state).down()


def _stop_after_first_cell(process: subprocess.Popen, root: Path, state: Path,
                           seen: set[int]) -> Path:
    """Wait until the first cell's run.json says completed, then SIGTERM the campaign."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        seen |= broker_pids(state)
        found = list(root.glob("001-*/run.json"))
        if found and json.loads(found[0].read_text() or "{}").get("outcome") == "completed":
            process.send_signal(signal.SIGTERM)  # as timeout, systemd or CI send
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"the first cell never completed: {process.communicate()[0]!r}")
