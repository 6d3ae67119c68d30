"""Where a run's metric tables lie on disk: each table's parts, or its compacted file (the
layout: :mod:`results.rundir.tables`). Read here by everything that reads rows, ``run.json``'s
reader included."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

COMPACTED = "compacted.parquet"


def table_files(root: Path, table: str) -> list[Path]:
    """The files that hold one metric table of a run: its compacted file if it has one, else its
    parts in order."""
    directory = root / "metrics" / table
    if (directory / COMPACTED).exists():
        return [directory / COMPACTED]
    return sorted(directory.glob("part-*.parquet"))


def read_files(root: Path, table: str, columns: Sequence[str] | None = None) -> pa.Table | None:
    """One metric table of a run (only ``columns``, if given) from the files that read;
    ``None`` when none does."""
    import pyarrow as pa  # loaded when rows are read, not by everything that imports this
    import pyarrow.parquet as pq
    tables = []
    for part in table_files(root, table):
        try:
            tables.append(pq.read_table(part, columns=columns))
        except (OSError, pa.ArrowInvalid):
            continue
    return pa.concat_tables(tables, promote_options="default") if tables else None
