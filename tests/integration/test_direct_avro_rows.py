"""The one-pass Avro decoder (tasks/decode_avro.py) against Spark's from_avro: the row type it
assumes is the one from_avro gives, every record it takes from_avro decodes to the same row, and
the malformed records it declines from_avro refuses too (they are dead letters on Spark's path).
In the integration tier for its session's spark-avro jar; it needs no service of the stack."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import BinaryType, TimestampNTZType

from icesink.batch.avro_types import writer_struct
from icesink.batch.direct_avro import direct_avro, row_struct
from icesink.kafka import wire
from icesink.tasks.decode_avro import AvroRows
from tests.support import baskets
from tests.support.frames import kafka_records

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Edge",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "b", "type": "boolean"},
        {"name": "d", "type": "double"},
        {"name": "f", "type": "float"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "u", "type": [{"type": "string", "logicalType": "uuid"}, "null"]},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}},
        {"name": "small", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 0}]},
    ],
}
UTC = dt.UTC
BASE: dict[str, Any] = {
    "l": 0, "i": 0, "b": False, "d": 0.0, "f": 0.0, "s": "", "raw": b"", "day": dt.date(1970, 1, 1),
    "ms": dt.datetime(1970, 1, 1, tzinfo=UTC), "us": None, "u": None, "amount": Decimal(0), "small": None,
}  # fmt: skip
EDGES: list[dict[str, Any]] = [
    BASE,
    {**BASE, "l": 2**63 - 1, "i": 2**31 - 1, "b": True, "d": 1e308, "f": 3.4e38, "s": "é\n\x00 😀"},
    {**BASE, "l": -(2**63), "i": -(2**31), "d": -0.0, "f": float("-inf"), "raw": bytes(range(256))},
    {**BASE, "d": float("nan"), "day": dt.date(1, 1, 1), "ms": dt.datetime(1900, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)},
    {**BASE, "day": dt.date(9999, 12, 31), "ms": dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)},
    {**BASE, "us": dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC), "u": "00000000-0000-4000-8000-00000000000f"},
    {**BASE, "amount": Decimal("99999999999999999999999999999.999999999"), "small": Decimal(999)},
    {**BASE, "amount": Decimal("-99999999999999999999999999999.999999999"), "small": Decimal(-999)},
    {**BASE, "amount": Decimal("0.000000001"), "small": Decimal(0)},
]
FRAME = wire.id_key(7)


def framed(record: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> bytes:
    buf = io.BytesIO()
    buf.write(FRAME)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def sparks(spark: SparkSession, values: list[bytes], schema: dict[str, Any] = SCHEMA) -> tuple[Any, list[Any]]:
    """from_avro's type and rows for `values` (PERMISSIVE: a row of nulls where it fails)."""
    body = F.expr("substring(value, 6)")
    frame = kafka_records(spark, values).select(
        "offset", from_avro(body, json.dumps(schema), {"mode": "PERMISSIVE"}).alias("r")
    )
    return frame.schema["r"].dataType, [r.r for r in frame.orderBy("offset").collect()]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):  # Arrow's is aware, Spark's UTC-naive
        return a.astimezone(UTC).replace(tzinfo=None) == b
    return bool(a == b and type(a) is type(b))


def test_every_record_it_takes_from_avro_decodes_to_the_same_row(spark: SparkSession) -> None:
    struct = writer_struct(json.dumps(SCHEMA))
    assert struct is not None
    values = [framed(r) for r in EDGES]
    spark_type, theirs = sparks(spark, values)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]

    direct = direct_avro({FRAME: json.dumps(SCHEMA)}, struct)
    assert direct is not None
    arrow = pa.schema(
        [
            ("l", pa.int64()), ("i", pa.int32()), ("b", pa.bool_()), ("d", pa.float64()), ("f", pa.float32()),
            ("s", pa.string()), ("raw", pa.binary()), ("day", pa.date32()), ("ms", pa.timestamp("us", "UTC")),
            ("us", pa.timestamp("us", "UTC")), ("u", pa.string()), ("amount", pa.decimal128(38, 9)),
            ("small", pa.decimal128(3, 0)),
        ]
    )  # fmt: skip
    rows = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert rows is not None, "takes every one of them"
    for record, mine, row in zip(EDGES, rows.to_pylist(), theirs, strict=True):
        assert row is not None
        for name in struct.fieldNames():
            assert _same(mine[name], row[name]), (record, name, mine[name], row[name])


