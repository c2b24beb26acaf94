"""Avro values and keys whose schema ids are in `__value_schema_id` and `__key_schema_id` headers
(newer Confluent serializers: bare bodies), beside framed ones, written in one pass
(tasks/header_frames.py), through librdkafka and through Spark's Kafka source: equal to Spark's
path's table and dead letters; a kill after the tasks wrote a batch's files replays without a
duplicate or a loss."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics, end_offsets
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.jobs import one_pass, timed_run
from tests.support.spark import dead_letters, snapshots, table_offsets
from tests.support.values import avro_config, avro_keys, avro_values

pytestmark = [pytest.mark.slow]

HEADER, KEY_HEADER = "__value_schema_id", "__key_schema_id"
KEY: dict[str, Any] = {"type": "record", "name": "PaymentKey", "fields": [{"name": "id", "type": "long"}]}
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    ],
}


def payment(i: int) -> dict[str, Any]:
    return {"id": i, "note": None if i % 4 == 0 else f"n{i}", "amount": Decimal(i * 7) / 100}


def send(topic: str, first: int, n: int) -> list[int]:
    """Payments `first`.. in three ways: framed; bare bodies, the ids in headers (the key's in
    every other one); framed beside a header of another name. Then a bare body its header names
    that does not decode, and a bare body behind a header of neither shape (no schema named).
    Returns the ids sent that decode."""
    ids = range(first, first + n)
    framed = avro_values(topic, SCHEMA, [payment(i) for i in ids])
    keys = avro_keys(topic, KEY, [{"id": i} for i in ids])
    producer = Producer({"bootstrap.servers": KAFKA, "enable.idempotence": True})
    for k, (key, value) in enumerate(zip(keys, framed, strict=True)):
        if k % 3 == 0:
            producer.produce(topic, key=key, value=value, partition=k % 2)
        elif k % 3 == 1:
            named = [(HEADER, value[:5])] + ([(KEY_HEADER, key[:5])] if k % 2 else [])
            bare_key = key[5:] if k % 2 else key
            producer.produce(topic, key=bare_key, value=value[5:], headers=named, partition=k % 2)
        else:
            headers = [("traceparent", b"00-4bf92f35-01")]
            producer.produce(topic, key=key, value=value, headers=headers, partition=k % 2)
    producer.produce(topic, key=keys[0], value=framed[0][5:-2], headers=[(HEADER, framed[0][:5])], partition=0)
    producer.produce(topic, key=keys[1], value=framed[1][5:], headers=[(HEADER, b"\x00\x00\x01")], partition=1)
    assert producer.flush(30) == 0
    return list(range(first, first + n))


@pytest.mark.faults
def test_schema_ids_in_headers_are_written_in_one_pass_as_sparks_path_writes_them(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("payments")
    create_topics(topic, partitions=2)
    sent = send(topic, 0, 30)
    sides = {"direct": True, "spark": False}

    def settings(side: str, **overrides: Any) -> dict[str, Any]:
        return avro_config(
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "decode.key_format": "avro",
                **overrides,
            },
        )

    def run(side: str, **overrides: Any) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**settings(side, **overrides)))

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_payments" for side in sides}
    assert one_pass(run("direct")) == [(True, [])], "batch 0, read by librdkafka, in one pass"
    assert [("direct" in t.steps) for t in run("spark")] == [False]

    # Batch 1: killed after a task wrote its files, before any commit; the replay, read through
    # Spark's Kafka source this time, writes it once.
    sent += send(topic, 30, 20)
    config = scenario.write_config(tmp_path / "direct.yaml", **settings("direct"))
    crashed = run_cli(config, env={faults.ENV: "executor-write:1"})
    assert crashed.returncode == 1, crashed.stderr[-3000:]
    assert "in one pass failed" in crashed.stderr
    assert len(snapshots(spark, tables["direct"])) == 1, "only batch 0 was committed"
    assert one_pass(run("direct", **{"kafka.direct_read": False})) == [(True, [])], "the replay in one pass"
    assert [("direct" in t.steps) for t in run("spark")] == [False]

    rows = {}
    for side, table in tables.items():
        spark.sql(f"REFRESH TABLE {table}")
        rows[side] = sorted(tuple(r) for r in spark.table(table).collect())
        assert sorted(r[0] for r in rows[side]) == sent, "each record once"
        assert table_offsets(spark, table) == end_offsets(topic)
    assert rows["direct"] == rows["spark"]
    assert [(i, note, amount, key.id) for i, note, amount, key in rows["direct"][:3]] == [
        (0, None, Decimal("0.00"), 0), (1, "n1", Decimal("0.07"), 1), (2, "n2", Decimal("0.14"), 2)
    ]  # fmt: skip
    letters = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in sides}
    assert letters["direct"] == letters["spark"]
    # Per batch, in partition 0 the bare body that does not decode, in 1 the one no header names.
    assert [(p, stage, error) for _, p, _, _, _, stage, error, _ in letters["direct"]] == [
        (0, "decode", "AvroDecodeError")
    ] * 2 + [(1, "header", "NotConfluentFramed")] * 2
