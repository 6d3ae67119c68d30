"""One holder per topology at a time, and a record of who started its running members.

A run, a campaign, a capacity search, ``surge up`` and ``surge down`` each take the topology's
lease (``<state root>/locks/<topology>.lock``, a :class:`~results.rundir.locks.FileLock`) before
they touch it; a second one is refused in one line naming the holder and its PID. Within one
process the lease is re-entrant, so a campaign or a capacity search holds it across its cells
and each cell's run takes it again. A holder that died (its lock free, its record still in the
file) is handed to the next holder as ``previous``, which settles what it left.

``<topology>.members.json`` says who started the members that run now (a run, a campaign, a
capacity search or ``surge up``), and whether a run that ended kept them up on purpose
(``--keep``). A run uses the members ``surge up`` started or a run kept; members that a run
which died started are refused unless the run is told to reuse them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import SurgeError
from results.rundir.jsonfile import replace_text
from results.rundir.locks import FileLock
from results.rundir.manifest import read_manifest
from topologies.base import default_state_root

LOCKS_DIR = "locks"


class TopologyBusy(SurgeError):
    """The topology is held by another live process, or its running members belong to one
    that died."""


@dataclass
class Lease:
    """This process's hold on one topology (``previous``: what a dead holder left)."""

    name: str
    lock: FileLock
    holder: dict[str, Any]
    depth: int = 1
    previous: dict[str, Any] | None = field(default=None)


_held: dict[str, Lease] = {}
_guard = threading.Lock()


def lock_path(name: str, root: Path | None = None) -> Path:
    """The lease file of topology ``name``."""
    return (root or default_state_root()) / LOCKS_DIR / f"{name}.lock"


def members_path(name: str, root: Path | None = None) -> Path:
    """The record of who started topology ``name``'s running members."""
    return (root or default_state_root()) / LOCKS_DIR / f"{name}.members.json"


@contextlib.contextmanager
def holding(name: str, kind: str, ident: str = "", directory: str = "",
            root: Path | None = None) -> Iterator[Lease]:
    """Hold topology ``name`` for a ``kind`` (run, campaign, capacity, up, down) called
    ``ident`` whose records are in ``directory``; raises :class:`TopologyBusy` naming the
    holder when another live process holds it."""
    with _guard:
        lease = _held.get(name)
        if lease is not None:
            lease.depth += 1
        else:
            holder = {"kind": kind, "id": ident, "directory": directory}
            lock, record = FileLock.take(lock_path(name, root), holder)
            if lock is None:
                raise TopologyBusy(busy_text(name, record))
            lease = _held[name] = Lease(name, lock, record, previous=lock.previous)
    try:
        yield lease
    finally:
        with _guard:
            lease.depth -= 1
            if lease.depth == 0:
                del _held[name]
                lease.lock.release()


def busy_text(name: str, holder: dict[str, Any]) -> str:
    """One line: who holds topology ``name``, and what to do about it."""
    pid = holder.get("pid", "?")
    since = holder.get("since")
    when = f", since {datetime.fromtimestamp(since):%H:%M:%S}" if since else ""
    return (f"topology {name} is in use by {_who(holder)} (pid {pid}{when}): wait for it to "
            f"end, or stop it cleanly with kill -TERM {pid}")


def describe(holder: dict[str, Any]) -> str:
    """``run <id> (pid N)`` for messages and events."""
    return f"{_who(holder)} (pid {holder.get('pid', '?')})"


def _who(holder: dict[str, Any]) -> str:
    return " ".join(str(part) for part in (holder.get("kind", "?"), holder.get("id")) if part)


def members_owner(name: str, root: Path | None = None) -> dict[str, Any] | None:
    """Who started topology ``name``'s members (``None``: no record)."""
    try:
        record = json.loads(members_path(name, root).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def record_members(name: str, owner: dict[str, Any] | None, root: Path | None = None) -> None:
    """Record who started the members now running (``None``: none run any more)."""
    path = members_path(name, root)
    if owner is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(owner))


def foreign_owner(owner: dict[str, Any] | None) -> bool:
    """Whether members started by ``owner`` belong to another process that did not hand them
    over: a run, campaign or capacity search (not ``surge up``) of another PID that did not end
    with ``--keep``. (A live one holds the lease, so such an owner is dead.)"""
    return bool(owner) and owner.get("kind") in ("run", "campaign", "capacity") \
        and owner.get("pid") != os.getpid() and not owner.get("kept")


def settle_previous(previous: dict[str, Any]) -> str:
    """Settle what a holder that died left (its run directory is read, which marks it
    interrupted: :func:`results.rundir.manifest.read_manifest`); one line saying so."""
    if previous.get("kind") == "run" and previous.get("directory"):
        with contextlib.suppress(SurgeError):
            read_manifest(Path(previous["directory"]))
    return (f"{describe(previous)} held this topology and died without ending"
            + ("; its run is marked interrupted" if previous.get("kind") == "run" else ""))
