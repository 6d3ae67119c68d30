"""The results lake: every analysed run of a runs root in a few Parquet tables, for Spark,
pandas or anything that reads Parquet, without surge.

``<runs>/_lake/``
    ``current``      a symbolic link to the committed generation: read the tables through it
    ``gen-NNNNNN/<table>/schema_version=<v>/part-*.parquet``   one generation of the tables
    ``gen-NNNNNN/_lake.json``   what it holds: per run, the fingerprint of the files it was
                                analysed from (what makes ``surge analyze`` incremental), and
                                per file, the runs in it

Tables (:data:`TABLES`, each keyed by ``run_id``, the run directory's name): ``runs``, ``steps``
(the step table, drain included), ``members``, ``latency`` (each row's merged histograms, one row
per bucket with its bounds in microseconds), ``cost`` and ``events``.

A pass (:meth:`Lake.commit`) builds the next generation in a staging directory: the files of the
current one that hold none of the pass's runs are hard links, those that do are rewritten
without them, and the pass's rows are one new file per table; a table that reaches
:data:`MAX_FILES` files is merged into one, so the lake holds few, large files. The staging
directory is renamed to its generation and ``current`` is switched to it with one atomic rename:
a reader, or a pass that crashes at any point, sees the old generation whole or the new one
whole. The previous generation is kept (for readers that listed it just before the switch); older
ones and abandoned staging directories are removed. One pass at a time: callers hold the root's
analysis lock (:func:`results.catalog.locked`).

A schema change bumps :data:`SCHEMA_VERSION`; files keep the version they were written with in
their partition directory, so old partitions stay readable beside new ones (``schema_version``
is a column to Spark and to pyarrow's datasets).
"""

from __future__ import annotations

import json
import os
import shutil
import typing
from collections.abc import Callable, Iterable
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from results.rundir.histogram import bucket_bounds
from results.rundir.steps import StepRow

LAKE_DIR = "_lake"
CURRENT = "current"
MANIFEST = "_lake.json"
SCHEMA_VERSION = 1
MAX_FILES = 8  # per table and schema version; a pass that reaches it merges them into one

_STEP_TYPES = {"int": pa.int64(), "int | None": pa.int64(), "float": pa.float64(),
               "float | None": pa.float64(), "str": pa.string(),
               "dict[str, float]": pa.map_(pa.string(), pa.float64()),
               "dict[str, int]": pa.map_(pa.string(), pa.int64())}


def _step_schema() -> pa.Schema:
    """``run_id``, then every :class:`~results.rundir.steps.StepRow` field, then ``ratio``."""
    hints = typing.get_type_hints(StepRow)
    return pa.schema([("run_id", pa.string()),
                      *[(f.name, _STEP_TYPES[_hint_name(hints[f.name])]) for f in fields(StepRow)],
                      ("ratio", pa.float64())])


