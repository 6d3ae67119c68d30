"""Incremental analysis: which run directories are new or changed since they were last analysed.

Each runs root keeps ``.analysis-state.json``: per run, a fingerprint of its files (names, sizes
and modification times of ``run.json``, ``events.jsonl`` and the Parquet parts). A run is analysed
again only when its fingerprint changes. One ``surge analyze`` at a time holds ``.analyze.lock``
in the root; the state file is replaced atomically after each run, so an interrupted analysis
loses nothing that was finished.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.errors import FileError
from results.rundir.jsonfile import read_object

STATE_FILE = ".analysis-state.json"
LOCK_FILE = ".analyze.lock"


def run_dirs(root: Path) -> list[Path]:
    """Every run directory directly under ``root`` (those with a ``run.json``)."""
    return sorted(p.parent for p in root.glob("*/run.json"))


def fingerprint(run_dir: Path) -> str:
    """A digest of the names, sizes and modification times of a run's recorded files."""
    digest = hashlib.sha256()
    files = [run_dir / "run.json", run_dir / "events.jsonl",
             *sorted((run_dir / "metrics").glob("*/part-*.parquet"))]
    for path in files:
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        digest.update(f"{path.relative_to(run_dir)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class Catalog:
    """The analysis state of one runs root."""

    def __init__(self, root: Path):
        self.root = root
        self.path = root / STATE_FILE
        try:  # a cache: a missing or damaged one means analysing again
            self.state: dict[str, str] = read_object(self.path)
        except FileError:
            self.state = {}

    def pending(self, dirs: list[Path], force: bool = False) -> dict[Path, str]:
        """The runs among ``dirs`` that are new or changed, or whose analysis is missing (all
        with ``force``), each with its fingerprint now."""
        digests = {d: fingerprint(d) for d in dirs}
        return {d: digest for d, digest in digests.items()
                if force or self.state.get(d.name) != digest
                or not (d / "analysis" / "report.md").exists()}

    def done(self, run_dir: Path, digest: str) -> None:
        """Record ``run_dir`` as analysed at ``digest``; saved at once, atomically."""
        self.state[run_dir.name] = digest
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True))
        tmp.replace(self.path)


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the root's analysis lock (waits for another ``surge analyze`` to finish)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
