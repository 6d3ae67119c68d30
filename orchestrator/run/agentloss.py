"""Load agents that stop answering mid-run: each is lost on its own, and the run goes on with
the others.

An agent whose reads fail (refused, reset: not merely slow) a few ticks in a row is lost: the
OOM killer took it, its host rebooted, its network went. So is one that a command (a new rate,
the stop of its senders) cannot reach: it no longer does what the run asks. From then on it is
neither read nor sent commands; its last good snapshot stays, so the accounting can say what it
had sent and received by then, what its senders had not seen confirmed, and that what it did
afterwards is unknown (:func:`orchestrator.run.accounting.account`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from drivers import protocol
from orchestrator.agents.client import AgentClient
from orchestrator.run.collector import Failed


@dataclass(frozen=True)
class LostAgent:
    """An agent the run lost, and what it had done by its last good reading (``None``: it
    never answered one)."""

    index: int
    host: str
    error: str
    lost_at_s: float  # the run's second at which it was given up
    last_reading_s: float | None  # the run's second of its last good snapshot
    snapshot: protocol.Snapshot | None
    senders: int
    receivers: int
    confirms: bool = True  # whether its senders asked for publisher confirms

    @property
    def unconfirmed(self) -> int | None:
        """Publishes neither confirmed nor nacked at its last reading (``None``: unknown, or
        no confirms asked for)."""
        s = self.snapshot
        return None if s is None or not self.confirms else max(s.sent - s.confirmed - s.nacked, 0)

    def explain(self) -> str:
        """One line: which agent, when, what it hosted and what is now unknown."""
        since = "" if self.last_reading_s is None else f" after {self.last_reading_s:.1f} s"
        done = "" if self.snapshot is None else (
            f"; by its last reading it had sent {self.snapshot.sent} and received "
            f"{self.snapshot.received}")
        return (f"agent {self.index} on {self.host} lost at {self.lost_at_s:.1f} s ({self.error})"
                f": the run goes on without its {self.senders} senders and {self.receivers} "
                f"receivers{done}; what it did{since} is unknown")

    def record(self) -> dict[str, Any]:
        """The event's and run.json's fields."""
        s = self.snapshot
        return {"agent": self.index, "host": self.host, "lost_at_s": round(self.lost_at_s, 3),
                "last_reading_s": None if self.last_reading_s is None
                else round(self.last_reading_s, 3),
                "senders": self.senders, "receivers": self.receivers,
                "sent": s.sent if s else None, "received": s.received if s else None,
                "confirmed": s.confirmed if s else None, "nacked": s.nacked if s else None,
                "unconfirmed": self.unconfirmed}


class AgentWatch:
    """Counts each agent's failed reads, keeps its last good snapshot, and says which agents
    are lost (``failures`` failed reads in a row); ``confirms``: whether the senders ask for
    publisher confirms."""

    def __init__(self, failures: int, confirms: bool = True):
        self.failures, self.confirms = failures, confirms
        self.lost: dict[int, LostAgent] = {}
        self._failed: dict[int, int] = {}
        self._last: dict[int, tuple[float, protocol.Snapshot]] = {}
        self._workers: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def hosting(self, index: int, senders: int, receivers: int) -> None:
        """Agent ``index`` hosts this many senders and receivers."""
        self._workers[index] = (senders, receivers)

    def seen(self, index: int, snapshot: protocol.Snapshot, elapsed_s: float) -> None:
        """A good snapshot of agent ``index`` at the run's second ``elapsed_s``."""
        with self._lock:
            self._last[index] = (elapsed_s, snapshot)

    def snapshots(self) -> dict[int, protocol.Snapshot]:
        """Each agent's last good snapshot, by agent index."""
        with self._lock:
            return {index: snapshot for index, (_, snapshot) in self._last.items()}

    def live(self, agents: Iterable[AgentClient]) -> list[AgentClient]:
        """``agents`` without the lost ones."""
        return [agent for agent in agents if agent.index not in self.lost]

    def observe(self, agents: Sequence[AgentClient], results: dict[str, Any],
                elapsed_s: float) -> list[LostAgent]:
        """Fold one tick's reads of the live ``agents``; the ones lost with it."""
        newly = []
        for agent in agents:
            result = results.get(f"agent:{agent.index}")
            if not isinstance(result, Failed):
                if result is not None:
                    self._failed.pop(agent.index, None)
                continue
            self._failed[agent.index] = self._failed.get(agent.index, 0) + 1
            if self._failed[agent.index] >= self.failures:
                newly.append(self.give_up(
                    agent, f"its last {self.failures} reads failed: {result.error}", elapsed_s))
        return newly

    def give_up(self, agent: AgentClient, error: str, elapsed_s: float) -> LostAgent:
        """Agent ``agent`` is lost at the run's second ``elapsed_s``, for ``error``, with what
        its last good snapshot says it had done."""
        with self._lock:
            at, snapshot = self._last.get(agent.index, (None, None))
            senders, receivers = self._workers.get(agent.index, (0, 0))
            lost = LostAgent(agent.index, agent.host, error, elapsed_s, at, snapshot, senders,
                             receivers, self.confirms)
            self.lost[agent.index] = lost
        return lost