def _hint_name(hint: Any) -> str:
    """A type hint as :data:`_STEP_TYPES` names it."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin is dict:
        return f"dict[str, {args[1].__name__}]"
    if args:  # X | None
        return " | ".join("None" if a is type(None) else a.__name__ for a in args)
    return hint.__name__


TABLES: dict[str, pa.Schema] = {
    "runs": pa.schema([
        ("run_id", pa.string()), ("scenario", pa.string()), ("campaign", pa.string()),
        ("outcome", pa.string()), ("started_at", pa.timestamp("us", tz="UTC")),
        ("ended_at", pa.timestamp("us", tz="UTC")), ("format_version", pa.int32()),
        ("broker", pa.string()), ("topology", pa.string()),
        ("cpu_per_member", pa.float64()), ("sent", pa.int64()), ("received", pa.int64()),
        ("lost", pa.int64()), ("duplicates", pa.int64()), ("balanced", pa.bool_()),
        ("steps", pa.int32()), ("analysed_at", pa.timestamp("us", tz="UTC")),
        ("problems", pa.list_(pa.string()))]),
    "steps": _step_schema(),
    "members": pa.schema([
        ("run_id", pa.string()), ("member", pa.string()), ("mean_cpu_percent", pa.float64()),
        ("max_cpu_percent", pa.float64()), ("mean_connections", pa.float64()),
        ("cpu_seconds", pa.float64()), ("messages_delivered", pa.int64()),
        ("seconds_serving", pa.int64()), ("cpu_unknown_s", pa.int64()),
        ("messages_unknown_s", pa.int64()), ("cpu_share", pa.float64()),
        ("message_share", pa.float64())]),
    "latency": pa.schema([
        ("run_id", pa.string()), ("label", pa.string()), ("histogram", pa.string()),
        ("bucket", pa.int32()), ("lower_us", pa.int64()), ("upper_us", pa.int64()),
        ("count", pa.int64())]),
    "cost": pa.schema([
        ("run_id", pa.string()), ("messages", pa.int64()), ("broker_cpu_s", pa.float64()),
        ("generator_cpu_s", pa.float64()), ("broker_us_per_msg", pa.float64()),
        ("generator_us_per_msg", pa.float64()), ("price_per_core_hour", pa.float64()),
        ("include_drain", pa.bool_()), ("span_start_s", pa.float64()),
        ("span_end_s", pa.float64()), ("broker_cost_per_1k_msg_s_month", pa.float64()),
        ("generator_cost_per_1k_msg_s_month", pa.float64())]),
    "events": pa.schema([
        ("run_id", pa.string()), ("t", pa.float64()), ("elapsed_s", pa.float64()),
        ("kind", pa.string()), ("fields", pa.string())]),
}
"""Every lake table and its columns at :data:`SCHEMA_VERSION`."""


def run_rows(analysis: Any, events: list[dict[str, Any]], campaign: str | None = None
             ) -> dict[str, list[dict[str, Any]]]:
    """One run's rows of every lake table, from its :class:`~results.analysis.RunAnalysis`
    and its events."""
    run_id = analysis.run_dir.name
    manifest = analysis.manifest
    topology = manifest.topology or {}
    accounting = manifest.accounting
    now = datetime.now(timezone.utc)
    runs = [{"run_id": run_id, "scenario": manifest.scenario_name, "campaign": campaign,
             "outcome": manifest.outcome, "started_at": manifest.started_at,
             "ended_at": manifest.ended_at, "format_version": manifest.format_version,
             "broker": topology.get("broker"), "topology": topology.get("name"),
             "cpu_per_member": topology.get("cpu_per_member"),
             "sent": accounting.sent if accounting else None,
             "received": accounting.received if accounting else None,
             "lost": accounting.lost if accounting else None,
             "duplicates": accounting.duplicates if accounting else None,
             "balanced": accounting.balanced if accounting else None,
             "steps": len(analysis.steps), "analysed_at": now,
             "problems": list(analysis.problems)}]
    steps = [{"run_id": run_id, **row.as_json()} for row in analysis.rows]
    latency = [{"run_id": run_id, "label": label, "histogram": name, "bucket": bucket,
                "lower_us": bucket_bounds(bucket)[0], "upper_us": bucket_bounds(bucket)[1],
                "count": count}
               for label, merged in analysis.histograms.items()
               for name, buckets in merged.items() for bucket, count in buckets.items()]
    cost = dict(analysis.cost)
    span = cost.pop("span_s", None) or [None, None]
    costs = [{"run_id": run_id, **cost, "span_start_s": span[0], "span_end_s": span[1]}]
    logged = [{"run_id": run_id, "t": event.get("t"), "elapsed_s": event.get("elapsed_s"),
               "kind": event.get("kind"),
               "fields": json.dumps({k: v for k, v in event.items()
                                     if k not in ("t", "elapsed_s", "kind")}, default=str)}
              for event in events]
    members = [{"run_id": run_id, **member} for member in analysis.members]
    return {"runs": runs, "steps": steps, "members": members, "latency": latency,
            "cost": costs if analysis.cost else [], "events": logged}


class Lake:
    """The lake of one runs root."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / LAKE_DIR

    @property
    def current(self) -> Path:
        """The committed generation's directory (through the ``current`` link)."""
        return self.dir / CURRENT

    def state(self) -> dict[str, Any]:
        """The committed generation's ``_lake.json`` (empty for a new lake)."""
        try:
            return json.loads((self.current / MANIFEST).read_text())
        except (FileNotFoundError, ValueError):
            return {"schema_version": SCHEMA_VERSION, "generation": 0, "runs": {}, "files": {}}

    def fingerprints(self) -> dict[str, str]:
        """Per run id in the lake, the fingerprint of the files it was analysed from."""
        return {run: entry["fingerprint"] for run, entry in self.state()["runs"].items()}

    def table(self, name: str) -> Path:
        """Where Spark or pyarrow read table ``name`` (all its schema versions)."""
        return self.current / name

    def commit(self, rows: dict[str, list[dict[str, Any]]], fingerprints: dict[str, str],
               before_switch: Callable[[], None] | None = None) -> int:
        """Replace the rows of the runs in ``fingerprints`` (run id -> fingerprint) with
        ``rows`` (per table) as the next generation; returns its number. ``before_switch`` is
        called between staging and the switch (for tests of a crash there)."""
        old = self.state()
        generation = old["generation"] + 1
        self.dir.mkdir(parents=True, exist_ok=True)
        self._remove_abandoned()
        staging = self.dir / f".staging-{generation:06d}-{os.getpid()}"
        staging.mkdir()
        replaced = set(fingerprints)
        files: dict[str, dict[str, list[str]]] = {}
        for table, schema in TABLES.items():
            kept = self._carry(old["files"].get(table, {}), replaced, staging)
            new = rows.get(table, [])
            if new:
                name = _part(table, generation, len(kept))
                _write(staging / name, pa.Table.from_pylist(new, schema=schema))
                kept[name] = sorted({row["run_id"] for row in new})
            files[table] = _merged(kept, staging, table, generation)
        when = datetime.now(timezone.utc).isoformat()
        runs = {run: entry for run, entry in old["runs"].items() if run not in replaced}
        runs.update({run: {"fingerprint": digest, "analysed_at": when}
                     for run, digest in fingerprints.items()})
        (staging / MANIFEST).write_text(json.dumps({
            "schema_version": SCHEMA_VERSION, "generation": generation, "committed_at": when,
            "runs": runs, "files": files}, indent=1, sort_keys=True))
        if before_switch is not None:
            before_switch()
        target = self.dir / f"gen-{generation:06d}"
        staging.rename(target)
        link = self.dir / f".{CURRENT}-{os.getpid()}"
        link.unlink(missing_ok=True)
        link.symlink_to(target.name)
        os.replace(link, self.current)
        self._remove_old(keep={target.name, f"gen-{old['generation']:06d}"})
        return generation

    def _carry(self, files: dict[str, list[str]], replaced: set[str], staging: Path
               ) -> dict[str, list[str]]:
        """The current generation's files into ``staging``: linked as they are, or rewritten
        without the ``replaced`` runs (left out if nothing else is in them)."""
        kept = {}
        for name, runs in files.items():
            source, target = self.current / name, staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not replaced.intersection(runs):
                _link(source, target)
                kept[name] = runs
                continue
            table = pq.read_table(source, partitioning=None)
            table = table.filter(pc.invert(pc.is_in(table["run_id"],
                                                    pa.array(sorted(replaced)))))
            if table.num_rows:
                _write(target, table)
                kept[name] = [r for r in runs if r not in replaced]
        return kept

    def _remove_abandoned(self) -> None:
        """Staging directories of passes that did not finish (the lock says none is running)."""
        for path in self.dir.glob(".staging-*"):
            shutil.rmtree(path, ignore_errors=True)

    def _remove_old(self, keep: set[str]) -> None:
        for path in self.dir.glob("gen-*"):
            if path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)


