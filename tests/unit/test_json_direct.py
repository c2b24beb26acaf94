"""The one-pass JSON decoder's pure parts: which tables it can fill (tasks/decode_json.py), and the
Arrow rows it makes (tasks/plain_rows.py)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesink.tasks.carried_rows import TOMBSTONE
from icesink.tasks.dead_letters import NOT_AN_OBJECT, NOT_JSON
from icesink.tasks.decode_json import DeclinedValueError, DirectColumn, direct_columns, json_object
from icesink.tasks.plain_rows import DirectRows
from tests.support.plain_events import CHANGES, KEY, LETTERED, UNLETTERED, change_rows, event


def shape(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_only_tables_of_nullable_simple_columns_are_filled() -> None:
    simple = shape(
        StructField("id", LongType()),
        StructField("x", DoubleType()),
        StructField("s", StringType()),
        StructField("b", BooleanType()),
        StructField("tags", ArrayType(StringType())),
    )
    assert direct_columns(simple) == (
        DirectColumn("id", "long"),
        DirectColumn("x", "double"),
        DirectColumn("s", "string"),
        DirectColumn("b", "boolean"),
        DirectColumn("tags", "string", array=True),
    )
    for other in (
        StructField("ts", TimestampType()),
        StructField("d", DecimalType(10, 2)),
        StructField("i", IntegerType()),  # a created table's JSON integers are longs; an int column is someone else's
        StructField("nested", shape(StructField("a", LongType(), nullable=False))),
        StructField("nested", shape(StructField("t", TimestampType()))),
        StructField("nested", shape()),
        StructField("id", LongType(), nullable=False),
        StructField("tags", ArrayType(StringType(), containsNull=False)),
        StructField("deep", ArrayType(ArrayType(LongType()))),
    ):
        assert direct_columns(shape(StructField("ok", LongType()), other)) is None, other
    assert direct_columns(shape()) is None


def test_structs_and_arrays_of_structs_at_any_depth() -> None:
    inner = shape(StructField("os", StringType()), StructField("v", DoubleType()))
    columns = direct_columns(
        shape(
            StructField("id", LongType()),
            StructField("device", shape(StructField("app", StringType()), StructField("hw", inner))),
            StructField("items", ArrayType(inner)),
        )
    )
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"id": 1, "device": {"app": "3.1", "hw": {"os": "ios", "v": 2}}, "items": [{"os": "a"}, null]}')
    assert rows.add(b'{"id": 2, "device": {}, "items": []}')
    assert rows.add(b'{"id": 3, "device": null}')
    batch = rows.take()
    assert batch is not None
    assert batch.to_pylist() == [
        {"id": 1, "device": {"app": "3.1", "hw": {"os": "ios", "v": 2.0}}, "items": [{"os": "a", "v": None}, None]},
        {"id": 2, "device": {"app": None, "hw": None}, "items": []},
        {"id": 3, "device": None, "items": None},
    ]
    for declined in (
        b'{"device": {"app": "x", "new": 1}}',  # a field the struct lacks: Spark's inference widens it
        b'{"device": {"hw": {"v": "2"}}}',  # a string for a double, deep down
        b'{"device": {"hw": {"v": 1e999}}}',  # an infinity, deep down
        b'{"device": "x"}',
        b'{"items": [{"os": 1}]}',
        b'{"items": {"os": "a"}}',
    ):
        rows = DirectRows(columns)
        assert rows.add(declined)
        with pytest.raises(DeclinedValueError):
            rows.take()


def test_a_required_key_column_of_a_table_of_changes_is_filled() -> None:
    keyed = shape(StructField("id", LongType(), nullable=False), StructField("op", StringType()))
    assert direct_columns(keyed) is None, "a required column of an append table"
    assert direct_columns(keyed, keys=("id",)) == (DirectColumn("id", "long"), DirectColumn("op", "string"))


def test_rows_of_changes_carry_their_kafka_coordinates_first() -> None:
    columns = direct_columns(shape(StructField("id", LongType()), StructField("op", StringType())))
    assert columns is not None
    rows = DirectRows(columns, carry=True)
    assert rows.add(b'{"id": 1, "op": "I"}', ("t", 2, 40))
    assert not rows.add(b"[1]", ("t", 2, 41)), "not an object: nothing taken, no coordinates either"
    assert rows.add(b'{"id": 1, "op": "D"}', ("t", 2, 42))
    batch = rows.take()
    assert batch is not None
    assert batch.schema.names == ["topic", "partition", "offset", TOMBSTONE, "id", "op"]
    assert batch.to_pydict() == {
        "topic": ["t", "t"], "partition": [2, 2], "offset": [40, 42], TOMBSTONE: [False, False],
        "id": [1, 1], "op": ["I", "D"],
    }  # fmt: skip
    assert rows.take() is None
    assert not rows.add(None, ("t", 2, 43)), "a tombstone of a table not keyed by the record key"


def test_string_keys_fill_the_key_column_and_tombstones_are_rows_of_their_key() -> None:
    columns = direct_columns(shape(StructField("v", LongType()), StructField("_key", StringType())))
    assert columns is not None
    rows = DirectRows(columns, carry=True, key_column="_key")
    assert rows.add(b'{"v": 1, "_key": "not the key"}', ("t", 0, 7), b"k1")
    assert rows.add(None, ("t", 0, 8), b"k1")
    assert rows.add(b'{"v": 2}', ("t", 0, 9), None)
    batch = rows.take()
    assert batch is not None
    assert batch.to_pydict() == {
        "topic": ["t"] * 3, "partition": [0] * 3, "offset": [7, 8, 9], TOMBSTONE: [False, True, False],
        "v": [1, None, 2], "_key": ["k1", "k1", None],
    }  # fmt: skip
    appends = DirectRows(columns, key_column="_key")
    assert not appends.add(None, None, b"k"), "a tombstone of an append table: Spark's path makes it a dead letter"
    assert appends.add(b'{"v": 3}', None, b"\xff\xfe")
    with pytest.raises(pa.ArrowInvalid):
        appends.take()  # a key that is not UTF-8: left to Spark's path


def test_a_batch_taken_whole_is_the_same_rows_as_a_record_at_a_time() -> None:
    """`add_all` (the one JSON table of a task, taking every record it reads) carries the batch's
    own coordinate columns and keys, tombstones too: the same rows as `add`, over two batches."""
    columns = direct_columns(shape(StructField("v", LongType()), StructField("_key", StringType())))
    assert columns is not None
    records = [(b'{"v": 1}', b"k1"), (None, b"k1"), (b'{"v": 2}', None), (b'{"v": 3}', b"k3")]
    one, whole = DirectRows(columns, carry=True, key_column="_key"), DirectRows(columns, carry=True, key_column="_key")
    for offset, (value, key) in enumerate(records):
        assert one.add(value, ("t", 1, offset), key)
    for part in (records[:3], records[3:]):
        first = records.index(part[0])
        coordinates = (
            pa.array(["t"] * len(part)), pa.array([1] * len(part), pa.int32()),
            pa.array(range(first, first + len(part)), pa.int64()),
        )  # fmt: skip
        assert whole.add_all([v for v, _ in part], coordinates, [k for _, k in part])
    expected, got = one.take(), whole.take()
    assert expected is not None
    assert got is not None
    assert got.to_pydict() == expected.to_pydict()
    assert got.to_pydict()[TOMBSTONE] == [False, True, False, False]
    assert not DirectRows(columns, carry=True).add_all([b'{"v": 1}', b"[1]"], coordinates), "one not taken: False"


def test_rows_come_out_in_the_columns_arrow_types_with_nulls_for_missing_keys() -> None:
    columns = direct_columns(
        shape(StructField("id", LongType()), StructField("x", DoubleType()), StructField("tags", ArrayType(LongType())))
    )
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"id": 1, "x": 2, "tags": [1, null]}')
    assert rows.add(b'\x00\x00\x00\x00\x01{"x": 0.5}')  # framed by Confluent's JSONSerializer
    assert not rows.add(b'{"id": 1, "y": 2}'), "a key the table lacks"
    assert rows.rows == 2
    batch = rows.take()
    assert batch is not None
    assert batch.schema == pa.schema([("id", pa.int64()), ("x", pa.float64()), ("tags", pa.list_(pa.int64()))])
    assert batch.to_pylist() == [{"id": 1, "x": 2.0, "tags": [1, None]}, {"id": None, "x": 0.5, "tags": None}]
    assert rows.take() is None, "taken rows are not taken again"


REFUSED = (DeclinedValueError, pa.ArrowException, OverflowError, UnicodeError)


def decoded(kind: DataType, value: bytes) -> object:
    """The column's value of the record `{"c": value}`, or "declined"."""
    columns = direct_columns(shape(StructField("c", kind)))
    assert columns is not None
    rows = DirectRows(columns)
    if not rows.add(b'{"c": ' + value + b"}"):
        return "declined"
    try:
        batch = rows.take()
    except REFUSED:
        return "declined"
    assert batch is not None
    return batch.to_pylist()[0]["c"]


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (LongType(), b"1.0"),
        (LongType(), b'"1"'),
        (LongType(), b"true"),
        (LongType(), b"9223372036854775808"),
        (LongType(), b"-9223372036854775809"),
        (LongType(), b"18446744073709551616"),
        (DoubleType(), b'"1.5"'),
        (DoubleType(), b"true"),
        (DoubleType(), b"9007199254740993"),  # not exactly a double
        (DoubleType(), b"Infinity"),
        (DoubleType(), b"1e999"),
        (StringType(), b"5"),
        (StringType(), b'{"a": 1}'),
        (StringType(), b'["x"]'),
        (BooleanType(), b"1"),
        (BooleanType(), b'"true"'),
        (ArrayType(LongType()), b"1"),
        (ArrayType(LongType()), b"[1.5]"),
        (ArrayType(LongType()), b'["x"]'),
        (ArrayType(DoubleType()), b"[1, Infinity]"),
    ],
)
def test_a_value_not_of_its_columns_type_declines_the_rows(kind: DataType, value: bytes) -> None:
    assert decoded(kind, value) == "declined"


