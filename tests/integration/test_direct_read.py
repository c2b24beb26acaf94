"""The one-pass job's own Kafka reads (kafka/reader.py, `kafka.direct_read`): the records of a
batch's ranges exactly as Spark's Kafka source gives them, with read_committed."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime.timings import BatchTimings
from tests.support.jobs import timed_run
from tests.support.spark import table_offsets

pytestmark = [pytest.mark.slow]


def test_aborted_transactions_are_left_out_as_sparks_source_leaves_them_out(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture, every_core: None
) -> None:
    topic = scenario.topic("txn")
    create_topics(topic, partitions=1)  # one partition: the two tasks each read a piece of it
    producer = Producer({"bootstrap.servers": KAFKA, "transactional.id": f"icesink-test-{scenario.prefix}"})
    producer.init_transactions(30)

    def transaction(ids: Iterable[int], commit: bool) -> None:
        producer.begin_transaction()
        for i in ids:
            producer.produce(topic, json.dumps({"id": i, "v": f"x{i}"}).encode())
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    transaction(range(0, 6), commit=True)
    transaction(range(100, 104), commit=False)
    produce(topic, [{"id": i, "v": f"x{i}"} for i in range(6, 9)])  # no transaction
    transaction(range(9, 12), commit=True)
    transaction(range(200, 203), commit=False)  # the batch's last offsets: aborted records and their marker

    def run(side: str, direct_read: bool) -> list[BatchTimings]:
        settings: dict[str, Any] = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "kafka.direct_read": direct_read,
        }
        return timed_run(spark, scenario.config(**settings))

    with caplog.at_level(logging.INFO, logger="icesink.batch.direct"):
        assert ["direct" in t.steps for t in run("librdkafka", True)] == [True]
    assert "with librdkafka in 2 task(s)" in caplog.text
    assert "could not read Kafka with librdkafka" not in caplog.text
    assert ["direct" in t.steps for t in run("spark", False)] == [True]

    def rows(side: str) -> list[tuple[int, str]]:
        table = f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_txn"
        spark.sql(f"REFRESH TABLE {table}")
        return sorted((r.id, r.v) for r in spark.table(table).collect())

    assert rows("librdkafka") == [(i, f"x{i}") for i in range(12)], "every committed record once, no aborted one"
    assert rows("librdkafka") == rows("spark")
    for side in ("librdkafka", "spark"):
        table = f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_txn"
        assert table_offsets(spark, table) == end_offsets(topic), "the offsets reach past the last marker"


def test_threads_reading_ranges_at_once_each_get_their_own_records(scenario: Scenario) -> None:
    """The driver reads new tables' samples from several threads (job.table_parallelism): each
    gets exactly its range's records (a consumer shared between threads had one thread's assign
    replace another's, whose range then stalled and failed), and each thread keeps a consumer of
    its own for the next read."""
    from concurrent.futures import ThreadPoolExecutor

    from icesink.kafka import reader
    from icesink.model import PartitionRange, TopicPartition

    topics = [scenario.topic(f"sample{k}") for k in range(24)]
    create_topics(*topics, partitions=1)
    for k, topic in enumerate(topics):
        produce(topic, [{"id": k * 100 + i} for i in range(40)])
    settings = reader.settings(scenario.config())
    assert settings is not None

    def read(k: int) -> list[int]:
        ranges = [PartitionRange(TopicPartition(topics[k], 0), 5, 34, 30)]
        values = [v for b in reader.RangeReader(settings).batches(ranges) for v in b.column("value").to_pylist()]
        return [json.loads(v)["id"] for v in values]

    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(read, range(24)))
    assert found == [[k * 100 + i for i in range(5, 35)] for k in range(24)]
    assert len({key[0] for key in reader._CONSUMERS}) > 1, "a consumer per thread"
