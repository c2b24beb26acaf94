"""The union check from the decoded values (tasks/avro_positions.py): every type's shortest
encoding computed as fastavro writes it, a bad union index found where it is, and what it leaves to
the reading again (a longer encoding, arrays); through AvroRows.decode, the same rows either way."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from decimal import Decimal
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from icesink.batch.direct_avro import direct_avro, row_struct
from icesink.kafka import wire
from icesink.tasks import avro_positions
from icesink.tasks.decode_avro import AvroRows

UTC = dt.UTC
INNER = {"type": "record", "name": "Inner", "fields": [
    {"name": "n", "type": "int"}, {"name": "tag", "type": ["null", "string"]},
]}  # fmt: skip
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Every",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": ["null", "int"]},
        {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": ["double", "null"]},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": ["null", "bytes"]},
        {"name": "fx", "type": {"type": "fixed", "name": "Fx", "size": 3}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}},
        {"name": "cents", "type": ["null", {"type": "fixed", "name": "Cents", "size": 8, "logicalType": "decimal",
                                            "precision": 18, "scale": 2}]},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "inner", "type": INNER},
        {"name": "maybe", "type": ["null", {**INNER, "name": "Maybe"}]},
    ],
}  # fmt: skip
# Magnitudes at each byte length's edges, for varints and two's-complement decimals.
EDGES = sorted({0, 1, *(2**k + d for k in range(6, 127) for d in (-1, 0, 1))})


def record(rng: random.Random) -> dict[str, Any]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.3 else v

    def long(bits: int) -> int:
        return rng.choice([e for e in EDGES if e < 2 ** (bits - 1)]) * rng.choice((1, -1))

    amount = rng.choice([e for e in EDGES if e < 10**38]) * rng.choice((1, -1))
    if amount < 0 and ~amount & -amount == 0:  # never -2**(8k-1): fastavro writes it a byte longer than Java
        amount -= 1
    amount = amount or 1  # a zero decimal is placed only if it has no byte (test_a_zero_decimal...)
    return {
        "l": long(64), "i": maybe(long(32)), "b": rng.random() < 0.5, "f": rng.random(), "d": maybe(rng.random()),
        "s": rng.choice(["", "é", "x" * rng.randrange(300)]), "raw": maybe(bytes(rng.randrange(200))),
        "fx": b"abc", "day": dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(-719_000, 2_900_000)),
        "ms": maybe(dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=long(45))),
        "us": dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=long(55)),
        "amount": Decimal(amount), "cents": maybe(Decimal(long(60)) / 100), "color": rng.choice(["RED", "GREEN"]),
        "inner": {"n": long(32), "tag": maybe("t")},
        "maybe": maybe({"n": long(8), "tag": maybe("u" * rng.randrange(130))}),
    }  # fmt: skip


def framed(schema: dict[str, Any], r: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    buf.write(wire.id_key(1))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), r)
    return buf.getvalue()


def rows_of(schema: dict[str, Any]) -> AvroRows:
    struct = row_struct(json.dumps(schema))
    assert struct is not None
    found = direct_avro({wire.id_key(1): json.dumps(schema)}, struct)
    assert found is not None
    from pyspark.sql.pandas.types import to_arrow_type

    return AvroRows(found, pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields]))


def judged(rows: AvroRows, values: list[bytes]) -> tuple[bool, list[bool]]:
    """What avro_positions says of `values`, read as AvroRows reads them: whether a placed record's
    index is refused, and which records are not placed."""
    w = rows._direct.writers[0]
    array = pa.array(values, pa.binary())
    decoded = rows._read(rows._headers[w.frame], array, [*w.fields, "__icesink_end"])
    assert decoded is not None
    refused, unplaced = avro_positions.indexes_placed(rows._fields[w.frame], w.unions, decoded, array)
    return refused, unplaced.tolist()


PLACED = (False, [False])  # one record, placed, its indexes its branches'
UNPLACED = (False, [True])


def test_every_type_is_placed_where_fastavro_writes_it() -> None:
    rng = random.Random(7)
    records = [record(rng) for _ in range(2_000)]
    rows = rows_of(SCHEMA)
    values = [framed(SCHEMA, r) for r in records]
    assert judged(rows, values) == (False, [False] * len(values))
    decoded = rows.decode(pa.array(values, pa.binary()))
    assert decoded is not None
    assert decoded.column("amount").to_pylist() == [r["amount"] for r in records]


def test_a_union_index_beyond_its_branches_is_found_where_it_is() -> None:
    rows = rows_of(SCHEMA)
    r = {**record(random.Random(1)), "maybe": {"n": 1, "tag": "zz"}}
    good = framed(SCHEMA, r)
    at = good.rindex(b"\x02\x04zz")  # maybe.tag: index 1, then the string
    bad = good[:at] + b"\x04" + good[at + 1 :]  # index 2 of a 2-branch union: polars reads the string
    assert judged(rows, [good, good]) == (False, [False, False])
    assert judged(rows, [good, bad])[0] is True, "refused"
    assert rows.decode(pa.array([good, bad], pa.binary())) is None


def test_a_longer_encoding_is_left_to_the_reading_again_which_takes_it() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "l", "type": "long"}, {"name": "o",
              "type": ["null", "long"]}]}  # fmt: skip
    rows = rows_of(schema)
    short = wire.id_key(1) + b"\x00\x02\x02"  # l = 0, o = 1
    long = wire.id_key(1) + b"\x80\x00\x02\x02"  # l = 0 in two bytes: Java reads it
    assert judged(rows, [short]) == PLACED
    assert judged(rows, [short, long]) == (False, [False, True]), "the longer one read again"
    decoded = rows.decode(pa.array([short, long], pa.binary()))
    assert decoded is not None
    assert decoded.to_pylist() == [{"l": 0, "o": 1}, {"l": 0, "o": 1}]
    # fastavro writes -128 in two bytes (ff 80) where Java's BigInteger writes one (80).
    money = {"type": "record", "name": "M", "fields": [{"name": "a", "type": {"type": "bytes", "logicalType":
             "decimal", "precision": 9, "scale": 0}}]}  # fmt: skip
    values = [framed(money, {"a": Decimal(v)}) for v in (-127, -128)]
    assert values[1][5:] == b"\x04\xff\x80"
    rows = rows_of(money)
    assert judged(rows, values) == (False, [False, True])
    decoded = rows.decode(pa.array(values, pa.binary()))
    assert decoded is not None
    assert decoded.to_pylist() == [{"a": Decimal(-127)}, {"a": Decimal(-128)}]


def test_arrays_are_left_to_the_reading_again() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "xs", "type": {"type": "array", "items": "long"}},
              {"name": "o", "type": ["null", "long"]}]}  # fmt: skip
    rows = rows_of(schema)
    assert judged(rows, [framed(schema, {"xs": [1, 2], "o": None})]) == UNPLACED


@pytest.mark.parametrize("sign", [1, -1])
def test_decimal_bytes_are_javas_fewest(sign: int) -> None:
    values = [sign * e for e in EDGES if e < 10**38] + [-(10**38) + 1, 10**38 - 1]
    array = pa.array([Decimal(v) for v in values], pa.decimal128(38, 0))
    # Java's BigInteger.toByteArray; a zero counted as none (polars reads no byte as 0)
    want = [(v if v >= 0 else ~v).bit_length() // 8 + 1 if v else 0 for v in values]
    assert avro_positions._decimal_bytes(array).tolist() == want
    assert avro_positions._decimal_bytes(array.slice(3, 5)).tolist() == want[3:8]


def test_varints_are_their_fewest_bytes() -> None:
    values = np.array([e for e in EDGES if e < 2**63] + [-(2**63), -1, -64, -65], dtype=np.int64)
    want = []
    for v in values.tolist():
        zz = (v << 1) ^ (v >> 63) if v >= 0 else ((-v) << 1) - 1
        want.append(max(1, (zz.bit_length() + 6) // 7))
    assert avro_positions._varint_bytes(avro_positions._zigzag(values)).tolist() == want


def test_a_struct_table_is_judged_with_its_columns() -> None:
    """The wide Debezium-like row of the end-to-end tests: many optional columns, one check."""
    schema = {"type": "record", "name": "W", "fields": [{"name": f"o{k}", "type": ["null", "long"]}
                                                        for k in range(100)]}  # fmt: skip
    table = T.StructType([T.StructField(f"o{k}", T.LongType()) for k in range(100)])
    found = direct_avro({wire.id_key(1): json.dumps(schema)}, table)
    assert found is not None
    rng = random.Random(3)
    records = [{f"o{k}": None if rng.random() < 0.5 else k for k in range(100)} for _ in range(500)]
    rows = AvroRows(found, pa.schema([(f"o{k}", pa.int64()) for k in range(100)]))
    assert judged(rows, [framed(schema, r) for r in records]) == (False, [False] * len(records))
    decoded = rows.decode(pa.array([framed(schema, r) for r in records], pa.binary()))
    assert decoded is not None, "500 records of ~500 combinations of null fields, checked in one pass"
    assert decoded.to_pylist() == records


def test_a_zero_decimal_is_read_again_and_one_of_no_byte_refused_either_way() -> None:
    """Java writes a zero decimal as one byte and refuses one of none, which polars reads as 0 too:
    a record with a zero decimal is not placed (which size it has is not known) but read again,
    where a decimal of no byte is refused."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}},
        {"name": "u", "type": ["null", "int"]}, {"name": "a", "type": "long"}]}  # fmt: skip
    rows = rows_of(schema)
    zero = framed(schema, {"d": Decimal(0), "u": 1, "a": 0})
    assert zero[5:] == b"\x02\x00\x02\x02\x00"
    assert judged(rows, [zero]) == UNPLACED
    decoded = rows.decode(pa.array([zero], pa.binary()))
    assert decoded is not None
    assert decoded.to_pylist() == [{"d": Decimal(0), "u": 1, "a": 0}]
    empty = wire.id_key(1) + b"\x00\x02\x02\x00"  # d of no byte
    assert judged(rows, [empty]) == UNPLACED
    assert rows.decode(pa.array([empty], pa.binary())) is None
    # No byte for d, union index 2, a written in two bytes: were the zero counted as a byte, the
    # sizes would add up and the byte at the index's place be 0x02. Read again; refused.
    offset = wire.id_key(1) + b"\x00\x04\x02\x80\x00"
    assert judged(rows, [offset]) == UNPLACED
    assert rows.decode(pa.array([offset], pa.binary())) is None
    # Read again (a written in two bytes): the decimal of no byte refused there too.
    longer = wire.id_key(1) + b"\x00\x02\x02\x80\x00"
    assert judged(rows, [zero, longer]) == (False, [True, True])
    assert rows.decode(pa.array([zero, longer], pa.binary())) is None
    assert rows.decode(pa.array([zero, zero[:-1] + b"\x80\x00"], pa.binary())) is not None
    # Placed records beside them: only the others are read again.
    one = framed(schema, {"d": Decimal(1), "u": None, "a": 7})
    assert judged(rows, [one, zero, one]) == (False, [False, True, False])
    decoded = rows.decode(pa.array([one, zero, one], pa.binary()))
    assert decoded is not None
    assert decoded.column("a").to_pylist() == [7, 0, 7]
    assert rows.decode(pa.array([one, empty, one], pa.binary())) is None
