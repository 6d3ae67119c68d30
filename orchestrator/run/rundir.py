"""Opening a run directory: a runs directory that cannot take a run is one line before anything
starts, never a traceback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from orchestrator.errors import FileError
from results.rundir.tables import SPARE_BYTES, RunWriter

MIN_FREE_BYTES = 64 << 20
"""A run needs this much free room to start: its first minutes of rows and the spare room."""


def open_run_dir(runs_dir: Path, run_dir: Path) -> RunWriter:
    """The writer of a new run directory ``run_dir`` under ``runs_dir``; a runs directory that is
    not a directory, cannot be written or has less than :data:`MIN_FREE_BYTES` free is a
    :class:`~orchestrator.errors.FileError` naming it."""
    where = f"runs directory {runs_dir}"
    existing = next((p for p in (runs_dir, *runs_dir.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise FileError(f"{where}: {existing} is not a directory")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise FileError(f"{where}: {existing} cannot be written (read-only, or not yours)")
    if existing is not None:
        free = shutil.disk_usage(existing).free
        if free < MIN_FREE_BYTES:
            raise FileError(f"{where}: only {free / 2**20:.1f} MiB free on its disk; a run "
                            f"needs at least {MIN_FREE_BYTES >> 20} MiB")
    try:
        return RunWriter(run_dir)
    except OSError as error:
        raise FileError(f"{where}: cannot create {run_dir} ({error.strerror or error}; "
                        f"{SPARE_BYTES >> 10} KiB kept spare for run.json)") from None