def test_values_of_their_columns_type_are_taken_as_spark_takes_them() -> None:
    assert decoded(LongType(), b"-9223372036854775808") == -(2**63)
    assert decoded(DoubleType(), b"2") == 2.0
    assert decoded(DoubleType(), b"9007199254740992") == 2.0**53
    assert decoded(DoubleType(), b"18446744073709551616") == 2.0**64, "beyond 64 bits: the nearest double"
    nan = decoded(DoubleType(), b"NaN")
    assert isinstance(nan, float)
    assert math.isnan(nan)
    assert decoded(ArrayType(DoubleType()), b"[1, 2.5, null]") == [1.0, 2.5, None]
    assert decoded(BooleanType(), b"false") is False
    assert decoded(StringType(), b'"\\u00e9"') == "\u00e9"


def test_a_declined_value_fails_the_take_of_every_row_since_the_last() -> None:
    columns = direct_columns(shape(StructField("a", LongType()), StructField("b", LongType())))
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"a": 2}')
    assert rows.add(b'{"a": 1, "b": "x"}')
    with pytest.raises(DeclinedValueError):
        rows.take()


def test_a_string_arrow_refuses_fails_the_take_not_silently() -> None:
    columns = direct_columns(shape(StructField("s", StringType())))
    assert columns is not None
    rows = DirectRows(columns)
    assert rows.add(b'{"s": "\\ud800"}')  # a lone surrogate: valid JSON, not valid UTF-8
    with pytest.raises((pa.ArrowException, UnicodeError)):
        rows.take()


