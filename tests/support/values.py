"""Record values and job settings shared by several test modules: Avro values, CDC streams."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession

from dev.kit.changes import Change
from dev.kit.endpoints import REGISTRY_URL
from dev.kit.kafka import SERDE_CONF, registry_client
from dev.kit.scenario import Scenario


def serializer(schema: dict[str, Any]) -> AvroSerializer:
    return AvroSerializer(registry_client(), json.dumps(schema), conf=SERDE_CONF)


def avro_values(topic: str, schema: dict[str, Any], items: list[dict[str, Any]]) -> list[bytes]:
    """Confluent-framed Avro values of `items`, the schema registered as {topic}-value."""
    ser = serializer(schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser(item, ctx) for item in items]


def avro_keys(topic: str, schema: dict[str, Any], items: list[dict[str, Any]]) -> list[bytes]:
    """Confluent-framed Avro keys of `items`, the schema registered as {topic}-key."""
    ser = serializer(schema)
    ctx = SerializationContext(topic, MessageField.KEY)
    return [ser(item, ctx) for item in items]


def avro_config(scenario: Scenario, **overrides: Any) -> dict[str, Any]:
    return {"decode.format": "avro", "decode.registry": {"url": REGISTRY_URL}, **overrides}


def cdc_config(**more: Any) -> dict[str, Any]:
    """Changelog tables fed by JSON keys and values whose `op` column says insert, update or delete."""
    return {
        "decode.key_format": "json",
        "decode.operation_column": "op",
        "tables.mode": "changelog",
        **more,
    }


def maintained_cdc_config() -> dict[str, Any]:
    """`cdc_config` at a 1 s trigger, 100 records a batch, the job maintaining its changelog
    tables once they have 3 live delete files, with no pause between runs (nor rest after one)."""
    return cdc_config(**{
        "kafka.max_offsets_per_trigger": 100,
        "job.trigger.mode": "processing-time",
        "job.trigger.interval": "1 second",
        "maintenance.tables": "changes",
        "maintenance.delete_files": 3,
        "maintenance.min_interval_s": 0,
        "maintenance.max_share": 1,
    })  # fmt: skip


def records(changes: list[Change]) -> list[tuple[bytes | None, bytes | None, int]]:
    return [(c.kafka_key(), c.kafka_value(), c.partition) for c in changes]


def table_state(spark: SparkSession, table: str) -> tuple[dict[int, int], int]:
    """id -> v of the table's rows, and the row count (which exceeds the ids when a key is doubled)."""
    rows = spark.sql(f"SELECT id, v FROM {table}").collect()
    return {r.id: r.v for r in rows}, len(rows)
