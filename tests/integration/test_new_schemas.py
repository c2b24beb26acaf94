"""One pass per batch with the writer schemas the topics carried last time, and the second pass for
records whose schema is new to the job: rows, snapshots and offsets, and a crash between the passes."""

from __future__ import annotations

import json
import logging
import signal
import struct
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce, produce_keyed
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.runtime import faults
from tests.support.cli import run_cli
from tests.support.spark import snapshots
from tests.support.values import avro_config, avro_values

V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "test.icesink",
    "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "long"}, {"name": "op", "type": "string"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
PER_BATCH = 30


def reading(i: int, v: int, op: str = "c", note: str | None = None) -> dict[str, Any]:
    return {"id": i, "v": v, "op": op, **({"note": note} if note is not None else {})}


def second_batch_mixes_schemas(topic: str, bad: bool = False) -> None:
    """Batch 0: 30 v1 records (ids 0-29). Batch 1: ids 30-59, every other one v2 (with a note);
    with `bad`, ids 58 and 59 are replaced by a truncated v1 value and one with an unknown schema id."""
    produce(topic, avro_values(topic, V1, [reading(i, i) for i in range(PER_BATCH)]))
    ids = range(PER_BATCH, 2 * PER_BATCH - (2 if bad else 0))
    mixed = [
        avro_values(topic, V2, [reading(i, i, note=f"n{i}")])[0]
        if i % 2
        else avro_values(topic, V1, [reading(i, i)])[0]
        for i in ids
    ]
    if bad:
        v1 = avro_values(topic, V1, [reading(0, 0)])[0]
        mixed += [v1[:7], b"\x00" + struct.pack(">I", 987654321) + v1[5:]]
    produce(topic, mixed)


