"""A run's id, which names its directory: kept apart from the tables so that a run can name its
directory before it loads them."""

from __future__ import annotations

import re
from datetime import datetime, timezone


def new_run_id(scenario_name: str) -> str:
    """``<UTC timestamp>-<scenario>``: sorts by time, says what ran. The name is made safe as
    one directory name whatever it holds (``/``, ``..``, line breaks become ``_``; at most 64
    characters), so a run never writes outside its runs directory."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", scenario_name)[:64] or "run"
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{name}"
