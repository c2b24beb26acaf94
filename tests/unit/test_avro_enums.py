"""Avro enums in the one-pass decoder (batch/avro_types.py, tasks/avro_enums.py): an enum at any
depth (a field, in a union with null, in a nested record, in an array, a map, an array of records)
is a string, as from_avro makes it, read by the tasks as its index and turned into its symbol; an
index beyond the symbols is declined at any depth (the task's loop then makes a dead letter of the
body: tests/unit/test_direct_letters.py). Spark's own rows for the same records:
tests/integration/test_direct_avro_rows.py."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from icesink.batch.avro_types import writer_struct
from icesink.batch.direct_avro import direct_avro, row_struct
from icesink.tasks.decode_avro import AvroRows
from tests.support.baskets import FRAME, framed

STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}
ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": STATUS}, {"name": "note", "type": "string"}],
}


def test_an_enum_field_is_a_string_column() -> None:
    struct = row_struct(json.dumps(ORDER))
    assert struct is not None
    assert struct["status"] == T.StructField("status", T.StringType(), False)


@pytest.mark.parametrize(
    ("where", "spark_type"),
    [
        (["null", STATUS], T.StringType()),
        ({"type": "record", "name": "R", "fields": [{"name": "s", "type": STATUS}]},
         T.StructType([T.StructField("s", T.StringType(), False)])),
        ({"type": "array", "items": STATUS}, T.ArrayType(T.StringType(), True)),
        ({"type": "map", "values": STATUS}, T.MapType(T.StringType(), T.StringType(), True)),
    ],
)  # fmt: skip
def test_an_enum_anywhere_is_a_string(where: Any, spark_type: T.DataType) -> None:
    schema = {**ORDER, "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": where}]}
    struct = writer_struct(json.dumps(schema))
    assert struct is not None
    assert struct["status"].dataType == spark_type


def test_an_enum_of_no_symbol_leaves_the_schema_to_spark() -> None:
    schema = {
        **ORDER,
        "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": {**STATUS, "symbols": []}}],
    }
    assert writer_struct(json.dumps(schema)) is None


def rows(values: list[bytes]) -> pa.Table | None:
    struct = row_struct(json.dumps(ORDER))
    assert struct is not None
    direct = direct_avro({FRAME: json.dumps(ORDER)}, struct)
    assert direct is not None
    table = pa.schema([("id", pa.int64()), ("status", pa.large_string()), ("note", pa.large_string())])
    return AvroRows(direct, table).decode(pa.array(values, pa.binary()))


def test_enum_values_become_their_symbols_and_an_index_beyond_them_is_declined() -> None:
    records = [{"id": i, "status": s, "note": f"n{i}"} for i, s in enumerate(["PAID", "NEW", "SHIPPED"])]
    values = [framed(r, ORDER) for r in records]
    out = rows(values)
    assert out is not None
    assert out.to_pylist() == records
    shipped = values[2]
    at = shipped.index(b"\x04\x04n2")  # status SHIPPED: index 2 (zig-zag 0x04), then the note "n2"
    beyond = shipped[:at] + b"\x06" + shipped[at + 1 :]  # index 3 of 3 symbols
    assert rows([values[0], beyond]) is None


COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
DEEP: dict[str, Any] = {
    "type": "record",
    "name": "Deep",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "maybe", "type": ["null", COLOR]},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [{"name": "c", "type": "Color"}]}},
        {"name": "many", "type": {"type": "array", "items": "Color"}},
        {"name": "by", "type": {"type": "map", "values": "Color"}},
        {
            "name": "parts",
            "type": {
                "type": "array",
                "items": {"type": "record", "name": "Part", "fields": [{"name": "c", "type": "Color"}]},
            },
        },
    ],
}


def deep_rows(values: list[bytes]) -> pa.Table | None:
    text = json.dumps(DEEP)
    struct = row_struct(text)
    assert struct is not None
    direct = direct_avro({FRAME: text}, struct)
    assert direct is not None
    table = pa.schema([
        ("id", pa.int64()), ("maybe", pa.string()), ("inner", pa.struct([("c", pa.string())])),
        ("many", pa.list_(pa.string())), ("by", pa.map_(pa.string(), pa.string())),
        ("parts", pa.list_(pa.struct([("c", pa.string())]))),
    ])  # fmt: skip
    return AvroRows(direct, table).decode(pa.array(values, pa.binary()))


def test_enums_at_any_depth_become_their_symbols() -> None:
    records = [
        {"id": 1, "maybe": "GREEN", "inner": {"c": "RED"}, "many": ["GREEN", "RED", "GREEN"], "by": {"a": "RED"},
         "parts": [{"c": "GREEN"}, {"c": "RED"}]},
        {"id": 2, "maybe": None, "inner": {"c": "GREEN"}, "many": [], "by": {}, "parts": []},
    ]  # fmt: skip
    out = deep_rows([framed(r, DEEP) for r in records])
    assert out is not None
    assert out.to_pylist() == [
        {**records[0], "by": [("a", "RED")]},
        {**records[1], "by": []},
    ]


def test_an_index_beyond_the_symbols_is_declined_at_any_depth() -> None:
    good = framed({"id": 3, "maybe": None, "inner": {"c": "RED"}, "many": ["RED"], "by": {}, "parts": []}, DEEP)
    # id 3 (0x06), maybe null (0x00), inner.c RED (0x00), many: one item (0x02) RED (0x00), end (0x00)
    at = good.index(b"\x06\x00\x00\x02\x00\x00") + 4
    assert deep_rows([good]) is not None
    beyond = good[:at] + b"\x04" + good[at + 1 :]  # index 2 of 2 symbols in the array
    assert deep_rows([good, beyond]) is None
    negative = good[:at] + b"\x01" + good[at + 1 :]  # index -1
    assert deep_rows([negative]) is None