def test_records_it_declines_for_their_bytes_from_avro_refuses(spark: SparkSession) -> None:
    good = framed({**BASE, "u": "x"})
    index = good.index(b"\x02x")  # u = "x": union index 0 (0x00), then the string; us before it: null
    assert good[index - 1] == 0
    wide = {
        **SCHEMA,
        "fields": [
            *SCHEMA["fields"][:-1],
            {
                "name": "small",
                "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 0}],
            },
        ],
    }
    as_bytes = {**SCHEMA, "fields": [f if f["name"] != "amount" else {"name": "amount", "type": "bytes"}
                                     for f in SCHEMA["fields"]]}  # fmt: skip
    bad = [
        good[:-2],  # truncated
        good[: index - 1] + b"\x04" + good[index:],  # u: union index 2 of a 2-branch union
        good[: index - 2] + b"\x06" + good[index - 1 :],  # us: union index 3
        framed({**BASE, "small": Decimal(1000)}, wide),  # small: beyond decimal(3, 0)
        framed({**BASE, "amount": b""}, as_bytes),  # amount: a decimal of no byte (polars reads 0)
    ]
    struct = writer_struct(json.dumps(SCHEMA))
    assert struct is not None
    direct = direct_avro({FRAME: json.dumps(SCHEMA)}, struct)
    assert direct is not None
    arrow = pa.schema([(f.name, pa.string()) for f in struct.fields])  # never reached: every one is declined
    _, theirs = sparks(spark, bad)
    for value, row in zip(bad, theirs, strict=True):
        assert AvroRows(direct, arrow).decode(pa.array([value], pa.binary())) is None, value
        assert row is None or all(v is None for v in row), (value, row)


def _sparks_spelling(v: Any) -> Any:
    """A value of from_avro's row as Arrow spells it: a struct a dict, a map a list of key-value
    pairs, by key (a map has no order: from_avro's follow a Java HashMap's, Arrow's the encoding's)."""
    if isinstance(v, Row):
        return {k: _sparks_spelling(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return sorted((k, _sparks_spelling(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_sparks_spelling(x) for x in v]
    return v


def _utc_naive(v: Any) -> Any:
    """An Arrow row's value with its timestamps UTC-naive, as Spark's, and its maps' entries by key."""
    if isinstance(v, dict):
        return {k: _utc_naive(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(type(x) is tuple for x in v):
        return sorted(_utc_naive(x) for x in v)
    if isinstance(v, list | tuple):
        return type(v)(_utc_naive(x) for x in v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    return v


def test_arrays_and_maps_decode_to_from_avros_rows(spark: SparkSession) -> None:
    struct = row_struct(json.dumps(baskets.BASKET))
    assert struct is not None
    values = [baskets.framed(baskets.basket(i)) for i in range(4)]
    spark_type, theirs = sparks(spark, values, baskets.BASKET)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields], (
        "arrays, maps, nested records, and the nullability within them, as from_avro types them"
    )
    direct = direct_avro({baskets.FRAME: json.dumps(baskets.BASKET)}, struct)
    assert direct is not None
    mine = AvroRows(direct, schema_to_pyarrow(baskets.TABLE)).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one of them"
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs]


STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}
ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "status", "type": STATUS},
        {"name": "maybe", "type": ["null", "Status"]},
        {"name": "at", "type": {"type": "record", "name": "At", "fields": [{"name": "s", "type": "Status"}]}},
        {"name": "history", "type": {"type": "array", "items": "Status"}},
        {"name": "by", "type": {"type": "map", "values": "Status"}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [{"name": "s", "type": "Status"}]}}},
    ],
}  # fmt: skip


