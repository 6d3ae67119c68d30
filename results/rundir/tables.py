"""The run directory: the versioned contract between the controller and the analysis (its
version and ``run.json``: :mod:`results.rundir.manifest`).

``runs/<run-id>/``
    ``run.json``      resolved specs, versions, host facts, start/end, outcome, accounting, steps
    ``events.jsonl``  one JSON object per line: step changes, member starts/stops, errors
    ``metrics/<table>/part-NNNNN.parquet``  1 Hz rows, each part a complete Parquet file
    ``metrics/<table>/compacted.parquet``   all of a closed run's parts in one file

Rows are buffered and written as a new part every ``flush_every_s`` seconds, so a crash loses at
most that much, and every file on disk is always readable on its own. When the run closes, each
table's parts are compacted into one file (an hour's run has 720 parts per table, and each file
read costs a reader more than its rows): the compacted file is renamed into place before the parts
are removed, and a table that has one is read from it alone, so a crash in between loses nothing
and counts nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.errors import SurgeError
from results.rundir.figures import CONFIRM, INTENDED, LATENCY, histogram_columns
from results.rundir.figures import CONTROLLER_HOST as CONTROLLER_HOST  # the hosts table's name
from results.rundir.histogram import LatencyHistogram
from results.rundir.manifest import RunManifest
from results.rundir.parts import COMPACTED as COMPACTED
from results.rundir.parts import read_files
from results.rundir.parts import table_files as table_files

if TYPE_CHECKING:
    import pyarrow as pa


class ArrowType(NamedTuple):
    """A column's Arrow type, named here and made a :class:`pyarrow.DataType` only where
    Parquet is written or read: pyarrow (and the numpy it loads) take a quarter of a second to
    import, which a run spends after its first publish rather than before
    (:func:`load_arrow`)."""

    name: str  # pyarrow's factory of the type: float64, int64, int32, bool_, string
    listed: bool = False  # a list of values of that type

    def arrow(self) -> pa.DataType:
        """The type as pyarrow's."""
        import pyarrow as pa
        item = getattr(pa, self.name)()
        return pa.list_(item) if self.listed else item

    def __str__(self) -> str:
        return str(self.arrow())  # as Arrow spells it: double, list<item: int32>


FLOAT64, INT64, INT32, BOOL, STRING = (ArrowType(name) for name in
                                       ("float64", "int64", "int32", "bool_", "string"))


class Column(NamedTuple):
    """One column of a metric table: its name, Arrow type, and what it holds with its unit
    (``null`` in a column always means unknown, never 0)."""

    name: str
    type: ArrowType
    description: str


_OF = {LATENCY: "from the actual send time",
       INTENDED: "from the intended send time (rate-limited senders only)",
       CONFIRM: "of publisher confirms, from publish to the broker's confirm (senders with "
                "confirms only)"}
_RECENT = "; null in runs recorded before it"
_SINCE = {LATENCY: "", INTENDED: _RECENT, CONFIRM: _RECENT}


def _histogram(name: str, span: str) -> list[Column]:
    """The columns of histogram ``name`` (sparse: its buckets and their counts) of ``span``."""
    buckets, counts = histogram_columns(name)
    return [Column(buckets, ArrowType("int32", listed=True),
                   f"Latency {_OF[name]} of {span}, as a histogram: the indices of its "
                   "non-empty buckets (log-linear over integer µs, 32 sub-buckets per power "
                   f"of two){_SINCE[name]}"),
            Column(counts, ArrowType("int64", listed=True),
                   f"Messages in each bucket of `{buckets}`, in the same order (count)")]


def _percentiles(name: str) -> list[Column]:
    buckets, _ = histogram_columns(name)
    return [Column(f"{name}_p{q}_ms", FLOAT64,
                   f"p{q} latency {_OF[name]} of this tick's `{buckets}` (ms); null when it "
                   f"holds no message{_SINCE[name]}") for q in (50, 99)]


def _when() -> list[Column]:
    return [Column("t", FLOAT64, "Wall-clock time of the tick, once its readings were in "
                   "(s since the Unix epoch, the controller's clock)"),
            Column("elapsed_s", FLOAT64, "When the tick started, in s since the load "
                   "started (the controller's monotonic clock)"),
            Column("phase", INT32, "Plan step running at this tick (1-based, counting "
                   "repeats and sweep counts); 0 before the first step and while draining")]


