"""Which kind of spec a file is (campaign, scenario or topology), for ``surge validate``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from orchestrator.errors import SpecError
from orchestrator.specs.campaign import load_campaign
from orchestrator.specs.loader import load_scenario, load_topology, read_document


def check_files(files: list[Path], overrides: list[str], warn: Callable[[str], None],
                ok: Callable[[Path, str], None], bad: Callable[[SpecError], None]) -> int:
    """``surge validate``: each file checked with :func:`load_any`; ``ok`` gets a valid one and
    its kind (campaign, scenario, topology), ``bad`` every invalid one's error. Returns how
    many were invalid."""
    failed = 0
    for path in files:
        try:
            spec = load_any(path, overrides, warn)
        except SpecError as error:
            bad(error)
            failed += 1
        else:
            ok(path, type(spec).__name__.removesuffix("Spec").lower())
    return failed


def load_any(path: str | Path, overrides: list[str] | None = None,
             warn: Callable[[str], None] | None = None) -> BaseModel:
    """Validate a file as whichever spec it is, for ``surge validate``: a campaign has
    ``cells`` (and every scenario and matrix combination it names is validated too), a
    scenario has ``plan`` or ``workload``, anything else is a topology. ``overrides`` apply as
    in ``surge run`` (a scenario), ``surge campaign`` (every cell of a campaign) or ``surge
    up`` (a topology). A scenario's warnings go to ``warn``."""
    path = Path(path)
    document, _ = read_document(path)
    if "cells" in document:
        return load_campaign(path, overrides).spec
    if "plan" in document or "workload" in document:
        return load_scenario(path, overrides, warn)[0]
    return load_topology(path, overrides)
