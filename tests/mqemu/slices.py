"""systemd slices for the stand-ins of ``systemctl set-property`` and ``systemd-run --scope``
(tests only): each slice is a real CPU cgroup (topologies/cgroups.py, v1 or v2 as the machine
has), so an emulated queue manager started in its slice runs under the slice's CPU quota, as
surge asks of a real one.

``python slices.py quota SLICE CPUQuota=50%`` creates (or updates) the slice's cgroup;
``strmqm`` (control.py) starts the queue manager's process in it with :func:`joining` when
``systemd-run --slice=SLICE`` set ``MQEMU_SLICE``. Where cgroups cannot be written (no root, no
delegated controller) ``quota`` says so on stderr and makes nothing: the queue manager then
runs without the quota. The cgroups are named after the stand-ins' state
directory, so two tests' slices of the same name never meet; :func:`remove_all` removes them.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from topologies.cgroups import CpuCgroup  # noqa: E402  (run as a script)
from topologies.cgroups import joining as joining_group  # noqa: E402


def group_name(state: Path, slice_: str) -> str:
    """The cgroup of ``slice_`` for the stand-ins keeping their state in ``state``."""
    tag = hashlib.sha1(str(state.resolve()).encode()).hexdigest()[:8]
    return f"mqemu-{tag}-{slice_.removesuffix('.slice')}"


def quota(state: Path, slice_: str, setting: str) -> int:
    """``CPUQuota=N%`` on ``slice_``: its cgroup with N/100 cores (recorded for removal)."""
    found = re.fullmatch(r"CPUQuota=(\d+(?:\.\d+)?)%", setting)
    if not found:
        print(f"slices: only CPUQuota=N% is expected, not {setting}", file=sys.stderr)
        return 1
    name = group_name(state, slice_)
    if CpuCgroup.create(name, float(found.group(1)) / 100) is None:
        print(f"slices: cgroups are not writable here: {slice_} runs without its quota",
              file=sys.stderr)
        return 0
    with (state / "slices").open("a", encoding="utf-8") as made:
        made.write(name + "\n")
    return 0


def joining(state: Path, slice_: str | None):
    """A ``preexec_fn`` moving the child into ``slice_``'s cgroup (None: no slice, or no
    cgroup could be made for it)."""
    if not slice_:
        return None
    group = CpuCgroup.at(group_name(state, slice_))
    return joining_group(group) if all(f.exists() for f in group.procs_files()) else None


def remove_all(state: Path) -> list[str]:
    """Remove the cgroups the stand-ins made under ``state`` (their processes have ended)."""
    made = state / "slices"
    names = sorted(set(made.read_text().split())) if made.exists() else []
    for name in names:
        CpuCgroup.at(name).remove()
    made.unlink(missing_ok=True)
    return names


def main(argv: list[str]) -> int:
    """``quota SLICE CPUQuota=N%``."""
    state = Path(os.environ.get("MQ_STANDIN_STATE", "."))
    state.mkdir(parents=True, exist_ok=True)
    if len(argv) == 3 and argv[0] == "quota":
        return quota(state, argv[1], argv[2])
    print("usage: slices.py quota SLICE CPUQuota=N%", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
