from __future__ import annotations

import json
from typing import Any

from icesink.batch.plan import plan_table
from icesink.batch.sources import own_ranges
from icesink.config import parse_config
from icesink.job.query import default_max_per_trigger
from icesink.kafka.source import range_options, stream_options
from icesink.model import PartitionRange, TableRef
from icesink.model import TopicPartition as TP

RAW = {
    "job": {"checkpoint_location": "/tmp/cp"},
    "kafka": {
        "bootstrap_servers": "k:9092",
        "subscribe_pattern": "db\\..*",
        "max_offsets_per_trigger": 1000,
        "options": {"kafka.security.protocol": "SSL", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"},
    },
    "catalog": {"uri": "http://c"},
    "tables": {"namespace": "ns"},
}


def r(topic: str, p: int, first: int, last: int) -> PartitionRange:
    return PartitionRange(TP(topic, p), first, last, last - first + 1)


def test_a_read_of_ranges_reads_exactly_them_with_the_streams_connection_settings() -> None:
    opts = range_options(parse_config(RAW, environ={}), [r("db.a", 0, 5, 9), r("db.a", 2, 0, 0), r("db.b", 1, 7, 8)])
    assert json.loads(opts["assign"]) == {"db.a": [0, 2], "db.b": [1]}
    assert json.loads(opts["startingOffsets"]) == {"db.a": {"0": 5, "2": 0}, "db.b": {"1": 7}}
    # Ending offsets are exclusive: one past each range's last offset.
    assert json.loads(opts["endingOffsets"]) == {"db.a": {"0": 10, "2": 1}, "db.b": {"1": 9}}
    assert opts["kafka.bootstrap.servers"] == "k:9092"
    assert opts["kafka.security.protocol"] == "SSL"
    assert opts["includeHeaders"] == "true"
    # What only a stream understands stays out (a batch read refuses some of it).
    for stream_only in ("subscribePattern", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        assert stream_only not in opts


def test_the_stream_reads_the_pattern_and_the_jobs_own_options_win() -> None:
    opts = stream_options(parse_config(RAW, environ={}), "earliest")
    assert opts["subscribePattern"] == "db\\..*"
    assert opts["startingOffsets"] == "earliest"
    assert opts["maxOffsetsPerTrigger"] == "1000"
    assert opts["minOffsetsPerTrigger"] == "10"
    assert opts["kafka.security.protocol"] == "SSL"


def test_without_a_cap_of_its_own_a_job_of_changes_reads_what_the_one_pass_tasks_hold() -> None:
    kafka = {k: v for k, v in RAW["kafka"].items() if k != "max_offsets_per_trigger"}
    unset: dict[str, Any] = {**RAW, "kafka": {**kafka, "options": {"kafka.security.protocol": "SSL"}}}
    changes = {**unset, "tables": {"namespace": "ns", "mode": "changelog", "key_columns": ["id"]}}
    one_table = {**unset, "tables": {"namespace": "ns", "per_table": {"orders": {"mode": "upsert"}}}}
    # 250,000 changes a core: a Debezium snapshot's first batch is not the whole topic.
    for raw in (changes, one_table):
        cap = default_max_per_trigger(parse_config(raw, environ={}), parallelism=2)
        assert cap == 500_000
        assert stream_options(parse_config(raw, environ={}), "earliest", cap)["maxOffsetsPerTrigger"] == "500000"
    # Append tables only: no cap (one batch of a backlog is faster than several).
    assert default_max_per_trigger(parse_config(unset, environ={}), parallelism=2) is None
    assert "maxOffsetsPerTrigger" not in stream_options(parse_config(unset, environ={}), "earliest")
    # The job's own cap wins, in its key or as Spark's option.
    capped = {**changes, "kafka": RAW["kafka"]}
    assert default_max_per_trigger(parse_config(capped, environ={}), parallelism=2) is None
    assert stream_options(parse_config(capped, environ={}), "earliest", 7)["maxOffsetsPerTrigger"] == "1000"
    spark_option = parse_config({**changes, "kafka": {**kafka, "options": {"maxOffsetsPerTrigger": "30"}}}, environ={})
    assert default_max_per_trigger(spark_option, parallelism=2) is None
    assert stream_options(spark_option, "earliest", None)["maxOffsetsPerTrigger"] == "30"


def test_a_tables_own_ranges_start_where_it_holds_nothing_yet() -> None:
    ranges = [r("db.a", 0, 0, 9), r("db.a", 1, 0, 9), r("db.a", 2, 0, 9)]
    plan = plan_table(TableRef("ns", "a"), ranges, {TP("db.a", 0): 4, TP("db.a", 1): 10})
    # Partition 0 from its committed offset, partition 1 held entirely, partition 2 all of it.
    assert own_ranges(plan, ranges) == [r("db.a", 0, 4, 9), r("db.a", 2, 0, 9)]
