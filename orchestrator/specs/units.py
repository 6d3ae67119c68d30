"""Friendly units in spec files: sizes (``2KiB``), durations (``30s``), percentages (``3%``).

Each parser accepts a plain number too (bytes, seconds, fraction) and raises ``ValueError``
with a message that says what was expected; the spec loader turns that into a file/field error.
``nan``, ``inf`` and ``true`` are never numbers here, a size is a whole number of bytes and a
duration is at most :data:`MAX_DURATION_S` (a year).
"""

from __future__ import annotations

import math
import re

_NUMBER = r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*"

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3,
}
_DURATION_UNITS = {
    "": 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "us": 1e-6,
    "m": 60.0, "min": 60.0, "h": 3600.0,
}
MAX_DURATION_S = 366 * 86400.0
_SIZE_RE = re.compile(_NUMBER + r"([a-zA-Z]*)\s*$")
UNIT_PATTERN = "^" + _NUMBER + r"[a-zA-Z]*\s*$"
"""A size or duration as text (``2KiB``, ``30s``), for the JSON Schema (the parsers say more)."""
NUMBER_PATTERN = r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*"
"""A number as text (``1e4``, which YAML 1.1 reads as text), for the JSON Schema."""
PERCENT_PATTERN = NUMBER_PATTERN + r"%?\s*$"
"""A percentage as text (``3%``), for the JSON Schema."""
_DURATION_RE = re.compile(_NUMBER + r"([a-zA-Z]*)\s*$")


def parse_size(value: int | float | str) -> int:
    """Bytes from ``2048``, ``"2KiB"``, ``"2KB"`` (1000) or ``"1.5MiB"``."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 2048 or '2KiB'")
    if isinstance(value, int):
        return _non_negative(value, "size")
    if isinstance(value, float):
        number = value
    else:
        match = _SIZE_RE.match(str(value))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _SIZE_UNITS:
            raise ValueError(f"expected a size such as 2048, '2KiB' or '1MB', got {value!r}")
        number = float(match.group(1)) * _SIZE_UNITS[unit]
    number = _non_negative(_finite(number, "size", value), "size")
    if number != int(number):
        raise ValueError(f"a size is a whole number of bytes, got {value!r} ({number:g} bytes)")
    return int(number)


def parse_duration(value: int | float | str) -> float:
    """Seconds from ``30``, ``"30s"``, ``"250ms"``, ``"5m"`` or ``"1h"``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30 or '30s'")
    if isinstance(value, (int, float)):
        seconds = _non_negative(_finite(value, "duration", value), "duration")
    else:
        match = _DURATION_RE.match(str(value))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _DURATION_UNITS:
            raise ValueError(f"expected a duration such as 30, '30s', '250ms' or '5m', "
                             f"got {value!r}")
        seconds = float(match.group(1)) * _DURATION_UNITS[unit]
    if seconds > MAX_DURATION_S:
        raise ValueError(f"a duration can be at most a year ({MAX_DURATION_S:.0f} s), got "
                         f"{value!r}")
    return seconds


def parse_percent(value: int | float | str) -> float:
    """A fraction from ``"3%"`` (0.03); a bare number is taken as percent too (``3`` -> 0.03)."""
    text = str(value).strip()
    number = text[:-1] if text.endswith("%") else text
    try:
        if isinstance(value, bool):
            raise ValueError
        return _finite(float(number), "percentage", value) / 100.0
    except ValueError:
        raise ValueError(f"expected a percentage such as '3%', got {value!r}") from None


def parse_counts(text: str) -> list[int]:
    """``1,2,4`` as member counts (whole numbers, at least 1)."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ValueError(f"expected member counts like 1,2,4 (got {text!r})")
    return counts


def format_span(seconds: float) -> str:
    """A wall-clock span for progress lines: ``80`` -> ``"1m20s"``, ``3725`` -> ``"1h02m"``."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def format_size(n_bytes: int) -> str:
    """``2048`` -> ``"2KiB"``; used when echoing resolved specs back to people."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n_bytes >= factor and n_bytes % factor == 0:
            return f"{n_bytes // factor}{unit}"
    return f"{n_bytes}B"


def _finite(number: float, what: str, value: object) -> float:
    try:
        finite = math.isfinite(number)
    except OverflowError:  # an int beyond any float
        raise ValueError(f"the {what} is far too big, got {value!r}") from None
    if not finite:
        raise ValueError(f"expected a finite {what}, got {value!r}")
    return float(number)


def _non_negative(number, what: str):
    if number < 0:
        raise ValueError(f"a {what} cannot be negative, got {number}")
    return number
