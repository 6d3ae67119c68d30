"""How each figure of a step row is taken from a window of recorded rows: the vocabulary the
step row's fields are declared in (:class:`results.rundir.steps.StepRow`), and its engine on
rows in memory (the controller's, or rows read back with pyarrow).

A figure comes in two stages. First the window's rows are reduced to a :class:`Partial`: one
value per tick figure (:class:`Mean`, :class:`Max`, :class:`Change`, :class:`Count`,
:class:`Missing`, :class:`MinLeast`), the window's merged latency histogram, per member or
host the mean CPU (:class:`KeyMean`; or another column's largest value, :class:`KeyMax`, or
the seconds a flag was set, :class:`KeyCount`) and each serving member's delivery
(:class:`Delivery`). The Spark analysis (``results.analysis``) computes the same partial with
Spark expressions of these same kinds. Then one function, :func:`results.rundir.steps.finish`,
turns a partial into the row: percentiles, the least of two rates, the balance. So the
controller's step table and the report's agree by construction, and a field declared once is
computed by both.

A value no row gave is unknown (``None``), never 0; a counter a run format did not record
counts from 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

LATENCY = "latency"
"""The histogram of latencies from each message's actual send time."""
INTENDED = "intended"
"""The histogram of latencies from each message's intended send time (the schedule's; messages
of rate-limited senders only): latency without coordinated omission."""
CONFIRM = "confirm"
"""The histogram of publisher-confirm latencies: from a message's publish to the broker's
confirm of it (senders with confirms only)."""
CPU_COLUMN = "cpu_percent"


# -- the kinds of figure -------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """How one field of a step row is taken from its window (see the subclasses)."""


@dataclass(frozen=True)
class FromWindow(Figure):
    """An attribute of the window itself (``step``, ``label``, ``start_s``, ``end_s``)."""

    attribute: str


@dataclass(frozen=True)
class Mean(Figure):
    """The mean of a tick column over the window's seconds whose value is known."""

    column: str


@dataclass(frozen=True)
class Max(Figure):
    """The largest known value of a tick column in the window."""

    column: str


@dataclass(frozen=True)
class Change(Figure):
    """A cumulative tick counter from the window's first second to its last (a counter the
    run's format did not record counts as 0)."""

    column: str


@dataclass(frozen=True)
class Count(Figure):
    """The number of seconds (ticks) in the window."""


@dataclass(frozen=True)
class Missing(Figure):
    """The seconds where a source missed its deadline: any of ``flags`` set, or any of
    ``nulls`` recorded as unknown (a column the format did not record is known)."""

    flags: tuple[str, ...]
    nulls: tuple[str, ...]


@dataclass(frozen=True)
class MinLeast(Figure):
    """The lowest, over the seconds where all of ``columns`` are known, of their least."""

    columns: tuple[str, ...]


@dataclass(frozen=True)
class Least(Figure):
    """The least of other fields of the row (unknown if any of them is)."""

    fields: tuple[str, ...]


@dataclass(frozen=True)
class Percentile(Figure):
    """A latency percentile (ms) of a histogram (:data:`LATENCY` or :data:`INTENDED`) merged
    over the window's seconds."""

    q: float
    histogram: str = LATENCY


@dataclass(frozen=True)
class HistogramMax(Figure):
    """The largest latency (ms) of a merged histogram (:data:`LATENCY` or :data:`INTENDED`)."""

    histogram: str = LATENCY


@dataclass(frozen=True)
class KeyMean(Figure):
    """Per ``key`` (member, host or agent; by its name as text) of ``table``: the mean known
    ``column`` (CPU% unless said) of its rows in the window's span (start, end], of the rows
    where ``where`` = (column, "==" or "!=", value) (``None``: every row); a key with no known
    value is left out."""

    table: str
    key: str
    where: tuple[str, str, Any] | None = None
    column: str = CPU_COLUMN

    def keeps(self, row: Mapping[str, Any]) -> bool:
        """Whether a row in memory passes ``where``."""
        if self.where is None:
            return True
        column, operator, value = self.where
        return (row.get(column) == value) == (operator == "==")

    def reduce(self, values: list[Any]) -> Any:
        """The figure of one key's known values (at least one)."""
        return fmean(values)


@dataclass(frozen=True)
class KeyMax(KeyMean):
    """As :class:`KeyMean`, the largest known value."""

    def reduce(self, values: list[Any]) -> Any:
        """The largest."""
        return max(values)


@dataclass(frozen=True)
class KeyCount(KeyMean):
    """As :class:`KeyMean`, the rows (seconds) where the flag ``column`` is true."""

    def reduce(self, values: list[Any]) -> Any:
        """How many are true."""
        return sum(1 for v in values if v)


@dataclass(frozen=True)
class Delivery(Figure):
    """One figure of the serving members' delivery in the window (``delivered_per_member``,
    ``unknown_per_member``, ``balance`` or ``balance_seconds``, see
    :func:`results.rundir.steps.delivery_figures`)."""

    part: str


TICK_KINDS = (Mean, Max, Change, Count, Missing, MinLeast)
"""The kinds reduced straight from the window's ticks into :attr:`Partial.ticks`."""
HISTOGRAM_KINDS = (Percentile, HistogramMax)
"""The kinds taken from a merged histogram (:attr:`Partial.histograms`)."""
CONTROLLER_HOST = "controller"  # the hosts table's name for the machine of the controller
MEMBERS_TABLE = "members"
DELIVERED_COLUMN = "messages_out"  # format 2 on; format 1 balances over CPU instead