def _resources() -> list[Column]:
    """The member's own resource figures (RabbitMQ's Prometheus endpoint); each null when the
    member did not report it (IBM MQ members report none)."""
    return [Column(name, kind, f"{text}; null when unknown{_RECENT}") for name, kind, text in (
        ("memory_bytes", INT64, "Memory the member uses, as its memory alarm counts it "
                                     "(bytes)"),
        ("memory_limit_bytes", INT64, "The member's memory high watermark: above it the "
                                           "memory alarm blocks publishers (bytes)"),
        ("memory_percent_of_watermark", FLOAT64, "`memory_bytes` over "
                                                      "`memory_limit_bytes` (%)"),
        ("memory_alarm", BOOL, "Whether the member's memory alarm is in effect"),
        ("disk_free_bytes", INT64, "Disk space free where the member keeps its data "
                                        "(bytes)"),
        ("disk_free_limit_bytes", INT64, "The free disk space below which the disk alarm "
                                              "blocks publishers (bytes)"),
        ("disk_alarm", BOOL, "Whether the member's disk alarm is in effect"),
        ("fds_open", INT64, "File descriptors the member holds open (count)"),
        ("fds_max", INT64, "The member's file descriptor limit (count)"),
        ("network_in_bytes", INT64, "Bytes received from the client connections open now "
                                         "(bytes, cumulative over each connection's life: it "
                                         "falls when a connection closes; a rate is the change "
                                         "over `elapsed_s`)"),
        ("network_out_bytes", INT64, "Bytes sent to the client connections open now, as "
                                          "`network_in_bytes` (bytes)"),
        ("network_in_mbps", FLOAT64, "Client traffic into the member since its previous "
                                          "known `network_in_bytes`, over the tick's clock "
                                          "(Mb/s); null on its first reading and where the "
                                          "count fell (a connection closed)"),
        ("network_out_mbps", FLOAT64, "Client traffic out of the member, as "
                                           "`network_in_mbps` (Mb/s)"),
        ("network_link_mbps", FLOAT64, "Bandwidth of the member's network link, each "
                                            "way, as the topology's `network_mbps` gives it "
                                            "(Mb/s)"))]


