"""Reading tables through the test session's Spark."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from dev.kit.scenario import CATALOG
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition


def snapshots(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """The table's snapshots, oldest first, with their summaries."""
    rows = spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at"
    ).collect()
    return [r.asDict() for r in rows]


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def table_offsets(spark: SparkSession, table: str) -> dict[TopicPartition, int]:
    """The offsets the table holds (its newest offset-bearing snapshot), read afresh; {} before
    the table exists or holds any."""
    if not table_exists(spark, table):
        return {}
    spark.sql(f"REFRESH TABLE {table}")
    for snap in reversed(snapshots(spark, table)):
        if codec.OFFSETS_KEY in snap["summary"]:
            return codec.decode(snap["summary"][codec.OFFSETS_KEY])
    return {}


def rows(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    spark.sql(f"REFRESH TABLE {table}")
    frame = spark.table(table)
    found = [tuple(r) for r in frame.select(*sorted(frame.columns)).collect()]
    return sorted(found, key=lambda row: [(v is not None, v if v is not None else 0) for v in row])


def partitions(spark: SparkSession, table: str) -> list[tuple[Any, str]]:
    """(id, the row's partition as Iceberg holds it) of every row: where each row was filed."""
    spark.sql(f"REFRESH TABLE {table}")
    return sorted((r.id, str(r.p)) for r in spark.sql(f"SELECT id, _partition AS p FROM {table}").collect())


def letters(spark: SparkSession, namespace: str) -> list[tuple[str, int, str]]:
    table = f"{CATALOG}.{namespace}.dead_letters"
    spark.sql(f"REFRESH TABLE {table}")
    return sorted((r.topic, r.offset, r.error_class) for r in spark.table(table).collect())


def dead_letters(spark: SparkSession, namespace: str) -> list[tuple[Any, ...]]:
    """The dead letters as a user compares them: where, the record's bytes, the stage and error."""
    table = f"{CATALOG}.{namespace}.dead_letters"
    spark.sql(f"REFRESH TABLE {table}")
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value, r.stage, r.error_class, r.error_message)
        for r in spark.table(table).collect()
    )
