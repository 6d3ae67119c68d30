"""Mergeable latency histogram with log-linear buckets on integer microseconds.

Values below 64 us get one bucket each. Above that, every power-of-two range [2**e, 2**(e+1))
is split into 32 equal buckets, so a bucket is at most 1/32 (~3.1%) of its lower bound wide.
For v >= 64 with s = v.bit_length() - 6, the bucket is (s << 5) + (v >> s); v >> s lies in
[32, 64), which makes the indices contiguous and monotonic in v.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import compress
from typing import Any

from results.rundir import compiled

SUB_BITS = 5
SUB_COUNT = 1 << SUB_BITS
EXACT_LIMIT = 2 * SUB_COUNT
"""Values below this get an exact (width 1) bucket."""
MAX_VALUE_US = (1 << 40) - 1
"""Larger values are clamped to this (~12.7 days)."""
_SHIFT_BASE = SUB_BITS + 1


def bucket_index(value_us: int) -> int:
    """Return the bucket index of value_us (negatives clamp to 0, large values to the last)."""
    if value_us < EXACT_LIMIT:
        return value_us if value_us > 0 else 0
    if value_us > MAX_VALUE_US:
        value_us = MAX_VALUE_US
    s = value_us.bit_length() - _SHIFT_BASE
    return (s << SUB_BITS) + (value_us >> s)


NUM_BUCKETS = bucket_index(MAX_VALUE_US) + 1
_INDICES = range(NUM_BUCKETS)


def bucket_bounds(index: int) -> tuple[int, int]:
    """Return the [low, high) range of integer microseconds that map to bucket index."""
    if not 0 <= index < NUM_BUCKETS:
        raise ValueError(f"bucket index {index} outside [0, {NUM_BUCKETS})")
    if index < EXACT_LIMIT:
        return index, index + 1
    s = (index >> SUB_BITS) - 1
    m = index - (s << SUB_BITS)
    return m << s, (m + 1) << s


def _midpoint(index: int) -> float:
    low, high = bucket_bounds(index)
    return (low + high - 1) / 2


class HistogramCore:
    """What each record runs through: the counts per bucket, count, sum, min and max, and
    :meth:`record`. The pure-Python reference of the compiled core
    (``results/rundir/_histogram.pyx``); :class:`LatencyHistogram` is built on whichever
    runs (:mod:`results.rundir.compiled`)."""

    __slots__ = ("_counts", "count", "total_us", "_min", "_max")

    def record(self, value_us: int) -> None:
        """Record one latency in integer microseconds."""
        if value_us < EXACT_LIMIT:
            if value_us < 0:
                value_us = 0
            index = value_us
        else:
            if value_us > MAX_VALUE_US:
                value_us = MAX_VALUE_US
            s = value_us.bit_length() - _SHIFT_BASE
            index = (s << SUB_BITS) + (value_us >> s)
        self._counts[index] += 1
        self.count += 1
        self.total_us += value_us
        if value_us < self._min:
            self._min = value_us
        if value_us > self._max:
            self._max = value_us


_compiled = compiled.load("results.rundir._histogram")
_Core: type[HistogramCore] = HistogramCore if _compiled is None else _compiled.HistogramCore


class LatencyHistogram(_Core):  # type: ignore[valid-type,misc]
    """Counts latencies in log-linear buckets; exact count, sum, min and max."""

    __slots__ = ()

    def __init__(self) -> None:
        """Create an empty histogram."""
        self._counts: list[int] = [0] * NUM_BUCKETS
        self.count = 0
        self.total_us = 0
        self._min = MAX_VALUE_US + 1
        self._max = -1

    def record_many(self, value_us: int, n: int) -> None:
        """Record the same latency n times."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n == 0:
            return
        value_us = min(max(value_us, 0), MAX_VALUE_US)
        self._counts[bucket_index(value_us)] += n
        self.count += n
        self.total_us += value_us * n
        if value_us < self._min:
            self._min = value_us
        if value_us > self._max:
            self._max = value_us

    @property
    def min_us(self) -> int:
        """Smallest recorded value (0 when empty)."""
        return self._min if self.count else 0

    @property
    def max_us(self) -> int:
        """Largest recorded value (0 when empty)."""
        return self._max if self.count else 0

    def mean_us(self) -> float:
        """Exact mean of the recorded values (0.0 when empty)."""
        return self.total_us / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """Return the q-th percentile (nearest rank, q in [0, 100]) to within half a bucket.

        The result is the midpoint of the bucket holding that rank, clamped to [min, max];
        q=0 and q=100 give the exact min and max. Empty histograms give 0.0.
        """
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {q}")
        count = self.count
        if count == 0:
            return 0.0
        if q == 0.0:
            return float(self._min)
        if q == 100.0:
            return float(self._max)
        rank = max(1, math.ceil(q * count / 100.0))
        seen = 0
        for index, c in enumerate(self._counts):
            seen += c
            if seen >= rank:
                return float(min(max(_midpoint(index), self._min), self._max))
        return float(self._max)  # unreachable while count == sum of buckets

    def merge(self, other: LatencyHistogram) -> None:
        """Add all of other's recordings into this histogram."""
        if not other.count:
            return
        counts, theirs = self._counts, other._counts
        for index in compress(_INDICES, theirs):  # the non-empty buckets, found in C
            counts[index] += theirs[index]
        self.count += other.count
        self.total_us += other.total_us
        if other._min < self._min:
            self._min = other._min
        if other._max > self._max:
            self._max = other._max

    def reset(self) -> None:
        """Forget all recordings."""
        self._counts = [0] * NUM_BUCKETS
        self.count = 0
        self.total_us = 0
        self._min = MAX_VALUE_US + 1
        self._max = -1

    def to_sparse(self) -> dict[int, int]:
        """Return {bucket index: count} for the non-empty buckets."""
        counts = self._counts
        return {i: counts[i] for i in compress(_INDICES, counts)}

    @classmethod
    def from_sparse(
        cls,
        buckets: Mapping[int, int],
        min_us: int | None = None,
        max_us: int | None = None,
        total_us: int | None = None,
    ) -> LatencyHistogram:
        """Rebuild a histogram from {bucket index: count}.

        Missing min/max default to the bounds of the lowest/highest non-empty bucket and a
        missing total to the sum of bucket midpoints, so those become approximate.
        """
        hist = cls()
        counts = hist._counts
        for index, c in buckets.items():
            if not 0 <= index < NUM_BUCKETS:
                raise ValueError(f"bucket index {index} outside [0, {NUM_BUCKETS})")
            if c < 0:
                raise ValueError(f"bucket {index} has negative count {c}")
            counts[index] += c
        used = list(compress(_INDICES, counts))
        if not used:
            return hist
        hist.count = sum(counts)
        hist._min = bucket_bounds(used[0])[0] if min_us is None else min_us
        hist._max = bucket_bounds(used[-1])[1] - 1 if max_us is None else max_us
        if total_us is None:
            total_us = round(sum(_midpoint(i) * counts[i] for i in used))
        hist.total_us = total_us
        return hist

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict; bucket keys are strings."""
        return {
            "buckets": {str(i): c for i, c in self.to_sparse().items()},
            "count": self.count,
            "total_us": self.total_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyHistogram:
        """Rebuild a histogram from to_dict() output (possibly after a JSON round trip)."""
        buckets = {int(k): int(v) for k, v in data["buckets"].items()}
        hist = cls.from_sparse(
            buckets,
            min_us=data.get("min_us"),
            max_us=data.get("max_us"),
            total_us=data.get("total_us"),
        )
        if "count" in data and data["count"] != hist.count:
            raise ValueError(f"count {data['count']} does not match the bucket total {hist.count}")
        return hist
