"""Progress of long work on stderr: on a terminal a rich bar for each stage (a spinner with the
time spent where the stage's size is not known), otherwise plain lines, one as each stage
begins and one every ``every_s`` while it goes, so a log shows that work goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress


class StageProgress:
    """A :class:`results.progress.Progress` shown on stderr; use as a context manager."""

    def __init__(self, what: str, console: Console | None = None, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.what, self.every_s, self.clock = what, every_s, clock
        self.console = console or Console(stderr=True)
        self.fancy = self.console.is_terminal
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._name, self._total, self._done = "", None, 0
        self._began = self._said = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __enter__(self) -> StageProgress:
        if self.fancy:
            self._bar = RichProgress(
                SpinnerColumn(), TextColumn(f"{self.what}: {{task.description}}"), BarColumn(),
                MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                console=self.console, transient=True)
            self._bar.__enter__()
        else:
            threading.Thread(target=self._tell, name="progress", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    def stage(self, name: str, total: int | None = None) -> None:
        """A stage begins (a new bar, or its line)."""
        with self._lock:
            self._name, self._total, self._done = name, total, 0
            self._began = self._said = self.clock()
        if self._bar is not None:
            if self._task is not None:
                self._bar.remove_task(self._task)
            self._task = self._bar.add_task(name, total=total)
        else:
            self.console.print(self.line(begins=True), soft_wrap=True)

    def advance(self, done: int = 1) -> None:
        """``done`` more items of the stage are done."""
        with self._lock:
            self._done += done
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, done)

    def line(self, begins: bool = False) -> str:
        """The stage as one plain line: ``analyse: reports and plots (100)`` as it begins,
        ``analyse: reports and plots 40/100 (12 s)`` as it goes."""
        with self._lock:
            if begins:
                return f"{self.what}: {self._name}" + (
                    "" if self._total is None else f" ({self._total:,})")
            count = "" if self._total is None else f" {self._done:,}/{self._total:,}"
            return f"{self.what}: {self._name}{count} ({self.clock() - self._began:.0f} s)"

    def tell_if_due(self) -> bool:
        """Without a terminal: say the stage's line if ``every_s`` passed since the last;
        whether it was said."""
        if not self._name or self.clock() - self._said < self.every_s:
            return False
        self._said = self.clock()
        self.console.print(self.line(), soft_wrap=True)
        return True

    def _tell(self) -> None:
        while not self._stop.wait(1.0):
            self.tell_if_due()
