"""CPU cgroups: v2 against a tree laid out as the kernel does, v2 accounting and v1 quotas on
this host's real cgroup file systems where they are writable, and the remote shell commands."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topologies import cgroups
from topologies.cgroups import (
    BOOT_SHARES,
    CpuCgroup,
    V1CpuCgroup,
    V2CpuCgroup,
    cap_script,
    joining,
    remove_script,
)

BUSY = [sys.executable, "-c", "while True: pass"]
V1_CPU = Path("/sys/fs/cgroup/cpu")
HYBRID_V2 = Path("/sys/fs/cgroup/unified")  # a v2 tree beside v1 hierarchies (no cpu controller)


def _v2_tree(root: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    """A cgroup v2 root as the kernel shows it, with surge's subtree already delegated."""
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("memory pids\n")
    (root / "surge").mkdir()
    (root / "surge" / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "surge" / "cgroup.subtree_control").write_text("\n")
    return root


@pytest.fixture(autouse=True)
def _fresh_warnings():
    cgroups._warned.clear()


def test_v2_create_enables_cpu_down_to_the_leaf_and_writes_quota_and_weight(tmp_path):
    root = _v2_tree(tmp_path)
    group = CpuCgroup.create("surge-lnx-0", 0.5, BOOT_SHARES, root=root)
    assert isinstance(group, V2CpuCgroup) and group.name == "surge/surge-lnx-0"
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"
    assert (root / "surge" / "cgroup.subtree_control").read_text() == "+cpu"
    leaf = root / "surge" / "surge-lnx-0"
    assert (leaf / "cpu.max").read_text() == "50000 100000"
    assert (leaf / "cpu.weight").read_text() == "1600"
    assert group.procs_files() == [leaf / "cgroup.procs"]
    group.set_quota(None)
    assert (leaf / "cpu.max").read_text() == "max 100000"
    assert (leaf / "cpu.weight").read_text() == "100"
    # the state keeps the name: it finds the same group again
    assert CpuCgroup.at(group.name, root=root) == group


def test_v2_reads_quota_and_usage_as_the_kernel_writes_them(tmp_path):
    root = _v2_tree(tmp_path)
    group = CpuCgroup.create("surge-lnx-1", 0.25, root=root)
    leaf = root / "surge" / "surge-lnx-1"
    assert group.quota_cores() == 0.25
    (leaf / "cpu.max").write_text("max 100000\n")
    assert group.quota_cores() is None
    (leaf / "cpu.max").write_text("150000 100000\n")
    assert group.quota_cores() == 1.5
    assert group.cpu_seconds() is None  # no cpu.stat yet
    (leaf / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n"
                                   "system_usec 500000\nnr_periods 10\n")
    assert group.cpu_seconds() == 2.5


def test_v2_without_the_cpu_controller_warns_once_and_runs_unlimited(tmp_path, caplog):
    root = _v2_tree(tmp_path, controllers="memory pids")
    with caplog.at_level(logging.WARNING, logger="topologies.cgroups"):
        assert CpuCgroup.create("surge-lnx-0", 0.5, root=root) is None
        assert CpuCgroup.create("surge-lnx-1", 0.5, root=root) is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "cpu controller is not available" in warnings[0] and str(root) in warnings[0]
    assert not (root / "surge" / "surge-lnx-0").exists()


def test_a_tree_that_cannot_be_written_warns_and_runs_unlimited(tmp_path, caplog):
    root = _v2_tree(tmp_path)
    (root / "surge" / "surge-lnx-0").write_text("")  # a file where the group would go
    with caplog.at_level(logging.WARNING, logger="topologies.cgroups"):
        assert CpuCgroup.create("surge-lnx-0", 0.5, root=root) is None
    assert "not usable" in caplog.records[0].getMessage()


def test_a_root_without_cgroup_controllers_is_v1(tmp_path):
    assert isinstance(CpuCgroup.at("surge-lnx-0", root=tmp_path), V1CpuCgroup)
    assert isinstance(CpuCgroup.at("surge-lnx-0", root=_v2_tree(tmp_path)), V2CpuCgroup)


