"""``surge query``: Spark SQL over a runs root's results lake (:mod:`results.lake`), each lake
table a view of its name (``runs``, ``steps``, ``members``, ``latency``, ``cost``, ``events``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from orchestrator.errors import SurgeError
from results.installed import require_analysis
from results.lake import TABLES, Lake
from results.pipeline import SPARK_LOG
from results.rundir.steps import fixed_width


def query_text(root: Path, sql: str, spark_master: str | None = None, csv_format: bool = False
               ) -> str:
    """``surge query``: what ``sql`` gives over the lake of ``root``, as a table or (``csv_format``)
    CSV; says what to install when the analysis extra is missing."""
    require_analysis()
    columns, rows = query(root, sql, spark_master)
    return as_csv(columns, rows) if csv_format else as_text(columns, rows)


def query(root: Path, sql: str, spark_master: str | None = None
          ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and rows ``sql`` gives over the lake of ``root``."""
    from pyspark.errors import PySparkException

    from results.spark import session
    lake = Lake(root)
    if not lake.current.exists():
        raise SurgeError(f"{lake.dir}: no results lake yet; surge analyze --runs-dir {root} "
                         "makes it")
    spark = session(spark_master, root / SPARK_LOG)
    for table in TABLES:
        if lake.table(table).exists():
            spark.read.parquet(str(lake.table(table))).createOrReplaceTempView(table)
    try:
        frame = spark.sql(sql)
        return frame.columns, [tuple(row) for row in frame.collect()]
    except PySparkException as error:
        first = str(error).strip().splitlines()[0]
        raise SurgeError(f"query: {first}") from None


def as_text(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A fixed-width table ("-" for null; numbers with thousands separators, at most 3
    decimals)."""
    return fixed_width([columns, *[[_cell(value) for value in row] for row in rows]])


def as_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """CSV with a header line (empty for null)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1e15 else f"{value:g}"
    return str(value)
