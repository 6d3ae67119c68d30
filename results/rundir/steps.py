"""The step table (the shape of Table 1 of the uniform-cluster document): the one rule for
which seconds each row covers (:func:`windows`) and the one declaration of the row's figures
(:class:`StepRow`, each field saying how it is taken from its window, see
:mod:`results.rundir.figures`).

Pure functions of rows: the controller calls them at the end of a run on what it recorded;
the Spark analysis computes the same windows with :func:`windows`, reduces them with Spark
expressions of the declared kinds and finishes each row with :func:`finish`, so both print
the same figures for the same run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.specs.plan import Phase
from orchestrator.specs.topology import LINK_OWN, LINK_SIDES
from results.rundir.bottleneck import bottleneck
from results.rundir.figures import (
    CONFIRM,
    CONTROLLER_HOST,
    INTENDED,
    Change,
    Count,
    Delivery,
    Figure,
    FromWindow,
    HistogramMax,
    KeyCount,
    KeyMax,
    KeyMean,
    Least,
    Max,
    Mean,
    MinLeast,
    Missing,
    Partial,
    Percentile,
    reduce_rows,
)
from results.rundir.histogram import LatencyHistogram

DRAIN_LABEL = "drain"
_RUNNING = ("running", "==", True)


@dataclass(frozen=True)
class Terms:
    """What a run's rates count and what its clients are called, wherever rows are shown."""

    unit: str = "msg/s"
    each: str = "msg"  # what one counted unit is (CPU us per ...)
    counted: str = "messages"  # what the counts count
    senders: str = "senders"
    receivers: str = "receivers"
    queues: str = "queues"


MESSAGES = Terms()
ROUND_TRIPS = Terms("round trips/s", "round trip", "round trips", "requesters", "responders",
                    "queue pairs")


def terms_of(pattern: str | None) -> Terms:
    """The terms of a workload ``pattern``: request/reply counts round trips (2 puts and 2
    gets each) between requesters and responders over queue pairs; others count messages."""
    return ROUND_TRIPS if pattern == "request-reply" else MESSAGES


def _figure(how: Figure, default: Any = None) -> Any:
    """A field of :class:`StepRow` declared with how it is taken from its window."""
    if isinstance(default, dict):
        return field(default_factory=dict, metadata={"figure": how})
    return field(default=default, metadata={"figure": how})


def _per_member(column: str, kind: type[KeyMean] = KeyMean) -> Any:
    """A field of :class:`StepRow` taken per running member from its ``members`` rows'
    ``column`` (the mean unless ``kind`` says otherwise)."""
    return _figure(kind("members", "member", _RUNNING, column), {})


