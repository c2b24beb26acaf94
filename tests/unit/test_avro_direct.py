"""The one-pass Avro decoder's pure parts: which writer schemas and tables it takes, the rows it
makes, and every kind of record it must decline rather than misread (batch/direct_avro.py,
tasks/decode_avro.py)."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)
from pyspark.sql import types as T

from icesink.batch.avro_types import avro_type, fixed_digits, writer_struct
from icesink.batch.direct_avro import MAX_UNIONS, direct_avro
from icesink.kafka import wire
from icesink.tasks.avro_records import new_frames
from icesink.tasks.decode_avro import AvroRows, DirectAvro
from icesink.tasks.table_out import NAMED

V1: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "n", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "x", "type": "double"},
        {"name": "f", "type": "float"},
        {"name": "s", "type": ["null", "string"], "default": None},
        {"name": "raw", "type": "bytes"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
    ],
}
V2: dict[str, Any] = {**V1, "fields": [*V1["fields"], {"name": "extra", "type": ["null", "long"], "default": None}]}
# The table the records go to, as Iceberg holds it (and Spark's path would create it): every column
# optional; `n` already widened to long; `extra` from V2.
TABLE = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "n", LongType()),
    NestedField(3, "ok", BooleanType()),
    NestedField(4, "x", DoubleType()),
    NestedField(5, "f", FloatType()),
    NestedField(6, "s", StringType()),
    NestedField(7, "raw", BinaryType()),
    NestedField(8, "day", DateType()),
    NestedField(9, "ts", TimestamptzType()),
    NestedField(10, "us", TimestamptzType()),
    NestedField(11, "u", StringType()),
    NestedField(12, "amount", DecimalType(8, 2)),
    NestedField(13, "extra", LongType()),
)
SPARK_TABLE = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("n", T.LongType()),
        T.StructField("ok", T.BooleanType()),
        T.StructField("x", T.DoubleType()),
        T.StructField("f", T.FloatType()),
        T.StructField("s", T.StringType()),
        T.StructField("raw", T.BinaryType()),
        T.StructField("day", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("us", T.TimestampType()),
        T.StructField("u", T.StringType()),
        T.StructField("amount", T.DecimalType(8, 2)),
        T.StructField("extra", T.LongType()),
    ]
)
UTC = dt.UTC
# V1 with room for larger amounts: the same encoding, so its bodies pass for V1's with a decimal
# beyond V1's precision (fastavro refuses to write one with V1 itself).
WIDE: dict[str, Any] = {
    **V1,
    "fields": [
        *V1["fields"][:-1],
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
    ],
}


def record(i: int, **changes: Any) -> dict[str, Any]:
    return {
        "id": i, "n": -i, "ok": i % 2 == 0, "x": i / 4, "f": 1.5, "s": None if i % 3 else f"s{i}",
        "raw": bytes([i % 256, 0]), "day": dt.date(2024, 1, 2) + dt.timedelta(days=i),
        "ts": dt.datetime(2024, 1, 2, tzinfo=UTC) + dt.timedelta(milliseconds=i),
        "us": None if i % 2 else dt.datetime(2024, 1, 2, 0, 0, 0, i, tzinfo=UTC),
        "u": f"00000000-0000-4000-8000-{i:012x}", "amount": Decimal(i) / 100 - Decimal("9999.99"),
        **changes,
    }  # fmt: skip


def framed(schema_id: int, schema: dict[str, Any], rec: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    buf.write(wire.id_key(schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def direct() -> DirectAvro:
    found = direct_avro({wire.id_key(1): json.dumps(V1), wire.id_key(2): json.dumps(V2)}, SPARK_TABLE)
    assert found is not None
    return found


def decode(values: list[bytes | None], headers: list[bytes | None] | None = None) -> pa.Table | None:
    """`headers`: each record's schema-id header (None: none)."""
    rows = AvroRows(direct(), schema_to_pyarrow(TABLE))
    return rows.decode(pa.array(values, pa.binary()), pa.array(headers, pa.binary()) if headers is not None else None)