def test_enums_at_any_depth_decode_to_from_avros_strings_and_an_index_beyond_them_is_refused_by_both(
    spark: SparkSession,
) -> None:
    struct = row_struct(json.dumps(ORDER))
    assert struct is not None
    records = [
        {"id": 0, "status": "PAID", "maybe": None, "at": {"s": "NEW"}, "history": ["NEW", "PAID"], "by": {"x": "NEW"},
         "lines": [{"s": "PAID"}]},
        {"id": 1, "status": "NEW", "maybe": "PAID", "at": {"s": "PAID"}, "history": [], "by": {}, "lines": []},
    ]  # fmt: skip
    values = [baskets.framed(r, ORDER) for r in records]
    # After the 5-byte frame: id, status, maybe's branch, maybe's index (record 1); id, status,
    # maybe (null), at.s, history's block count (2), its first item (record 0).
    assert values[1][5:9] == b"\x02\x00\x02\x02"
    assert values[0][5:11] == b"\x00\x02\x00\x00\x04\x00"
    beyond = values[1][:8] + b"\x04" + values[1][9:]  # maybe: index 2 of 2 symbols
    in_array = values[0][:10] + b"\x04" + values[0][11:]  # history's first item: index 2 of 2
    spark_type, theirs = sparks(spark, [*values, beyond, in_array], ORDER)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    direct = direct_avro({baskets.FRAME: json.dumps(ORDER)}, struct)
    assert direct is not None
    arrow = pa.schema([
        ("id", pa.int64()), ("status", pa.string()), ("maybe", pa.string()), ("at", pa.struct([("s", pa.string())])),
        ("history", pa.list_(pa.string())), ("by", pa.map_(pa.string(), pa.string())),
        ("lines", pa.list_(pa.struct([("s", pa.string())]))),
    ])  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs[:2]]
    for bad, row in ((beyond, theirs[2]), (in_array, theirs[3])):
        assert AvroRows(direct, arrow).decode(pa.array([bad], pa.binary())) is None
        assert row is None or all(v is None for v in row), row


DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}
PRICES: dict[str, Any] = {
    "type": "record",
    "name": "Prices",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amounts", "type": {"type": "array", "items": DECIMAL}},
        {"name": "by", "type": {"type": "map", "values": DECIMAL}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [{"name": "price", "type": DECIMAL}]}}},
    ],
}  # fmt: skip


def test_decimals_in_arrays_and_maps_decode_to_from_avros_and_one_beyond_its_precision_is_refused_by_both(
    spark: SparkSession,
) -> None:
    """Every element's precision is checked (polars keeps a value of more digits than its schema
    says; from_avro refuses it), in an array, a map and a record in an array."""
    struct = row_struct(json.dumps(PRICES))
    assert struct is not None
    records = [
        {"id": 1, "amounts": [Decimal("1.25"), Decimal("-3.00")], "by": {"a": Decimal("9999.99")},
         "lines": [{"price": Decimal("0.01")}, {"price": Decimal("-9999.99")}]},
        {"id": 2, "amounts": [], "by": {}, "lines": []},
    ]  # fmt: skip
    values = [baskets.framed(r, PRICES) for r in records]
    # Written with a wider precision (the encoding is the unscaled value's bytes either way).
    wide = json.loads(json.dumps(PRICES).replace('"precision": 6', '"precision": 10'))
    beyond = [
        baskets.framed({**records[1], "amounts": [Decimal("10000.00")]}, wide),
        baskets.framed({**records[1], "by": {"x": Decimal("-10000.00")}}, wide),
        baskets.framed({**records[1], "lines": [{"price": Decimal("0.01")}, {"price": Decimal("123456.78")}]}, wide),
    ]
    spark_type, theirs = sparks(spark, [*values, *beyond], PRICES)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    direct = direct_avro({baskets.FRAME: json.dumps(PRICES)}, struct)
    assert direct is not None
    decimal = pa.decimal128(6, 2)
    arrow = pa.schema([
        ("id", pa.int64()), ("amounts", pa.list_(decimal)), ("by", pa.map_(pa.string(), decimal)),
        ("lines", pa.list_(pa.struct([("price", decimal)]))),
    ])  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one within its precision"
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs[:2]]
    for value, row in zip(beyond, theirs[2:], strict=True):
        assert AvroRows(direct, arrow).decode(pa.array([value], pa.binary())) is None
        assert row is None or all(v is None for v in row), row