@dataclass(frozen=True)
class StepRow:
    """Figures for one phase of the plan over its steady part (after ``settle`` seconds), or
    for the drain after the last step (``label`` "drain"). Rates are means over the seconds
    whose figures are known (``None`` if none was); latency percentiles come from the
    histograms merged over the window's seconds, never from averaging percentiles (the
    ``intended_`` ones from the latencies measured from each message's intended send time, for
    messages of rate-limited senders; unknown where there were none);
    ``missing_seconds`` counts the seconds in the window where some source missed its
    deadline. Each field declares how it is taken from its window: add a field here and both
    the controller's step table and the Spark report have it."""

    step: int = _figure(FromWindow("step"), 0)
    label: str = _figure(FromWindow("label"), "")
    target_rate: float = _figure(Mean("target_rate"), 0.0)
    # end to end: the lower of the mean send and receive rates
    achieved_rate: float | None = _figure(Least(("sent_rate", "received_rate")))
    min_rate: float | None = _figure(MinLeast(("send_rate", "receive_rate")))
    sent_rate: float | None = _figure(Mean("send_rate"))
    received_rate: float | None = _figure(Mean("receive_rate"))
    members: int = _figure(Max("members_running"), 0)
    cpu_percent: dict[str, float] = _figure(
        KeyMean("members", "member", ("running", "==", True)), {})
    host_cpu_percent: float | None = _figure(Mean("host_cpu_percent"))
    p50_ms: float | None = _figure(Percentile(50.0))
    p99_ms: float | None = _figure(Percentile(99.0))
    errors: int = _figure(Change("errors"), 0)
    seconds: int = _figure(Count(), 0)
    skipped: int = _figure(Change("skipped"), 0)  # sends a stalled sender could not make up
    hosts_cpu_percent: dict[str, float] = _figure(  # broker hosts (SSH)
        KeyMean("hosts", "host", ("host", "!=", CONTROLLER_HOST)), {})
    # every host's busy cores, the controller's included (its load generator and any local
    # members); runs before them have none
    hosts_cores_busy: dict[str, float] = _figure(
        KeyMean("hosts", "host", column="cpu_cores_busy"), {})
    missing_seconds: int = _figure(
        Missing(flags=("agents_missing", "broker_missing"), nulls=("queue_depth",)), 0)
    start_s: float = _figure(FromWindow("start_s"), 0.0)
    end_s: float = _figure(FromWindow("end_s"), 0.0)
    p95_ms: float | None = _figure(Percentile(95.0))
    p999_ms: float | None = _figure(Percentile(99.9))
    max_ms: float | None = _figure(HistogramMax())
    reconnects: int = _figure(Change("reconnects"), 0)
    max_backlog: int | None = _figure(Max("queue_depth"))
    # messages each member's queues delivered (format 2 on)
    delivered_per_member: dict[str, int] = _figure(Delivery("delivered_per_member"), {})
    balance: float | None = _figure(Delivery("balance"))  # Jain's index, known readings only
    balance_seconds: int = _figure(Delivery("balance_seconds"), 0)  # every member known
    unknown_per_member: dict[str, int] = _figure(Delivery("unknown_per_member"), {})
    intended_p50_ms: float | None = _figure(Percentile(50.0, INTENDED))
    intended_p99_ms: float | None = _figure(Percentile(99.0, INTENDED))
    intended_max_ms: float | None = _figure(HistogramMax(INTENDED))
    confirm_p50_ms: float | None = _figure(Percentile(50.0, CONFIRM))
    confirm_p99_ms: float | None = _figure(Percentile(99.0, CONFIRM))
    # the clients taking part (null in runs recorded before they were counted)
    senders: int | None = _figure(Max("sending"))  # requesters in request/reply
    receivers: int | None = _figure(Max("consuming"))  # responders in request/reply
    queues: int | None = _figure(Max("queues_in_use"))  # queues (pairs) the senders use
    agents_cpu_percent: dict[str, float] = _figure(KeyMean("agents", "agent"), {})
    cpu_quota_cores: dict[str, float] = _per_member("cpu_quota_cores")
    blocked_s: float = _figure(Change("blocked_s"), 0.0)  # publishers held, agent-seconds
    # broker resources (RabbitMQ members): the most memory against the high watermark (%),
    # and the seconds each member's memory or disk alarm was in effect
    memory_percent: dict[str, float] = _per_member("memory_percent_of_watermark", KeyMax)
    memory_alarm_seconds: dict[str, int] = _per_member("memory_alarm", KeyCount)
    disk_alarm_seconds: dict[str, int] = _per_member("disk_alarm", KeyCount)
    # each member's client traffic (Mb/s), and its link's bandwidth each way where known
    network_in_mbps: dict[str, float] = _per_member("network_in_mbps")
    network_out_mbps: dict[str, float] = _per_member("network_out_mbps")
    network_link_mbps: dict[str, float] = _per_member("network_link_mbps")

    @property
    def ratio(self) -> float | None:
        """Achieved over target (1.0 when the target is unlimited or zero)."""
        if not self.target_rate:
            return 1.0
        return None if self.achieved_rate is None else self.achieved_rate / self.target_rate

    @property
    def member_us_per_msg(self) -> dict[str, float]:
        """Each member's CPU microseconds per message received (per round trip in
        request/reply) over the window: its mean CPU over the mean receive rate."""
        return {m: us for m, percent in self.cpu_percent.items()
                if (us := self.us_per_msg(percent)) is not None}

    @property
    def host_us_per_msg(self) -> dict[str, float]:
        """Each host's CPU microseconds per message (round trip), everything on it together:
        its mean busy cores over the mean receive rate (``controller`` is this machine's)."""
        return {h: us for h, cores in self.hosts_cores_busy.items()
                if (us := self.us_per_msg(100 * cores)) is not None}

    @property
    def broker_us_per_msg(self) -> float | None:
        """The members' CPU microseconds per message (round trip) together; unknown without
        member CPU or without messages received."""
        return self.us_per_msg(sum(self.cpu_percent.values())) if self.cpu_percent else None

    @property
    def generator_us_per_msg(self) -> float | None:
        """The load generator's (every agent's) CPU microseconds per message (round trip)."""
        return self.us_per_msg(sum(self.agents_cpu_percent.values())) \
            if self.agents_cpu_percent else None

    def us_per_msg(self, cpu_percent: float) -> float | None:
        """CPU microseconds per message of a mean CPU% (100 = one core) at the received
        rate."""
        if not self.received_rate:
            return None
        return cpu_percent / 100 * 1e6 / self.received_rate

    @property
    def bottleneck(self) -> str:
        """What saturated, from the row's own figures (see :mod:`results.rundir.bottleneck`)."""
        return bottleneck(self)

    def as_json(self) -> dict[str, Any]:
        """The row as ``run.json`` records it: its fields, its ratio, its costs and what
        saturated."""
        return {**asdict(self), "ratio": self.ratio, "broker_us_per_msg": self.broker_us_per_msg,
                "generator_us_per_msg": self.generator_us_per_msg,
                "member_us_per_msg": self.member_us_per_msg,
                "host_us_per_msg": self.host_us_per_msg, "bottleneck": self.bottleneck}


