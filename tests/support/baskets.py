"""A writer schema of arrays and maps at every depth (of primitives, logical types and records,
a map behind a union with null, a named type referred to by name), its records, and the table
Spark's path makes of them: for the tests of the one-pass Avro decoder's nested values."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import fastavro
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from icesink.kafka import wire

LINE = {
    "type": "record",
    "name": "Line",
    "fields": [
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
BASKET: dict[str, Any] = {
    "type": "record",
    "name": "Basket",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "lines", "type": {"type": "array", "items": LINE}},
        {"name": "scores", "type": ["null", {"type": "map", "values": {"type": "array", "items": "double"}}]},
        {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [
                    {"name": "by_sku", "type": {"type": "map", "values": "Line"}},
                    {"name": "days", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
                ],
            },
        },
    ],
}
AT = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)
RECORDS: list[dict[str, Any]] = [
    {
        "id": 1, "tags": ["a", "b"], "attrs": {"k": "v", "é": ""},
        "lines": [{"sku": "x", "qty": 2, "at": AT}, {"sku": "y", "qty": -1, "at": AT}],
        "scores": {"m": [1.5, -0.0], "n": []}, "grid": [[1, 2], [], [3]],
        "meta": {"by_sku": {"x": {"sku": "x", "qty": 9, "at": AT}}, "days": [dt.date(2024, 2, 29)]},
    },
    {
        "id": 2, "tags": [], "attrs": {}, "lines": [], "scores": None, "grid": [],
        "meta": {"by_sku": {}, "days": []},
    },
]  # fmt: skip
FRAME = wire.id_key(3)


def _line(first: int) -> StructType:
    return StructType(
        NestedField(first, "sku", StringType(), required=False),
        NestedField(first + 1, "qty", IntegerType(), required=False),
        NestedField(first + 2, "at", TimestamptzType(), required=False),
    )


# The table as Spark's path creates it from from_avro's type (PERMISSIVE: nullable throughout):
# every column, field, element and value optional.
TABLE = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "tags", ListType(20, StringType(), element_required=False)),
    NestedField(3, "attrs", MapType(21, StringType(), 22, StringType(), value_required=False)),
    NestedField(4, "lines", ListType(23, _line(40), element_required=False)),
    NestedField(
        5,
        "scores",
        MapType(24, StringType(), 25, ListType(26, DoubleType(), element_required=False), value_required=False),
    ),
    NestedField(6, "grid", ListType(27, ListType(28, LongType(), element_required=False), element_required=False)),
    NestedField(
        7,
        "meta",
        StructType(
            NestedField(29, "by_sku", MapType(30, StringType(), 31, _line(50), value_required=False), required=False),
            NestedField(32, "days", ListType(33, DateType(), element_required=False), required=False),
        ),
    ),
)


def basket(i: int) -> dict[str, Any]:
    """Record `i` of a stream of baskets: its id `i`, the arrays and maps of RECORDS in turn."""
    return {**RECORDS[i % len(RECORDS)], "id": i}


def framed(record: dict[str, Any], schema: dict[str, Any] = BASKET, frame: bytes = FRAME) -> bytes:
    buf = io.BytesIO()
    buf.write(frame)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()
