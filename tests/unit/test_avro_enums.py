"""Avro enums in the one-pass decoder (batch/avro_types.py, tasks/decode_avro.py): a field of the
writer's record is a string column, as from_avro makes it; an enum polars cannot read (in a union,
a nested record, an array) leaves the schema to Spark's path; an index beyond the symbols is
declined. Spark's own rows for the same records: tests/integration/test_direct_avro_rows.py."""

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
    "where",
    [
        ["null", STATUS],
        {"type": "record", "name": "R", "fields": [{"name": "s", "type": STATUS}]},
        {"type": "array", "items": STATUS},
        {"type": "map", "values": STATUS},
        {**STATUS, "symbols": []},
    ],
)
def test_an_enum_polars_cannot_read_leaves_the_schema_to_spark(where: Any) -> None:
    schema = {**ORDER, "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": where}]}
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
