"""How far an unlimited sender may run ahead of the receivers: credit from its queue's depth.

An unlimited sender would otherwise publish as fast as the broker takes messages in, which on
most brokers is faster than receivers take them out; the queue then grows for the whole step
and the step measures the queue's growth, not the rate the system sustains. With a gate the
sender publishes at most ``bound`` minus the queue's depth, counting what it published after
asking; it asks again once half of its credit is spent, so a reading is usually on its way
before the credit runs out. Pure: the driver asks and answers, the gate only counts.
"""

from __future__ import annotations


class BacklogGate:
    """Credit for one sender against ``bound`` ready messages in its queues."""

    __slots__ = ("bound", "credit", "_asked_at")

    def __init__(self, bound: int) -> None:
        """No credit until the first reading; ``bound`` is this sender's share (>= 1)."""
        if bound < 1:
            raise ValueError(f"backlog bound must be at least 1, got {bound}")
        self.bound = bound
        self.credit = 0
        self._asked_at: int | None = None

    def wants_reading(self) -> bool:
        """Whether to ask for the depth now: none asked yet and half the credit is spent."""
        return self._asked_at is None and self.credit <= self.bound // 2

    def asked(self, published: int) -> None:
        """A reading was asked for when this sender had published ``published`` messages."""
        self._asked_at = published

    def answered(self, depth: int, published: int) -> None:
        """The queue held ``depth`` ready messages when it answered; ``published`` is this
        sender's count now (what it published since asking is not in ``depth`` yet)."""
        asked_at = published if self._asked_at is None else self._asked_at
        self.credit = self.bound - depth - (published - asked_at)
        self._asked_at = None

    def forget(self) -> None:
        """The connection is gone: an answer will not come, and the old credit is stale."""
        self.credit = 0
        self._asked_at = None

    def allow(self, n: int) -> int:
        """How many of ``n`` due messages may be published now; spends that credit."""
        n = max(0, min(n, self.credit))
        self.credit -= n
        return n
