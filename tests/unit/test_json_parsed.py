"""A batch of plain JSON records parsed whole by Arrow's JSON reader (tasks/decode_json.parsed_columns,
taken by tasks/plain_rows.DirectRows): wherever it takes a batch, its rows are the ones the
record-at-a-time decoder makes (which tests/spark/test_json_direct.py pins against Spark's path);
whatever that decoder would refuse or decide otherwise, the whole-batch parse leaves to it."""

from __future__ import annotations

import math
import random
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import ArrayType, BooleanType, DoubleType, LongType, StringType, StructField, StructType

from icesink.tasks.carried_rows import TOMBSTONE, in_order, joined
from icesink.tasks.decode_json import DirectColumn, direct_columns, parsed_columns
from icesink.tasks.plain_rows import DirectRows
from icesink.tasks.table_out import REFUSED
from tests.support.mangle import mangled

INNER = StructType([StructField("os", StringType()), StructField("v", DoubleType())])
SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("x", DoubleType()),
        StructField("s", StringType()),
        StructField("b", BooleanType()),
        StructField("tags", ArrayType(StringType())),
        StructField("device", StructType([StructField("app", StringType()), StructField("hw", INNER)])),
        StructField("items", ArrayType(INNER)),
    ]
)
GOOD = [
    b'{"id": 1, "x": 0.1, "s": "caf\\u00e9 \\"q\\" \\/ \\u0000", "b": true, "tags": ["a", null], "device": {"app": "3",'
    b' "hw": {"os": "ios", "v": 2}}, "items": [{"os": "a"}, null]}',
    b'{"id": -0, "x": 9007199254740991, "s": "\xc3\xa9\xf0\x9f\x98\x80", "b": false, "tags": [], "items": []}',
    b'{"x": 12.5, "device": {}, "items": null}',
    b"{}",
    b'{"id": 9223372036854775807, "x": -1.5e-300, "device": null}',
    b'{\n  "id": 3,\r\n  "s": "spread over lines"\n}',
    b'{"\\u0069d": 4}',  # a key spelled with an escape
    b'{"x": 1E+2, "s": ""}',
]
# Each refused by the record-at-a-time decoder, or one Arrow's reader may not read as it does (a
# double of 2**53 or more: an integer there it leaves to Spark's path; the integer -0, which Arrow's
# reader reads as -0.0 into a double).
DOUBTFUL = [
    b"null", b"[1]", b"1", b'"s"', b"", b"  ", b"\xef\xbb\xbf{}", b"\x00\x00\x00\x00\x01{}", b'{"s": "\xff"}',
    b'{"x": NaN}', b'{"x": -NaN}', b'{"x": Infinity}', b'{"x": -Inf}', b'{"x": 1e999}', b'{"id": 1, "id": 2}',
    b'{"new": 1}', b'{"ID": 1}', b'{"device": {"app": "x", "new": 1}}', b'{"s": 1}', b'{"id": true}',
    b'{"b": 1}', b'{"id": 1.0}', b'{"id": 1e2}', b'{"id": 9223372036854775808}', b'{"id": "1"}',
    b'{"items": {"os": "a"}}', b'{"tags": [1]}', b'{"s": "\\ud800"}', b'{"id": 1} x', b'{"id": 1}{"id": 2}',
    b"{'id': 1}", b'{"id": 1,}', b'{"s": "a\tb"}', b'{"id": 01}', b'{"x": 9007199254740993}',
    b'{"x": 18446744073709551616}', b'{"x": -1e300}', b'{"items": [{"v": 1e17}]}',
    b'{"x": -0}', b'{"x": -0.0}', b'{"items": [{"v": -0}]}',  # a negative zero: the integer -0 is 0.0
]  # fmt: skip


def columns() -> tuple[DirectColumn, ...]:
    found = direct_columns(SCHEMA)
    assert found is not None
    return found


def one_at_a_time(values: list[bytes | None]) -> list[pa.Array] | None:
    """The record-at-a-time decoder's columns of `values`, or None where it does not take them all."""
    rows = DirectRows(columns())
    if not all(rows.add(v) for v in values):
        return None
    try:
        batch = rows.take()
    except REFUSED:
        return None
    assert batch is not None
    return batch.columns


def same(got: list[pa.Array], expected: list[pa.Array]) -> bool:
    """Equal columns, a zero's sign too (`Array.equals` takes -0.0 for 0.0)."""
    return all(g.equals(e) and _signs(g) == _signs(e) for g, e in zip(got, expected, strict=True))


def _signs(array: pa.Array) -> list[Any]:
    """The sign of every double at any depth of `array` (None for a null)."""
    return [_sign(v) for v in _floats(array.to_pylist())]


def _floats(values: Any) -> list[float | None]:
    if isinstance(values, list):
        return [f for v in values for f in _floats(v)]
    if isinstance(values, dict):
        return [f for v in values.values() for f in _floats(v)]
    return [values] if isinstance(values, float) else []


