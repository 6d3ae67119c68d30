"""Stops nobody scheduled, on real members: SIGTERM, a controller killed, a second run on the
same topology, a runs directory that is not one, read-only or full. Each run is a real
``surge run`` process; each test checks the run directory it left and that nothing runs on."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from results.rundir.manifest import RunManifest, read_manifest
from topologies import lease
from topologies.rabbitmq.local import LocalRabbitMQ

pytestmark = pytest.mark.integration

PORT_BASE = 8000  # clear of the session cluster (7200) and of the other tests
TOPOLOGY = {"name": "it-stops", "members": 1, "start": 1, "port_base": PORT_BASE,
            "queues": [{"name": "q", "type": "quorum"}]}


@pytest.fixture
def specs(tmp_path, state_root):
    """A one-member topology and a scenario of a given plan, as files; the members are
    stopped at the end whatever happened."""
    topology = tmp_path / "topology.yaml"
    topology.write_text(json.dumps(TOPOLOGY))

    def scenario(hold: str, name: str = "stops") -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(json.dumps({
            "name": name, "topology": str(topology), "agents": 1,
            "workload": {"queue": "q", "senders": 2, "receivers": 2, "confirms": True,
                         "message": {"size": "1KiB"}},
            "plan": [{"rate_per_sender": 50, "hold": hold}],
            "measure": {"settle": "1s", "drain": "10s"}}))
        return path
    yield scenario
    from orchestrator.specs.topology import TopologySpec
    provisioner = LocalRabbitMQ(TopologySpec.model_validate(TOPOLOGY), state_root)
    pids = [m.pid for m in provisioner.status() if m.pid]
    provisioner.down()
    lease.record_members(TOPOLOGY["name"], None)
    assert not [p for p in pids if _alive(p)], "members left running"


def surge(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ), **kwargs)


def until_ticking(runs: Path, process: subprocess.Popen, timeout_s: float = 90) -> Path:
    """The run directory once its first step has rows on disk (parts flush every 5 s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        found = list(runs.glob("*/metrics/ticks/part-*.parquet"))
        if found:
            return found[0].parents[2]
        time.sleep(0.5)
    process.kill()
    raise AssertionError("the run never started ticking")


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def member_pids(state_root) -> list[int]:
    from orchestrator.specs.topology import TopologySpec
    provisioner = LocalRabbitMQ(TopologySpec.model_validate(TOPOLOGY), state_root)
    return [m.pid for m in provisioner.status() if m.running and m.pid]


def agents_of(run_dir: Path) -> list[int]:
    return [a["pid"] for e in events(run_dir) if e["kind"] == "agents_up" for a in e["agents"]]


def stop_with_sigterm(process: subprocess.Popen, after_s: float = 2.0) -> str:
    """SIGTERM ``process`` ``after_s`` from now, as timeout or systemd would; its stderr."""
    time.sleep(after_s)
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=90)[1]


def stopped_cleanly(run_dir: Path, state_root) -> RunManifest:
    """The run's manifest, checked to say it was stopped by SIGTERM, with nothing of it left
    running and its members' record gone."""
    manifest = read_manifest(run_dir)
    assert manifest.outcome == "interrupted"
    assert manifest.interruption.reason == "stopped by SIGTERM"
    assert not member_pids(state_root), "members were left running"
    assert lease.members_owner(TOPOLOGY["name"]) is None
    return manifest


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_a_second_run_is_refused_and_sigterm_stops_the_first_cleanly(specs, tmp_path,
                                                                      state_root):
    runs = tmp_path / "runs"
    first = surge("run", str(specs("2m")), "--no-live", "--no-analyze", "--runs-dir", str(runs))
    try:
        run_dir = until_ticking(runs, first)
        second = surge("run", str(specs("5s", "second")), "--no-live", "--no-analyze",
                       "--runs-dir", str(runs))
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert f"in use by run {run_dir.name} (pid {first.pid}" in lines[0]
        assert [p.name for p in runs.iterdir()] == [run_dir.name]  # nothing of the second
        for command in ("up", "down"):
            refused = surge(command, str(tmp_path / "topology.yaml"))
            _, said = refused.communicate(timeout=60)
            assert refused.returncode == 1 and f"(pid {first.pid}" in said, said
        assert member_pids(state_root), "surge down stopped members under a live run"
        err = stop_with_sigterm(first)
    finally:
        with contextlib.suppress(ProcessLookupError):
            first.kill()
    assert first.returncode == 1, err
    manifest = stopped_cleanly(run_dir, state_root)
    assert manifest.interruption.last_second_s > 3
    accounting = manifest.accounting
    assert accounting.balanced and accounting.lost == 0 and accounting.sent > 100, accounting
    assert not [p for p in agents_of(run_dir) if _alive(p)]


