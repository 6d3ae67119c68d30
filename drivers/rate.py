"""Per-sender rate control on an absolute schedule, driven by times passed in.

Message k of the current segment is due at anchor + k / rate, so rounding never accumulates into
drift. A stall longer than max_catchup_s is not made up in full: at most max_catchup_s worth of
messages is handed out at once and the rest are counted as skipped: the oldest ones, so the
messages handed out are always the latest due, and :attr:`RateSchedule.last_due` (the time the
latest of them was due) places each on the schedule (its intended send time).
"""

from __future__ import annotations

import math

UNLIMITED_BATCH = 64
"""Messages handed out per due() call when the rate is 0 (unlimited), at most."""

UNLIMITED_BATCH_BYTES = 1024 * 1024
"""Bytes of bodies handed out per due() call when unlimited: large messages go a few at a
time, so a batch never outgrows the connection's write buffer (4 MiB); 1 MiB rather than
256 KiB: 64 KiB messages cost a fifth less CPU per message, the work per batch shared by 16."""

# Absorbs float error in elapsed * rate, so a message due exactly now is not reported late.
_EPS = 1e-9


def unlimited_batch(size: int) -> int:
    """Messages of ``size`` bytes an unlimited sender publishes per wake-up (1 to 64)."""
    return max(1, min(UNLIMITED_BATCH, UNLIMITED_BATCH_BYTES // max(1, size)))


def on_tick(delay: float, now: float, tick: float) -> float:
    """The delay from ``now`` to the first instant that is a whole multiple of ``tick``, after
    ``now`` and at least ``delay`` away. Senders that wake on the same instants are served
    by one turn of the event loop instead of one each."""
    k = max(math.floor(now / tick) + 1, math.ceil((now + delay) / tick - _EPS))
    return max(0.0, k * tick - now)


class RateSchedule:
    """Tells a sender how many messages are due at a given time."""

    __slots__ = (
        "rate",
        "max_catchup_s",
        "handed_out",
        "skipped",
        "last_due",
        "_anchor",
        "_k",
        "_max_batch",
        "_unlimited_batch",
    )

    def __init__(self, rate: float, now: float, max_catchup_s: float = 1.0,
                 batch: int = UNLIMITED_BATCH) -> None:
        """Start at now (the first message is due then); rate in msg/s, 0 means unlimited
        (``batch`` messages handed out per call)."""
        if not max_catchup_s > 0:
            raise ValueError(f"max_catchup_s must be > 0, got {max_catchup_s}")
        self._unlimited_batch = batch
        self.max_catchup_s = max_catchup_s
        self.handed_out = 0
        self.skipped = 0
        self.last_due = now
        self._set(rate, now)

    def _set(self, rate: float, anchor: float) -> None:
        if not (rate >= 0 and math.isfinite(rate)):
            raise ValueError(f"rate must be a finite number >= 0, got {rate}")
        self.rate = rate
        self._anchor = anchor
        self._k = 0
        self._max_batch = max(1, int(rate * self.max_catchup_s))

    def due(self, now: float) -> int:
        """Return how many messages are due by now and not yet handed out, and hand them out.

        With a rate, the last of them was due at :attr:`last_due` and each earlier one
        ``1 / rate`` before the next (the skipped ones are the oldest)."""
        rate = self.rate
        if rate == 0:
            self.handed_out += self._unlimited_batch
            return self._unlimited_batch
        elapsed = now - self._anchor
        if elapsed < 0:
            return 0
        target = int(elapsed * rate + _EPS) + 1
        n = target - self._k
        if n <= 0:
            return 0
        self._k = target
        self.last_due = self._anchor + (target - 1) / rate
        if n > self._max_batch:
            self.skipped += n - self._max_batch
            n = self._max_batch
        self.handed_out += n
        return n

    def next_due(self) -> float:
        """Absolute time the next message is due; 0.0 (always in the past) when unlimited."""
        if self.rate == 0:
            return 0.0
        return self._anchor + self._k / self.rate

    def set_rate(self, rate: float, now: float, restart: bool = False) -> None:
        """Switch to rate from now on, keeping the progress towards the next message.

        The fraction of the current interval already elapsed carries over (scaled to the new
        rate), so the change causes neither a burst nor a gap; messages already due under the
        old rate but not yet handed out stay due. ``restart`` starts afresh from ``now``
        instead (after a pause, nothing is owed).
        """
        old = self.rate
        if old == 0 or rate == 0 or restart:
            self._set(rate, now)
            return
        # Message units still to go before the next message; negative when messages are pending.
        remaining = self._k - (now - self._anchor) * old
        self._set(rate, now + remaining / rate)