# -- the partial ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberSpan:
    """One member over its serving rows in a window: the change of its delivered count (or
    of its CPU figure, for formats without counts), the seconds between its first and last
    known figure, its rows with the figure unknown, and its mean known CPU%."""

    member: str
    delivered: float | None
    known_s: float | None
    unknown: int
    cpu: float | None


@dataclass
class Partial:
    """A window reduced: tick figures by field name, the merged histograms (bucket -> count)
    by histogram name (:data:`LATENCY`, :data:`INTENDED`), per-key means by field name, the
    serving members, the distinct seconds where some serving member's figure was unknown, and
    whether members' delivered counts were recorded."""

    ticks: dict[str, Any] = field(default_factory=dict)
    histograms: dict[str, dict[int, int]] = field(default_factory=dict)
    keyed: dict[str, dict[str, float]] = field(default_factory=dict)
    members: list[MemberSpan] = field(default_factory=list)
    unknown_seconds: int = 0
    counted: bool = True


# -- the engine on rows in memory ----------------------------------------------------------------


def reduce_rows(figures: Mapping[str, Figure], ticks: list[dict], start_s: float,
                end_s: float, tables: Mapping[str, list[dict]]) -> Partial:
    """The :class:`Partial` of one window of ``ticks`` (in time order), with the rows of
    ``tables`` (``members``, ``hosts``) in its span (start_s, end_s]."""
    def spanned(name: str) -> list[dict]:
        return [r for r in tables.get(name, []) if start_s < r["elapsed_s"] <= end_s]
    partial = Partial(ticks={name: tick_value(how, ticks) for name, how in figures.items()
                             if isinstance(how, TICK_KINDS)},
                      histograms={name: merged_histogram(ticks, name)
                                  for name in histograms_of(figures)})
    for name, how in figures.items():
        if isinstance(how, KeyMean):
            partial.keyed[name] = key_means(how, spanned(how.table))
    members = tables.get(MEMBERS_TABLE, [])
    partial.counted = not members or DELIVERED_COLUMN in members[0]
    if any(isinstance(how, Delivery) for how in figures.values()):
        serving = [r for r in spanned(MEMBERS_TABLE) if r.get("running")]
        partial.members, partial.unknown_seconds = member_spans(serving, partial.counted)
    return partial


def _known(values: Iterable[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def tick_value(how: Figure, ticks: list[dict]) -> Any:
    """One tick figure of a window's ticks."""
    if isinstance(how, Mean):
        known = _known(t.get(how.column) for t in ticks)
        return fmean(known) if known else None
    if isinstance(how, Max):
        return max(_known(t.get(how.column) for t in ticks), default=None)
    if isinstance(how, Change):
        return (ticks[-1].get(how.column) or 0) - (ticks[0].get(how.column) or 0)
    if isinstance(how, Count):
        return len(ticks)
    if isinstance(how, Missing):
        return sum(1 for t in ticks if any(t.get(f) for f in how.flags)
                   or any(c in t and t[c] is None for c in how.nulls))
    if isinstance(how, MinLeast):
        return min((min(t[c] for c in how.columns) for t in ticks
                    if all(t.get(c) is not None for c in how.columns)), default=None)
    raise TypeError(f"not a tick figure: {how!r}")


def histogram_columns(name: str) -> tuple[str, str]:
    """The tick columns holding histogram ``name`` sparsely: its buckets and their counts."""
    return f"{name}_buckets", f"{name}_counts"


def histograms_of(figures: Mapping[str, Figure]) -> list[str]:
    """The names of the histograms ``figures`` are taken from, each once."""
    return list(dict.fromkeys(how.histogram for how in figures.values()
                              if isinstance(how, HISTOGRAM_KINDS)))


def merged_histogram(ticks: list[dict], name: str = LATENCY) -> dict[int, int]:
    """The per-second histograms ``name`` of ``ticks`` summed per bucket (empty for a run
    that did not record them)."""
    buckets, counts = histogram_columns(name)
    merged: dict[int, int] = defaultdict(int)
    for tick in ticks:
        for bucket, count in zip(tick.get(buckets) or [], tick.get(counts) or []):
            merged[bucket] += count
    return dict(merged)


def key_means(how: KeyMean, rows: list[dict]) -> dict[str, Any]:
    """Per key (by its name as text), the figure (:meth:`KeyMean.reduce`) of the kept rows'
    known values."""
    values: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if how.keeps(row) and row.get(how.column) is not None:
            values[str(row[how.key])].append(row[how.column])
    return {name: how.reduce(v) for name, v in sorted(values.items())}


def member_spans(serving: list[dict], counted: bool) -> tuple[list[MemberSpan], int]:
    """Each serving member's :class:`MemberSpan` (by name) and the distinct seconds where
    some member's figure was unknown."""
    figure = DELIVERED_COLUMN if counted else CPU_COLUMN
    by_member: dict[str, list[dict]] = defaultdict(list)
    for row in serving:
        by_member[row["member"]].append(row)
    spans = []
    for member, rows in sorted(by_member.items()):
        known = [r for r in rows if r.get(figure) is not None]
        values = [r[figure] for r in known]
        times = [r["elapsed_s"] for r in known]
        cpu = _known(r.get(CPU_COLUMN) for r in rows)
        spans.append(MemberSpan(member, max(values) - min(values) if values else None,
                                max(times) - min(times) if times else None,
                                len(rows) - len(known), fmean(cpu) if cpu else None))
    unknown = {r["elapsed_s"] for r in serving if r.get(figure) is None}
    return spans, len(unknown)