def test_json_object_is_an_object_or_nothing() -> None:
    assert json_object(b'{"a": [1]}') == {"a": [1]}
    assert json_object(b"\x00\x00\x00\x00\x09{}") == {}
    for value in (None, b"", b"[]", b"1", b"null", b"{", b"\xff", b'{"a": 1}{"a": 2}'):
        assert json_object(value) is None, value


def test_plain_json_change_events_become_the_rows_of_their_images_with_the_key_struct() -> None:
    rows = change_rows()
    taken = [
        (event("c", None, {"id": 1, "email": "a@x"}, 10, ts_ms=5), b'{"id": 1}'),
        (event("u", {"id": 1, "email": "a@x"}, {"id": 1, "email": "b@x"}, 11), b'{"id": 1}'),
        (event("r", None, {"id": 2, "email": None}, None), b'{"id": 2}'),
        (event("d", {"id": 1, "email": "b@x"}, None, 12), b'{"id": 1}'),
        (None, b'{"id": 1}'),  # Debezium's tombstone after the delete
        (event("c", None, {"email": "c@x"}, 13), b'{"id": 3}'),  # the row's key from the record key
    ]
    for offset, (value, key) in enumerate(taken):
        assert rows.add(value, ("t", 0, offset), key), value
    batch = rows.take()
    assert batch is not None
    assert batch.to_pydict() == {
        "topic": ["t"] * 6, "partition": [0] * 6, "offset": list(range(6)),
        TOMBSTONE: [False, False, False, False, True, False],
        "id": [1, 1, 2, 1, 1, 3], "email": ["a@x", "b@x", None, "b@x", None, "c@x"],
        "_op": ["I", "U", "I", "D", None, "I"], "_source_lsn": [10, 11, None, 12, None, 13],
        "_key": [{"id": 1}, {"id": 1}, {"id": 2}, {"id": 1}, {"id": 1}, {"id": 3}],
    }  # fmt: skip