_TICK_SPAN = "the messages received since the agents' previous snapshots"
COLUMNS: dict[str, list[Column]] = {
    "ticks": [
        *_when(),
        Column("lateness_s", FLOAT64, "How late the tick fired against its one-second "
               "grid (s)"),
        Column("target_rate", FLOAT64, "Total send rate the plan (times any publish "
               "spike) asks for at this second, over the active senders (msg/s); 0 outside a "
               "step"),
        Column("send_rate", FLOAT64, "Messages sent per second, summed over agents, each "
               "agent's count change over its own clock (msg/s); null when an agent's "
               "reading is missing"),
        Column("receive_rate", FLOAT64, "Messages received per second, as `send_rate` "
               "(msg/s)"),
        Column("confirm_rate", FLOAT64, "Publishes the broker confirmed per second, as "
               "`send_rate` (msg/s)"),
        Column("skip_rate", FLOAT64, "Scheduled sends skipped per second by senders "
               "catching up after a stall, as `send_rate` (msg/s)"),
        Column("sent", INT64, "Messages sent, over all agents (count, cumulative)"),
        Column("received", INT64, "Messages received, over all agents (count, "
               "cumulative)"),
        Column("confirmed", INT64, "Publishes the broker confirmed (count, cumulative)"),
        Column("nacked", INT64, "Messages the broker nacked, each once however often it "
               "was published again (count, cumulative)"),
        Column("skipped", INT64, "Scheduled sends skipped: a stalled sender catches up "
               "at most a second's worth, the oldest are skipped (count, cumulative)"),
        Column("errors", INT64, "Errors the drivers met: failed connects, lost "
               "connections or channels, consumers cancelled, failed MQ calls (count, "
               "cumulative)"),
        Column("reconnects", INT64, "Connection attempts after a connection was lost "
               "(count, cumulative)"),
        Column("connections", INT64, "Connections the agents hold open to the broker now "
               "(count)"),
        Column("held", INT64, "Deliveries slowed receivers hold now, not yet handled "
               "nor counted as received (count)"),
        Column("senders_done", INT64, "Senders that have sent all their message limit "
               "asked for (count)"),
        Column("members_running", INT32, "Broker members running, from the latest "
               "broker sample (count; 0 before any)"),
        Column("queue_depth", INT64, "Messages in the workload's queues: ready (asked "
               "of the queues themselves) plus the deliveries the live agents' receivers hold "
               "unacknowledged (`held` + `unacked`) (count); null when a reading is missing or "
               "older than 1 s; where no probe asks the queues (IBM MQ), the broker's own "
               "per-queue depth"),
        Column("depth_age_s", FLOAT64, "Age of the oldest of the readings `queue_depth` "
               "is made of (s); null when the depth does not come from the queues themselves "
               "or is unknown"),
        Column("backlog", INT64, "`sent` - `received` (count): includes what flow "
               "control holds in the broker's ingress, where no queue counts it; with an "
               "exchange copying each message to several queues, `sent` x copies - "
               "`received`, null where keys reach different numbers of queues or once an "
               "agent is lost (what it did after its last reading is unknown)"),
        Column("agents_missing", INT32, "Agents whose reading did not arrive by the "
               "tick's deadline (0.8 s) (count)"),
        Column("read_span_s", FLOAT64, "Time between the first and the last of this "
               "tick's agent and depth readings, controller clock (s); null with none"),
        Column("broker_missing", BOOL, "True when the broker sample did not arrive by "
               "the tick's deadline"),
        *_percentiles(LATENCY),
        Column("host_cpu_percent", FLOAT64, "CPU of the controller's whole host, busy "
               "over total time of all its cores since the previous reading (%); null on the "
               "first reading or when missing"),
        *_histogram(LATENCY, _TICK_SPAN),
        # runs since the intended latency: absent in earlier runs of format 3 and before
        *_percentiles(INTENDED), *_histogram(INTENDED, _TICK_SPAN),
        # runs since the confirm latency: absent in earlier runs
        *_percentiles(CONFIRM), *_histogram(CONFIRM, _TICK_SPAN),
        # runs since broker-side cancels and blocked connections, and since agents could be
        # lost: absent in earlier runs
        Column("cancels", INT64, "Consumers the broker cancelled: a queue deleted, a "
               f"leader lost (count, cumulative){_RECENT}"),
        Column("blocked", INT64, "Connections the broker blocks now (a memory or disk "
               f"alarm holds their publishes) (count){_RECENT}"),
        Column("blocked_s", FLOAT64, "Seconds during which at least one connection of "
               f"an agent was blocked, summed over agents (s, cumulative){_RECENT}"),
        Column("agents_lost", INT32, "Agents lost so far: no longer asked, their share "
               f"unknown (count){_RECENT}"),
        Column("receivers_done", INT64, "Receivers that have taken all their message "
               f"limit (exit.messages_per_receiver) (count){_RECENT}"),
        # runs since active client counts: absent in earlier runs
        Column("sending", INT64, "Senders (requesters) publishing now: not stopped, "
               "paused by the plan or done, summed over the live agents (a lost agent's are "
               f"gone) (count){_RECENT}"),
        Column("consuming", INT64, "Receivers (responders) consuming now, summed over "
               f"the live agents (count); null where a driver does not say{_RECENT}"),
        Column("queues_in_use", INT64, "Distinct queues the publishing senders send to "
               "(count; request/reply: the request queues, document 004's queue pairs)"
               f"{_RECENT}"),
        # runs since the depth counts the receivers' own unacknowledged deliveries
        Column("unacked", INT64, "Deliveries the receivers handled whose acknowledgement "
               "is not sent yet (acks go in batches, flushed every 100 ms), summed over the "
               f"agents (count){_RECENT}")],
    "members": [
        *_when(),
        Column("member", STRING, "The member's name"),
        Column("running", BOOL, "Whether the member is running"),
        Column("cpu_percent", FLOAT64, "The member's CPU over `cpu_interval_s`, of one "
               "core (%; 100 = one core); null when not running, not answered, on its first "
               "reading, or (IBM MQ) between two published figures"),
        Column("cpu_interval_s", FLOAT64, "The interval `cpu_percent` is over, on the "
               "source's own clock (s)"),
        Column("cpu_age_s", FLOAT64, "At most how old the CPU figure is (s); null when "
               "the source does not say or the CPU is unknown"),
        Column("cpu_quota_cores", FLOAT64, "The member's CPU quota (cores); null when it "
               "has none or it is unknown"),
        Column("connections", INT64, "Client connections on the member now (count); "
               "null when unknown"),
        Column("messages_in", INT64, "Messages published through the member (count, "
               "cumulative); null when unknown"),
        Column("messages_out", INT64, "Messages delivered through the member (count, "
               "cumulative); null when unknown"),
        # runs since broker resources were sampled: absent in earlier runs
        *_resources()],
    "hosts": [
        *_when(),
        Column("host", STRING, f"The host: `{CONTROLLER_HOST}` for the controller's, "
               "else the SSH broker host's name"),
        Column("cpu_percent", FLOAT64, "CPU of the whole host, busy over total time of "
               "all its cores over `cpu_interval_s` (%); null on the first reading or when "
               "missing"),
        Column("cpu_interval_s", FLOAT64, "The interval `cpu_percent` is over, on the "
               "host's own clock (s)"),
        Column("cpu_cores_busy", FLOAT64, "Cores busy on average over `cpu_interval_s` "
               "(CPU seconds per second, all its processes); null where `cpu_percent` is")],
    "agents": [
        *_when(),
        Column("agent", INT32, "The agent's index"),
        Column("monotonic_s", FLOAT64, "The agent's own monotonic clock when it took "
               "its snapshot (s)"),
        Column("sent", INT64, "Messages the agent sent (count, cumulative)"),
        Column("received", INT64, "Messages the agent received (count, cumulative)"),
        Column("errors", INT64, "Errors the agent's driver met (count, cumulative)"),
        Column("reconnects", INT64, "The agent's connection attempts after a lost "
               "connection (count, cumulative)"),
        Column("skipped", INT64, "Scheduled sends the agent skipped catching up after a "
               "stall (count, cumulative)"),
        Column("cpu_percent", FLOAT64, "The agent process's CPU since its previous "
               "snapshot, of one core (%; 100 = one core); null on its first reading or when "
               "missing"),
        Column("cpu_seconds", FLOAT64, "The agent process's CPU time at its snapshot "
               "(s, cumulative); null when unknown"),
        *_histogram(LATENCY, "the messages the agent received since its previous snapshot")],
}
"""Every metric table's columns, each declared once: :data:`SCHEMAS` and the reference
(``docs/reference/tables.md``) are made from it."""


