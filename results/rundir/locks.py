"""Who holds what: advisory file locks that the kernel lets go of when their process dies.

A :class:`FileLock` is an exclusive ``flock`` on a file that also holds, as JSON, who took it
(kind, id, PID, since when). Its holder empties the file when it lets go; so a file that still
names a holder while nobody holds its lock was left by a process that died (SIGKILL, the OOM
killer, a reboot) without ending what it was doing. That is how a run whose controller died is
told from a run that is still recording (:data:`CONTROLLER_LOCK` in its run directory), and how a
topology that a dead run held is told from one in use (:mod:`topologies.lease`).

Locks are per machine: they say nothing of a process on another host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

CONTROLLER_LOCK = ".controller.lock"
"""Held in a run directory by its controller for as long as the run goes."""


class FileLock:
    """An exclusive lock on ``path`` held by this process until :meth:`release` (or its end);
    ``previous`` is the holder record a dead holder left there (``None``: none)."""

    def __init__(self, path: Path, fd: int, previous: dict[str, Any] | None):
        self.path, self._fd, self.previous = path, fd, previous

    @classmethod
    def take(cls, path: Path, holder: dict[str, Any]) -> tuple[FileLock | None, dict[str, Any]]:
        """Take the lock for ``holder`` (``pid`` and ``since`` are added): ``(lock, holder)``,
        or ``(None, what the file says of the process that holds it)``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None, holder_of(path) or {}
        previous = _parse(os.pread(fd, 65536, 0))
        record = {**holder, "pid": os.getpid(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        return cls(path, fd, previous), record

    def release(self, remove: bool = False) -> None:
        """Say the holder ended what it was doing (the file is emptied, or ``remove``d where
        nobody else takes it) and let go."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):  # a full or read-only disk still lets go
            if remove:
                self.path.unlink()
            os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = -1


def holder_of(path: Path) -> dict[str, Any] | None:
    """The holder ``path`` names (held or left behind), ``None`` if it names none."""
    try:
        return _parse(path.read_bytes())
    except OSError:
        return None


def is_held(path: Path) -> bool:
    """Whether a live process holds the lock on ``path`` (this one included)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def abandoned(path: Path) -> dict[str, Any] | None:
    """The holder record a dead process left on ``path`` (nobody holds it, yet it names one),
    else ``None``."""
    holder = holder_of(path)
    return holder if holder and not is_held(path) else None


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(data.decode() or "null")
    except (UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None
