"""Progress of long work, told to whatever shows it: a stage begins (with how many items it
has, where that is known) and items of it get done. The analysis tells; the command line shows
(:mod:`orchestrator.cli.progress`)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Where long work reports how far it is."""

    def stage(self, name: str, total: int | None = None) -> None:
        """A stage begins: ``name`` says what it does, ``total`` how many items it has (None:
        not known in advance)."""

    def advance(self, done: int = 1) -> None:
        """``done`` more items of the current stage are done."""


class Silent:
    """Progress nobody shows (analysis inside ``surge run``, tests)."""

    def stage(self, name: str, total: int | None = None) -> None:
        """Nothing to show."""

    def advance(self, done: int = 1) -> None:
        """Nothing to show."""