FIGURES: dict[str, Figure] = {f.name: f.metadata["figure"] for f in dataclasses.fields(StepRow)}
"""Every field of :class:`StepRow` with how it is taken from its window."""


# -- the windows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The seconds one row covers: the ticks of step ``step`` labelled ``label``, from the
    second before its first tick to its last, (start_s, end_s]."""

    step: int
    label: str
    ticks: list[dict] = field(compare=False, repr=False)

    @property
    def seconds(self) -> list[float]:
        """The elapsed seconds of its ticks."""
        return [t["elapsed_s"] for t in self.ticks]

    @property
    def start_s(self) -> float:
        """The second before its first tick."""
        return self.ticks[0]["elapsed_s"] - 1

    @property
    def end_s(self) -> float:
        """Its last tick's second."""
        return self.ticks[-1]["elapsed_s"]


def _phase(phase: Phase | Mapping[str, Any]) -> Phase:
    return phase if isinstance(phase, Phase) else Phase(**phase)


def segments(phases: Sequence[Phase | Mapping[str, Any]], ticks: list[dict], settle_s: float
             ) -> list[tuple[Phase, str, list[dict]]]:
    """Steady windows: each phase split where the number of running members or of agents
    lost changed, each part without its first ``settle_s`` seconds. Labels are ``3``, or
    ``3a``, ``3b``, ... ``ticks`` in time order; ``phases`` as :class:`Phase` or as the dicts
    run.json holds."""
    out = []
    for phase in map(_phase, phases):
        runs: list[list[dict]] = []
        for tick in (t for t in ticks if t["phase"] == phase.index):
            if not runs or _shape(runs[-1][-1]) != _shape(tick):
                runs.append([])
            runs[-1].append(tick)
        steady = [[t for t in run if t["elapsed_s"] >= max(run[0]["elapsed_s"] - 1 + settle_s,
                                                           phase.start_s + settle_s)]
                  for run in runs]
        steady = [run for run in steady if run]
        for k, run in enumerate(steady):
            label = str(phase.index) + (chr(ord("a") + k) if len(steady) > 1 else "")
            out.append((phase, label, run))
    return out


