"""Reading tables through the test session's Spark."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def snapshots(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """The table's snapshots, oldest first, with their summaries."""
    rows = spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at"
    ).collect()
    return [r.asDict() for r in rows]


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))