CODES: dict[str, Any] = {
    "type": "record",
    "name": "Codes",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "mac", "type": {"type": "fixed", "name": "Mac", "size": 6}},
        {"name": "tag", "type": ["null", {"type": "fixed", "name": "Tag", "size": 2}]},
        {"name": "keys", "type": {"type": "array", "items": {"type": "fixed", "name": "Key", "size": 3}}},
        {"name": "by", "type": {"type": "map", "values": {"type": "fixed", "name": "Val", "size": 1}}},
        {"name": "at", "type": {"type": "record", "name": "At", "fields": [
            {"name": "zone", "type": {"type": "fixed", "name": "Zone", "size": 1}},
        ]}},
    ],
}  # fmt: skip


def test_fixed_decodes_to_from_avros_bytes_at_any_depth(spark: SparkSession) -> None:
    struct = row_struct(json.dumps(CODES))
    assert struct is not None
    zero = {**CODES, "fields": [{"name": "z", "type": {"type": "fixed", "name": "Z", "size": 0}}]}
    assert row_struct(json.dumps(zero)) is None, "a fixed of no byte: Spark's path (polars refuses it)"
    records = [
        {"id": 1, "mac": b"\x00\x01\x02\x03\x04\xff", "tag": None, "keys": [], "by": {}, "at": {"zone": b"z"}},
        {"id": 2, "mac": b"abcdef", "tag": b"hi", "keys": [b"k01", b"\x00\x00\x00"], "by": {"x": b"\x07"},
         "at": {"zone": b"\x00"}},
    ]  # fmt: skip
    values = [baskets.framed(r, CODES) for r in records]
    spark_type, theirs = sparks(spark, values, CODES)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    direct = direct_avro({baskets.FRAME: json.dumps(CODES)}, struct)
    assert direct is not None
    arrow = pa.schema(
        [
            ("id", pa.int64()), ("mac", pa.binary()), ("tag", pa.binary()), ("keys", pa.list_(pa.binary())),
            ("by", pa.map_(pa.string(), pa.binary())), ("at", pa.struct([("zone", pa.binary())])),
        ]
    )  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one of them"
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs]


def _fixed_decimal(name: str, size: int, precision: int, scale: int) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, "logicalType": "decimal", "precision": precision,
            "scale": scale}  # fmt: skip


# Decimals on fixed, as Spark's to_avro writes them: at the top, in a union, an array, a map and a record.
LEDGER: dict[str, Any] = {
    "type": "record",
    "name": "Ledger",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "cents", "type": _fixed_decimal("Cents", 6, 12, 2)},
        {"name": "big", "type": ["null", _fixed_decimal("Big", 16, 38, 6)]},
        {"name": "one", "type": _fixed_decimal("One", 1, 2, 1)},
        {"name": "parts", "type": {"type": "array", "items": _fixed_decimal("Part", 4, 9, 3)}},
        {"name": "by", "type": {"type": "map", "values": _fixed_decimal("By", 3, 6, 0)}},
        {"name": "at", "type": {"type": "record", "name": "At", "fields": [
            {"name": "rate", "type": _fixed_decimal("Rate", 8, 18, 18)}]}},
    ],
}  # fmt: skip