def test_types_map_as_sparks_from_avro_maps_them() -> None:
    struct = writer_struct(json.dumps(V2))
    assert struct is not None
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in struct.fields] == [
        ("id", "bigint", False), ("n", "int", False), ("ok", "boolean", False), ("x", "double", False),
        ("f", "float", False), ("s", "string", True), ("raw", "binary", False), ("day", "date", False),
        ("ts", "timestamp", False), ("us", "timestamp", True), ("u", "string", False),
        ("amount", "decimal(6,2)", False), ("extra", "bigint", True),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "avro",
    [
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "array"}]},
        {"type": "record", "name": "R", "fields": []},
        {"type": "array", "items": ["null", "long"]},
        {"type": "enum", "name": "E", "symbols": []},
        {"type": "fixed", "name": "F", "size": 0},
        {"type": "fixed", "name": "F", "size": 12, "logicalType": "duration"},
        ["null", "long", "string"],
        ["long", "string"],
        "null",
        "SomeNamedType",
        {"type": "long", "logicalType": "time-millis"},
        {"type": "int", "logicalType": "local-timestamp-millis"},
        {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 2},
        {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5},
        {"type": "bytes", "logicalType": "decimal", "scale": 2},
        {"type": "fixed", "name": "D", "size": 17, "logicalType": "decimal", "precision": 38, "scale": 2},
        {"type": "fixed", "name": "D", "size": 2, "logicalType": "decimal", "precision": 5, "scale": 0},
        {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 39, "scale": 2},
        {"type": "int", "connect.name": "io.debezium.time.Timestamp"},
        {"type": "long", "connect.name": "io.debezium.time.Timestamp", "logicalType": "timestamp-millis"},
        {
            "type": "record",
            "name": "V",
            "fields": [{"name": "scale", "type": "long"}, {"name": "value", "type": "bytes"}],
            "connect.name": "io.debezium.data.VariableScaleDecimal",
        },
    ],
)
def test_types_it_leaves_to_spark(avro: Any) -> None:
    assert avro_type(avro) is None
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "a", "type": avro}]}
    assert writer_struct(json.dumps(schema)) is None


def test_a_decimal_on_a_fixed_is_a_decimal_where_its_size_holds_its_digits() -> None:
    def fixed(size: int, precision: int, scale: int = 0) -> dict[str, Any]:
        return {"type": "fixed", "name": "D", "size": size, "logicalType": "decimal", "precision": precision,
                "scale": scale}  # fmt: skip

    assert [fixed_digits(n) for n in (1, 2, 4, 8, 16)] == [2, 4, 9, 18, 38]  # Avro's maxPrecision
    assert avro_type(fixed(8, 10, 2)) == (T.DecimalType(10, 2), False)
    assert avro_type(fixed(16, 38, 38)) == (T.DecimalType(38, 38), False)
    assert avro_type(fixed(2, 4)) == (T.DecimalType(4, 0), False)
    assert avro_type(["null", fixed(1, 2)]) == (T.DecimalType(2, 0), True)
    assert avro_type({"type": "fixed", "name": "B", "size": 3}) == (T.BinaryType(), False)


def test_a_local_timestamp_is_a_timestamp_without_zone() -> None:
    for logical in ("local-timestamp-millis", "local-timestamp-micros"):
        assert avro_type({"type": "long", "logicalType": logical}) == (T.TimestampNTZType(), False)
        assert avro_type(["null", {"type": "long", "logicalType": logical}]) == (T.TimestampNTZType(), True)


