"""The stand-ins of systemctl and systemd-run give an emulated queue manager the slice surge
asks for (tests/mqemu/slices.py): a real CPU cgroup with the slice's quota, holding the queue
manager's process and not its exporter, removed by end_all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.mqemu import end_all, free_port, install_standins
from tests.mqemu.slices import group_name
from topologies.cgroups import CpuCgroup

pytestmark = pytest.mark.timeout(60)


def standin(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], env=environment,
                          capture_output=True, text=True, timeout=30)


def test_a_queue_manager_started_in_its_slice_runs_under_the_slice_quota(tmp_path):
    if CpuCgroup.create("mqemu-probe", 1.0) is None:
        pytest.skip("CPU cgroups are not writable here")
    CpuCgroup.at("mqemu-probe").remove()
    port = free_port(set())
    bin_dir = install_standins(tmp_path / "bin", exporter_offset=1)
    try:
        assert standin(bin_dir, "crtmqm", "-p", str(port), "QMS").returncode == 0
        quota = standin(bin_dir, "systemctl", "set-property", "--runtime", "mq-QMS.slice",
                        "CPUQuota=20%")
        assert quota.returncode == 0, quota.stderr
        started = standin(bin_dir, "systemd-run", "--scope", "--slice=mq-QMS.slice", "strmqm",
                          "QMS")
        assert started.returncode == 0, started.stderr
        pids = json.loads((bin_dir / "state" / "QMS.json").read_text())
        name = group_name(bin_dir / "state", "mq-QMS.slice")
        group = CpuCgroup.at(name)
        assert group.quota_cores() == pytest.approx(0.2)
        assert f"/{name}" in Path(f"/proc/{pids['pid']}/cgroup").read_text()
        assert name not in Path(f"/proc/{pids['exporter_pid']}/cgroup").read_text()
    finally:
        end_all(bin_dir)
    assert not any(d.exists() for d in CpuCgroup.at(name)._dirs())  # removed with the rest
