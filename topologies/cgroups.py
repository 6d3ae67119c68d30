"""Per-member CPU cgroups: a CPU quota (cgroup v1 ``cpu``) and CPU accounting (``cpuacct``).

Where the hierarchies are missing or not writable, :meth:`CpuCgroup.create` returns ``None``
and logs one warning: the member then runs unlimited and its CPU is read from its processes.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path(os.environ.get("SURGE_CGROUP_ROOT", "/sys/fs/cgroup"))
PERIOD_US = 100_000  # 100 ms, the kernel default; the quota is cores * period
NORMAL_SHARES = 1024  # the kernel default weight against sibling cgroups
BOOT_SHARES = 16 * NORMAL_SHARES  # a booting member comes first when the host is busy


@dataclass(frozen=True)
class CpuCgroup:
    """A named cgroup in the ``cpu`` and (where separate) ``cpuacct`` v1 hierarchies."""

    name: str
    cpu_dir: Path
    acct_dir: Path

    @classmethod
    def at(cls, name: str) -> CpuCgroup:
        """The cgroup called ``name`` (whether or not it exists)."""
        acct_root = CGROUP_ROOT / "cpuacct"
        acct_dir = (acct_root if acct_root.is_dir() else CGROUP_ROOT / "cpu") / name
        return cls(name, CGROUP_ROOT / "cpu" / name, acct_dir)

    @classmethod
    def create(cls, name: str, cores: float | None, shares: int = NORMAL_SHARES
               ) -> CpuCgroup | None:
        """Create (or reuse) the cgroup with a quota and weight; ``None`` with a warning if
        impossible."""
        group = cls.at(name)
        try:
            for directory in {group.cpu_dir, group.acct_dir}:
                directory.mkdir(exist_ok=True)
            (group.cpu_dir / "cpu.cfs_quota_us").write_text(
                str(-1 if cores is None else max(1000, int(cores * PERIOD_US))))
            (group.cpu_dir / "cpu.shares").write_text(str(shares))
        except OSError as error:
            log.warning("cgroup %s not usable (%s): member runs without a CPU quota; "
                        "its CPU is read from its processes instead", name, error.strerror)
            return None
        return group

    def set_quota(self, cores: float | None, shares: int = NORMAL_SHARES) -> None:
        """Set the CPU quota in cores (``None``: unlimited) and the weight against siblings;
        warns where they cannot be written."""
        quota = -1 if cores is None else max(1000, int(cores * PERIOD_US))
        try:
            (self.cpu_dir / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.cpu_dir / "cpu.cfs_quota_us").write_text(str(quota))
            (self.cpu_dir / "cpu.shares").write_text(str(shares))
        except OSError as error:
            log.warning("cannot set the CPU quota of cgroup %s (%s): it runs unlimited",
                        self.name, error.strerror)

    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process writes its PID to in order to join."""
        return sorted({self.cpu_dir / "cgroup.procs", self.acct_dir / "cgroup.procs"})

    def quota_cores(self) -> float | None:
        """The CPU quota in force now, in cores (``None``: unlimited or unreadable)."""
        try:
            quota = int((self.cpu_dir / "cpu.cfs_quota_us").read_text())
            period = int((self.cpu_dir / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            return None
        return quota / period if quota > 0 and period > 0 else None

    def cpu_seconds(self) -> float | None:
        """CPU time used by everything in the cgroup, in seconds."""
        try:
            return int((self.acct_dir / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the cgroup directories, waiting for exited processes to leave them."""
        deadline = time.monotonic() + wait_s
        for directory in {self.cpu_dir, self.acct_dir}:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if time.monotonic() > deadline:
                        log.warning("could not remove cgroup %s: %s", directory, error.strerror)
                        break
                    time.sleep(0.1)


def joining(group: CpuCgroup | None):
    """A ``preexec_fn`` that moves the child into ``group`` before it execs (``None``: none)."""
    if group is None:
        return None
    paths = [str(p) for p in group.procs_files()]
    return lambda: join_cgroup(paths)


def join_cgroup(procs_files: list[str]) -> None:
    """Move the calling process into the cgroups (used between fork and exec)."""
    for path in procs_files:
        with open(path, "w") as handle:
            handle.write(str(os.getpid()))