def _shape(tick: Mapping[str, Any]) -> tuple[int, int]:
    """What splits a step: the members running and the agents lost (absent in older runs)."""
    return tick["members_running"], tick.get("agents_lost") or 0


def drain_ticks(phases: Sequence[Phase | Mapping[str, Any]], ticks: list[dict]) -> list[dict]:
    """The ticks after the last step, while the receivers emptied the queues, from the
    second tick on: the first one's figures still take in the second in which the step ended
    (its rates span it, its clients are the step's). A drain that ended at its first tick
    has none."""
    if not phases:
        return []
    end = _phase(phases[-1]).start_s
    return [t for t in ticks if t["phase"] == 0 and t["elapsed_s"] > end][1:]


def windows(phases: Sequence[Phase | Mapping[str, Any]], ticks: list[dict], settle_s: float,
            drain: bool = True) -> list[Window]:
    """Every row's window: the steady windows (:func:`segments`), then (with ``drain``) the
    drain's, if there was one."""
    out = [Window(phase.index, label, run) for phase, label, run in
           segments(phases, ticks, settle_s)]
    after = drain_ticks(phases, ticks) if drain else []
    return out + ([Window(0, DRAIN_LABEL, after)] if after else [])


def settle_excluded(ticks: list[dict], steady: Sequence[Window]) -> int:
    """Seconds of the steps (phase 1 on) that are in no steady window: left out as settle."""
    covered = sum(len(w.ticks) for w in steady if w.label != DRAIN_LABEL)
    return sum(1 for t in ticks if t["phase"] >= 1) - covered


# -- the rows ------------------------------------------------------------------------------------


def finish(window: Window, partial: Partial) -> StepRow:
    """The row of a window from its reduced rows (by either engine)."""
    histograms = {name: LatencyHistogram.from_sparse(buckets)
                  for name, buckets in partial.histograms.items()}
    empty = LatencyHistogram()
    delivery = delivery_figures(partial, len(window.ticks))
    values: dict[str, Any] = {}
    for name, how in FIGURES.items():
        if isinstance(how, FromWindow):
            values[name] = getattr(window, how.attribute)
        elif isinstance(how, Percentile):
            histogram = histograms.get(how.histogram, empty)
            values[name] = histogram.percentile(how.q) / 1000 if histogram.count else None
        elif isinstance(how, HistogramMax):
            histogram = histograms.get(how.histogram, empty)
            values[name] = histogram.max_us / 1000 if histogram.count else None
        elif isinstance(how, KeyMean):
            values[name] = partial.keyed.get(name, {})
        elif isinstance(how, Delivery):
            values[name] = delivery[how.part]
        elif not isinstance(how, Least):
            values[name] = partial.ticks[name]
    for name, how in FIGURES.items():  # after the figures they are the least of
        if isinstance(how, Least):
            parts = [values[f] for f in how.fields]
            values[name] = None if None in parts else min(parts)
    return StepRow(**values)


def delivery_figures(partial: Partial, seconds: int) -> dict[str, Any]:
    """The serving members' delivery in a window: what each member's queues delivered (format
    2 on), each member's unknown seconds, the balance over known readings only (Jain's index
    over each member's delivery rate between its first and last known count; over mean CPU%
    for format 1; ``None`` while a member's figure is unknown throughout) and the seconds,
    of the window's ``seconds``, known for every member."""
    spans = partial.members
    if not spans:
        return {"delivered_per_member": {}, "unknown_per_member": {}, "balance": None,
                "balance_seconds": 0}
    delivered = {s.member: s.delivered for s in spans
                 if partial.counted and s.delivered is not None}
    rates = {s.member: s.delivered / s.known_s for s in spans
             if partial.counted and s.delivered is not None and s.known_s}
    cpu = {s.member: s.cpu for s in spans if s.cpu is not None}
    known = rates if partial.counted else cpu
    return {"delivered_per_member": delivered,
            "unknown_per_member": {s.member: s.unknown for s in spans if s.unknown},
            "balance": jain_index(list(known.values())) if len(known) == len(spans) else None,
            "balance_seconds": seconds - partial.unknown_seconds}


