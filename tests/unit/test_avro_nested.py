"""Avro arrays and maps in the one-pass decoder (batch/direct_avro.py, tasks/avro_maps.py,
tasks/decode_avro.py): the types Spark's from_avro gives them, the ones left to Spark's path, and
the rows the tasks make of them in the table's columns. Spark's own rows for the same records:
tests/integration/test_direct_avro_rows.py."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyspark.sql import types as T

from icesink.batch.avro_types import avro_type
from icesink.batch.direct_avro import direct_avro, row_struct
from icesink.kafka import wire
from icesink.tasks.avro_maps import as_column, entries_for_maps
from icesink.tasks.decode_avro import AvroRows
from tests.support.baskets import AT, BASKET, FRAME, RECORDS, TABLE, framed


def test_arrays_and_maps_type_as_from_avro_types_them() -> None:
    """As PERMISSIVE from_avro (Spark's path) types them: nullable throughout, each column as the
    writer schema says."""
    struct = row_struct(json.dumps(BASKET))
    assert struct is not None
    line = T.StructType(
        [
            T.StructField("sku", T.StringType()),
            T.StructField("qty", T.IntegerType()),
            T.StructField("at", T.TimestampType()),
        ]
    )
    assert struct["tags"].dataType == T.ArrayType(T.StringType(), True)
    assert struct["attrs"].dataType == T.MapType(T.StringType(), T.StringType(), True)
    assert struct["lines"].dataType == T.ArrayType(line, True)
    assert struct["scores"].dataType == T.MapType(T.StringType(), T.ArrayType(T.DoubleType(), True), True)
    assert (struct["id"].nullable, struct["tags"].nullable, struct["scores"].nullable) == (False, False, True)
    assert struct["meta"].dataType == T.StructType(
        [
            T.StructField("by_sku", T.MapType(T.StringType(), line, True)),
            T.StructField("days", T.ArrayType(T.DateType())),
        ]
    )


@pytest.mark.parametrize(
    ("items", "why"),
    [
        (["null", "string"], "a union inside an array: its branch indexes are checked a record at a time"),
        ({"type": "int", "connect.name": "io.debezium.time.Date"}, "a semantic type: converted by field path"),
        ({"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "long"]}]}, "a union deeper in"),
        ({"type": "map", "values": ["null", "long"]}, "a union in a map in the array"),
    ],
)
def test_what_arrays_and_maps_leave_to_spark(items: Any, why: str) -> None:
    assert avro_type({"type": "array", "items": items}) is None, why
    assert avro_type({"type": "map", "values": items}) is None, why
    assert avro_type(["null", {"type": "array", "items": items}]) is None, why


def test_maps_are_read_as_arrays_of_entries_each_named_apart() -> None:
    rewritten = entries_for_maps(BASKET)
    fields = {f["name"]: f["type"] for f in rewritten["fields"]}
    assert fields["attrs"] == {
        "type": "array",
        "items": {
            "type": "record",
            "name": "IcesinkMapEntry1",
            "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": "string"}],
        },
    }
    assert fields["scores"][1]["items"]["name"] == "IcesinkMapEntry2"
    by_sku = fields["meta"]["fields"][0]["type"]
    assert by_sku["items"]["name"] == "IcesinkMapEntry3"
    assert by_sku["items"]["fields"][1]["type"] == "Line", "the values' type as it was"
    # The same bytes: a map written by fastavro reads back as the array of its entries.
    body = framed(RECORDS[0])[wire.HEADER_SIZE :]
    schema = {**rewritten, "fields": [{**f, "type": f["type"]} for f in rewritten["fields"]]}
    back = fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(schema))
    assert back["attrs"] == [{"key": "k", "value": "v"}, {"key": "é", "value": ""}]


def rows(values: list[bytes | None]) -> pa.Table | None:
    struct = row_struct(json.dumps(BASKET))
    assert struct is not None
    direct = direct_avro({FRAME: json.dumps(BASKET)}, struct)
    assert direct is not None
    return AvroRows(direct, schema_to_pyarrow(TABLE)).decode(pa.array(values, pa.binary()))


def test_records_of_arrays_and_maps_become_the_tables_rows() -> None:
    out = rows([framed(r) for r in RECORDS])
    assert out is not None
    assert out.schema == schema_to_pyarrow(TABLE), "the table's types and field ids, maps as maps"
    first, second = out.to_pylist()
    line = {"sku": "x", "qty": 2, "at": AT}
    assert first["tags"] == ["a", "b"]
    assert first["attrs"] == [("k", "v"), ("é", "")]
    assert first["lines"] == [line, {"sku": "y", "qty": -1, "at": AT}]
    assert first["scores"] == [("m", [1.5, -0.0]), ("n", [])]
    assert first["grid"] == [[1, 2], [], [3]]
    assert first["meta"] == {"by_sku": [("x", {**line, "qty": 9})], "days": [dt.date(2024, 2, 29)]}
    assert second == {
        "id": 2, "tags": [], "attrs": [], "lines": [], "scores": None, "grid": [], "meta": {"by_sku": [], "days": []},
    }  # fmt: skip


def test_a_record_whose_map_is_cut_short_is_declined() -> None:
    good = framed(RECORDS[0])
    assert rows([good, good[:-3]]) is None, "truncated inside meta.days"
    assert rows([good[:-1] + b"\x02"]) is None, "a block count where the days array ended"


def test_entries_become_maps_from_sliced_arrays_with_nulls() -> None:
    """A task's columns are often slices (one writer schema's records of a batch): offsets and
    validity must stay aligned, for either list width the reader gives."""
    entry = pa.struct([("key", pa.large_string()), ("value", pa.int64())])
    target = pa.map_(pa.large_string(), pa.int64())
    values = [[{"key": "a", "value": 1}], [], None, [{"key": "b", "value": 2}, {"key": "c", "value": 3}]]
    for lists in (pa.array(values, pa.large_list(entry)), pa.array(values, pa.list_(entry))):
        assert as_column(lists.slice(1), target).to_pylist() == [[], None, [("b", 2), ("c", 3)]]
        assert as_column(lists.slice(2, 1), target).to_pylist() == [None]
    nested = pa.array([[values[0]], None, [values[3], None]], pa.large_list(pa.large_list(entry)))
    want = [None, [[("b", 2), ("c", 3)], None]]
    assert as_column(nested.slice(1), pa.large_list(target)).to_pylist() == want
    assert as_column(nested.slice(1), pa.list_(target)).to_pylist() == want
