"""Commands a user gives for acting on members of a cluster surge did not start
(``existing.commands``): run on this machine without a shell, with a timeout, and recorded like
surge's own remote commands."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable

from orchestrator.errors import ProvisionError
from topologies.base import CommandResult

OUTPUT_TAIL = 2000  # characters of stdout and stderr kept in the record


def run_member_command(template: str, what: str, timeout_s: float,
                       record: Callable[[CommandResult], None] | None = None,
                       **values: object) -> CommandResult:
    """Fill ``values`` ({index}, {name}, {count}) into ``template``, split it as a shell would
    (no shell runs it), run it for at most ``timeout_s``, hand the result to ``record`` and
    return it; :class:`ProvisionError` naming ``what`` (the spec field) when it cannot be
    split, started, or ends with a status other than 0."""
    command = template.format(**values)
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise ProvisionError(f"{what}: {command!r} cannot be split into words: {error}") from None
    if not argv:
        raise ProvisionError(f"{what}: the command is empty")
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        status, stdout = -1, _text(expired.stdout)
        stderr = _text(expired.stderr) + f"\n(stopped after {timeout_s:g} s)"
    except OSError as error:
        status, stdout, stderr = -1, "", f"cannot run {argv[0]!r}: {error}"
    result = CommandResult("localhost", command, status, stdout[-OUTPUT_TAIL:],
                           stderr[-OUTPUT_TAIL:], time.monotonic() - started)
    if record is not None:
        record(result)
    if not result.ok:
        said = " | ".join((stderr or stdout).strip().splitlines()[-3:]) or "no output"
        raise ProvisionError(f"{what} {command!r} failed (status {status}): {said}")
    return result


def _text(data: bytes | str | None) -> str:
    """Captured output, whichever type the timeout left it in."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""
