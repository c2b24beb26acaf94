"""The greatest `order_by` value a table may hold, from its data files' column metrics: what lets
the one-pass job order a batch's changes across batches without reading the table.

Spark's path joins each change with the row the table holds for its key and drops a change older
than it (tasks/last_changes.not_older). A change whose order value is at least every value the
table holds is older than none of them, so when all of a batch's are, that join drops nothing:
the one-pass job writes the batch; otherwise its tasks decline it and a second round compares
the changes with the rows the table holds above the oldest of them (batch/direct_held.py). The
bound is the greatest upper bound of the column over the snapshot's data files (deleted rows
count too: the bound only grows), read from the `data_files` metadata table, which plans from the
manifests alone. A file without the column's bound (metrics off for the column, more columns than
metrics are kept for) that holds a value of it makes the bound unknown.

Reading it is a Spark job (~0.4 s), which a table written batch after batch by this job need not
pay: `OrderBounds` carries a table's bound from the snapshot it was read at to the snapshot the job
commits on top of it, from the footers of the files that commit added (`files_bound`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from icesink.model import TableRef, WrittenFile


def order_bound(spark: SparkSession, table: str, snapshot_id: int, column: str) -> tuple[bool, Any]:
    """(whether the bound is known, the greatest value of `column` the data files of snapshot
    `snapshot_id` of `table` (catalog.namespace.name) may hold: None when they hold none). A
    timestamp's bound is its microseconds since the epoch (`files_bound` says the same)."""
    files = spark.read.format("iceberg").option("versionAsOf", str(snapshot_id)).load(f"{table}.data_files")
    metrics = F.col("readable_metrics").getField(column)
    upper = metrics.getField("upper_bound")
    # No bound for the column and not all null: the file holds values nothing says the size of.
    unknown = upper.isNull() & (F.coalesce(metrics.getField("null_value_count"), F.lit(-1)) != F.col("record_count"))
    greatest = F.max(upper)
    if isinstance(files.select(upper).schema[0].dataType, TimestampType):
        # Exact microseconds: a collected timestamp is a datetime of the Python process's zone.
        greatest = F.unix_micros(greatest)
    row = files.agg(greatest.alias("bound"), F.count_if(unknown).alias("unknown")).first()
    assert row is not None  # an aggregate has a row
    return row["unknown"] == 0, row["bound"]


def files_bound(files: Sequence[WrittenFile], column: str) -> tuple[bool, Any]:
    """(whether it is known, the greatest value of the top-level `column` in the data files
    `files`, from their Parquet footers: None when they hold none). Unknown when a data file has no
    footer, or a row group holds values of the column without its maximum."""
    bound = None
    for f in files:
        if f.content != "data":
            continue  # equality deletes hold the key columns only, and no row
        if not f.footer:
            return False, None
        metadata = pq.read_metadata(pa.BufferReader(f.footer))
        arrow = metadata.schema.to_arrow_schema()
        index = arrow.get_field_index(column)
        if index < 0:  # a file without the column: every row's value is null
            continue
        kind = arrow.field(index).type
        if pa.types.is_timestamp(kind) and kind.unit != "us":
            return False, None  # Iceberg's timestamps are microseconds; another writer's unit is not compared
        for g in range(metadata.num_row_groups):
            chunk = metadata.row_group(g).column(index)
            stats = chunk.statistics
            if stats is not None and stats.has_min_max:
                # A timestamp's raw maximum: its microseconds, as `order_bound` gives them.
                top = stats.max_raw if pa.types.is_timestamp(kind) else stats.max
                bound = top if bound is None else max(bound, top)
            elif stats is None or not stats.has_null_count or stats.null_count != chunk.num_values:
                return False, None
    return True, bound


@dataclass(frozen=True)
class _Bound:
    snapshot_id: int
    column: str
    known: bool
    value: Any


class OrderBounds:
    """The job's order bounds, one per table at the last snapshot the job read or committed it at."""

    def __init__(self, spark: SparkSession, catalog: str) -> None:
        self._spark = spark
        self._catalog = catalog
        self._bounds: dict[TableRef, _Bound] = {}
        self._lock = threading.Lock()  # tables are planned and committed from several threads
        self.reads = 0  # bounds read from the table (the others were carried from the job's commits)

    def get(self, table: TableRef, snapshot_id: int, column: str) -> tuple[bool, Any]:
        """`order_bound` of `table` at `snapshot_id`, carried from the job's own commit when it made that snapshot."""
        with self._lock:
            found = self._bounds.get(table)
        if found is not None and found.snapshot_id == snapshot_id and found.column == column:
            return found.known, found.value
        known, value = order_bound(self._spark, table.qualified(self._catalog), snapshot_id, column)
        with self._lock:
            self.reads += 1
            self._bounds[table] = _Bound(snapshot_id, column, known, value)
        return known, value

    def committed(self, table: TableRef, parent_id: int | None, snapshot_id: int, files: Sequence[WrittenFile]) -> None:
        """The job committed `files` to `table` as `snapshot_id` on top of `parent_id`: the bound
        there, when it was known at the parent (another writer's snapshot between the two, or a
        file whose bound is not known: read again next time)."""
        with self._lock:
            found = self._bounds.pop(table, None)
        if found is None or not found.known or found.snapshot_id != parent_id:
            return
        known, added = files_bound(files, found.column)
        if not known:
            return
        value = found.value if added is None else added if found.value is None else max(found.value, added)
        with self._lock:
            self._bounds[table] = _Bound(snapshot_id, found.column, True, value)
