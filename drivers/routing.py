"""Which routing key each message takes: a pure function of its producer and sequence number.

A sender given several routing keys picks one per message in turn (``sequential``), uniformly
(``random``) or by a Zipf distribution (``zipf``: key ``k`` of ``n`` with weight ``1 / k**s``);
a message's size class is picked the same way, by weights (``weighted``).
"Random" is a fixed hash of (producer, sequence), not a generator's state: the controller
computes, after the run, the key every message took and so the queues it was routed to, and
accounts for each copy exactly without the senders reporting their keys.

The hash is Fibonacci hashing of the sequence number offset by a per-producer salt (one
multiplication per message). ``random`` scales it to the key count; ``zipf`` indexes with its
top bits a table of at least 65,536 slots holding each key in proportion to its probability,
so a pick costs a multiply, a shift and a list index.
"""

from __future__ import annotations

from itertools import accumulate

ORDERS = ("random", "sequential", "zipf", "weighted")
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / the golden ratio, odd


def mix(producer_id: int, seq: int) -> int:
    """A 64-bit hash of (producer, sequence) (SplitMix64's finaliser), spread uniformly."""
    z = ((producer_id << 40) ^ seq) * 0x9E3779B97F4A7C15 & _MASK
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _MASK
    return z ^ (z >> 31)


class KeyPicker:
    """Picks the index of one of ``count`` routing keys (or message size classes) for each
    message; ``weighted`` picks in proportion to ``weights``. Pickers of different ``salt``
    pick independently of each other (a message's key says nothing of its size)."""

    __slots__ = ("count", "order", "slots", "shift", "salt")

    def __init__(self, count: int, order: str = "random", exponent: float = 1.0,
                 weights: list[float] | None = None, salt: int = 0):
        if count < 1 or order not in ORDERS or (order == "weighted") != (weights is not None):
            raise ValueError(f"routing keys: {count} keys in order {order!r} (orders: "
                             f"{', '.join(ORDERS)}; weighted goes with weights)")
        self.count, self.order, self.salt = count, order, salt
        bits = min(24, max(16, count.bit_length() + 4))  # every key has slots
        self.shift = 64 - bits
        if order == "zipf":
            weights = [1 / k ** exponent for k in range(1, count + 1)]
        self.slots = _slots(weights, bits) if weights is not None else []

    @property
    def fixed(self) -> bool:
        """Whether every message takes the same key."""
        return self.count == 1

    def pick(self, producer_id: int, seq: int) -> int:
        """The key index of message ``seq`` of ``producer_id``."""
        if self.count == 1:
            return 0
        return self.picks(producer_id, seq, 1)[0]

    def picks(self, producer_id: int, first_seq: int, n: int) -> list[int]:
        """The key indices of ``n`` consecutive messages from ``first_seq``."""
        if self.count == 1:
            return [0] * n
        if self.order == "sequential":
            count = self.count
            return [seq % count for seq in range(first_seq, first_seq + n)]
        salt, seqs = mix(producer_id, self.salt), range(first_seq, first_seq + n)
        if self.order == "random":
            count = self.count
            return [((seq + salt) * _GOLDEN & _MASK) * count >> 64 for seq in seqs]
        slots, shift = self.slots, self.shift
        return [slots[(seq + salt) * _GOLDEN & _MASK >> shift] for seq in seqs]


def _slots(weights: list[float], bits: int) -> list[int]:
    """A table of ``2**bits`` key indices, key ``k`` in a share of the slots as near its
    weight's share as whole slots allow (every key at least one slot)."""
    size, total = 1 << bits, sum(weights)
    ends = [round(w / total * size) for w in accumulate(weights)]
    table, start = [], 0
    for k, end in enumerate(ends):
        end = max(end, start + 1) if k < len(ends) - 1 else size
        table += [k] * (end - start)
        start = end
    return table[:size]
