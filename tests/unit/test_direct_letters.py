"""Which records a one-pass task makes dead letters of (tasks/dead_letters.py), in the words of
Spark's path (batch/decode/json_rows.py, batch/decode/avro.py: the same dead letters byte for byte
in tests/integration/test_direct_letters.py)."""

from __future__ import annotations

import pyarrow as pa

from icesink.tasks.dead_letters import NOT_FRAMED, NULL_VALUE, Letter, avro_letters, decoded, encoded

NAMED = "named"


def batch(values: list[bytes | None], named: list[bool | None] | None = None) -> pa.RecordBatch:
    n = len(values)
    columns = {
        "topic": pa.array(["t"] * n), "partition": pa.array([1] * n, pa.int32()),
        "offset": pa.array(range(100, 100 + n), pa.int64()), "value": pa.array(values, pa.binary()),
    }  # fmt: skip
    if named is not None:
        columns[NAMED] = pa.array(named, pa.bool_())
    return pa.RecordBatch.from_pydict(columns)


def test_null_and_unframed_avro_values_are_letters_the_others_decoded() -> None:
    framed = b"\x00\x00\x00\x00\x07body"
    values = [framed, None, b'{"id": 1}', b"\x00\x01", b"", b"\x01" + framed[1:], b"\x00\x00\x00\x00\x07", framed]
    kept, letters = avro_letters(batch(values), NAMED)
    assert kept.column("offset").to_pylist() == [100, 106, 107]
    assert sorted(letters) == [
        Letter("t", 1, 101, *NULL_VALUE),
        *[Letter("t", 1, o, *NOT_FRAMED) for o in (102, 103, 104, 105)],
    ]


def test_a_value_named_by_a_header_is_decoded_not_judged() -> None:
    kept, letters = avro_letters(batch([b"raw avro body", None, b"x"], [True, True, None]), NAMED)
    assert kept.column("offset").to_pylist() == [100]
    assert sorted(letters) == [Letter("t", 1, 101, *NULL_VALUE), Letter("t", 1, 102, *NOT_FRAMED)]


def test_nothing_to_judge_keeps_the_batch_as_it_is() -> None:
    records = batch([b"\x00\x00\x00\x00\x01a", b"\x00\x00\x00\x00\x01b"])
    kept, letters = avro_letters(records, NAMED)
    assert kept is records
    assert letters == []


def test_letters_cross_to_the_driver_unchanged() -> None:
    letters = [Letter("t", 0, 5, *NULL_VALUE), Letter("u", 3, 2**40, *NOT_FRAMED)]
    assert decoded(encoded(letters)) == letters
    assert NULL_VALUE == ("decode", "NullValue", "null value (tombstone) for an append-only table")
    assert NOT_FRAMED == ("header", "NotConfluentFramed", "no 0x00 magic byte and schema id")
