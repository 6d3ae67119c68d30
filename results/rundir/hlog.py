"""surge's latency histograms in HdrHistogram's formats: one histogram as the compressed V2
encoding (:func:`encode`), many as an interval log, the ``.hlog`` text file HdrHistogram's tools
read (:func:`write_log`). Written from the formats' published description; nothing here needs
an HdrHistogram library.

Values are integer microseconds (µs), the unit surge records in. The HdrHistogram parameters
are :data:`LOWEST_DISCERNIBLE_US` = 1 µs, :data:`HIGHEST_TRACKABLE_US` = surge's own clamp
(:data:`~results.rundir.histogram.MAX_VALUE_US`, about 12.7 days) and
:data:`SIGNIFICANT_DIGITS` = 3.

Why the round trip is exact at surge's precision. With 3 significant digits HdrHistogram has
2,048 sub-buckets: every value below 2,048 µs has a bucket of its own, and above that each power
of two [2**k, 2**(k+1)) is cut into 1,024 equal buckets of width 2**(k-10). surge's buckets
(:mod:`results.rundir.histogram`) are exact below 64 µs and 32 to a power of two above, width
2**(k-5). Both are aligned on multiples of their (power-of-two) width, and HdrHistogram's width
divides surge's, so every surge bucket is a union of whole HdrHistogram buckets: the count of
each surge bucket survives the trip exactly. Inside a bucket surge knows no more than its
count, so the counts are placed where surge itself answers for that bucket: at its midpoint,
clamped to the histogram's min and max (:meth:`LatencyHistogram.percentile`), rounded down to
a whole µs; one count of the lowest bucket sits at the min and one of the highest at the max,
so HdrHistogram records surge's min and max (a reader reports them to its own precision, within
1 µs or 1/1024 of the value). A reader then answers any rank but the first and
the last with a value ``v`` such that ``s - 1 µs < v < s + max(1 µs, s / 1024)``, where ``s``
is surge's own answer for that rank; both always lie in the same surge bucket. (HdrHistogram's
readers round the rank of a percentile to the nearest; surge takes the next one up: where
``q * count / 100`` is not whole, the two may pick neighbouring ranks.)
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TextIO

from results.rundir.histogram import MAX_VALUE_US, LatencyHistogram, bucket_bounds

LOWEST_DISCERNIBLE_US = 1
HIGHEST_TRACKABLE_US = MAX_VALUE_US
SIGNIFICANT_DIGITS = 3
SUB_BUCKET_HALF_BITS = 10
"""log2 of half HdrHistogram's sub-bucket count: 2 * 10**3 = 2,000 rounds up to 2**11."""
LOG_FORMAT_VERSION = "1.3"
MAX_UNIT_RATIO = 1000.0
"""Each interval line's ``Interval_Max`` is the max in µs divided by this: in ms."""

_ENCODING_COOKIE = 0x1C849303 | 0x10  # V2, counts as ZigZag LEB128 words of up to 9 bytes
_COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")  # cookie, payload bytes, normalizing offset, digits,
# lowest discernible, highest trackable, integer-to-double ratio
_COMPRESSED_HEADER = struct.Struct(">ii")  # cookie, compressed bytes
_LEB128_LIMIT = 1 << 56  # 8 bytes of 7 bits: beyond, the 9-byte word differs from plain LEB128
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'


def hdr_index(value_us: int) -> int:
    """The index of ``value_us``'s bucket in HdrHistogram's counts array (1 µs lowest
    discernible value, 3 significant digits): the same log-linear shape as surge's, 1,024
    sub-buckets to a power of two instead of 32."""
    shift = max(0, value_us.bit_length() - SUB_BUCKET_HALF_BITS - 1)
    return (shift << SUB_BUCKET_HALF_BITS) + (value_us >> shift)