@pytest.mark.parametrize(
    "value",
    [
        event("t", None, None),  # a truncate: Spark's path makes it a dead letter
        event("m", None, {"id": 1}),
        json.dumps({"after": {"id": 1}, "source": {"lsn": 1}}).encode(),  # no op
        event("c", None, None),  # no image
        event("d", None, {"id": 1}),  # a delete without its before image
        event("c", None, {"id": 1, "name": "n"}),  # a field the table lacks: Spark's path adds it
        event("u", {"id": 1, "name": "n"}, {"id": 1}),  # in the other image too
        event("c", None, {"id": 1, "_op": "x"}),  # an image field of the operation column's name
        event("c", None, [1]),
        json.dumps({"schema": {"type": "struct"}, "payload": {"op": "c"}}).encode(),  # Connect JSON
    ],
)
def test_a_change_event_spark_would_not_make_that_row_of_is_not_taken(value: bytes) -> None:
    assert not change_rows().add(value, ("t", 0, 1), b'{"id": 1}')


@pytest.mark.parametrize(("value", "key", "message"), LETTERED)
def test_a_change_event_spark_makes_a_dead_letter_of_is_one_in_its_words(
    value: bytes, key: bytes | None, message: str
) -> None:
    rows = change_rows()
    assert not rows.add(value, ("t", 0, 1), key)
    assert rows.letter(value, key) == ("decode", "DebeziumEnvelopeError", message)
    assert rows.take() is None, "nothing of it taken"


@pytest.mark.parametrize(("value", "key"), UNLETTERED)
def test_a_change_event_that_could_change_the_table_is_no_letter(value: bytes, key: bytes | None) -> None:
    assert change_rows().letter(value, key) is None


def test_plain_json_records_are_never_envelope_letters() -> None:
    columns = direct_columns(shape(StructField("id", LongType()), StructField("op", StringType())))
    assert columns is not None
    assert DirectRows(columns).letter(b'{"id": 1, "op": "x"}', None) is None
    assert DirectRows(columns).letter(b"not json", None) == NOT_JSON, "json_problem's, as for change events"
    assert change_rows().letter(b"[1]", None) == NOT_AN_OBJECT


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (event("u", {"id": 1, "email": 5}, {"id": 1, "email": "a"}), b'{"id": 1}'),  # the other image's type
        (event("c", None, {"id": 1}, lsn="9"), b'{"id": 1}'),  # a source field of another type
        (event("c", None, {"id": 1}), b'{"id": "1"}'),  # a key field of another type
        (event("c", None, {"id": 1}), b'{"id": 1, "tenant": 2}'),  # a key field the key column lacks
        (event("c", None, {"id": 1}), b"[1]"),  # a key that is not an object
        (event("c", None, {"id": 1}), b"nope"),
    ],
)
def test_a_value_or_key_not_of_its_columns_type_declines_the_change_rows(value: bytes, key: bytes) -> None:
    rows = change_rows()
    assert rows.add(value, ("t", 0, 1), key)
    with pytest.raises(DeclinedValueError):
        rows.take()


def test_plain_json_keys_of_plain_values_fill_the_key_column() -> None:
    columns = direct_columns(shape(StructField("v", LongType()), CHANGES["_key"]))
    assert columns is not None
    rows = DirectRows(columns, key_column="_key", key=KEY)
    assert rows.add(b'{"v": 1}', None, b'{"id": 7}')
    assert rows.add(b'{"v": 2}', None, None)
    assert rows.add(b'{"v": 3}', None, b"\x00\x00\x00\x00\x01" + b'{"id": 8}')  # JSONSerializer's frame
    batch = rows.take()
    assert batch is not None
    assert batch.to_pydict() == {"v": [1, 2, 3], "_key": [{"id": 7}, None, {"id": 8}]}


def test_a_batch_not_taken_whole_leaves_only_what_was_taken_before_it() -> None:
    """`add_all` refusing a batch takes none of it (the task then takes it a record at a time,
    making dead letters of the bad ones: tasks/json_records.py)."""
    columns = direct_columns(shape(StructField("id", LongType())))
    assert columns is not None
    rows = DirectRows(columns, carry=True)

    def at(*offsets: int) -> tuple[pa.Array, pa.Array, pa.Array]:
        n = len(offsets)
        return pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(list(offsets), pa.int64())

    assert rows.add_all([b'{"id": 1}'], at(0))
    assert not rows.add_all([b'{"id": 2}', b"not json"], at(1, 2))
    batch = rows.take()
    assert batch is not None
    assert batch.to_pydict() == {"topic": ["t"], "partition": [0], "offset": [0], TOMBSTONE: [False], "id": [1]}
