"""A finished (or crashed) run's page from its directory: the rows, events, steps and
accounting it recorded, and the plots its analysis wrote."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from orchestrator.specs.plan import duration
from orchestrator.web.feed import Board, RunFeed
from orchestrator.web.server import serving
from results.rundir.manifest import read_manifest
from results.rundir.tables import read_table
from results.timeline import read_events


def recorded_feed(run_dir: Path) -> RunFeed:
    """The page of the run in ``run_dir`` (a :class:`~orchestrator.errors.FileError` naming
    the file when it is not a run directory)."""
    manifest = read_manifest(run_dir)
    analysis = run_dir / "analysis"
    feed = RunFeed(
        manifest.run_id, manifest.scenario.get("name", manifest.run_id), duration(manifest.phases),
        ticks=read_table(run_dir, "ticks").to_pylist(),
        members=read_table(run_dir, "members").to_pylist(), phases=list(manifest.phases),
        steps=[step.as_json() for step in manifest.steps], terms=asdict(manifest.terms),
        accounting=manifest.accounting.model_dump(mode="json") if manifest.accounting else None,
        outcome=manifest.outcome or "unknown", label=f"recorded ({manifest.outcome})",
        run_dir=run_dir,
        analysis=sorted(p.name for p in analysis.glob("*.png")) if analysis.is_dir() else [])
    for event in read_events(run_dir):
        feed.event(event)
    return feed


def serve_recorded(run_dir: Path, address: str, say: Callable[[str], None]) -> None:
    """``surge view``: serve the page of the recorded run on ``address`` (``HOST:PORT``) until
    Ctrl-C."""
    board = Board(run=recorded_feed(run_dir))
    with serving(board, address, say), contextlib.suppress(KeyboardInterrupt):
        say(f"showing {run_dir} until Ctrl-C")
        threading.Event().wait()
