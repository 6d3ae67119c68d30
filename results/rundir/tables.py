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
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from orchestrator.errors import SurgeError
from results.rundir.figures import CONTROLLER_HOST as CONTROLLER_HOST  # the hosts table's name
from results.rundir.figures import INTENDED, LATENCY, histogram_columns
from results.rundir.histogram import LatencyHistogram
from results.rundir.manifest import RunManifest
from results.rundir.parts import COMPACTED as COMPACTED
from results.rundir.parts import read_files
from results.rundir.parts import table_files as table_files


def _histogram(name: str) -> list[tuple[str, pa.DataType]]:
    """The columns of histogram ``name`` (sparse: its buckets and their counts)."""
    buckets, counts = histogram_columns(name)
    return [(buckets, pa.list_(pa.int32())), (counts, pa.list_(pa.int64()))]


def _percentiles(name: str) -> list[tuple[str, pa.DataType]]:
    return [(f"{name}_p50_ms", pa.float64()), (f"{name}_p99_ms", pa.float64())]


_HISTOGRAM = _histogram(LATENCY)
_WHEN = [("t", pa.float64()), ("elapsed_s", pa.float64()), ("phase", pa.int32())]

SCHEMAS: dict[str, pa.Schema] = {
    "ticks": pa.schema([
        *_WHEN, ("lateness_s", pa.float64()),
        ("target_rate", pa.float64()), ("send_rate", pa.float64()),
        ("receive_rate", pa.float64()), ("confirm_rate", pa.float64()),
        ("skip_rate", pa.float64()),
        ("sent", pa.int64()), ("received", pa.int64()), ("confirmed", pa.int64()),
        ("nacked", pa.int64()), ("skipped", pa.int64()),
        ("errors", pa.int64()), ("reconnects", pa.int64()), ("connections", pa.int64()),
        ("held", pa.int64()), ("senders_done", pa.int64()),
        ("members_running", pa.int32()), ("queue_depth", pa.int64()),
        ("depth_age_s", pa.float64()), ("backlog", pa.int64()), ("agents_missing", pa.int32()),
        ("read_span_s", pa.float64()), ("broker_missing", pa.bool_()),
        *_percentiles(LATENCY), ("host_cpu_percent", pa.float64()), *_HISTOGRAM,
        # runs since the intended latency: absent in earlier runs of format 3 and before
        *_percentiles(INTENDED), *_histogram(INTENDED),
        # runs since broker-side cancels and blocked connections, and since agents could be
        # lost: absent in earlier runs
        ("cancels", pa.int64()), ("blocked", pa.int64()), ("blocked_s", pa.float64()),
        ("agents_lost", pa.int32())]),
    "members": pa.schema([
        *_WHEN, ("member", pa.string()),
        ("running", pa.bool_()), ("cpu_percent", pa.float64()), ("cpu_interval_s", pa.float64()),
        ("cpu_age_s", pa.float64()), ("cpu_quota_cores", pa.float64()), ("connections", pa.int64()),
        ("messages_in", pa.int64()), ("messages_out", pa.int64())]),
    "hosts": pa.schema([
        *_WHEN, ("host", pa.string()), ("cpu_percent", pa.float64()),
        ("cpu_interval_s", pa.float64())]),
    "agents": pa.schema([
        *_WHEN, ("agent", pa.int32()), ("monotonic_s", pa.float64()),
        ("sent", pa.int64()), ("received", pa.int64()), ("errors", pa.int64()),
        ("reconnects", pa.int64()), ("skipped", pa.int64()), ("cpu_percent", pa.float64()),
        ("cpu_seconds", pa.float64()), *_HISTOGRAM]),
}




def latency_columns(name: str, histogram: LatencyHistogram) -> dict[str, Any]:
    """A tick's histogram ``name`` (:data:`LATENCY`, :data:`INTENDED`) as its row's columns:
    p50 and p99 in ms (``None`` when it holds nothing) and the sparse buckets."""
    sparse = histogram.to_sparse()
    buckets, counts = histogram_columns(name)
    known = histogram.count > 0
    return {f"{name}_p50_ms": histogram.percentile(50) / 1000 if known else None,
            f"{name}_p99_ms": histogram.percentile(99) / 1000 if known else None,
            buckets: list(sparse), counts: list(sparse.values())}


def new_run_id(scenario_name: str) -> str:
    """``<UTC timestamp>-<scenario>``: sorts by time, says what ran. The name is made safe as
    one directory name whatever it holds (``/``, ``..``, line breaks become ``_``; at most 64
    characters), so a run never writes outside its runs directory."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", scenario_name)[:64] or "run"
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{name}"


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
        self._buffers: dict[str, list[dict[str, Any]]] = {name: [] for name in SCHEMAS}
        self._parts: dict[str, int] = dict.fromkeys(SCHEMAS, 0)
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
        for table, rows in self._buffers.items():
            if not rows:
                continue
            directory = self.root / "metrics" / table
            directory.mkdir(exist_ok=True)
            part = directory / f"part-{self._parts[table]:05d}.parquet"
            tmp = part.with_suffix(".tmp")
            pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS[table]), tmp)
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
    return found if found is not None else SCHEMAS[table].empty_table()