_schemas: dict[str, pa.Schema] | None = None


def schemas() -> dict[str, pa.Schema]:
    """The Arrow schema of each metric table (no field metadata: the files are as they were),
    made on first use; also the module's ``SCHEMAS``."""
    global _schemas
    if _schemas is None:
        import pyarrow as pa
        _schemas = {table: pa.schema([(c.name, c.type.arrow()) for c in columns])
                    for table, columns in COLUMNS.items()}
    return _schemas


def __getattr__(name: str) -> Any:
    if name == "SCHEMAS":  # made on first use: see ArrowType
        return schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_arrow() -> None:
    """Import pyarrow and its Parquet writer and make the schemas now: a run calls it in the
    background once its load has started, so that its first part written does not make a tick
    late by the import."""
    import pyarrow.parquet  # noqa: F401
    schemas()


def latency_columns(name: str, histogram: LatencyHistogram) -> dict[str, Any]:
    """A tick's histogram ``name`` (:data:`LATENCY`, :data:`INTENDED`) as its row's columns:
    p50 and p99 in ms (``None`` when it holds nothing) and the sparse buckets."""
    sparse = histogram.to_sparse()
    buckets, counts = histogram_columns(name)
    known = histogram.count > 0
    return {f"{name}_p50_ms": histogram.percentile(50) / 1000 if known else None,
            f"{name}_p99_ms": histogram.percentile(99) / 1000 if known else None,
            buckets: list(sparse), counts: list(sparse.values())}


class RunDirFailed(SurgeError):
    """The run directory could not be written (the disk is full, or was made read-only)."""


SPARE = ".spare"
SPARE_BYTES = 1 << 20  # room kept for the last run.json when the disk fills


