"""Which EMULATED queue managers run and where (tests only; NOT IBM MQ): the emulator's
stand-in for what MQ's cluster repositories know.

A queue manager started with ``--peers DIR`` announces itself in ``DIR/<name>.json`` (name,
host, port, pid and the clusters its cluster-receiver channels join) and withdraws when it
ends. The others of a cluster find it there and talk to it over its admin protocol
(:func:`ask`). MQ spreads this knowledge through full repositories and cluster channels; the
emulator's queue managers all run on this machine and read one directory instead.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.mqemu import admin


@dataclass(frozen=True)
class Peer:
    """One running queue manager as it announced itself."""

    name: str
    host: str
    port: int
    pid: int
    clusters: tuple[str, ...] = field(default_factory=tuple)


class Peers:
    """This queue manager's entry in the directory, and what it can see of the others."""

    def __init__(self, directory: str, me: Peer):
        self.directory = Path(directory) if directory else None
        self.me = me

    def announce(self, clusters: tuple[str, ...] | None = None) -> None:
        """Write (or rewrite, with new ``clusters``) this queue manager's entry."""
        if clusters is not None:
            self.me = Peer(self.me.name, self.me.host, self.me.port, self.me.pid,
                           tuple(sorted(clusters)))
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.me.name}.json"
        spare = path.with_suffix(".tmp")
        spare.write_text(json.dumps(asdict(self.me)), encoding="utf-8")
        os.replace(spare, path)

    def withdraw(self) -> None:
        """Remove this queue manager's entry (it is ending)."""
        if self.directory is not None:
            (self.directory / f"{self.me.name}.json").unlink(missing_ok=True)

    def others(self, cluster: str | None = None) -> list[Peer]:
        """The other running queue managers (of ``cluster``), by name."""
        if self.directory is None or not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob("*.json")):
            with contextlib.suppress(OSError, ValueError, TypeError):
                entry = json.loads(path.read_text(encoding="utf-8"))
                peer = Peer(**{**entry, "clusters": tuple(entry.get("clusters", ()))})
                if peer.name != self.me.name and running(peer.pid) and (
                        cluster is None or cluster in peer.clusters):
                    found.append(peer)
        return found


def ask(peer: Peer, *commands: str, timeout_s: float = 5.0) -> list[list[str]] | None:
    """Run admin ``commands`` on ``peer``; each one's output lines (None: it did not answer)."""
    try:
        return admin(peer.port, *commands, timeout_s=timeout_s, host=peer.host)
    except OSError:
        return None


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a queue manager that ended without withdrawing)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
