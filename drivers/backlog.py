"""How far an unlimited sender may run ahead of the receivers: credit from its queue's depth.

An unlimited sender would otherwise publish as fast as the broker takes messages in, which on
most brokers is faster than receivers take them out; the queue then grows for the whole step
and the step measures the queue's growth, not the rate the system sustains. With a gate the
sender publishes at most ``bound`` minus the queue's depth, counting what it published after
asking; a question is always on its way (the next is asked when the answer comes), because a
busy queue can take tens of milliseconds to answer and the credit must not wait for it.
Pure: the driver asks and answers, the gate only counts.
"""

from __future__ import annotations


class BacklogGate:
    """Credit for one sender against ``bound`` ready messages in its queues."""

    __slots__ = ("bound", "credit", "min_interval_s", "_asked_at", "_answered_s")

    def __init__(self, bound: int, min_interval_s: float = 0.005) -> None:
        """No credit until the first reading; ``bound`` is this sender's share (>= 1); readings
        are at least ``min_interval_s`` apart (a queue that answers at once is not asked a
        thousand times a second)."""
        if bound < 1:
            raise ValueError(f"backlog bound must be at least 1, got {bound}")
        self.bound = bound
        self.credit = 0
        self.min_interval_s = min_interval_s
        self._asked_at: int | None = None
        self._answered_s = float("-inf")

    def wants_reading(self, now: float) -> bool:
        """Whether to ask for the depth at ``now`` (seconds, monotonic): no question is on its
        way and the last answer is at least ``min_interval_s`` old."""
        return self._asked_at is None and now - self._answered_s >= self.min_interval_s

    def asked(self, published: int) -> None:
        """A reading was asked for when this sender had published ``published`` messages."""
        self._asked_at = published

    def answered(self, depth: int, published: int, now: float) -> None:
        """The queue held ``depth`` ready messages when it answered at ``now``; ``published``
        is this sender's count now (what it published since asking is not in ``depth`` yet)."""
        self.credit = self.bound - depth - (published - (self._asked_at or 0))
        self._asked_at = None
        self._answered_s = now

    def forget(self) -> None:
        """The connection is gone: an answer will not come, and the old credit is stale."""
        self.credit = 0
        self._asked_at = None
        self._answered_s = float("-inf")

    def allow(self, n: int) -> int:
        """How many of ``n`` due messages may be published now; spends that credit."""
        n = max(0, min(n, self.credit))
        self.credit -= n
        return n
