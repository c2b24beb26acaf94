"""Flattened and case-insensitive tables on the one-pass Avro path (batch/direct_shape.py and the
tasks' column picking in tasks/decode_avro.py): the rows' names, shape and nullability as Spark's
path makes them (batch/shape.py), and the values the tasks put in each column. Spark's own rows
for the same records: tests/integration/test_direct_shape.py."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from icesink.batch.direct_avro import direct_avro, merged_rows, row_struct
from icesink.batch.direct_shape import Shaping, shaped
from icesink.kafka import wire
from icesink.tasks.decode_avro import AvroRows
from tests.support.baskets import framed

CPU = {
    "type": "record",
    "name": "Cpu",
    "fields": [
        {"name": "Cores", "type": "int"},
        {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    ],
}
DEVICE: dict[str, Any] = {
    "type": "record",
    "name": "Device",
    "fields": [
        {"name": "Id", "type": "long"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {
            "name": "Meta",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Meta",
                    "fields": [
                        {"name": "os", "type": "string"},
                        {"name": "cpu", "type": CPU},
                        {"name": "tags", "type": {"type": "array", "items": "string"}},
                    ],
                },
            ],
        },
    ],
}
FRAME = wire.id_key(7)
FLAT = Shaping("_", False)
SEEN = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)


def _row() -> T.StructType:
    struct = row_struct(json.dumps(DEVICE))
    assert struct is not None
    return struct


def test_a_flattened_tables_columns_are_the_leaves_by_path_all_nullable() -> None:
    out = shaped(_row(), FLAT, T.StructType([]))
    assert out is not None
    struct, columns = out
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in struct.fields] == [
        ("Id", "bigint", True),
        ("price", "decimal(6,2)", True),
        ("Meta_os", "string", True),
        ("Meta_cpu_Cores", "int", True),
        ("Meta_cpu_seen", "timestamp", True),
        ("Meta_tags", "array<string>", True),
    ], "as batch/shape.py flattens (lists are leaves; every flat column nullable)"
    assert dict(columns)["Meta_cpu_Cores"] == ("Meta", "cpu", "Cores")
    assert merged_rows({FRAME: json.dumps(DEVICE)}, shaping=FLAT) == struct, "a new table's columns"


def test_matching_ignoring_case_takes_the_tables_spelling() -> None:
    table = T.StructType([T.StructField("id", T.LongType()), T.StructField("meta_cpu_cores", T.IntegerType())])
    out = shaped(_row(), Shaping("_", True), table)
    assert out is not None
    assert [name for name, _ in out[1]] == ["id", "price", "Meta_os", "meta_cpu_cores", "Meta_cpu_seen", "Meta_tags"]
    plain = shaped(_row(), Shaping(None, True), T.StructType([T.StructField("ID", T.LongType())]))
    assert plain is not None
    assert plain[1][0] == ("ID", ("Id",))
    assert plain[0].fieldNames()[0] == "ID"


def test_what_the_tasks_cannot_pick_is_left_to_spark() -> None:
    nested = T.StructType([T.StructField("Meta", T.StructType([T.StructField("OS", T.StringType())]))])
    assert shaped(_row(), Shaping(None, True), nested) is None, "a struct column's field respelled"
    b = T.StructType([T.StructField("b", T.LongType())])
    twice = T.StructType([T.StructField("a_b", T.LongType()), T.StructField("a", b)])
    assert shaped(twice, FLAT, T.StructType([])) is None, "a_b and a.b land in one column"
    cased = T.StructType([T.StructField("Id", T.LongType()), T.StructField("ID", T.LongType())])
    assert shaped(cased, Shaping(None, True), T.StructType([])) is None
    assert shaped(cased, Shaping(), T.StructType([])) == (cased, (("Id", ("Id",)), ("ID", ("ID",))))


def test_the_tasks_pick_each_flat_column_null_where_a_record_around_it_is() -> None:
    struct, _ = shaped(_row(), FLAT, T.StructType([])) or (None, None)
    assert struct is not None
    direct = direct_avro({FRAME: json.dumps(DEVICE)}, struct, shaping=FLAT)
    assert direct is not None
    schema = pa.schema([
        ("Id", pa.int64()), ("price", pa.decimal128(6, 2)), ("Meta_os", pa.string()), ("Meta_cpu_Cores", pa.int32()),
        ("Meta_cpu_seen", pa.timestamp("us", "UTC")), ("Meta_tags", pa.list_(pa.string())),
    ])  # fmt: skip
    records = [
        {"Id": 1, "price": Decimal("12.34"), "Meta": {"os": "linux", "cpu": {"Cores": 4, "seen": SEEN}, "tags": ["a"]}},
        {"Id": 2, "price": Decimal("-0.01"), "Meta": None},
        {"Id": 3, "price": Decimal("0"), "Meta": {"os": "mac", "cpu": {"Cores": 8, "seen": None}, "tags": []}},
    ]
    out = AvroRows(direct, schema).decode(pa.array([framed(r, DEVICE, FRAME) for r in records], pa.binary()))
    assert out is not None
    assert out.to_pylist() == [
        {"Id": 1, "price": Decimal("12.34"), "Meta_os": "linux", "Meta_cpu_Cores": 4, "Meta_cpu_seen": SEEN,
         "Meta_tags": ["a"]},
        {"Id": 2, "price": Decimal("-0.01"), "Meta_os": None, "Meta_cpu_Cores": None, "Meta_cpu_seen": None,
         "Meta_tags": None},
        {"Id": 3, "price": Decimal("0.00"), "Meta_os": "mac", "Meta_cpu_Cores": 8, "Meta_cpu_seen": None,
         "Meta_tags": []},
    ]  # fmt: skip
