"""Commands a user gives for acting on members of a cluster surge did not start
(``existing.commands``), run on this machine and recorded like surge's own remote commands."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable

from orchestrator.errors import ProvisionError
from topologies.base import CommandResult

OUTPUT_TAIL = 2000  # characters of stdout/stderr kept in the run's events


def run_member_command(template: str, what: str, timeout_s: float,
                       record: Callable[[CommandResult], None] | None = None,
                       **values: object) -> CommandResult:
    """Run ``template`` with ``values`` filled in (the spec allows only
    :data:`orchestrator.specs.existing.PLACEHOLDERS`) (no shell: split like a shell would), wait
    at most ``timeout_s``, hand the result to ``record``; :class:`ProvisionError` naming
    ``what`` (e.g. ``existing.commands.start_member``) if it fails."""
    command = template.format(**values)
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise ProvisionError(f"{what}: cannot split {command!r} into words: {error}") from None
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, errors="replace")
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        status, stdout, stderr = -1, _text(expired.stdout), _text(expired.stderr)
        stderr += f"\n(timed out after {timeout_s:g} s)"
    except OSError as error:
        status, stdout, stderr = -1, "", str(error)
    result = CommandResult("localhost", command, status, stdout[-OUTPUT_TAIL:],
                           stderr[-OUTPUT_TAIL:], time.monotonic() - started)
    if record is not None:
        record(result)
    if not result.ok:
        tail = " | ".join((stderr or stdout).strip().splitlines()[-3:])
        raise ProvisionError(f"{what} {command!r} failed (status {status}): {tail}")
    return result


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""
