"""Every benchmark keeps what it printed: ``bench/results/<name>.txt``, headed by the command that
produced it, when, on what machine and at which commit, so a figure quoted in the docs can be
checked against the file a run wrote rather than against someone's copy.

``with recorded("generators"): main()`` tees the benchmark's stdout into that file when the
benchmark completes. A run that fails or is interrupted keeps what it printed in
``<name>.unfinished.txt`` instead, with a line saying so, so the record of the last completed run
is never overwritten by a broken one; ``--help`` and bad arguments write nothing.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, terminal):
        self.terminal, self.copy = terminal, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.terminal.write(text)

    def flush(self) -> None:
        self.terminal.flush()


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5, cwd=RESULTS.parent).stdout.strip() or "-"
    except (OSError, subprocess.SubprocessError):
        return "-"


def header(argv: list[str]) -> str:
    """Who produced a results file: the command, the time, the machine and the commit."""
    command = shlex.join(["python", *argv])
    return (f"# command: {command}\n"
            f"# at: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores, "
            f"{platform.machine()}, Python {platform.python_version()}; commit {_commit()}\n")


@contextlib.contextmanager
def recorded(name: str, directory: Path = RESULTS) -> Iterator[None]:
    """Tee stdout into ``directory/<name>.txt`` while the benchmark runs (see the module)."""
    tee, terminal = _Tee(sys.stdout), sys.stdout
    sys.stdout = tee
    ended: str | None = "\n# ended: not completed\n"
    try:
        yield
        ended = ""
    except SystemExit as stop:
        if stop.code in (0, 2):
            ended = None  # argparse's --help or a usage error: nothing was measured
        raise
    finally:
        sys.stdout = terminal
        if ended is not None:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / (f"{name}.txt" if not ended else f"{name}.unfinished.txt")
            path.write_text(header(sys.argv) + "\n" + tee.copy.getvalue() + ended)
            print(f"results: {path}", file=sys.stderr)