def _busy_in(group: CpuCgroup, seconds: float) -> float:
    """Run a busy process in ``group`` for ``seconds``; the CPU-seconds it used, as its own
    counters say (on a loaded host, less than ``seconds``)."""
    import psutil
    process = subprocess.Popen(BUSY, preexec_fn=joining(group))
    try:
        time.sleep(seconds)
        times = psutil.Process(process.pid).cpu_times()
        return times.user + times.system
    finally:
        process.kill()
        process.wait()


@pytest.mark.skipif(not (HYBRID_V2 / "cgroup.controllers").exists()
                    or not os.access(HYBRID_V2, os.W_OK), reason="no writable v2 tree here")
def test_v2_accounting_and_removal_on_the_real_kernel():
    """A real v2 tree: joining through cgroup.procs and usage_usec from cpu.stat. Its cpu
    controller belongs to a v1 hierarchy on this host, so no cap can be set in it."""
    name = f"lnx-test-{os.getpid()}"
    assert CpuCgroup.create(name, 0.5, root=HYBRID_V2) is None  # no cpu controller: refused
    assert isinstance(CpuCgroup.at(name, root=HYBRID_V2), V2CpuCgroup)
    group = V2CpuCgroup(name, HYBRID_V2)  # a leaf right under the root, for accounting only
    group.directory.mkdir()
    try:
        assert group.cpu_seconds() == 0.0
        used = _busy_in(group, 0.6)
        assert used > 0.01 and group.cpu_seconds() >= 0.9 * used, (used, group.cpu_seconds())
        assert group.quota_cores() is None
    finally:
        group.remove()
    assert not group.directory.exists()


@pytest.mark.skipif(cgroups.is_v2(Path("/sys/fs/cgroup")) or not os.access(V1_CPU, os.W_OK),
                    reason="no writable cgroup v1 cpu hierarchy")
def test_v1_quota_caps_a_busy_process_for_real():
    group = CpuCgroup.create(f"lnx-test-{os.getpid()}", 0.2, root=Path("/sys/fs/cgroup"))
    assert isinstance(group, V1CpuCgroup)
    try:
        assert group.quota_cores() == 0.2
        before = group.cpu_seconds()
        started = time.monotonic()
        _busy_in(group, 1.5)
        used = group.cpu_seconds() - before
        elapsed = time.monotonic() - started
        assert 0.1 < used <= 0.2 * elapsed + 0.1  # a full core would be ~1.5 s
        group.set_quota(None)
        assert group.quota_cores() is None
    finally:
        group.remove()
    assert not group.cpu_dir.exists()


def _sh(command: str) -> str:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout


def test_remote_cap_script_writes_v2_files(tmp_path):
    root = _v2_tree(tmp_path)
    assert _sh(cap_script("surge-ssh-lnx-0", 0.5, 4242, root=str(root))).strip() == "ok"
    leaf = root / "surge" / "surge-ssh-lnx-0"
    assert (leaf / "cpu.max").read_text() == "50000 100000\n"
    assert (leaf / "cgroup.procs").read_text() == "4242\n"
    assert (root / "cgroup.subtree_control").read_text() == "+cpu\n"
    assert not (root / "cpu").exists()
    _sh(remove_script("surge-ssh-lnx-", root=str(root)))
    assert leaf.exists()  # a plain directory with files; the kernel's rmdir would remove it


def test_remote_cap_script_writes_v1_files_and_says_when_it_cannot(tmp_path):
    (tmp_path / "cpu").mkdir()
    assert _sh(cap_script("surge-ssh-lnx-1", 0.25, 77, root=str(tmp_path))).strip() == "ok"
    group = tmp_path / "cpu" / "surge-ssh-lnx-1"
    assert (group / "cpu.cfs_quota_us").read_text() == "25000\n"
    assert (group / "cpu.cfs_period_us").read_text() == "100000\n"
    assert (group / "cgroup.procs").read_text() == "77\n"
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    assert _sh(cap_script("surge-ssh-lnx-1", 0.25, 77, root=str(blocked))).strip() == ""