def test_a_new_writer_schema_mid_stream_gets_a_second_pass_in_the_same_snapshot(
    spark: SparkSession, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    topic = scenario.topic("readings.20240301")
    create_topics(topic, partitions=1)
    second_batch_mixes_schemas(topic, bad=True)

    caplog.set_level(logging.INFO, logger="icesink")
    # Spark's path (the one-pass job's own second job: test_direct_evolution.py).
    settings = {"kafka.max_offsets_per_trigger": PER_BATCH, "decode.direct_avro": False}
    Job(spark, scenario.config(**avro_config(scenario, **settings))).run()

    # Batch 1 ran with batch 0's schema and found the new ones (v2's, and the id the registry lacks).
    assert "batch 1: table" in caplog.text
    assert "15 record(s) with schemas new to the table or the job; decoding them in a second pass" in caplog.text
    table = scenario.table("readings")
    rows = {r.id: r for r in spark.sql(f"SELECT id, v, note FROM {table}").collect()}
    good = 2 * PER_BATCH - 2
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == good, "no record twice"
    assert sorted(rows) == list(range(good)), "no record lost"
    for i, r in rows.items():
        assert r.v == i
        assert r.note == (f"n{i}" if i >= PER_BATCH and i % 2 else None)
    snaps = snapshots(spark, table)
    assert len(snaps) == 2, "one snapshot per batch: both passes of batch 1 commit together"
    assert int(snaps[-1]["summary"]["added-records"]) == good - PER_BATCH
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
    # The bad record of each pass is a dead letter, once.
    letters = spark.sql(f"SELECT offset, stage, error_class FROM icesink.{scenario.namespace}.dead_letters").collect()
    assert sorted((r.offset, r.stage, r.error_class) for r in letters) == [
        (good, "decode", "AvroDecodeError"),
        (good + 1, "schema", "SchemaNotFound"),
    ]


def test_a_changelog_batch_with_a_new_schema_keeps_the_last_change_per_key(
    spark: SparkSession, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    topic = scenario.topic("meters.20240302")
    create_topics(topic, partitions=1)
    key = lambda i: json.dumps({"id": i}).encode()  # noqa: E731
    # Batch 0: inserts of keys 0-9. Batch 1: each key of 0-4 updated in v1, then again in v2;
    # key 5 updated in v2, then deleted in v1; key 6 deleted.
    inserts = avro_values(topic, V1, [reading(i, i) for i in range(10)])
    first = avro_values(topic, V1, [reading(i, 100 + i, "u") for i in range(5)])
    again = avro_values(topic, V2, [reading(i, 200 + i, "u", f"n{i}") for i in range(5)])
    five = avro_values(topic, V2, [reading(5, 105, "u", "n5")]) + avro_values(topic, V1, [reading(5, 5, "d")])
    six = avro_values(topic, V1, [reading(6, 6, "d")])
    batch1 = [*zip(range(5), first, strict=True), *zip(range(5), again, strict=True)]
    batch1 += [(5, five[0]), (5, five[1]), (6, six[0])]
    produce_keyed(topic, [(key(i), v, 0) for i, v in enumerate(inserts)])
    produce_keyed(topic, [(key(i), v, 0) for i, v in batch1])
    config = {
        "decode.key_format": "json",
        "decode.operation_column": "op",
        "tables.mode": "changelog",
        "kafka.max_offsets_per_trigger": len(inserts),
    }

    caplog.set_level(logging.INFO, logger="icesink")
    Job(spark, scenario.config(**avro_config(scenario, **config))).run()

    assert "decoding all of its records again" in caplog.text
    table = scenario.table("meters")
    rows = spark.sql(f"SELECT id, v, note FROM {table}").collect()
    assert len(rows) == len({r.id for r in rows}), "one row per key"
    got = {r.id: (r.v, r.note) for r in rows}
    want = {i: (200 + i, f"n{i}") for i in range(5)} | {i: (i, None) for i in (7, 8, 9)}
    assert got == want
    assert codec.decode(snapshots(spark, table)[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)


def test_json_batches_parse_with_the_tables_columns_and_a_second_pass_takes_what_they_lack(
    spark: SparkSession, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    topic = scenario.topic("orders.20240304")
    create_topics(topic, partitions=1)
    produce(topic, [{"id": i, "v": i} for i in range(10)])  # batch 0 creates the table: id, v
    batch1: list[Any] = [
        {"id": 10, "v": 10},
        {"id": 11, "v": 11, "note": "new key"},  # pending: a column to add
        "not json",  # bad in the first pass already
        {"id": 13, "v": "abc"},  # pending, then bad: a string does not fit v (bigint)
        {"id": 14, "v": 14, "gone": None},  # pending; null only: no column
        {"id": 15, "v": 15},
    ]
    produce(topic, batch1)

    caplog.set_level(logging.INFO, logger="icesink")
    Job(spark, scenario.config(**{"kafka.max_offsets_per_trigger": 10})).run()

    assert "batch 1: table" in caplog.text
    assert "3 record(s) with schemas new to the table or the job; decoding them in a second pass" in caplog.text
    table = scenario.table("orders")
    assert spark.table(table).columns == ["id", "v", "note"]
    rows = sorted((r.id, r.v, r.note) for r in spark.sql(f"SELECT * FROM {table}").collect())
    assert rows == [(i, i, None) for i in range(11)] + [(11, 11, "new key"), (14, 14, None), (15, 15, None)]
    snaps = snapshots(spark, table)
    assert len(snaps) == 2
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
    letters = spark.sql(f"SELECT offset, error_class FROM icesink.{scenario.namespace}.dead_letters").collect()
    assert sorted((r.offset, r.error_class) for r in letters) == [(12, "JsonParseError"), (13, "TypeMismatch")]


@pytest.mark.slow
def test_killed_during_the_second_pass_after_the_first_wrote_files(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("gauges.20240303")
    create_topics(topic, partitions=1)
    second_batch_mixes_schemas(topic)
    # Spark's path's second pass (the one-pass job takes a new writer schema in a second job of its
    # own: test_direct_evolution.py).
    settings = {"kafka.max_offsets_per_trigger": PER_BATCH, "decode.direct_avro": False}
    config = scenario.write_config(tmp_path / "job.yaml", **avro_config(scenario, **settings))
    table = scenario.table("gauges")

    crashed = run_cli(config, env={faults.ENV: "second-pass:1"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "decoding them in a second pass" in crashed.stderr
    assert len(snapshots(spark, table)) == 1, "batch 1's first pass wrote files; nothing of it was committed"
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == PER_BATCH

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    ids = sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())
    assert ids == list(range(2 * PER_BATCH)), "no loss, no duplicate"
    snaps = snapshots(spark, table)
    assert len(snaps) == 2
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
