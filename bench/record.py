"""Every benchmark keeps what it printed: ``bench/results/<name>.txt``, headed by the command that
produced it, when, on what machine and at which commit, so a figure quoted in the docs can be
checked against the file a run wrote rather than against someone's copy.

``with recorded("generators"): main()`` tees the benchmark's stdout into that file (written
when the benchmark ends, also when it fails or is interrupted, with a line saying so).
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
    """Tee stdout into ``directory/<name>.txt`` while the benchmark runs."""
    tee, terminal = _Tee(sys.stdout), sys.stdout
    sys.stdout = tee
    ended = "\n# ended: not completed\n"
    try:
        yield
        ended = ""
    finally:
        sys.stdout = terminal
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.txt"
        path.write_text(header(sys.argv) + "\n" + tee.copy.getvalue() + ended)
        print(f"results: {path}", file=sys.stderr)