class RunWriter:
    """Appends to one run directory while the run goes.

    The first write that fails (a full disk, say) raises :class:`RunDirFailed`; the writer is
    then :attr:`failed` and drops whatever else it is given, so the run can end and tear down.
    A spare file of :data:`SPARE_BYTES` is kept in the directory while it is open and removed
    before the last ``run.json`` is written, so that one still fits on a full disk."""

    def __init__(self, root: Path, flush_every_s: float = 5.0):
        self.root = root
        self.flush_every_s = flush_every_s
        self.failed: OSError | None = None
        (root / "metrics").mkdir(parents=True, exist_ok=True)
        self._buffers: dict[str, list[dict[str, Any]]] = {name: [] for name in COLUMNS}
        self._parts: dict[str, int] = dict.fromkeys(COLUMNS, 0)
        self._last_flush = time.monotonic()
        self._events = open(root / "events.jsonl", "a", buffering=1)  # noqa: SIM115 - long-lived
        self._lock = threading.Lock()  # scaling actions log events from their own thread
        (root / SPARE).write_bytes(bytes(SPARE_BYTES))

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            if self.failed is not None:
                return  # said once; what comes after is dropped
            self.failed = error
            raise RunDirFailed(f"{self.root}: cannot write the run directory any more "
                               f"({error.strerror or error}); the load was stopped and what "
                               f"was recorded before is kept") from None

    def write_manifest(self, manifest: RunManifest) -> None:
        """(Re)write ``run.json`` atomically (see :mod:`results.rundir.manifest`); it is written
        even after a failure, into the spare room."""
        if self.failed is not None:
            (self.root / SPARE).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                manifest.write(self.root)
            return
        with self._writing():
            manifest.write(self.root)

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event line (flushed at once) and return it."""
        record = {"t": time.time(), "kind": kind, **fields}
        line = json.dumps(record, default=str) + "\n"
        with self._lock, self._writing():
            self._events.write(line)
        return record

    def row(self, table: str, row: dict[str, Any]) -> None:
        """Buffer one metric row; writes a part when the flush interval has passed."""
        self._buffers[table].append(row)
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        """Write every buffered row as a new Parquet part per table."""
        with self._writing():
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        for table, rows in self._buffers.items():
            if not rows:
                continue
            directory = self.root / "metrics" / table
            directory.mkdir(exist_ok=True)
            part = directory / f"part-{self._parts[table]:05d}.parquet"
            tmp = part.with_suffix(".tmp")
            pq.write_table(pa.Table.from_pylist(rows, schema=schemas()[table]), tmp)
            os.replace(tmp, part)
            self._parts[table] += 1
            rows.clear()
        self._last_flush = time.monotonic()

    def close(self, compacted: bool = True) -> None:
        """Flush what is buffered, close the event log, give the spare room back and (unless
        not ``compacted``, or writing failed) compact the parts."""
        with contextlib.suppress(RunDirFailed):
            self.flush()
        with contextlib.suppress(OSError):  # what a full disk kept in its buffer is lost
            self._events.close()
        (self.root / SPARE).unlink(missing_ok=True)
        if compacted and self.failed is None:
            with contextlib.suppress(RunDirFailed), self._writing():
                compact(self.root)


def compact(root: Path) -> None:
    """Put each table's readable parts into one file (see the module's text); unreadable parts
    are kept, as they were, beside it."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    for directory in sorted(p for p in (root / "metrics").glob("*") if p.is_dir()):
        parts = sorted(directory.glob("part-*.parquet"))
        if not parts or (directory / COMPACTED).exists():
            continue
        good = readable_parts(root, directory.name)
        if good:
            tmp = directory / (COMPACTED + ".tmp")
            pq.write_table(pa.concat_tables([pq.read_table(p) for p in good],
                                            promote_options="default"), tmp)
            os.replace(tmp, directory / COMPACTED)
        for part in good:
            part.unlink()


def readable_files(root: Path, table: str, problems: list[str] | None = None
                   ) -> dict[Path, pa.Schema]:
    """The files of one metric table (:func:`table_files`) whose footer reads, each with its
    schema; the others are named in ``problems`` (if given) and left out."""
    import pyarrow.parquet as pq
    good = {}
    for part in table_files(root, table):
        try:
            good[part] = pq.read_schema(part)  # reads and checks the footer
        except Exception as error:  # noqa: BLE001 - any unreadable file is skipped, named
            if problems is not None:
                problems.append(f"{part}: unreadable ({type(error).__name__}: {error}); "
                                "skipped")
    return good


def readable_parts(root: Path, table: str, problems: list[str] | None = None) -> list[Path]:
    """The files of one metric table whose footer reads (:func:`readable_files`)."""
    return list(readable_files(root, table, problems))


def read_table(root: Path, table: str) -> pa.Table:
    """All of one metric table of a run (empty table if none), skipping unreadable files."""
    found = read_files(root, table)
    return found if found is not None else schemas()[table].empty_table()


def read_rows(root: Path, table: str) -> list[dict[str, Any]]:
    """The rows of one metric table of a run (:func:`read_table`) in time order
    (``elapsed_s``)."""
    return sorted(read_table(root, table).to_pylist(), key=lambda row: row["elapsed_s"])
