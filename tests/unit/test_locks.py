"""File locks that a dead process lets go of, the topology lease built on them, and a run whose
controller died read as interrupted."""

import json
import subprocess
import sys

import pytest

from orchestrator.run.controller import Controller
from results.rundir.locks import FileLock, abandoned, holder_of, is_held
from results.rundir.manifest import read_manifest
from tests.fakes import FakeClock, MemoryLauncher, ScriptedProvisioner, idle_host, no_probe
from tests.unit.test_controller import run, scenario, topology
from topologies import lease


def hold_in_child(path, then: str) -> subprocess.Popen:
    """A child process that takes the lock on ``path``, prints ``held``, then ``then``s: exits
    cleanly (``release``), dies holding it (``die``) or waits for stdin (``wait``)."""
    code = f"""
import os, sys
from pathlib import Path
from results.rundir.locks import FileLock
lock, _ = FileLock.take(Path({str(path)!r}), {{"kind": "run", "id": "child"}})
print("held", flush=True)
if {then!r} == "release":
    lock.release()
elif {then!r} == "die":
    os._exit(9)
else:
    sys.stdin.readline()
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_lock_names_its_holder_and_a_dead_holder_is_told_from_a_live_one(tmp_path):
    path = tmp_path / "x.lock"
    child = hold_in_child(path, "wait")
    try:
        assert is_held(path) and holder_of(path)["pid"] == child.pid
        lock, holder = FileLock.take(path, {"kind": "run", "id": "me"})
        assert lock is None and holder["id"] == "child"
        assert abandoned(path) is None
    finally:
        child.communicate("\n", timeout=10)
    assert child.returncode == 0 and not is_held(path)
    assert abandoned(path)["id"] == "child"  # it exited without releasing: left behind
    lock, holder = FileLock.take(path, {"kind": "run", "id": "me"})
    assert lock.previous["id"] == "child" and holder["id"] == "me"
    lock.release()
    assert holder_of(path) is None and abandoned(path) is None


def test_a_released_lock_leaves_nothing_behind(tmp_path):
    path = tmp_path / "x.lock"
    hold_in_child(path, "release").wait(timeout=10)
    lock, _ = FileLock.take(path, {"kind": "run"})
    assert lock.previous is None
    lock.release(remove=True)
    assert not path.exists()


def test_the_lease_is_reentrant_in_a_process_and_refused_to_another(tmp_path):
    with lease.holding("t", "campaign", "c1", root=tmp_path) as outer:
        with lease.holding("t", "run", "r1", root=tmp_path) as inner:
            assert inner is outer and inner.holder["kind"] == "campaign"
        assert is_held(lease.lock_path("t", tmp_path))
        code = ("from topologies import lease; from pathlib import Path\n"
                f"with lease.holding('t', 'run', 'r2', root=Path({str(tmp_path)!r})): pass")
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert other.returncode == 1
        assert "topology t is in use by campaign c1 (pid" in other.stderr
    assert not is_held(lease.lock_path("t", tmp_path))


def test_members_of_a_run_that_did_not_hand_them_over_are_foreign():
    assert not lease.foreign_owner(None)
    assert not lease.foreign_owner({"kind": "up", "pid": 1})
    assert lease.foreign_owner({"kind": "run", "pid": 1})
    assert not lease.foreign_owner({"kind": "run", "pid": 1, "kept": True})


def test_a_run_left_running_by_a_dead_controller_reads_as_interrupted(tmp_path):
    result, *_ = run(scenario([{"rate_per_sender": 10, "hold": "4s"}]), topology(), tmp_path)
    path = result.run_dir / "run.json"
    data = json.loads(path.read_text())
    data.update(outcome="running")
    data.pop("ended_at")
    path.write_text(json.dumps(data))  # as a controller killed mid-run leaves it
    manifest = read_manifest(result.run_dir)
    assert manifest.outcome == "interrupted"
    assert manifest.interruption.last_second_s == pytest.approx(
        max(t["elapsed_s"] for t in _ticks(result.run_dir)))
    assert json.loads(path.read_text())["outcome"] == "interrupted"  # written back


class StopAt(FakeClock):
    """A fake clock that calls ``action`` once when it has moved ``after_s`` on."""

    def __init__(self, after_s: float):
        super().__init__()
        self.mark, self.action = self.now + after_s, None

    def sleep(self, seconds, stop=None):
        super().sleep(seconds, stop)
        if self.action is not None and self.now >= self.mark:
            action, self.action = self.action, None
            action()


def test_a_stop_request_ends_the_run_interrupted_with_its_reason(tmp_path):
    clock, topo = StopAt(10.0), topology()
    spec = scenario([{"rate_per_sender": 10, "hold": "60s"}])
    controller = Controller(spec, topo, tmp_path, live=False,
                            provisioner=ScriptedProvisioner(topo, clock, 0.5),
                            launcher=MemoryLauncher(2, clock), clock=clock, host_cpu=idle_host,
                            probes=no_probe, preflights=no_probe, background=False,
                            sd_dir=tmp_path / "sd")
    clock.action = lambda: controller.request_stop("stopped by SIGTERM")
    result = controller.run()
    manifest = read_manifest(result.run_dir)
    assert manifest.outcome == "interrupted" and manifest.accounting.balanced
    assert manifest.interruption.reason == "stopped by SIGTERM"
    assert 8 <= manifest.interruption.last_second_s < 30


def _ticks(run_dir):
    from results.rundir.tables import read_table
    return read_table(run_dir, "ticks").to_pylist()


def test_the_report_says_at_its_top_that_a_run_was_interrupted_and_why(tmp_path):
    from results.report import caveats_text
    result, *_ = run(scenario([{"rate_per_sender": 10, "hold": "4s"}]), topology(), tmp_path)
    path = result.run_dir / "run.json"
    data = json.loads(path.read_text())
    assert caveats_text(read_manifest(result.run_dir)) == []  # a completed run: nothing to say
    data.update(outcome="running")
    path.write_text(json.dumps(data))
    [line, _] = caveats_text(read_manifest(result.run_dir))
    assert line.startswith("**INTERRUPTED**: the controller stopped without ending the run")
    assert "the figures stop at second" in line
