"""Which records a table still takes (icesink.batch.plan.keep_condition)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from icesink.batch.plan import keep_condition
from icesink.model import TopicPartition


def test_keep_records_at_or_above_each_partitions_committed_offset(spark: SparkSession) -> None:
    records = spark.createDataFrame(
        [("a", 0, 4), ("a", 0, 5), ("a", 1, 0), ("b", 0, 2), ("b", 0, 3)], "topic string, partition int, offset bigint"
    )
    keep = keep_condition({TopicPartition("a", 0): 5, TopicPartition("b", 0): 3})
    assert sorted(tuple(r) for r in records.where(keep).collect()) == [("a", 0, 5), ("a", 1, 0), ("b", 0, 3)]
    assert records.where(keep_condition({})).count() == 5
