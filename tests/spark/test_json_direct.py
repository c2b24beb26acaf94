"""The one-pass JSON decoder (tasks/decode_json.py) against Spark's: every record it takes, Spark's
guessed decode (the path it stands in for) takes too, as the same row; and a batch parsed whole by
Arrow's JSON reader (`parsed_columns`) holds only such records, as the same rows."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, BooleanType, DoubleType, LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ROW
from icesink.batch.decode.json import JsonDecoder
from icesink.tasks.decode_json import DeclinedValueError, direct_columns, parsed_columns
from icesink.tasks.plain_rows import DirectRows
from tests.support.frames import kafka_records

SHAPE = StructType(
    [
        StructField("id", LongType()),
        StructField("amount", DoubleType()),
        StructField("name", StringType()),
        StructField("ok", BooleanType()),
        StructField("tags", ArrayType(StringType())),
        StructField("nums", ArrayType(LongType())),
        StructField("device", StructType([StructField("os", StringType()), StructField("v", DoubleType())])),
        StructField("items", ArrayType(StructType([StructField("n", LongType())]))),
    ]
)

TAKEN: list[bytes] = [
    b'{"id": 1, "amount": 2.5, "name": "a", "ok": true, "tags": ["x", null], "nums": [1, -2]}',
    b'{"id": -0, "amount": 3}',
    b'{"amount": -0}',  # the integer -0: 0.0, not -0.0
    b'{"amount": -0.0}',
    b'{"amount": 1e3, "ok": false}',
    b'{"amount": -1.5e-300, "nums": []}',
    b'{"amount": 0.1}',
    b'{"amount": 9007199254740992}',
    b'{"amount": NaN}',
    b'{"name": "\\u00e9\\n\\u0000 \\ud83d\\ude00 \xc3\xa9"}',
    b'{"id": null, "tags": null, "name": null}',
    b"{}",
    b'\x00\x00\x00\x00\x07{"id": 7}',
    b'  {"id": 8}\n',
    b'{"id": 9223372036854775807}',
    b'{"id": -9223372036854775808}',
    b'{"id": 9, "id": 10}',
    b'{"amount": 18446744073709551616}',  # beyond 64 bits: orjson reads the nearest double
    b'{"amount": -123456789012345678901234567890}',
    b'{"device": {"os": "ios", "v": 1}, "items": [{"n": 1}, null, {}]}',
    b'{"device": {}, "items": []}',
    b'{"device": null, "items": null}',
    b'{"device": {"v": NaN}}',
]

DECLINED: list[bytes | None] = [
    b'{"id": 1.0}',  # Spark: not a long
    b'{"id": "1"}',
    b'{"id": 9223372036854775808}',
    b'{"id": true}',
    b'{"name": 5}',  # Spark takes it as the text "5": this decoder leaves such a record to Spark
    b'{"name": {"a": 1}}',
    b'{"extra": 1}',  # a new column: Spark's pass leaves it pending, for the second pass
    b'{"ID": 1}',
    b'{"amount": Infinity}',
    b'{"amount": 1e999}',
    b'{"device": {"os": 1}}',  # Spark takes it as the text "1"
    b'{"device": {"model": "x"}}',  # a field the struct lacks
    b'{"device": {"v": Infinity}}',
    b'{"device": [1]}',
    b'{"items": [{"n": 1.5}]}',
    b'{"items": {"n": 1}}',
    b'{"amount": 9007199254740993}',
    b'{"amount": "1.5"}',
    b'{"tags": ["a", 1]}',
    b'{"nums": [1, 2.5]}',
    b'{"nums": 1}',
    b"[1]",
    b'"x"',
    b"null",
    b"",
    None,
    b"not json",
    b'{"id": 1} x',
    b"\xff\xfe{}",
    b'\xef\xbb\xbf{"id": 1}',  # a byte order mark
]


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN, at any depth."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)  # a zero's sign too
    return bool(a == b and type(a) is type(b))


def _takes(columns: Any, value: bytes | None) -> bool:
    rows = DirectRows(columns)
    try:
        return rows.add(value) and rows.take() is not None
    except (DeclinedValueError, pa.ArrowException, OverflowError, UnicodeError):
        return False


def test_every_record_it_takes_spark_decodes_to_the_same_row(spark: SparkSession) -> None:
    columns = direct_columns(SHAPE)
    assert columns is not None
    taken = [v for v in [*TAKEN, *DECLINED] if _takes(columns, v)]
    assert taken == TAKEN, "takes exactly the records it is sure of"
    rows = DirectRows(columns)
    assert all(rows.add(v) for v in TAKEN)
    batch = rows.take()
    assert batch is not None
    direct = batch.to_pylist()

    inspected = JsonDecoder(spark).inspect(kafka_records(spark, TAKEN), SHAPE, guessed=True)
    decoded = inspected.parse(SHAPE).orderBy("offset").collect()
    assert [r[ERROR] for r in decoded] == [None] * len(TAKEN), "Spark's pass takes every one of them"
    for value, mine, theirs in zip(TAKEN, direct, decoded, strict=True):
        row = theirs[ROW].asDict(recursive=True)
        for name in SHAPE.fieldNames():
            a, b = mine[name], row[name]
            if isinstance(a, list) and isinstance(b, list):
                assert len(a) == len(b), value
                assert all(_same(x, y) for x, y in zip(a, b, strict=True)), value
            else:
                assert _same(a, b) or (a is None and b is None), (value, name, a, b)

    # Arrow's whole-batch parse takes a subset of them (the rest it leaves to the record-at-a-time
    # decoder), as the same rows.
    whole = [v for v in [*TAKEN, *DECLINED] if v is not None and parsed_columns(columns, [v]) is not None]
    assert set(whole) <= set(TAKEN)
    assert len(whole) >= len(TAKEN) // 2, whole
    arrays = parsed_columns(columns, whole)
    assert arrays is not None
    parsed = pa.RecordBatch.from_arrays(arrays, names=SHAPE.fieldNames()).to_pylist()
    for value, got in zip(whole, parsed, strict=True):
        assert _same(got, direct[TAKEN.index(value)]), value