def placed_counts(histogram: LatencyHistogram) -> Counter[int]:
    """The histogram's counts by µs value, placed as the module explains: each bucket's at
    surge's own answer for it, one at the min and one at the max."""
    placed: Counter[int] = Counter()
    buckets = histogram.to_sparse()
    for index, count in buckets.items():
        placed[_answer(histogram, index)] += count
    if histogram.count > 1:  # with one value, its bucket's answer is already the min and max
        for index, value in ((min(buckets), histogram.min_us),
                             (max(buckets), histogram.max_us)):
            placed[_answer(histogram, index)] -= 1
            placed[value] += 1
    return +placed


def _answer(histogram: LatencyHistogram, index: int) -> int:
    """surge's answer for a rank in bucket ``index``: its midpoint clamped to the histogram's
    min and max, rounded down to a whole µs."""
    first, end = bucket_bounds(index)
    return min(max((first + end - 1) // 2, histogram.min_us), histogram.max_us)


def _zigzag_leb128(number: int) -> bytes:
    """``number`` as a ZigZag LEB128 word (the V2 encoding's counts)."""
    word = (number << 1) ^ (number >> 63)
    if word >= _LEB128_LIMIT:
        raise ValueError(f"count {number} too large for the encoding (at most 2**55)")
    out = bytearray()
    while True:
        byte, word = word & 0x7F, word >> 7
        out.append(byte | 0x80 if word else byte)
        if not word:
            return bytes(out)


def _payload(counts: Counter[int]) -> bytes:
    """The counts array up to its last non-empty bucket: each count as a word, each run of
    empty buckets (longer than one) as one negative word, its length."""
    by_index: Counter[int] = Counter()
    for value, count in counts.items():
        by_index[hdr_index(value)] += count
    words = bytearray()
    empty = 0
    for index in range(max(by_index) + 1 if by_index else 0):
        count = by_index.get(index, 0)
        if count == 0:
            empty += 1
            continue
        if empty:
            words += _zigzag_leb128(-empty if empty > 1 else 0)
            empty = 0
        words += _zigzag_leb128(count)
    return bytes(words)


def encode(histogram: LatencyHistogram) -> str:
    """The histogram as HdrHistogram's compressed V2 encoding, in base64 (an interval line's
    last field; ``HISTF...``)."""
    payload = _payload(placed_counts(histogram))
    header = _HEADER.pack(_ENCODING_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS,
                          LOWEST_DISCERNIBLE_US, HIGHEST_TRACKABLE_US, 1.0)
    compressed = zlib.compress(header + payload)
    framed = _COMPRESSED_HEADER.pack(_COMPRESSED_COOKIE, len(compressed)) + compressed
    return base64.b64encode(framed).decode("ascii")


@dataclass(frozen=True)
class Interval:
    """One interval line: its tag, when it starts (s after the log's start time), how long it
    lasts (s) and the latencies recorded in it."""

    tag: str
    start_s: float
    length_s: float
    histogram: LatencyHistogram

    def line(self) -> str:
        """The interval as a line of the log (without its line break)."""
        max_ms = self.histogram.max_us / MAX_UNIT_RATIO
        return (f"Tag={self.tag},{self.start_s:.3f},{self.length_s:.3f},{max_ms:.3f},"
                f"{encode(self.histogram)}")


def write_log(out: TextIO, intervals: Iterable[Interval], start_time_s: float,
              comments: Iterable[str] = ()) -> None:
    """Write an interval log: ``comments`` (one ``#[...]`` line each), the format version, the
    start time (s since the Unix epoch; also the base time the intervals' starts count from),
    the legend, then one line per interval in the order given."""
    for comment in comments:
        out.write(f"#[{comment}]\n")
    when = datetime.fromtimestamp(start_time_s, timezone.utc)
    out.write(f"#[Histogram log format version {LOG_FORMAT_VERSION}]\n")
    out.write(f"#[StartTime: {start_time_s:.3f} (seconds since epoch), "
              f"{when:%a %b %d %H:%M:%S UTC %Y}]\n")
    out.write(f"#[BaseTime: {start_time_s:.3f} (seconds since epoch)]\n")
    out.write(LEGEND + "\n")
    for interval in intervals:
        out.write(interval.line() + "\n")
