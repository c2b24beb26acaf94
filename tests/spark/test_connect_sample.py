"""A sample's Connect schemas found by the driver (JsonDecoder.connect_rows_of, on the values
librdkafka read: batch/direct_json.py) against Spark's aggregate over the same records
(`connect_rows`): the same row, the same verdict on whether the records are Connect JSON; a
record Spark may read otherwise leaves the verdict to Spark."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.decode.json import UNSURE, JsonDecoder
from icesink.schema.connect_sample import sample_schemas
from tests.support import debezium as ce
from tests.support.frames import kafka_records

PREFIX = "shop.public.items"
ROW = [ce.field("id", "int64", optional=False), ce.field("name", "string"), ce.decimal_field("price", 10, 2)]
WIDER = [*ROW, ce.field("seen", "int64", name="io.debezium.time.MicroTimestamp", version=1)]
SPEC = EnvelopeSpec("op", ("lsn",))


def event(row: list[dict[str, Any]], key: int, **spacing: Any) -> bytes:
    image = {"id": key, "name": f"n{key}", "price": ce.decimal_value("1.25", 2), "seen": 1_700_000_000_000_000}
    image = {f["field"]: image[f["field"]] for f in row}
    payload = {"before": None, "after": image, "source": {"lsn": key}, "op": "c", "ts_ms": key}
    return ce.wrapped(ce.envelope_schema(PREFIX, row), payload, **spacing)


def framed(value: bytes) -> bytes:
    return b"\x00\x00\x00\x00\x07" + value  # Confluent's JSONSerializer: magic byte, schema id


SAMPLES: dict[str, list[bytes | None]] = {
    "one schema, tombstones": [event(ROW, 1), None, event(ROW, 2), None],
    "two schemas, spaced and framed": [event(ROW, 1), event(WIDER, 2, spaced=True), framed(event(WIDER, 3))],
    "a record without a schema": [event(ROW, 1), b'{"id": 2, "name": "x"}'],
    "a schema that is a string": [event(ROW, 1), b'{"schema": "items", "payload": {}}'],
    "a schema without a type": [b'{"schema": {"fields": []}, "payload": {}}'],
    "plain JSON only": [b'{"id": 1}', b'{"id": 2}'],
    "a schema Spark's path does not read": [ce.wrapped({"type": "string", "optional": False}, "x")],
    "JSON that is not an object": [b"[1, 2]", b'"text"'],
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_the_drivers_reading_of_a_sample_is_sparks(spark: SparkSession, name: str) -> None:
    values = SAMPLES[name]
    by_spark, here = JsonDecoder(spark, SPEC), JsonDecoder(spark, SPEC)
    expected = by_spark.connect_rows(kafka_records(spark, values))
    assert here.connect_rows_of(values) == expected
    assert here.connect == by_spark.connect, "the same verdict: Connect JSON, not, or not known"


def test_the_rows_of_a_sample_with_two_schemas_are_merged(spark: SparkSession) -> None:
    row = JsonDecoder(spark, SPEC).connect_rows_of(SAMPLES["two schemas, spaced and framed"])
    assert not isinstance(row, type(UNSURE))
    assert row is not None
    assert row.simpleString() == (
        "struct<id:bigint,name:string,price:decimal(10,2),op:string,_source_lsn:bigint,seen:timestamp_ntz>"
    ), "the second schema's new column after the first's"


@pytest.mark.parametrize(
    "value",
    [
        b'{"schema": {"type": "struct", "fields": []}, "payload": {}} trailing',
        b'{"schema": {"type": "struct", "fields": []}, "payload": {"x": NaN}}',
        b'{"schema": {"type": "struct"}, "schema": {"type": "string"}, "payload": {}}',
        b'{"schema": {"type": "struct", "fields": []}, "payload": "\xff"}',
        b"",
        b'{"schema": "{\\"type\\": \\"struct\\", \\"fields\\": []}", "payload": {}}',
        b'{"schema": {"type": "struct", "fields": [], "parameters": {"scale": 1e400}}, "payload": {}}',
        b'{"schema": {"type": "struct", "fields": []}, "payload": {"n": 1' + b"0" * 1000 + b"}}",
        b'{"schema": {"type": "struct", "fields": []}, "payload": ' + b"[" * 1001 + b"]" * 1001 + b"}",
    ],
    ids=[
        "trailing text",
        "NaN",
        "a duplicate key",
        "not UTF-8",
        "empty",
        "a schema in a string",
        "a float past double",
        "a number past Jackson's length",
        "nested past Jackson's depth",
    ],
)
def test_a_record_spark_may_read_otherwise_leaves_the_verdict_to_spark(spark: SparkSession, value: bytes) -> None:
    decoder = JsonDecoder(spark, SPEC)
    assert decoder.connect_rows_of([event(ROW, 1), value]) is UNSURE
    assert decoder.connect is None, "nothing learnt"


def test_the_same_schema_in_another_key_order_is_one_schema(spark: SparkSession) -> None:
    schema = ce.envelope_schema(PREFIX, ROW)
    reordered = json.dumps({"payload": {"op": "c"}, "schema": dict(reversed(list(schema.items())))}).encode()
    found = sample_schemas([event(ROW, 1), reordered])
    assert found is not None
    assert (len(found[0]), found[1]) == (1, 0)