def test_a_writer_schema_must_fit_the_table_as_it_is() -> None:
    table = T.StructType([T.StructField("id", T.LongType()), T.StructField("s", T.StringType())])
    one = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}, {"name": "s", "type": "string"}]}
    assert direct_avro({wire.id_key(1): json.dumps(one)}, table) is not None, "int into a long column"
    other = {**one, "fields": [{"name": "id", "type": "long"}, {"name": "t", "type": "string"}]}
    assert direct_avro({wire.id_key(1): json.dumps(other)}, table) is None, "a column the table lacks"
    typed = {**one, "fields": [{"name": "id", "type": "string"}]}
    assert direct_avro({wire.id_key(1): json.dumps(typed)}, table) is None, "another type"
    narrow = T.StructType([T.StructField("id", T.IntegerType())])
    wide = {**one, "fields": [{"name": "id", "type": "long"}]}
    assert direct_avro({wire.id_key(1): json.dumps(wide)}, narrow) is None, "the table must widen first"
    required = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("s", T.StringType())])
    nullable = {**one, "fields": [{"name": "id", "type": ["null", "long"]}, {"name": "s", "type": "string"}]}
    assert direct_avro({wire.id_key(1): json.dumps(nullable)}, required) is None
    lacking = {**one, "fields": [{"name": "s", "type": "string"}]}
    assert direct_avro({wire.id_key(1): json.dumps(lacking)}, required) is None, "a required column"
    assert direct_avro({wire.id_key(1): json.dumps(lacking)}, table) is not None
    guid = bytes([wire.GUID_MAGIC]) + bytes(16)
    assert direct_avro({guid: json.dumps(one)}, table) is None
    assert direct_avro({}, table) is None


USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
NESTED = {"type": "record", "name": "Visit", "fields": [{"name": "id", "type": "int"}, {"name": "user", "type": USER},
          {"name": "users", "type": {"type": "array", "items": "User"}}]}  # fmt: skip
USER_TABLE = T.StructType([T.StructField("name", T.StringType()), T.StructField("age", T.IntegerType())])
NESTED_TABLE = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("user", USER_TABLE),
        T.StructField("users", T.ArrayType(USER_TABLE)),
    ]
)


def test_a_nested_record_without_a_field_the_table_has_fits_and_the_field_is_null() -> None:
    """Rows of an older writer schema after the table evolved for a newer one's nested field (and
    widened id): the same rows Spark's path writes, the field null."""
    found = direct_avro({wire.id_key(1): json.dumps(NESTED)}, NESTED_TABLE)
    assert found is not None
    arrow = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "user", StructType(NestedField(4, "name", StringType()), NestedField(5, "age", IntegerType()))),
        NestedField(3, "users", ListType(6, StructType(NestedField(7, "name", StringType()),
                                                        NestedField(8, "age", IntegerType())))),
    )  # fmt: skip
    visit = {"id": 3, "user": {"name": "u"}, "users": [{"name": "a"}, {"name": "b"}]}
    rows = AvroRows(found, schema_to_pyarrow(arrow)).decode(pa.array([framed(1, NESTED, visit)], pa.binary()))
    assert rows is not None
    assert rows.to_pylist() == [
        {"id": 3, "user": {"name": "u", "age": None}, "users": [{"name": "a", "age": None}, {"name": "b", "age": None}]}
    ]
    required = T.StructType([T.StructField("name", T.StringType()), T.StructField("age", T.IntegerType(), False)])
    strict = T.StructType([T.StructField("id", T.LongType()), T.StructField("user", required)])
    assert direct_avro({wire.id_key(1): json.dumps(NESTED)}, strict) is None, "a required nested field it lacks"
    narrow = T.StructType([T.StructField("id", T.LongType()), T.StructField("user", T.StructType([]))])
    assert direct_avro({wire.id_key(1): json.dumps(NESTED)}, narrow) is None, "a nested field the table lacks"


def test_rows_of_two_writer_schemas_in_the_tables_columns() -> None:
    recs = [record(i) for i in range(6)]
    values: list[bytes | None] = [
        framed(1, V1, r) if i % 2 else framed(2, V2, {**r, "extra": i}) for i, r in enumerate(recs)
    ]
    rows = decode(values)
    assert rows is not None
    assert rows.schema == schema_to_pyarrow(TABLE), "the table's types and field ids"
    got = sorted(rows.to_pylist(), key=lambda r: r["id"])
    want = [{**r, "extra": i if i % 2 == 0 else None} for i, r in enumerate(recs)]
    assert got == want