def jain_index(values: list[float]) -> float | None:
    """Jain's fairness index: 1.0 when the load is spread evenly, 1/n when one takes it all."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def window_row(window: Window, tables: Mapping[str, list[dict]]) -> StepRow:
    """The row of one window of ticks held in memory, with the run's other rows by table
    (``members``, ``hosts``, ``agents``)."""
    return finish(window, reduce_rows(FIGURES, window.ticks, window.start_s, window.end_s,
                                      tables))


def step_rows(phases: Sequence[Phase | Mapping[str, Any]], ticks: list[dict],
              members: list[dict], settle_s: float, hosts: list[dict] | None = None,
              agents: list[dict] | None = None) -> list[StepRow]:
    """One :class:`StepRow` per steady window (see :func:`segments`)."""
    tables = {"members": members, "hosts": hosts or [], "agents": agents or []}
    return [window_row(w, tables) for w in windows(phases, ticks, settle_s, drain=False)]


def drain_row(phases: Sequence[Phase | Mapping[str, Any]], ticks: list[dict],
              members: list[dict], hosts: list[dict] | None = None,
              agents: list[dict] | None = None) -> StepRow | None:
    """The drain after the last step as a row of its own (``None`` if there was none)."""
    after = drain_ticks(phases, ticks)
    tables = {"members": members, "hosts": hosts or [], "agents": agents or []}
    return window_row(Window(0, DRAIN_LABEL, after), tables) if after else None


def fast_path_line(on: bool, why: str = "") -> str:
    """Whether the AMQP driver's fast path ran, as one line: ``AMQP fast path: on`` or
    ``AMQP fast path: off (why)``."""
    return "AMQP fast path: on" if on else f"AMQP fast path: off ({why or 'reason unknown'})"


def as_text(rows: list[StepRow], terms: Terms = MESSAGES, settle_s: float | None = None,
            heading: str | None = None) -> str:
    """A fixed-width table for terminals and logs, in ``terms`` (round trips/s for
    request/reply, where "sent" counts requests and "received" matched replies; requesters,
    responders and queue pairs for the clients). A target of 0 is shown as "max": as fast as
    it goes; "-" is a figure no source gave. Given ``settle_s``, a last line says which
    seconds the figures cover; given ``heading`` (such as :func:`fast_path_line`), a first
    line says it."""
    members = sorted({m for row in rows for m in row.cpu_percent})
    hosts = sorted({h for row in rows for h in row.hosts_cpu_percent})
    short = [member_index(m) for m in members]
    confirms = any(row.confirm_p99_ms is not None for row in rows)
    unit = terms.unit
    header = ["step", *client_header(terms), f"target {unit}", f"achieved {unit}",
              f"sent {unit}", f"received {unit}", "members", *[f"m{s} CPU%" for s in short],
              "host CPU%", *[f"{h} CPU%" for h in hosts], *cost_header(terms),
              "p50 ms", "p99 ms", "intended p99 ms",
              *(["confirm p99 ms"] if confirms else []), "skipped", "errors",
              *resource_header(rows)]
    lines = [header]
    for row in rows:
        lines.append([
            row.label, *client_cells(row), f"{row.target_rate:,.0f}"
            if row.target_rate or row.label == "drain" else "max", cell(row.achieved_rate),
            cell(row.sent_rate), cell(row.received_rate), str(row.members),
            *[cell(row.cpu_percent.get(m), ".1f") for m in members],
            cell(row.host_cpu_percent, ".1f"),
            *[cell(row.hosts_cpu_percent.get(h), ".1f") for h in hosts], *cost_cells(row),
            cell(row.p50_ms, ".2f"), cell(row.p99_ms, ".2f"),
            cell(row.intended_p99_ms, ".2f"),
            *([cell(row.confirm_p99_ms, ".2f")] if confirms else []), f"{row.skipped:,}",
            str(row.errors), *resource_cells(rows, row)])
    table = fixed_width(lines)
    if heading:
        table = f"{heading}\n{table}"
    if settle_s is not None:
        missing = sum(r.missing_seconds for r in rows)
        table += (f"\nrates are means, percentiles merged over each step's seconds after the "
                  f"first {settle_s:g} s (settle); drain: after the last step; intended p99: "
                  f"from when the schedule meant each message to go (rate-limited senders)"
                  + ("; confirm p99: from publish to the broker's confirm" if confirms else "")
                  + f"; CPU us/{terms.each}: CPU time per {terms.each} received"
                  + (f"; {missing} seconds had a source missing (\"-\" = unknown)"
                     if missing else ""))
    return table


def client_header(terms: Terms) -> list[str]:
    """The client-count columns' names (see :func:`client_cells`)."""
    return [terms.senders, terms.receivers, terms.queues]


