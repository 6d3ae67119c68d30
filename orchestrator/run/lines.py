"""Where the lines of a run or a search go, as the command line sets it up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Say = Callable[[str], None]


@dataclass(frozen=True)
class Lines:
    """Where the lines of a run or search go: ``say`` plain ones, ``good`` and ``caution`` the
    ones to set apart (a balanced or an unbalanced accounting, a skipped analysis), ``warn``
    a spec's warnings."""

    say: Say
    good: Say
    caution: Say
    warn: Say
