"""Incremental analysis: which run directories are new or changed since they were last analysed.

A run's fingerprint digests the names, sizes and modification times of its ``run.json``,
``events.jsonl`` and Parquet files; the results lake records, per run, the fingerprint it was
analysed from (:meth:`results.lake.Lake.fingerprints`), committed with its rows in one step. A
run is analysed again only when its fingerprint changes or its report is missing. One
``surge analyze`` at a time holds ``.analyze.lock`` in the root.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".analyze.lock"


def run_dirs(root: Path) -> list[Path]:
    """Every run directory directly under ``root`` (those with a ``run.json``)."""
    return sorted(p.parent for p in root.glob("*/run.json"))


def fingerprint(run_dir: Path) -> str:
    """A digest of the names, sizes and modification times of a run's recorded files."""
    digest = hashlib.sha256()
    files = [run_dir / "run.json", run_dir / "events.jsonl",
             *sorted((run_dir / "metrics").glob("*/*.parquet"))]
    for path in files:
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        digest.update(f"{path.relative_to(run_dir)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def pending(dirs: list[Path], analysed: dict[str, str], force: bool = False) -> dict[Path, str]:
    """The runs among ``dirs`` that are new or changed since ``analysed`` (run name ->
    fingerprint), or whose report is missing (all with ``force``), each with its fingerprint
    now."""
    digests = {d: fingerprint(d) for d in dirs}
    return {d: digest for d, digest in digests.items()
            if force or analysed.get(d.name) != digest
            or not (d / "analysis" / "report.md").exists()}


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the root's analysis lock (waits for another ``surge analyze`` to finish)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
