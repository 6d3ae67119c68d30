"""Per-member CPU cgroups: a CPU quota and CPU accounting, on cgroup v1 or v2, whichever the host
mounts at the cgroup root (``<root>/cgroup.controllers`` exists: v2; a hybrid host whose ``cpu``
controller sits in a v1 hierarchy counts as v1).

- v1: the group is a directory of the ``cpu`` hierarchy (``cpu.cfs_quota_us``,
  ``cpu.cfs_period_us``, ``cpu.shares``) and of ``cpuacct`` (``cpuacct.usage``).
- v2: the group is a child of surge's subtree, ``<root>/$SURGE_CGROUP_PARENT`` (default
  ``surge``; on a systemd host, point it at a delegated subtree), with the ``cpu`` controller
  enabled from the root down to that subtree: ``cpu.max`` (``quota period`` or ``max period``),
  ``cpu.weight``, and ``cpu.stat``'s ``usage_usec`` for CPU time.

Where the tree is missing or not writable, or v2's ``cpu`` controller is not delegated,
:meth:`CpuCgroup.create` returns ``None`` and logs one warning (once per reason): the member
then runs unlimited and its CPU is read from its processes. Every function takes the cgroup
root as a parameter (default ``$SURGE_CGROUP_ROOT`` or ``/sys/fs/cgroup``).
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path(os.environ.get("SURGE_CGROUP_ROOT", "/sys/fs/cgroup"))
V2_PARENT = os.environ.get("SURGE_CGROUP_PARENT", "surge")  # relative to the root
PERIOD_US = 100_000  # 100 ms, the kernel default; the quota is cores * period
MIN_QUOTA_US = 1000  # the kernel refuses less
NORMAL_SHARES = 1024  # the kernel default weight against sibling cgroups (v1 units)
BOOT_SHARES = 16 * NORMAL_SHARES  # a booting member comes first when the host is busy

_warned: set[str] = set()


def is_v2(root: Path | None = None) -> bool:
    """Whether the cgroup root is a cgroup v2 (unified) tree."""
    return ((root or CGROUP_ROOT) / "cgroup.controllers").exists()


def quota_us(cores: float | None) -> int | None:
    """The quota per period for ``cores`` (``None``: unlimited)."""
    return None if cores is None else max(MIN_QUOTA_US, int(cores * PERIOD_US))


def weight(shares: int) -> int:
    """A v1 ``cpu.shares`` value as the v2 ``cpu.weight`` of the same standing (1024 -> 100)."""
    return min(10_000, max(1, round(shares * 100 / NORMAL_SHARES)))


class CpuCgroup(ABC):
    """A member's CPU cgroup; :meth:`at` and :meth:`create` pick v1 or v2 by what the host has."""

    name: str

    @staticmethod
    def at(name: str, root: Path | None = None) -> CpuCgroup:
        """The cgroup called ``name`` (whether or not it exists); on v2 ``name`` may already
        be a path under the root, as :attr:`name` of a v2 group is."""
        root = root or CGROUP_ROOT
        if is_v2(root):
            return V2CpuCgroup(name if "/" in name else f"{V2_PARENT}/{name}", root)
        return V1CpuCgroup(name, root)

    @staticmethod
    def create(name: str, cores: float | None, shares: int = NORMAL_SHARES,
               root: Path | None = None) -> CpuCgroup | None:
        """Create (or reuse) the cgroup with a quota and weight; ``None`` with a warning if
        impossible."""
        group = CpuCgroup.at(name, root)
        try:
            group._make()
            group._write_limits(cores, shares)
        except OSError as error:
            _warn_once(f"CPU cgroups under {group.root} are not usable ({_reason(error)}): "
                       "members run without a CPU quota and their CPU is read from their "
                       "processes")
            return None
        return group

    def set_quota(self, cores: float | None, shares: int = NORMAL_SHARES) -> None:
        """Set the CPU quota in cores (``None``: unlimited) and the weight against siblings;
        warns where they cannot be written."""
        try:
            self._write_limits(cores, shares)
        except OSError as error:
            _warn_once(f"cannot set the CPU quota of cgroup {self.name} ({_reason(error)}): "
                       "it runs unlimited")

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the cgroup directories, waiting for exited processes to leave them."""
        deadline = time.monotonic() + wait_s
        for directory in self._dirs():
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

    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process writes its PID to in order to join."""
        return sorted({d / "cgroup.procs" for d in self._dirs()})

    @abstractmethod
    def quota_cores(self) -> float | None:
        """The CPU quota in force now, in cores (``None``: unlimited or unreadable)."""

    @abstractmethod
    def cpu_seconds(self) -> float | None:
        """CPU time used by everything in the cgroup, in seconds (``None``: unreadable)."""

    @abstractmethod
    def _make(self) -> None:
        """Create the cgroup's directories (raises ``OSError``)."""

    @abstractmethod
    def _write_limits(self, cores: float | None, shares: int) -> None:
        """Write the quota and weight (raises ``OSError``)."""

    @abstractmethod
    def _dirs(self) -> list[Path]:
        """The group's directories, in the order they are removed."""