def client_cells(row: StepRow) -> list[str]:
    """The clients taking part in a row: senders (requesters), receivers (responders) and the
    queues (pairs) the senders use; "-" where not recorded."""
    return [cell(row.senders), cell(row.receivers), cell(row.queues)]


def cost_header(terms: Terms) -> list[str]:
    """The per-row cost columns' names (see :func:`cost_cells`)."""
    return [f"broker CPU us/{terms.each}", f"generator CPU us/{terms.each}"]


def cost_cells(row: StepRow) -> list[str]:
    """A row's broker and load generator CPU microseconds per message (round trip)."""
    return [cell(row.broker_us_per_msg, ",.1f"), cell(row.generator_us_per_msg, ",.1f")]


def _memory_members(rows: list[StepRow]) -> list[str]:
    return sorted({m for row in rows for m in row.memory_percent})


def _disk_alarms(rows: list[StepRow]) -> bool:
    return any(any(row.disk_alarm_seconds.values()) for row in rows)


def _network(rows: list[StepRow]) -> bool:
    return any(row.network_in_mbps or row.network_out_mbps for row in rows)


def resource_header(rows: list[StepRow]) -> list[str]:
    """The resource columns of a step table, each group only where some member reported it:
    each member's most memory against its high watermark, the seconds of memory alarm (of
    the member longest in alarm) and, if any, of disk alarm; the members' client traffic in
    and out together."""
    members = _memory_members(rows)
    memory = [*[f"m{member_index(m)} mem%" for m in members], "mem alarm s",
              *(["disk alarm s"] if _disk_alarms(rows) else [])] if members else []
    return memory + (["net in Mb/s", "net out Mb/s"] if _network(rows) else [])


def resource_cells(rows: list[StepRow], row: StepRow) -> list[str]:
    """``row``'s cells under :func:`resource_header` of ``rows``."""
    def most(seconds: dict[str, int]) -> str:
        return str(max(seconds.values())) if seconds else "-"

    def total(mbps: dict[str, float]) -> str:
        return cell(sum(mbps.values()) if mbps else None, ",.1f")
    members = _memory_members(rows)
    memory = [*[cell(row.memory_percent.get(m), ".1f") for m in members],
              most(row.memory_alarm_seconds),
              *([most(row.disk_alarm_seconds)] if _disk_alarms(rows) else [])] \
        if members else []
    return memory + ([total(row.network_in_mbps), total(row.network_out_mbps)]
                     if _network(rows) else [])


def cell(value: float | None, spec: str = ",.0f") -> str:
    """A figure as a table cell (``spec`` a format spec), "-" when no source gave it."""
    return "-" if value is None else format(value, spec)


def member_index(node_name: str) -> str:
    """The pool index in a member's node name: ``surge-uniform-4-2@localhost`` -> ``2``; a
    linked topology's member with its side: ``surge-local-linked-b-0@localhost`` -> ``b0`` (the
    link's own: ``link0``)."""
    parts = node_name.split("@")[0].rsplit("-", 2)
    if len(parts) == 3 and parts[1] in (*LINK_SIDES, LINK_OWN):
        return parts[1] + parts[2]
    return parts[-1]


def fixed_width(lines: list[list[str]]) -> str:
    """Right-aligned columns, two spaces apart; the first line is the header."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines)
