"""Which routing key each message takes: a pure function of its producer and sequence number.

A sender given several routing keys picks one per message in turn (``sequential``), uniformly
(``random``) or by a Zipf distribution (``zipf``: key ``k`` of ``n`` with weight ``1 / k**s``).
"Random" is a fixed hash of (producer, sequence), not a generator's state: the controller
computes, after the run, the key every message took and so the queues it was routed to, and
accounts for each copy exactly without the senders reporting their keys.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

ORDERS = ("random", "sequential", "zipf")
_MASK = (1 << 64) - 1


def mix(producer_id: int, seq: int) -> int:
    """A 64-bit hash of (producer, sequence) (SplitMix64's finaliser), spread uniformly."""
    z = ((producer_id << 40) ^ seq) * 0x9E3779B97F4A7C15 & _MASK
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _MASK
    return z ^ (z >> 31)


class KeyPicker:
    """Picks the index of one of ``count`` routing keys for each message."""

    __slots__ = ("count", "order", "bounds")

    def __init__(self, count: int, order: str = "random", exponent: float = 1.0):
        if count < 1 or order not in ORDERS:
            raise ValueError(f"routing keys: {count} keys in order {order!r} (orders: "
                             f"{', '.join(ORDERS)})")
        self.count, self.order = count, order
        weights = [1 / k ** exponent for k in range(1, count + 1)]
        total = sum(weights)
        # key k is taken where the hash falls below bounds[k] (of 2**64)
        self.bounds = [int(w / total * (1 << 64)) for w in accumulate(weights)][:-1]

    @property
    def fixed(self) -> bool:
        """Whether every message takes the same key."""
        return self.count == 1

    def pick(self, producer_id: int, seq: int) -> int:
        """The key index of message ``seq`` of ``producer_id``."""
        if self.count == 1:
            return 0
        if self.order == "sequential":
            return seq % self.count
        if self.order == "random":
            return mix(producer_id, seq) % self.count
        return bisect_right(self.bounds, mix(producer_id, seq))

    def picks(self, producer_id: int, first_seq: int, n: int) -> list[int]:
        """The key indices of ``n`` consecutive messages from ``first_seq``."""
        pick = self.pick
        return [pick(producer_id, seq) for seq in range(first_seq, first_seq + n)]
