"""Which records a one-pass task makes dead letters of (tasks/dead_letters.py), in the words of
Spark's path (batch/decode/json_rows.py, batch/decode/avro.py: the same dead letters byte for byte
in tests/integration/test_direct_letters.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.types import LongType, StructField, StructType

from icesink.tasks.dead_letters import (
    EMPTY_VALUE,
    MAX_LETTERS,
    NOT_AN_OBJECT,
    NOT_FRAMED,
    NOT_JSON,
    NULL_VALUE,
    Letter,
    avro_letters,
    decoded,
    encoded,
    undecodable_letters,
)
from icesink.tasks.decode_connect import DirectConnect
from icesink.tasks.decode_json import DirectColumn
from icesink.tasks.files import WriteTask
from icesink.tasks.one_pass import direct_fn
from icesink.tasks.storage import StorageSettings
from icesink.tasks.table_out import DirectTable

NAMED = "named"


def batch(values: list[bytes | None], named: list[bytes | None] | None = None) -> pa.RecordBatch:
    n = len(values)
    columns = {
        "topic": pa.array(["t"] * n), "partition": pa.array([1] * n, pa.int32()),
        "offset": pa.array(range(100, 100 + n), pa.int64()), "value": pa.array(values, pa.binary()),
    }  # fmt: skip
    if named is not None:
        columns[NAMED] = pa.array(named, pa.binary())
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


def test_a_null_value_of_a_table_of_changes_is_a_tombstone_not_a_letter() -> None:
    framed = b"\x00\x00\x00\x00\x07body"
    kept, letters = avro_letters(batch([framed, None, b"\x00\x01", None]), NAMED, nulls=False)
    assert kept.column("offset").to_pylist() == [100, 101, 103], "the tombstones go on to the table's rows"
    assert letters == [Letter("t", 1, 102, *NOT_FRAMED)]


ID_HEADER = b"\x00\x00\x00\x01\x2c"  # schema id 300
GUID_HEADER = b"\x01" + bytes(range(16))


def test_a_value_named_by_a_header_is_decoded_not_judged() -> None:
    """As Spark's path: a header of the id's or the GUID's shape names the schema (the value is a
    bare body); one of any other shape is as none, and the value's own frame counts."""
    values = [b"raw avro body", None, b"x", b"raw", b"raw", b"raw", b"\x00\x00\x00\x00\x07body"]
    headers = [ID_HEADER, ID_HEADER, None, GUID_HEADER, b"\x00\x00\x01", b"\x05" + ID_HEADER[1:], b"\x07"]
    kept, letters = avro_letters(batch(values, headers), NAMED)
    assert kept.column("offset").to_pylist() == [100, 103, 106]
    assert sorted(letters) == [
        Letter("t", 1, 101, *NULL_VALUE),
        *[Letter("t", 1, o, *NOT_FRAMED) for o in (102, 104, 105)],
    ]


def test_avro_bodies_java_cannot_decode_are_letters_naming_their_writer_schema() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}
    frame = b"\x00\x00\x00\x01\x2c"  # schema id 300
    good, cut, trailing = frame + b"\x04ok", frame + b"\x08ok", frame + b"\x04ok!"
    other = b"\x00\x00\x00\x00\x07\x08ok"  # a writer schema not given: not judged here
    # Named in a header: the whole value is the body. By id, judged with that schema; by GUID, not.
    values = [good, cut, trailing, other, b"\x08ok", b"\x04ok", b"\x08ok"]
    headers = [None, None, None, None, ID_HEADER, ID_HEADER, GUID_HEADER]
    kept, letters = undecodable_letters(batch(values, headers), {frame: schema}, NAMED)
    assert kept.column("offset").to_pylist() == [100, 102, 103, 105, 106]
    why = ("decode", "AvroDecodeError", "body does not decode with writer schema 300")
    assert letters == [Letter("t", 1, o, *why) for o in (101, 104)]


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