def test_a_dead_controller_is_found_out_and_its_members_are_not_reused_silently(
        specs, tmp_path, state_root):
    runs = tmp_path / "runs"
    sd_dir = Path(state_root) / "prometheus"
    dead = surge("run", str(specs("2m")), "--no-live", "--no-analyze", "--runs-dir", str(runs))
    dead_dir = until_ticking(runs, dead)
    dead.kill()
    dead.communicate(timeout=30)
    agents = agents_of(dead_dir)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in agents) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in agents if _alive(p)], "agents outlived their controller"
    assert json.loads((dead_dir / "run.json").read_text())["outcome"] == "running"
    assert (sd_dir / f"{dead_dir.name}.json").exists()
    assert member_pids(state_root), "the members should still run: nobody stopped them"

    refused = surge("run", str(specs("4s", "next")), "--no-live", "--no-analyze",
                    "--runs-dir", str(runs))
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert f"run {dead_dir.name} (pid {dead.pid})" in err and "--reuse" in err
    # the refusal found the dead holder: its run now reads as interrupted, for every reader
    manifest = read_manifest(dead_dir)
    assert manifest.outcome == "interrupted", manifest.outcome
    assert manifest.interruption.last_second_s > 1
    assert "controller stopped without ending" in manifest.interruption.reason

    reused = surge("run", str(specs("4s", "next")), "--no-live", "--no-analyze", "--reuse",
                   "--runs-dir", str(runs))
    out, err = reused.communicate(timeout=120)
    assert reused.returncode == 0, err
    next_dir = next(p for p in runs.iterdir() if p.name.endswith("-next"))
    after = read_manifest(next_dir)
    assert after.outcome == "completed" and after.reused is not None
    assert after.reused.started_by["id"] == dead_dir.name and "--reuse" in after.reused.why
    assert not (sd_dir / f"{dead_dir.name}.json").exists(), "stale targets file left"
    assert not member_pids(state_root), "members a run reused must be stopped at its end"
    # what the dead run left still counts what it sent: it was 2 senders at 50 msg/s
    assert after.accounting.balanced


def test_runs_directories_that_cannot_take_a_run_are_one_line(specs, tmp_path, state_root):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    mounted = tmp_path / "ro"
    mounted.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M,ro", "tmpfs", str(mounted)],
                   check=True)
    try:
        for runs, said in ((not_a_dir, "is not a directory"),
                           (mounted, "cannot be written"),
                           (not_a_dir / "deeper", "is not a directory")):
            process = surge("run", str(specs("3s")), "--no-live", "--no-analyze",
                            "--runs-dir", str(runs))
            out, err = process.communicate(timeout=60)
            assert process.returncode == 2, err
            assert len(err.strip().splitlines()) == 1 and said in err, err
        assert not member_pids(state_root), "refused before provisioning"
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_a_disk_that_fills_mid_run_ends_it_failed_in_one_line(specs, tmp_path, state_root):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80M", "tmpfs", str(small)], check=True)
    try:
        process = surge("run", str(specs("2m")), "--no-live", "--no-analyze",
                        "--runs-dir", str(small))
        try:
            run_dir = until_ticking(small, process)
            with open(small / "filler", "wb") as filler, contextlib.suppress(OSError):
                while True:
                    filler.write(bytes(1 << 20))
            out, err = process.communicate(timeout=90)
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        assert process.returncode == 1, err
        assert "Traceback" not in err
        lines = [line for line in err.strip().splitlines() if "cannot write" in line]
        assert len(lines) == 1 and "No space left on device" in lines[0], err
        manifest = read_manifest(run_dir)
        assert manifest.outcome == "failed"
        assert "No space left on device" in manifest.interruption.reason
        assert not member_pids(state_root), "the run's members were left running"
        assert not [p for p in agents_of(run_dir) if _alive(p)]
    finally:
        subprocess.run(["umount", "-l", str(small)], check=True)


def test_a_load_agent_killed_mid_run_costs_its_share_not_the_run(specs, tmp_path, state_root):
    runs = tmp_path / "runs"
    scenario = specs("20s", "agents")
    body = json.loads(scenario.read_text())
    body.update(agents=2)
    body["workload"].update(senders=4, receivers=4)
    scenario.write_text(json.dumps(body))
    process = surge("run", str(scenario), "--no-live", "--no-analyze", "--runs-dir", str(runs))
    try:
        run_dir = until_ticking(runs, process)
        time.sleep(3)
        victim = agents_of(run_dir)[1]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.time()
        out, err = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    assert process.returncode == 0, err
    manifest = read_manifest(run_dir)
    assert manifest.outcome == "completed"
    [lost] = [e for e in events(run_dir) if e["kind"] == "agent_lost"]
    assert lost["agent"] == 1 and lost["senders"] == 2 and lost["receivers"] == 2
    assert lost["t"] - killed_at < 6, "noticed within three failed reads"
    assert [s.label for s in manifest.steps] == ["1a", "1b"]
    before, after = manifest.steps
    assert after.achieved_rate == pytest.approx(before.achieved_rate / 2, rel=0.2)
    accounting = manifest.accounting
    assert accounting.lost is None and accounting.unknown is not None
    assert "not known" in accounting.explain
    [record] = manifest.agents_lost
    assert record["sent"] > 0 and record["received"] > 0
    # what the lost agent left unknown is bounded by what it could do in the seconds after its
    # last reading: its 2 senders and 2 receivers at 50 msg/s each, for at most ~5 s
    assert accounting.unknown <= 2 * 50 * 6 + record["unconfirmed"], accounting.explain
    assert not [p for p in agents_of(run_dir) if _alive(p)]


def test_sigterm_stops_a_capacity_search_cleanly(specs, tmp_path, state_root):
    scenario = specs("1s", "cap")
    body = json.loads(scenario.read_text())
    body.pop("plan")
    body.update(slo={"p99": "2s", "backlog": 5000},
                capacity={"members": [1], "start_rate": 200, "hold_min": "3s",
                          "hold_max": "4s", "drain": "5s", "max_probes": 20})
    scenario.write_text(json.dumps(body))
    runs = tmp_path / "runs"
    process = surge("capacity", str(scenario), "--no-live", "--no-analyze", "--runs-dir",
                    str(runs))
    try:
        deadline = time.monotonic() + 90
        while not list(runs.glob("*/*/metrics/ticks/part-*.parquet")):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.5)
        run_dir = next(runs.glob("*/*/metrics")).parent
        err = stop_with_sigterm(process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    assert process.returncode == 1, err
    manifest = stopped_cleanly(run_dir, state_root)
    assert manifest.accounting is not None and manifest.accounting.lost == 0
