"""The batch's offset ranges read from Spark's Kafka source (batch/ranges.py reads Spark internals
through py4j): pinned here, so a Spark upgrade that plans Kafka reads differently fails loudly."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import Scenario
from icesink.batch.ranges import input_ranges
from icesink.errors import UnsupportedSparkError
from icesink.model import PartitionRange


def test_ranges_are_the_kafka_sources_planned_ranges_even_when_split(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("ticks")
    create_topics(topic, partitions=3)
    produce(topic, [{"i": i} for i in range(90)])
    seen: list[tuple[list[PartitionRange], set[tuple[int, int, int]]]] = []

    def handle(batch: DataFrame, batch_id: int) -> None:
        scanned = batch.groupBy("partition").agg(F.min("offset").alias("lo"), F.count("*").alias("n")).collect()
        seen.append((input_ranges(batch), {(r.partition, r.lo, r.n) for r in scanned}))

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minPartitions", 7)  # splits topic-partitions into several input partitions
        .load()
    )
    query = stream.writeStream.foreachBatch(handle).trigger(availableNow=True)
    query.option("checkpointLocation", str(scenario.checkpoint)).start().awaitTermination()

    [(ranges, scanned)] = seen
    assert {r.tp: r.last_offset + 1 for r in ranges} == {tp: end for tp, end in end_offsets(topic).items() if end}
    assert {(r.tp.partition, r.first_offset, r.records) for r in ranges} == scanned


def test_a_batch_not_read_from_kafka_fails_loudly_and_an_empty_one_has_no_ranges(spark: SparkSession) -> None:
    with pytest.raises(UnsupportedSparkError, match="offset ranges from Spark's Kafka source"):
        input_ranges(spark.range(5))
    assert input_ranges(spark.range(0)) == []
    kafka_schema = "key binary, value binary, topic string, partition int, offset bigint"
    assert input_ranges(spark.createDataFrame([], kafka_schema)) == [], "an empty local relation"
    with pytest.raises(UnsupportedSparkError):
        input_ranges(spark.createDataFrame([(b"k", b"v", "t", 0, 0)], kafka_schema))