def one_pass_rows(tmp_path: Path, values: list[bytes | None], connect: bool = False) -> list[dict[str, Any]]:
    """The result rows of a one-pass task (tasks/one_pass.direct_fn) over `values`, for one plain
    JSON (`connect`: Connect JSON) append table of a long `id` that makes dead letters, written to
    a local folder."""
    schema = pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    task = WriteTask("ns.t", schema, f"file://{tmp_path}/", "q-00000001", storage=StorageSettings())
    decoder = DirectConnect(StructType([StructField("id", LongType())])) if connect else (DirectColumn("id", "long"),)
    table = DirectTable(task, decoder, {("t", 1): (100, 100 + len(values))}, True, letters=True)
    run = direct_fn([table], batch_id=1)
    out = pa.Table.from_batches(list(run(iter([batch(values)])))).to_pylist()
    return sorted(out, key=lambda r: (r["letters"] is not None, r["declined"]))


def test_a_task_reports_its_dead_letters_beside_its_files(tmp_path: Path) -> None:
    found = one_pass_rows(tmp_path, [b'{"id": 1}', None, b'{"id": 2}', None])
    assert [(r["table"], r["declined"], r["record_count"]) for r in found] == [(0, False, 2), (0, False, None)]
    assert decoded(found[1]["letters"]) == [Letter("t", 1, 101, *NULL_VALUE), Letter("t", 1, 103, *NULL_VALUE)]


def test_json_values_that_are_not_objects_are_letters_and_a_new_column_still_declines(tmp_path: Path) -> None:
    found = one_pass_rows(tmp_path, [b'{"id": 1}', b"oops", b"", b"[3]", b'{"id": 2'])
    assert [(r["table"], r["declined"], r["record_count"]) for r in found] == [(0, False, 1), (0, False, None)]
    assert decoded(found[1]["letters"]) == [
        Letter("t", 1, 101, *NOT_JSON), Letter("t", 1, 102, *EMPTY_VALUE),
        Letter("t", 1, 103, *NOT_AN_OBJECT), Letter("t", 1, 104, *NOT_JSON),
    ]  # fmt: skip
    for undecided in (b'{"id": 1, "new": 2}', b"{'id': 1}", b'{"id": 1} trailing'):
        found = one_pass_rows(tmp_path, [b"oops", undecided])
        assert [(r["declined"], r["letters"]) for r in found] == [(True, None)], undecided


def test_a_task_with_more_dead_letters_than_the_driver_reads_back_declines_the_table(tmp_path: Path) -> None:
    found = one_pass_rows(tmp_path, [b'{"id": 1}'] + [None] * (MAX_LETTERS + 1))
    assert [(r["table"], r["declined"], r["letters"]) for r in found] == [(0, True, None)]
    found = one_pass_rows(tmp_path, [b'{"id": 1}'] + [None, b"x"] * (MAX_LETTERS // 2))
    assert [(r["declined"], len(decoded(r["letters"])) if r["letters"] else 0) for r in found] == [
        (False, 0),
        (False, MAX_LETTERS),
    ], "up to MAX_LETTERS, of any kind"


def test_a_connect_json_append_tables_null_values_are_letters_and_plain_json_declines(tmp_path: Path) -> None:
    """Connect JSON: a null value is Spark's path's letter as for plain JSON; a value without a
    Connect schema is not judged (that path may read it as plain JSON, or word it otherwise)."""
    record = b'{"schema":{"type":"struct","fields":[{"field":"id","type":"int64"}]},"payload":{"id":1}}'
    found = one_pass_rows(tmp_path, [record, None, record], connect=True)
    assert [(r["table"], r["declined"], r["record_count"]) for r in found] == [(0, False, 2), (0, False, None)]
    assert decoded(found[1]["letters"]) == [Letter("t", 1, 101, *NULL_VALUE)]
    for undecided in (b"oops", b"[3]", b'{"id": 1}'):
        found = one_pass_rows(tmp_path, [record, undecided], connect=True)
        assert [(r["declined"], r["letters"]) for r in found] == [(True, None)], undecided
