"""The greatest `order_by` value a table may hold, from its data files' column metrics: what lets
the one-pass job order a batch's changes across batches without reading the table.

Spark's path joins each change with the row the table holds for its key and drops a change older
than it (tasks/last_changes.not_older). A change whose order value is at least every value the
table holds is older than none of them, so when all of a batch's are, that join drops nothing:
the one-pass job writes the batch and its tasks decline it otherwise (batch/direct_tables.py). The
bound is the greatest upper bound of the column over the snapshot's data files (deleted rows
count too: the bound only grows), read from the `data_files` metadata table, which plans from the
manifests alone. A file without the column's bound (metrics off for the column, more columns than
metrics are kept for) that holds a value of it makes the bound unknown.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def order_bound(spark: SparkSession, table: str, snapshot_id: int, column: str) -> tuple[bool, Any]:
    """(whether the bound is known, the greatest value of `column` the data files of snapshot
    `snapshot_id` of `table` (catalog.namespace.name) may hold: None when they hold none)."""
    files = spark.read.format("iceberg").option("versionAsOf", str(snapshot_id)).load(f"{table}.data_files")
    metrics = F.col("readable_metrics").getField(column)
    upper = metrics.getField("upper_bound")
    # No bound for the column and not all null: the file holds values nothing says the size of.
    unknown = upper.isNull() & (F.coalesce(metrics.getField("null_value_count"), F.lit(-1)) != F.col("record_count"))
    row = files.agg(F.max(upper).alias("bound"), F.count_if(unknown).alias("unknown")).first()
    assert row is not None  # an aggregate has a row
    return row["unknown"] == 0, row["bound"]
