"""The dead-letter table: every record that could not be decoded or converted, with why.

It is an Iceberg table like the others, committed in the same batch (before the data tables, so a
crash in between never loses a dead letter) and carrying its own offsets, so a replay adds none
twice. The raw key, value and headers are kept byte for byte: a fixed record can be replayed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from icesink.batch.decode import ERROR


def rows(bad: DataFrame, target: str, batch_id: int, query_id: str) -> DataFrame:
    """Dead-letter rows for the bad records of one table's share of the batch (`target`: the
    table they were meant for, or why none was)."""
    return bad.select(
        "topic", "partition", "offset", "timestamp", "key", "value", "headers",
        F.col(f"{ERROR}.stage").alias("stage"),
        F.col(f"{ERROR}.error_class").alias("error_class"),
        F.col(f"{ERROR}.message").alias("error_message"),
        F.lit(target).alias("target_table"),
        F.lit(batch_id).cast("long").alias("batch_id"),
        F.lit(query_id).alias("query_id"),
        F.current_timestamp().alias("failed_at"),
    )  # fmt: skip