def test_carried_columns_stay_with_their_records_across_writer_schemas() -> None:
    """A table of changes carries each record's Kafka offset before its columns: the rows come a
    writer schema at a time, and each must keep its own offset."""
    recs = [record(i) for i in range(6)]
    values = [framed(1, V1, r) if i % 3 else framed(2, V2, {**r, "extra": i}) for i, r in enumerate(recs)]
    carry = pa.table({"offset": pa.array([100 + i for i in range(6)], pa.int64())})
    rows = AvroRows(direct(), schema_to_pyarrow(TABLE)).decode(pa.array(values, pa.binary()), carry=carry)
    assert rows is not None
    assert rows.column_names == ["offset", *schema_to_pyarrow(TABLE).names]
    assert sorted(zip(rows.column("offset").to_pylist(), rows.column("id").to_pylist(), strict=True)) == [
        (100 + i, i) for i in range(6)
    ]
    empty = AvroRows(direct(), schema_to_pyarrow(TABLE)).decode(pa.array([], pa.binary()), carry=carry.slice(0, 0))
    assert empty is not None
    assert empty.num_rows == 0
    assert empty.column_names == rows.column_names


def test_a_batch_with_no_record_of_a_known_schema_is_empty() -> None:
    rows = decode([])
    assert rows is not None
    assert rows.num_rows == 0


def test_records_that_do_not_name_their_schema_in_a_header_are_taken() -> None:
    rows = decode([framed(1, V1, record(1))], headers=[None])
    assert rows is not None
    assert rows.num_rows == 1


GOOD = framed(1, V1, record(1))


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ([GOOD, framed(3, V1, record(2))], "a schema id it was not planned with (a second pass)"),
        ([GOOD, None], "a tombstone"),
        ([GOOD, b"\x00\x00\x00"], "shorter than a frame"),
        ([GOOD, b'{"id": 1}'], "not framed"),
        ([GOOD[:-3], GOOD], "a truncated body"),
        ([GOOD[:-3]], "a truncated last body"),
        ([GOOD + b"\x00\x02", GOOD], "trailing bytes"),
        ([GOOD, GOOD + b"\x00"], "a trailing byte on the last record"),
        ([framed(1, WIDE, record(1, amount=Decimal("10000.00")))], "a decimal beyond precision 6 (scale 2)"),
        ([framed(1, WIDE, record(1, amount=Decimal("-10000.00")))], "a negative one"),
        ([framed(1, V1, record(1, s="ok")).replace(b"\x02\x04ok", b"\x0a\x04ok")], "a union index out of range"),
        ([GOOD, framed(1, V1, record(1, s="ok")).replace(b"\x02\x04ok", b"\x80\x01\x04ok")], "index 64, in 2 bytes"),
        ([framed(1, V1, record(1, s="ok")).replace(b"\x02\x04ok", b"\x01\x04ok")], "a negative union index"),
        ([framed(1, V1, record(1, us=None)).replace(b"\x02H0", b"\x04H0")], "index 2 for [T, null], the null's is 1"),
        ([framed(1, V1, record(1, s="ok")).replace(b"\x04ok", b"\x04\xff\xfe")], "a string that is not UTF-8"),
        ([framed(1, V1, record(1, s="ok")).replace(b"\x04ok", b"\x03ok")], "a negative length"),
    ],
)
def test_records_it_declines(values: list[bytes | None], why: str) -> None:
    assert decode(values) is None, why


def test_a_declined_batch_says_which_writer_schemas_it_was_not_given() -> None:
    """The frames the driver looks up to evolve the table and run it again (batch/direct_rounds.py):
    framed records of other ids only, not those of its schemas, nor unframed bodies, tombstones,
    short values; a record named by id in a header by that id, not by its first bytes (data), and
    one named by GUID not at all (the tasks take no GUID)."""
    values = [GOOD, framed(3, V1, record(2)), None, b"\x00\x00", b'{"id": 1}', framed(7, V1, record(3)),
              framed(3, V1, record(4)), wire.id_key(9) + GOOD[5:], wire.id_key(11) + GOOD[5:]]  # fmt: skip
    headers = [None] * 7 + [wire.id_key(12), b"\x01" + bytes(16)]
    records = pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary()), NAMED: pa.array(headers)})
    assert new_frames(direct(), records) == {wire.id_key(3), wire.id_key(7), wire.id_key(12)}
    records = pa.RecordBatch.from_pydict(
        {"value": pa.array([GOOD, framed(2, V2, {**record(1), "extra": 1})], pa.binary())}
    )
    assert new_frames(direct(), records) == set()