def test_decimals_on_fixed_decode_to_from_avros_and_one_beyond_its_precision_is_refused_by_both(
    spark: SparkSession,
) -> None:
    struct = row_struct(json.dumps(LEDGER))
    assert struct is not None
    zero = {"id": 0, "cents": Decimal("0.00"), "big": None, "one": Decimal("0.0"), "parts": [], "by": {},
            "at": {"rate": Decimal(0)}}  # fmt: skip
    records = [
        zero,
        {"id": 1, "cents": Decimal("9999999999.99"), "big": Decimal("99999999999999999999999999999999.999999"),
         "one": Decimal("9.9"), "parts": [Decimal("999999.999"), Decimal("-0.001")], "by": {"x": Decimal(999999)},
         "at": {"rate": Decimal("0.999999999999999999")}},
        {"id": 2, "cents": Decimal("-9999999999.99"), "big": Decimal("-99999999999999999999999999999999.999999"),
         "one": Decimal("-9.9"), "parts": [Decimal("-999999.999")], "by": {"y": Decimal(-999999), "z": Decimal(0)},
         "at": {"rate": Decimal("-0.000000000000000001")}},
    ]  # fmt: skip
    values = [baskets.framed(r, LEDGER) for r in records]
    # Values of more digits than the schema says (the encoding is the unscaled value's bytes, which
    # the size holds): written with a wider precision, and as the fixed's bytes (-100: -10.0).
    wide = json.loads(json.dumps(LEDGER).replace('"precision": 12', '"precision": 13'))
    raw = {**LEDGER, "fields": [*LEDGER["fields"][:3], {"name": "one", "type": {"type": "fixed", "name": "One",
           "size": 1}}, *LEDGER["fields"][4:]]}  # fmt: skip
    beyond = [
        baskets.framed({**zero, "cents": Decimal("10000000000.00")}, wide),
        baskets.framed({**zero, "one": (-100).to_bytes(1, "big", signed=True)}, raw),
    ]
    spark_type, theirs = sparks(spark, [*values, *beyond], LEDGER)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    direct = direct_avro({baskets.FRAME: json.dumps(LEDGER)}, struct)
    assert direct is not None
    arrow = pa.schema([
        ("id", pa.int64()), ("cents", pa.decimal128(12, 2)), ("big", pa.decimal128(38, 6)),
        ("one", pa.decimal128(2, 1)), ("parts", pa.list_(pa.decimal128(9, 3))),
        ("by", pa.map_(pa.string(), pa.decimal128(6, 0))), ("at", pa.struct([("rate", pa.decimal128(18, 18))])),
    ])  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one within its precision"
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs[:3]]
    for value, row in zip(beyond, theirs[3:], strict=True):
        assert AvroRows(direct, arrow).decode(pa.array([value], pa.binary())) is None
        assert row is None or all(v is None for v in row), row


