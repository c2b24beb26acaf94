"""Avro through the real Schema Registry, produced by confluent-kafka's AvroSerializer, and the
dead-letter table: every consumed offset ends in exactly one place."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import struct
import uuid
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession

from dev.kit.endpoints import REGISTRY_URL
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import Scenario
from icesink.errors import RegistryUnavailableError
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from tests.support.spark import snapshots
from tests.support.values import avro_config, avro_values, serializer

V1 = {
    "type": "record",
    "name": "Payment",
    "namespace": "test.icesink",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "payer", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "rate", "type": "float"},
    ],
}
# v2 adds an optional top-level field and an optional nested record: a backward-compatible change.
V2 = {
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "card",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Card",
                    "fields": [{"name": "brand", "type": "string"}, {"name": "last4", "type": "int"}],
                },
            ],
            "default": None,
        },
    ],
}


def payment(i: int, v2: bool) -> dict[str, Any]:
    p: dict[str, Any] = {
        "id": i,
        "payer": f"p{i}",
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
        "day": dt.date(2024, 1, 2) + dt.timedelta(days=i % 3),
        "amount": Decimal(f"{i}.{i % 100:02d}"),
        "ref": str(uuid.UUID(int=i)),
        "rate": 0.5,
    }
    if v2:
        p["note"] = f"note{i}" if i % 2 else None
        p["card"] = {"brand": "visa", "last4": 1000 + i} if i % 3 else None
    return p


def run_job(spark: SparkSession, scenario: Scenario, **overrides: Any) -> Job:
    job = Job(spark, scenario.config(**avro_config(scenario, **overrides)))
    job.run()
    return job


def test_two_schema_versions_interleaved_in_one_batch_with_logical_types(
    spark: SparkSession, scenario: Scenario
) -> None:
    topic = scenario.topic("payments.20240102")
    create_topics(topic, partitions=1)
    v1 = avro_values(topic, V1, [payment(i, False) for i in range(0, 40)])
    v2 = avro_values(topic, V2, [payment(i, True) for i in range(40, 80)])
    interleaved = [v for pair in zip(v1, v2, strict=True) for v in pair]
    produce(topic, interleaved)

    run_job(spark, scenario)

    table = scenario.table("payments")
    types = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert types == {
        "id": "bigint", "payer": "string", "at": "timestamp", "day": "date", "amount": "decimal(10,2)",
        "ref": "string", "rate": "float", "note": "string", "card": "struct<brand:string,last4:int>",
    }  # fmt: skip
    rows = {r.id: r for r in spark.sql(f"SELECT * FROM {table}").collect()}
    assert sorted(rows) == list(range(80))
    for i, r in rows.items():
        want = payment(i, i >= 40)
        assert r.payer == want["payer"]
        assert r.at == want["at"].astimezone(dt.UTC).replace(tzinfo=None)  # session time zone is UTC
        assert r.day == want["day"]
        assert r.amount == want["amount"]
        assert r.ref == want["ref"]
        assert r.note == want.get("note")
        card = want.get("card")
        assert (r.card.asDict() if r.card else None) == card
    assert not spark.catalog.tableExists(f"icesink.{scenario.namespace}.dead_letters"), "no record was bad"


def test_poison_records_are_dead_letters_and_every_offset_lands_once(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("orders.20240103")
    create_topics(topic, partitions=1)
    good = avro_values(topic, V1, [payment(i, False) for i in range(6)])
    schema_id = struct.unpack(">I", good[0][1:5])[0]
    stream: list[tuple[bytes | None, str | None]] = [
        (good[0], None),
        (b"\x01" + good[1][1:], "header"),  # wrong magic byte
        (good[1], None),
        (good[2][:9], "decode"),  # truncated body
        (b"\x00" + struct.pack(">I", 987654321) + good[3][5:], "schema"),  # id unknown to the registry
        (good[2], None),
        (good[3], None),
        (None, "decode"),  # a tombstone on an append-only table
        (b"ab", "header"),  # shorter than the header
        (good[4], None),
        (good[5], None),
    ]
    produce(topic, [v for v, _ in stream])

    run_job(spark, scenario)

    table, dlq = scenario.table("orders"), f"icesink.{scenario.namespace}.dead_letters"
    in_table = sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())
    assert in_table == list(range(6)), "the good records, each once, none as nulls"
    letters = spark.sql(f"SELECT * FROM {dlq} ORDER BY offset").collect()
    expected_bad = {off: stage for off, (_, stage) in enumerate(stream) if stage}
    assert {r.offset: r.stage for r in letters} == expected_bad
    for r in letters:
        assert r.topic == topic
        assert r.partition == 0
        assert r.target_table == f"{scenario.namespace}.{scenario.prefix}_orders"
        assert r.value == stream[r.offset][0], "the raw value is kept byte for byte"
        assert r.error_message
    by_offset = {r.offset: r for r in letters}
    assert "987654321" in by_offset[4].error_message
    assert by_offset[4].error_class == "SchemaNotFound"
    assert by_offset[3].error_class == "AvroDecodeError"
    assert str(schema_id) in by_offset[3].error_message
    assert by_offset[1].error_class == "NotConfluentFramed"
    assert by_offset[7].error_class == "NullValue"
    # Both tables carry the offsets of the batch, in the same batch.
    for t in (table, dlq):
        assert codec.decode(snapshots(spark, t)[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)

    shutil.rmtree(scenario.checkpoint)
    run_job(spark, scenario)  # a full replay from earliest adds nothing anywhere
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 6
    assert spark.sql(f"SELECT count(*) FROM {dlq}").first()[0] == len(expected_bad)


def test_unreachable_registry_fails_the_batch_then_it_resumes(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("refunds.20240104")
    create_topics(topic, partitions=1)
    produce(topic, avro_values(topic, V1, [payment(i, False) for i in range(10)]))

    down = Job(
        spark,
        scenario.config(
            **{
                "decode.format": "avro",
                "decode.registry": {"url": "http://127.0.0.1:9", "attempts": 2},
                "job.retry_unreachable_for_s": 0,  # fail at once (test_faults waits an outage out)
            }
        ),
    )
    with pytest.raises(Exception, match=r"unavailable after 2 attempts"):
        down.run()
    assert isinstance(down.handler.failure, RegistryUnavailableError)
    assert "http://127.0.0.1:9 unavailable after 2 attempts" in str(down.handler.failure)
    assert not spark.catalog.tableExists(scenario.table("refunds")), "nothing committed, not even a dead letter"
    assert not spark.catalog.tableExists(f"icesink.{scenario.namespace}.dead_letters")

    run_job(spark, scenario)  # the registry is back (the real one): the same batch lands
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {scenario.table('refunds')}").collect()) == list(range(10))


def test_avro_keys_are_decoded_into_the_key_column(spark: SparkSession, scenario: Scenario) -> None:
    from confluent_kafka import Producer

    from dev.kit.endpoints import KAFKA

    topic = scenario.topic("accounts")
    create_topics(topic, partitions=1)
    key_schema = {"type": "record", "name": "AccountKey", "fields": [{"name": "account_id", "type": "long"}]}
    key_ser = serializer(key_schema)
    ctx = SerializationContext(topic, MessageField.KEY)
    producer = Producer({"bootstrap.servers": KAFKA})
    for i in range(4):
        producer.produce(topic, key=key_ser({"account_id": 100 + i}, ctx), value=json.dumps({"balance": i}).encode())
    producer.produce(topic, key=b"plain", value=json.dumps({"balance": 9}).encode())  # a key that is not framed
    producer.produce(topic, key=None, value=json.dumps({"balance": 10}).encode())  # no key at all: fine
    assert producer.flush(30) == 0

    Job(spark, scenario.config(**{"decode.key_format": "avro", "decode.registry": {"url": REGISTRY_URL}})).run()

    rows = spark.sql(
        f"SELECT _key.account_id AS k, balance FROM {scenario.table('accounts')} ORDER BY balance"
    ).collect()
    assert [(r.k, r.balance) for r in rows] == [(100, 0), (101, 1), (102, 2), (103, 3), (None, 10)]
    letters = spark.sql(f"SELECT offset, stage, key FROM icesink.{scenario.namespace}.dead_letters").collect()
    assert [(r.offset, r.stage, bytes(r.key)) for r in letters] == [(4, "key header", b"plain")]


def test_schema_ids_in_record_headers(spark: SparkSession, scenario: Scenario) -> None:
    import uuid as uuidlib

    from confluent_kafka import Producer

    from dev.kit.endpoints import KAFKA

    topic = scenario.topic("transfers")
    create_topics(topic, partitions=1)
    framed = avro_values(topic, V1, [payment(i, False) for i in range(4)])
    id_header = framed[0][:5]  # 0x00 + the 4-byte id, as the header carries it; the value is the bare body
    guid = str(uuidlib.UUID(int=42))
    producer = Producer({"bootstrap.servers": KAFKA})
    producer.produce(topic, value=framed[0])  # the usual frame
    producer.produce(topic, value=framed[1][5:], headers=[("__value_schema_id", id_header)])
    producer.produce(topic, value=framed[2][5:], headers=[("__value_schema_id", b"\x01" + uuidlib.UUID(guid).bytes)])
    # Headers, none naming a schema (a tracing header): the frame names it. This failed the whole
    # batch once (an index into the empty list of schema-id headers, under ANSI mode).
    producer.produce(topic, value=framed[3], headers=[("traceparent", b"00-4bf92f3577b34da6-00f067aa0ba902b7-01")])
    assert producer.flush(30) == 0

    run_job(spark, scenario)

    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {scenario.table('transfers')}").collect()) == [0, 1, 3]
    letters = spark.sql(f"SELECT offset, error_class, error_message FROM icesink.{scenario.namespace}.dead_letters")
    # The local registry (Apicurio) serves no GUIDs: that record's schema is unknown to it.
    [letter] = letters.collect()
    assert letter.offset == 2
    assert letter.error_class == "SchemaNotFound"
    assert guid in letter.error_message