def test_a_record_naming_its_schema_by_id_in_a_header_is_taken_as_if_framed() -> None:
    """Newer Confluent serializers: a bare body, its schema's id in `__value_schema_id` (0x00 + 4
    bytes), as Spark's path reads it (batch/decode/avro.py)."""
    values = [framed(i % 2 + 1, V1 if i % 2 == 0 else V2, record(i)) for i in range(6)]
    headers: list[bytes | None] = [v[:5] if i % 3 else None for i, v in enumerate(values)]
    bare: list[bytes | None] = [v[5:] if h is not None else v for v, h in zip(values, headers, strict=True)]
    rows, expected = decode(bare, headers), decode(list(values))
    assert expected is not None
    assert rows is not None
    assert rows.sort_by("id").to_pylist() == expected.sort_by("id").to_pylist()
    # A header of neither shape is as none (the value's own frame counts); an empty one too.
    assert decode([GOOD, GOOD], [b"\x00\x00\x01", b""]) is not None


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([None, b"\x01" + bytes(16)], "named by its GUID: the tasks know their schemas by id"),
        ([b"\x01" + bytes(16), None], "framed, and named by a GUID: the GUID's schema reads the whole value"),
        ([None, wire.id_key(9)], "an id the table was not planned with"),
        ([None, b"\x00\x00\x01"], "a header of another shape: the value's own frame counts, and it is data"),
    ],
)
def test_a_bare_body_it_cannot_place_is_declined(headers: list[bytes | None], why: str) -> None:
    values = [GOOD, GOOD[5:]] if headers[1] is not None else [GOOD, GOOD]
    assert decode(values, headers) is None, why


def test_the_widest_decimal_that_fits_is_taken() -> None:
    rows = decode(
        [framed(1, V1, record(1, amount=Decimal("9999.99"))), framed(1, V1, record(2, amount=Decimal("-9999.99")))]
    )
    assert rows is not None
    assert sorted(rows.column("amount").to_pylist()) == [Decimal("-9999.99"), Decimal("9999.99")]


SPARSE: dict[str, Any] = {
    "type": "record",
    "name": "Sparse",
    "fields": [{"name": f"o{k}", "type": ["null", "long"], "default": None} for k in range(6)],
}
SPARSE_TABLE = T.StructType([T.StructField(f"o{k}", T.LongType()) for k in range(6)])


def sparse(rows: list[dict[str, Any]]) -> pa.Table | None:
    found = direct_avro({wire.id_key(5): json.dumps(SPARSE)}, SPARSE_TABLE)
    assert found is not None
    arrow = pa.schema([(f"o{k}", pa.int64()) for k in range(6)])
    return AvroRows(found, arrow).decode(pa.array([framed(5, SPARSE, r) for r in rows], pa.binary()))


def _longer(m: int) -> bytes:
    """SPARSE's record of combination `m`, each value in two bytes (Java reads them): not placed."""
    fields = [b"\x02" + bytes([0x80 | (2 * m & 0x7F), 2 * m >> 7]) if m >> k & 1 else b"\x00" for k in range(6)]
    return wire.id_key(5) + b"".join(fields)


