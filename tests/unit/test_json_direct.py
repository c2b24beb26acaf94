"""The one-pass JSON decoder's pure parts: which tables it can fill, and the Arrow rows it makes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesink.batch.decode.json_direct import DirectColumn, DirectRows, direct_columns, json_object


def shape(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_only_tables_of_nullable_simple_columns_are_filled() -> None:
    simple = shape(
        StructField("id", LongType()),
        StructField("x", DoubleType()),
        StructField("s", StringType()),
        StructField("b", BooleanType()),
        StructField("tags", ArrayType(StringType())),
    )
    assert direct_columns(simple) == (
        DirectColumn("id", "long"),
        DirectColumn("x", "double"),
        DirectColumn("s", "string"),
        DirectColumn("b", "boolean"),
        DirectColumn("tags", "string", array=True),
    )
    for other in (
        StructField("ts", TimestampType()),
        StructField("d", DecimalType(10, 2)),
        StructField("i", IntegerType()),  # a created table's JSON integers are longs; an int column is someone else's
        StructField("nested", shape(StructField("a", LongType()))),
        StructField("id", LongType(), nullable=False),
        StructField("tags", ArrayType(StringType(), containsNull=False)),
        StructField("deep", ArrayType(ArrayType(LongType()))),
    ):
        assert direct_columns(shape(StructField("ok", LongType()), other)) is None, other
    assert direct_columns(shape()) is None


def test_rows_come_out_in_the_columns_arrow_types_with_nulls_for_missing_keys() -> None:
    columns = direct_columns(
        shape(StructField("id", LongType()), StructField("x", DoubleType()), StructField("tags", ArrayType(LongType())))
    )
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"id": 1, "x": 2, "tags": [1, null]}')
    assert rows.add(b'\x00\x00\x00\x00\x01{"x": 0.5}')  # framed by Confluent's JSONSerializer
    assert not rows.add(b'{"id": 1, "x": "2"}')
    assert rows.rows == 2
    batch = rows.take()
    assert batch is not None
    assert batch.schema == pa.schema([("id", pa.int64()), ("x", pa.float64()), ("tags", pa.list_(pa.int64()))])
    assert batch.to_pylist() == [{"id": 1, "x": 2.0, "tags": [1, None]}, {"id": None, "x": 0.5, "tags": None}]
    assert rows.take() is None, "taken rows are not taken again"


def test_a_declined_record_leaves_nothing_behind() -> None:
    columns = direct_columns(shape(StructField("a", LongType()), StructField("b", LongType())))
    assert columns is not None
    rows = DirectRows(columns)
    assert not rows.add(b'{"a": 1, "b": "x"}')  # a is fine, b is not: no half row
    assert rows.add(b'{"a": 2}')
    batch = rows.take()
    assert batch is not None
    assert batch.to_pylist() == [{"a": 2, "b": None}]


def test_a_string_arrow_refuses_fails_the_take_not_silently() -> None:
    columns = direct_columns(shape(StructField("s", StringType())))
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"s": "\\ud800"}')  # a lone surrogate: valid JSON, not valid UTF-8
    with pytest.raises((pa.ArrowException, UnicodeError)):
        rows.take()


def test_json_object_is_an_object_or_nothing() -> None:
    assert json_object(b'{"a": [1]}') == {"a": [1]}
    assert json_object(b"\x00\x00\x00\x00\x09{}") == {}
    for value in (None, b"", b"[]", b"1", b"null", b"{", b"\xff", b'{"a": 1}{"a": 2}'):
        assert json_object(value) is None, value