def _part(table: str, generation: int, index: int) -> str:
    return f"{table}/schema_version={SCHEMA_VERSION}/part-{generation:06d}-{index:03d}.parquet"


def _merged(files: dict[str, list[str]], staging: Path, table: str, generation: int
            ) -> dict[str, list[str]]:
    """``files`` as they are, or, once a schema version has :data:`MAX_FILES` of them, that
    version's files merged into one."""
    by_version: dict[str, list[str]] = {}
    for name in files:
        by_version.setdefault(Path(name).parent.name, []).append(name)
    out = dict(files)
    for version, names in by_version.items():
        if len(names) < MAX_FILES:
            continue
        merged = f"{table}/{version}/part-{generation:06d}-merged.parquet"
        _write(staging / merged, pa.concat_tables(
            [pq.read_table(staging / name, partitioning=None) for name in sorted(names)],
            promote_options="default"))
        for name in names:
            (staging / name).unlink()
            out.pop(name)
        out[merged] = sorted({run for name in names for run in files[name]})
    return out


def _write(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _link(source: Path, target: Path) -> None:
    """A hard link (the same data, no copy), or a copy where links are not possible."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def read(lake: Lake, table: str, columns: Iterable[str] | None = None) -> pa.Table:
    """A lake table as it is committed, with pyarrow (empty if the lake has none of it)."""
    path = lake.table(table)
    if not path.exists():
        return TABLES[table].empty_table()
    return pq.read_table(path, columns=list(columns) if columns else None)


def analysed(run_dirs: Iterable[Path]) -> dict[Path, dict[str, Any]]:
    """Per run of ``run_dirs`` in its root's lake: ``steps`` (its step rows in order, the drain
    left out) and ``cost`` (its cost row); runs the lakes do not hold are left out."""
    by_root: dict[Path, list[Path]] = {}
    for run_dir in run_dirs:
        by_root.setdefault(run_dir.resolve().parent, []).append(run_dir)
    out: dict[Path, dict[str, Any]] = {}
    for root, dirs in by_root.items():
        lake = Lake(root)
        steps: dict[str, list[dict[str, Any]]] = {}
        for row in sorted(read(lake, "steps").to_pylist(), key=lambda r: r["start_s"]):
            if row["label"] != "drain":
                steps.setdefault(row["run_id"], []).append(_dicts(row))
        costs = {row["run_id"]: row for row in read(lake, "cost").to_pylist()}
        for run_dir in dirs:
            if run_dir.name in costs or run_dir.name in steps:
                out[run_dir] = {"steps": steps.get(run_dir.name, []),
                                "cost": costs.get(run_dir.name, {})}
    return out


def _dicts(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its map columns (pyarrow's lists of pairs) as dicts."""
    return {k: dict(v) if isinstance(v, list) else v for k, v in row.items()}