def test_records_of_many_null_combinations_are_placed_and_read_again_up_to_32() -> None:
    # The union indexes are found where the decoded values place them (tasks/avro_positions.py):
    # any number of combinations of null fields. The records with a value encoded longer than it
    # need be are read again once per combination: 32 are, more are left to Spark's decoder.
    combos = [{f"o{k}": (m if m >> k & 1 else None) for k in range(6)} for m in range(64)]
    taken = sparse(combos)
    assert taken is not None
    assert taken.to_pylist() == combos
    found = direct_avro({wire.id_key(5): json.dumps(SPARSE)}, SPARSE_TABLE)
    assert found is not None
    rows = AvroRows(found, pa.schema([(f"o{k}", pa.int64()) for k in range(6)]))
    values = [framed(5, SPARSE, r) for r in combos]
    again = rows.decode(pa.array([*values, *(_longer(m) for m in range(1, 33))], pa.binary()))
    assert again is not None, "64 placed, 32 read again"
    assert again.to_pylist() == [*combos, *combos[1:33]]
    assert rows.decode(pa.array([*values, *(_longer(m) for m in range(1, 34))], pa.binary())) is None


def test_a_schema_of_more_unions_than_the_check_counts_is_left_to_spark() -> None:
    fields = [{"name": f"o{k}", "type": ["null", "long"]} for k in range(MAX_UNIONS + 1)]
    table = T.StructType([T.StructField(f"o{k}", T.LongType()) for k in range(MAX_UNIONS + 1)])
    schema = {"type": "record", "name": "Wide", "fields": fields}
    assert direct_avro({wire.id_key(1): json.dumps(schema)}, table) is None
    assert direct_avro({wire.id_key(1): json.dumps({**schema, "fields": fields[:MAX_UNIONS]})}, table) is not None


WIDE = 130  # optional fields: three words of a record's null pattern (62 unions each)


def test_records_of_more_unions_than_a_word_holds_are_checked_in_every_word() -> None:
    """A wide row of optional columns (a Debezium envelope of 60 nullable columns has 120 unions
    and more): every union's index is checked, the last word's too."""
    schema = {"type": "record", "name": "Wide", "fields": [{"name": f"o{k}", "type": ["null", "long"]}
                                                           for k in range(WIDE)]}  # fmt: skip
    table = T.StructType([T.StructField(f"o{k}", T.LongType()) for k in range(WIDE)])
    found = direct_avro({wire.id_key(9): json.dumps(schema)}, table)
    assert found is not None
    rows = AvroRows(found, pa.schema([(f"o{k}", pa.int64()) for k in range(WIDE)]))
    records = [{f"o{k}": (None if (k + i) % (i + 2) == 0 else k * i) for k in range(WIDE)} for i in range(5)]
    values = [framed(9, schema, r) for r in records]
    decoded = rows.decode(pa.array([*values, *values[::-1]], pa.binary()))
    assert decoded is not None
    assert decoded.to_pylist() == [*records, *records[::-1]]
    # Every field null but o125 (5): its union index (1: 0x02) made 2 (0x04), in the third word.
    alone = wire.id_key(9) + b"\x00" * 125 + b"\x02\x0a" + b"\x00" * 4
    assert rows.decode(pa.array([*values, alone], pa.binary())) is not None
    assert rows.decode(pa.array([*values, alone.replace(b"\x02\x0a", b"\x04\x0a")], pa.binary())) is None
    # And in the first word: o0 (5) with index 2.
    first = wire.id_key(9) + b"\x02\x0a" + b"\x00" * 129
    assert rows.decode(pa.array([first], pa.binary())) is not None
    assert rows.decode(pa.array([first.replace(b"\x02\x0a", b"\x04\x0a")], pa.binary())) is None
    # The same where the records are read again (o125 written in two bytes, which the placing of
    # indexes does not take: tasks/avro_positions.py): grouped by three words of null patterns.
    longer = alone.replace(b"\x02\x0a", b"\x02\x8a\x00")
    again = rows.decode(pa.array([*values, longer, first], pa.binary()))
    assert again is not None
    assert again.to_pylist() == [*records, {**dict.fromkeys(again.column_names), "o125": 5},
                                 {**dict.fromkeys(again.column_names), "o0": 5}]  # fmt: skip
    assert rows.decode(pa.array([*values, longer, alone.replace(b"\x02\x0a", b"\x04\x0a")], pa.binary())) is None
    assert rows.decode(pa.array([*values, longer, first.replace(b"\x02\x0a", b"\x04\x0a")], pa.binary())) is None