def _sign(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else math.copysign(1.0, v)


def test_a_batch_parsed_whole_is_the_rows_of_a_record_at_a_time() -> None:
    expected = one_at_a_time(list(GOOD))
    assert expected is not None
    got = parsed_columns(columns(), GOOD)
    assert got is not None, "a batch of plain objects of the table's columns is parsed whole"
    assert same(got, expected)
    assert got[2][0].as_py() == 'café "q" / \x00'
    assert got[1].to_pylist()[1:3] == [9007199254740991.0, 12.5]


@pytest.mark.parametrize("doubtful", DOUBTFUL, ids=range(len(DOUBTFUL)))
def test_a_doubtful_record_leaves_its_batch_to_the_record_at_a_time_decoder(doubtful: bytes) -> None:
    assert parsed_columns(columns(), [GOOD[0], doubtful, GOOD[1]]) is None


def test_mangled_records_are_parsed_whole_only_into_the_rows_a_record_at_a_time_makes() -> None:
    """Random bytes changed, dropped or added in good records (a fixed seed): Arrow's reader takes
    a batch only where the record-at-a-time decoder makes the same rows (and never crashes the
    task: a null value did, before values not framed as objects were left out)."""
    rng = random.Random(36)
    alphabet = b'{}[]",:0123456789.eE+-\\untrfasl \n\xff\xc3'
    parsed = 0
    for _ in range(1500):
        record = mangled(rng.choice(GOOD), rng, alphabet)
        batch = [GOOD[3], record]
        got = parsed_columns(columns(), batch)
        if got is None:
            continue
        parsed += 1
        expected = one_at_a_time(list(batch))
        assert expected is not None, record
        assert same(got, expected), record
    assert parsed > 100, "most mangled records are refused by both, but not all"


def test_batches_parsed_whole_and_records_taken_one_at_a_time_keep_their_order() -> None:
    rows = DirectRows(columns())
    assert rows.add(b'{"id": 1}')
    assert rows.add_parsed([b'{"id": 2}', b'{"id": 3}'])
    assert rows.add(b'{"id": 4}')
    assert not rows.add_parsed([b'{"id": 5}', b'{"id": "6"}']), "a value of another type: none taken"
    assert rows.add(b'{"id": 5}')
    assert rows.add_parsed([b'{"id": 6}'])
    assert rows.rows == 6
    batch = rows.take()
    assert batch is not None
    assert batch.column("id").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert rows.take() is None
    assert rows.rows == 0


def test_a_table_of_changes_takes_a_batch_whole_with_its_tombstones() -> None:
    """A keyed table of changes: a tombstone (no value) is a row of only its key, its flag set, as
    the record-at-a-time decoder makes it."""
    keyed = direct_columns(StructType([StructField("v", LongType()), StructField("_key", StringType())]))
    assert keyed is not None
    values, keys = [b'{"v": 1}', None, b'{"v": 2, "_key": "not the key"}'], [b"k1", b"k1", b"k2"]
    coordinates = (pa.array(["t"] * 3), pa.array([0] * 3, pa.int32()), pa.array([5, 6, 7], pa.int64()))
    whole, one = DirectRows(keyed, carry=True, key_column="_key"), DirectRows(keyed, carry=True, key_column="_key")
    assert whole.add_all(values, coordinates, keys)
    assert whole._parsed, "parsed whole"
    for offset, value, key in zip([5, 6, 7], values, keys, strict=True):
        assert one.add(value, ("t", 0, offset), key)
    got, expected = whole.take(), one.take()
    assert got is not None
    assert expected is not None
    assert got.to_pydict() == expected.to_pydict()
    assert got.to_pydict()[TOMBSTONE] == [False, True, False]
    assert got.to_pydict()["v"] == [1, None, 2]
    appends = DirectRows(keyed, key_column="_key")
    assert not appends.add_parsed([b'{"v": 1}']), "an append table keyed by the record key: a record at a time"


def test_in_order_puts_each_batch_taken_whole_after_the_records_taken_before_it() -> None:
    rows = "abcde"  # taken one at a time; a batch is (how many of them came before it, its piece)

    def between(start: int, end: int) -> str:
        return rows[start:end]

    assert in_order([], 5, between) == ["abcde"]
    assert in_order([(0, "X")], 5, between) == ["X", "abcde"]
    assert in_order([(2, "X"), (2, "Y"), (5, "Z")], 5, between) == ["ab", "X", "Y", "cde", "Z"]
    assert in_order([(0, "X")], 0, between) == ["X"]
    assert joined([[pa.array([1]), pa.array(["a"])]], 2) == [pa.array([1]), pa.array(["a"])]
    assert joined([[pa.array([1]), pa.array(["a"])], [pa.array([2]), pa.array(["b"])]], 2) == [
        pa.array([1, 2]),
        pa.array(["a", "b"]),
    ]
