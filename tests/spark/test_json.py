"""JSON values -> rows, plain and with Kafka Connect schemas (icesink.batch.decode.json)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ROW
from icesink.batch.decode.json import JsonDecoder
from tests.support import debezium as ce
from tests.support.frames import kafka_records


def decoded(parsed: DataFrame) -> list[tuple[Any, ...]]:
    """(offset, row as a dict, error class) per record, in offset order."""
    rows = parsed.orderBy("offset").collect()
    return [
        (
            r.offset,
            None if r[ROW] is None else r[ROW].asDict(recursive=True),
            None if r[ERROR] is None else r[ERROR].error_class,
        )
        for r in rows
    ]


def test_plain_json_with_the_tables_types_and_every_kind_of_bad_value(spark: SparkSession) -> None:
    values = ['{"id": 1, "name": "a"}', '{"id": 2}', "not json {", "[1, 2]", '{"id": "x"}', "", None]
    inspected = JsonDecoder(spark).inspect(kafka_records(spark, values))
    assert sorted(inspected.schema.fieldNames()) == ["id", "name"]
    target = StructType([StructField("id", LongType()), StructField("name", StringType())])
    got = decoded(inspected.parse(target))
    assert [(o, e) for o, _, e in got] == [
        (0, None),
        (1, None),
        (2, "JsonParseError"),
        (3, "JsonTypeError"),
        (4, "TypeMismatch"),
        (5, "EmptyValue"),
        (6, "NullValue"),
    ]
    # ROW holds the table's columns (and the parse's corrupt-record column, which writes ignore).
    good = [{c: row[c] for c in target.fieldNames()} for _, row, e in got if e is None]
    assert good == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]


def test_connect_schemas_decide_the_types_and_plain_records_are_inferred(spark: SparkSession) -> None:
    schema = ce.struct("shop.Value", [ce.field("id", "int32", optional=False), ce.decimal_field("amount", 6, 2)])
    values = [
        ce.wrapped(schema, {"id": 1, "amount": ce.decimal_value("1234.50", 2)}),
        ce.wrapped(schema, {"id": 2, "amount": ce.decimal_value("123456.78", 2)}),  # over precision 6
        ce.wrapped(schema, {"id": "two", "amount": None}),
        b'{"id": 4}',  # no Connect schema: inferred like any plain JSON
    ]
    inspected = JsonDecoder(spark).inspect(kafka_records(spark, values))
    assert inspected.schema.simpleString() == "struct<id:bigint,amount:decimal(6,2)>"
    got = decoded(inspected.parse(inspected.schema))
    assert [(o, e) for o, _, e in got] == [(0, None), (1, "ConversionFailed"), (2, "TypeMismatch"), (3, None)]
    assert [row for _, row, e in got if e is None] == [
        {"id": 1, "amount": Decimal("1234.50")},
        {"id": 4, "amount": None},
    ]