def test_a_decimal_of_more_digits_than_its_fixed_holds_is_left_to_from_avro_which_reads_bytes(
    spark: SparkSession,
) -> None:
    """Avro's Java parser drops such a logical type as invalid: from_avro reads the fixed as bytes,
    where polars would read a decimal. The tasks leave it to Spark's path."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "d", "type": _fixed_decimal("D", 2, 5, 0)}]}
    spark_type, rows = sparks(spark, [baskets.framed({"d": b"\x01\x02"}, {**schema, "fields": [
        {"name": "d", "type": {"type": "fixed", "name": "D", "size": 2}}]})], schema)  # fmt: skip
    assert spark_type["d"].dataType == BinaryType()
    assert rows == [Row(d=bytearray(b"\x01\x02"))]
    assert row_struct(json.dumps(schema)) is None
    assert row_struct(json.dumps({**schema, "fields": [{"name": "d", "type": _fixed_decimal("D", 2, 4, 0)}]}))


LOCAL: dict[str, Any] = {
    "type": "record",
    "name": "Local",
    "fields": [
        {"name": "ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "us", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "at", "type": {"type": "record", "name": "At", "fields": [
            {"name": "us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}}]}},
        {"name": "seen", "type": {"type": "array", "items": {"type": "long", "logicalType": "local-timestamp-millis"}}},
    ],
}  # fmt: skip


def test_local_timestamps_decode_to_from_avros_timestamps_without_zone(spark: SparkSession) -> None:
    struct = row_struct(json.dumps(LOCAL))
    assert struct is not None
    day = dt.datetime(2024, 1, 2, 3, 4, 5)
    records = [
        {"ms": day.replace(microsecond=123_000), "us": None, "at": {"us": day.replace(microsecond=7)}, "seen": []},
        {"ms": dt.datetime(1, 1, 1), "us": dt.datetime(9999, 12, 31, 23, 59, 59, 999_999),
         "at": {"us": dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)}, "seen": [dt.datetime(1900, 1, 1), day]},
    ]  # fmt: skip
    values = [baskets.framed(r, LOCAL) for r in records]
    # The most milliseconds a long holds: beyond the microseconds a long holds, refused by both.
    raw = json.loads(json.dumps(LOCAL).replace('"logicalType": "local-timestamp-millis"', '"logicalType": "x"'))
    beyond = baskets.framed({**records[0], "ms": 2**63 - 1, "at": {"us": 0}}, raw)
    spark_type, theirs = sparks(spark, [*values, beyond], LOCAL)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    assert spark_type["ms"].dataType == TimestampNTZType()
    direct = direct_avro({baskets.FRAME: json.dumps(LOCAL)}, struct)
    assert direct is not None
    arrow = pa.schema([
        ("ms", pa.timestamp("us")), ("us", pa.timestamp("us")), ("at", pa.struct([("us", pa.timestamp("us"))])),
        ("seen", pa.list_(pa.timestamp("us"))),
    ])  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one of them"
    assert mine.to_pylist() == [_sparks_spelling(r) for r in theirs[:2]]
    assert AvroRows(direct, arrow).decode(pa.array([beyond], pa.binary())) is None
    assert theirs[2] is None or all(v is None for v in theirs[2]), theirs[2]


TIMES: dict[str, Any] = {
    "type": "record",
    "name": "Times",
    "fields": [
        {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "us", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
        {"name": "at", "type": {"type": "record", "name": "At", "fields": [
            {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}}]}},
        {"name": "laps", "type": {"type": "array", "items": {"type": "long", "logicalType": "time-micros"}}},
        {"name": "by", "type": {"type": "map", "values": {"type": "int", "logicalType": "time-millis"}}},
    ],
}  # fmt: skip


def test_times_of_day_decode_to_from_avros_ints_and_longs(spark: SparkSession) -> None:
    """from_avro reads no time of day: it gives a time-millis' int and a time-micros' long, any
    value (a day's length is not checked), where polars would read a time of day."""
    struct = row_struct(json.dumps(TIMES))
    assert struct is not None
    plain = json.loads(json.dumps(TIMES).replace('"logicalType": "time-millis"', '"logicalType": "x"'))
    plain = json.loads(json.dumps(plain).replace('"logicalType": "time-micros"', '"logicalType": "x"'))
    records = [
        {"ms": 0, "us": None, "at": {"ms": 86_399_999}, "laps": [], "by": {}},
        {"ms": -(2**31), "us": 2**63 - 1, "at": {"ms": 2**31 - 1}, "laps": [-(2**63), 0, 86_400_000_000],
         "by": {"x": -1}},
    ]  # fmt: skip
    values = [baskets.framed(r, plain) for r in records]
    spark_type, theirs = sparks(spark, values, TIMES)
    assert [(f.name, f.dataType) for f in struct.fields] == [(f.name, f.dataType) for f in spark_type.fields]
    direct = direct_avro({baskets.FRAME: json.dumps(TIMES)}, struct)
    assert direct is not None
    arrow = pa.schema([
        ("ms", pa.int32()), ("us", pa.int64()), ("at", pa.struct([("ms", pa.int32())])), ("laps", pa.list_(pa.int64())),
        ("by", pa.map_(pa.string(), pa.int32())),
    ])  # fmt: skip
    mine = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert mine is not None, "takes every one of them"
    assert [_utc_naive(r) for r in mine.to_pylist()] == [_sparks_spelling(r) for r in theirs]
