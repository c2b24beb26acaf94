"""Which records a guessed pass left pending (icesink.batch.new_schemas.pending_records and the
decoders' `pending`): exactly those the guess does not cover, never a record that is plainly bad."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from icesink.batch.decode import KEY
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.new_schemas import pending_records
from icesink.batch.work import Planned
from tests.support.frames import kafka_records

ONE, TWO, THREE = (b"\x00\x00\x00\x00" + bytes([i]) for i in (1, 2, 3))


def test_avro_records_with_a_value_or_key_schema_not_given_are_pending(spark: SparkSession) -> None:
    rows = [
        (1, ONE + b"body", ONE + b"k"),  # both known
        (2, TWO + b"body", ONE + b"k"),  # a new value schema
        (3, ONE + b"body", THREE + b"k"),  # a new key schema
        (4, b"not framed", None),  # no schema at all: an error of its own, not pending
        (5, None, ONE + b"k"),  # a tombstone
    ]
    schema = "id int, value binary, key binary, headers array<struct<key:string,value:binary>>"
    records = spark.createDataFrame([(i, v, k, None) for i, v, k in rows], schema)
    registry: Any = None  # `pending` never asks it
    ctx: Any = SimpleNamespace(decoder=AvroDecoder(registry), key_decoder=AvroDecoder(registry, src=KEY))

    def ids(planned: Planned) -> list[int]:
        return sorted(r.id for r in records.where(pending_records(ctx, planned)).collect())

    assert ids(Planned([ONE], [ONE])) == [2, 3]
    assert ids(Planned([ONE, TWO], None)) == [], "a side the decoder looked at is never pending"
    assert ids(Planned([], [])) == [1, 2, 3, 5]


def test_json_records_the_tables_columns_do_not_cover_are_pending(spark: SparkSession) -> None:
    shape = StructType(
        [StructField("id", LongType()), StructField("name", StringType()), StructField("tags", ArrayType(LongType()))]
    )
    values = [
        '{"id": 1, "name": "a", "tags": [1]}',  # fits
        '{"id": 2}',  # fits: missing columns are nulls
        '{"id": 3, "extra": 1}',  # a key that is not a column
        '{"id": 4, "extra": null}',  # also (a second pass finds it makes no column)
        '{"id": 2.5}',  # a value its column type does not take
        '{"id": 6, "tags": ["x"]}',  # also, inside an array
        '{"id": 7, "name": 7}',  # a number read as a string column's text: fits
        "not json",  # bad, not pending
        "[1, 2]",  # bad: not an object
        None,  # a tombstone
        "",  # empty
    ]
    records = kafka_records(spark, values)
    ctx: Any = SimpleNamespace(decoder=JsonDecoder(spark), key_decoder=None)
    pending = records.where(pending_records(ctx, Planned(shape, None)))
    assert sorted(r.offset for r in pending.collect()) == [2, 3, 4, 5]