@dataclass(frozen=True)
class V1CpuCgroup(CpuCgroup):
    """A named cgroup in the ``cpu`` and (where separate) ``cpuacct`` v1 hierarchies."""

    name: str
    root: Path

    @property
    def cpu_dir(self) -> Path:
        """The group in the ``cpu`` hierarchy."""
        return self.root / "cpu" / self.name

    @property
    def acct_dir(self) -> Path:
        """The group in the ``cpuacct`` hierarchy (the ``cpu`` one where they are co-mounted)."""
        acct_root = self.root / "cpuacct"
        return (acct_root if acct_root.is_dir() else self.root / "cpu") / self.name

    def quota_cores(self) -> float | None:
        """The CPU quota in force now, in cores (``None``: unlimited or unreadable)."""
        try:
            quota = int((self.cpu_dir / "cpu.cfs_quota_us").read_text())
            period = int((self.cpu_dir / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            return None
        return quota / period if quota > 0 and period > 0 else None

    def cpu_seconds(self) -> float | None:
        """CPU time used by everything in the cgroup (``cpuacct.usage``), in seconds."""
        try:
            return int((self.acct_dir / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def _make(self) -> None:
        for directory in self._dirs():
            directory.mkdir(exist_ok=True)

    def _write_limits(self, cores: float | None, shares: int) -> None:
        quota = quota_us(cores)
        (self.cpu_dir / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.cpu_dir / "cpu.cfs_quota_us").write_text(str(-1 if quota is None else quota))
        (self.cpu_dir / "cpu.shares").write_text(str(shares))

    def _dirs(self) -> list[Path]:
        return sorted({self.cpu_dir, self.acct_dir})


@dataclass(frozen=True)
class V2CpuCgroup(CpuCgroup):
    """A cgroup v2 leaf ``<root>/<name>`` (``name``: a path below the root, such as
    ``surge/surge-local-3-0``) under a subtree with the ``cpu`` controller enabled."""

    name: str
    root: Path

    @property
    def directory(self) -> Path:
        """The group's directory."""
        return self.root / self.name

    def quota_cores(self) -> float | None:
        """The quota in ``cpu.max`` (``quota period``), in cores (``None``: ``max`` or
        unreadable)."""
        try:
            quota, period = (self.directory / "cpu.max").read_text().split()
            cores = int(quota) / int(period)
        except (OSError, ValueError, ZeroDivisionError):
            return None
        return cores if cores > 0 else None

    def cpu_seconds(self) -> float | None:
        """``usage_usec`` of ``cpu.stat``, in seconds."""
        try:
            for line in (self.directory / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def _make(self) -> None:
        """Enable the ``cpu`` controller on every level from the root down to the parent (the
        parent is created empty, as v2 requires of a cgroup that hands controllers down), then
        create the leaf."""
        level = self.root
        for part in Path(self.name).parent.parts:
            _enable_cpu(level)
            level = level / part
            level.mkdir(exist_ok=True)
        _enable_cpu(level)
        self.directory.mkdir(exist_ok=True)

    def _write_limits(self, cores: float | None, shares: int) -> None:
        quota = quota_us(cores)
        (self.directory / "cpu.max").write_text(
            f"{'max' if quota is None else quota} {PERIOD_US}")
        (self.directory / "cpu.weight").write_text(str(weight(shares)))

    def _dirs(self) -> list[Path]:
        return [self.directory]


class ControllerMissing(OSError):
    """The v2 ``cpu`` controller is not available where surge needs it."""


def _enable_cpu(directory: Path) -> None:
    """Hand the ``cpu`` controller down to ``directory``'s children (a no-op if it already is)."""
    if "cpu" not in (directory / "cgroup.controllers").read_text().split():
        raise ControllerMissing(f"the cpu controller is not available in {directory}: not "
                                "delegated to it, or bound to a cgroup v1 hierarchy")
    if "cpu" not in (directory / "cgroup.subtree_control").read_text().split():
        (directory / "cgroup.subtree_control").write_text("+cpu")


def _reason(error: OSError) -> str:
    if isinstance(error, ControllerMissing):
        return str(error)
    return f"{error.strerror}: {error.filename}" if error.filename else str(error.strerror)


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


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


def cap_script(name: str, cores: float, pid: int, root: str = "/sys/fs/cgroup",
               parent: str = "surge") -> str:
    """A POSIX shell command that caps process ``pid`` at ``cores`` in cgroup ``name`` on a
    remote host, on v2 or v1 as the host has, and prints ``ok`` if it could (the same files as
    :class:`CpuCgroup` writes)."""
    quota, group = quota_us(cores), shlex.quote(f"{root}/{parent}/{name}")
    v1 = shlex.quote(f"{root}/cpu/{name}")
    top, sub = shlex.quote(root), shlex.quote(f"{root}/{parent}")
    return (f"if [ -e {top}/cgroup.controllers ]; then "
            f"echo +cpu > {top}/cgroup.subtree_control && mkdir -p {sub} && "
            f"echo +cpu > {sub}/cgroup.subtree_control && mkdir -p {group} && "
            f"echo '{quota} {PERIOD_US}' > {group}/cpu.max && "
            f"echo {int(pid)} > {group}/cgroup.procs && echo ok; "
            f"else mkdir -p {v1} && echo {PERIOD_US} > {v1}/cpu.cfs_period_us && "
            f"echo {quota} > {v1}/cpu.cfs_quota_us && echo {int(pid)} > {v1}/cgroup.procs "
            f"&& echo ok; fi 2>/dev/null")


def remove_script(prefix: str, root: str = "/sys/fs/cgroup", parent: str = "surge") -> str:
    """A shell command removing the cgroups named ``prefix*`` that :func:`cap_script` made
    (v1 or v2); it never fails."""
    return (f"rmdir {shlex.quote(root)}/cpu/{shlex.quote(prefix)}* "
            f"{shlex.quote(f'{root}/{parent}')}/{shlex.quote(prefix)}* 2>/dev/null; true")
