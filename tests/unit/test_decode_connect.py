"""The tasks' Connect JSON decoder (tasks/decode_connect.py): the rows Spark's path makes of
Connect JSON records, plain and Debezium envelopes, or a decline for a record it would not make
a row of (integration: tests/integration/test_direct_connect.py, against Spark's path)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from icesink.schema.connect import parse_schema
from icesink.schema.envelope import EnvelopeSpec, row_type
from icesink.tasks.decode_connect import ConnectRows, DirectConnect
from icesink.tasks.table_out import REFUSED
from tests.support import debezium as ce

ROW = [
    ce.field("id", "int32", optional=False, default=0),
    ce.field("name", "string"),
    ce.decimal_field("balance", 12, 2),
    ce.field("created_at", "string", name="io.debezium.time.ZonedTimestamp", version=1),
    ce.field("born", "int32", name="io.debezium.time.Date", version=1),
    ce.field("ratio", "float"),
    ce.field("raw", "bytes"),
    ce.field("tags", "array", items={"type": "string", "optional": True}),
]
ENVELOPE = ce.envelope_schema("shop.public.customers", ROW)
SPEC = EnvelopeSpec("_op", ("lsn",))
TABLE = row_type(parse_schema(json.dumps(ENVELOPE)).result_type, SPEC)


def customer(i: int, **extra: Any) -> dict[str, Any]:
    row = {
        "id": i, "name": f"n{i}", "balance": ce.decimal_value("-12.34", 2), "created_at": "2024-01-02T03:04:05.5+02:00",
        "born": 19_000 + i, "ratio": 0.5, "raw": "AAE=", "tags": ["a", None],
    }  # fmt: skip
    return {**row, **extra}


def taken(rows: ConnectRows, values: list[bytes | None], **add: Any) -> pa.RecordBatch | None:
    """The rows of `values`, or None when the decoder declines one."""
    for i, v in enumerate(values):
        coordinates = ("t", 0, i) if add.get("carry") else None
        if not rows.add(v, coordinates, add.get("key")):
            return None
    try:
        return rows.take()
    except REFUSED:
        return None


def test_change_events_become_sparks_rows() -> None:
    events = [
        ce.change(ENVELOPE, "r", None, customer(1), 10),
        ce.change(ENVELOPE, "u", customer(1), customer(1, name="x", id=None), 11),
        ce.change(ENVELOPE, "d", customer(2), None, 12),
    ]
    found = taken(ConnectRows(DirectConnect(TABLE, SPEC)), events)
    assert found is not None
    assert found.schema.names == TABLE.names
    got = found.to_pylist()
    assert [(r["id"], r["name"], r["_op"], r["_source_lsn"]) for r in got] == [
        (1, "n1", "I", 10), (0, "x", "U", 11), (2, "n2", "D", 12),
    ], "a delete's row is its before image; a required field's null its default"  # fmt: skip
    first = got[0]
    assert first["balance"] == Decimal("-12.34")
    assert first["created_at"] == dt.datetime(2024, 1, 2, 1, 4, 5, 500000, tzinfo=dt.UTC)
    assert first["born"] == dt.date(1970, 1, 1) + dt.timedelta(days=19_001)
    assert (first["ratio"], first["raw"], first["tags"]) == (0.5, b"\x00\x01", ["a", None])
    assert found.schema.field("balance").type == pa.decimal128(12, 2)


def test_a_plain_record_is_laid_out_as_the_table_and_a_wider_column_takes_it() -> None:
    schema = ce.struct(
        "Value",
        [
            ce.field("n", "int32"),
            ce.struct("Inner", [ce.field("b", "string"), ce.field("a", "int16")], optional=True, field="inner"),
            ce.field(
                "m", "map", keys={"type": "string", "optional": False}, values={"type": "int64", "optional": True}
            ),
        ],
    )
    table = StructType(
        [
            StructField("inner", StructType([StructField("a", IntegerType()), StructField("c", StringType()),
                                             StructField("b", StringType())])),
            StructField("n", LongType()),  # widened from the record's int32
            StructField("m", MapType(StringType(), LongType())),
            StructField("extra", DecimalType(38, 2)),
        ]
    )  # fmt: skip
    values = [ce.wrapped(schema, {"n": 5, "inner": {"a": 1, "b": "x"}, "m": {"k": 2}}), ce.wrapped(schema, {})]
    found = taken(ConnectRows(DirectConnect(table)), values)
    assert found is not None
    assert found.to_pylist() == [
        {"inner": {"a": 1, "c": None, "b": "x"}, "n": 5, "m": [("k", 2)], "extra": None},
        {"inner": None, "n": None, "m": None, "extra": None},
    ]
    assert found.schema.field("n").type == pa.int64()


def test_a_tombstone_is_a_row_of_its_key() -> None:
    table = StructType([*TABLE.fields, StructField("_key", StringType())])
    rows = ConnectRows(DirectConnect(table, SPEC), carry=True, key_column="_key")
    found = taken(rows, [ce.change(ENVELOPE, "c", None, customer(3), 1), None], carry=True, key=b"3")
    assert found is not None
    got = found.to_pylist()
    assert [(r["__icesink_tombstone"], r["id"], r["_key"], r["offset"]) for r in got] == [
        (False, 3, "3", 0), (True, None, "3", 1),
    ]  # fmt: skip


HALFWAY = 1 + 2**-24  # a double exactly between two floats: read as a float directly, "1.0000000596046448" rounds up


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (json.dumps({"id": 1}).encode(), "plain JSON, not Connect's"),
        (json.dumps({"schema": ENVELOPE, "payload": None}).encode(), "a null payload"),
        (b"{not json", "not JSON"),
        (None, "a tombstone where the table takes none"),
        (
            ce.change(ce.envelope_schema("p", [*ROW, ce.field("new", "int32")]), "c", None, customer(1), 1),
            "a new field",
        ),
        (ce.change(ENVELOPE, "c", None, customer(1, name=5), 1), "a number for a string"),
        (ce.change(ENVELOPE, "c", None, customer(1, id="1"), 1), "a string for an int"),
        (ce.change(ENVELOPE, "c", None, customer(1, id=2**31), 1), "an int32 out of range"),
        (ce.change(ENVELOPE, "c", None, customer(1, balance=ce.decimal_value("1" * 11, 2)), 1), "a decimal too long"),
        (ce.change(ENVELOPE, "c", None, customer(1, raw="AAE"), 1), "base64 without its padding"),
        (ce.change(ENVELOPE, "c", None, customer(1, created_at="2024-01-02 03:04:05"), 1), "another zoned spelling"),
        (ce.change(ENVELOPE, "c", None, customer(1, ratio=HALFWAY), 1), "a double halfway between floats"),
        (ce.change(ENVELOPE, "c", None, customer(1, tags="a"), 1), "a string for an array"),
        (ce.change(ENVELOPE, "x", None, customer(1), 1), "an op Debezium does not write"),
        (ce.change(ENVELOPE, "c", customer(1), None, 1), "an insert without its after image"),
    ],
)
def test_what_sparks_path_would_not_make_a_row_of_is_declined(value: bytes | None, why: str) -> None:
    assert (
        taken(ConnectRows(DirectConnect(TABLE, SPEC)), [ce.change(ENVELOPE, "c", None, customer(9), 0), value]) is None
    ), why


def no_op(op: object) -> bytes:
    """A change event whose op is `op` (None: no op field), its payload otherwise an insert's."""
    payload = json.loads(ce.change(ENVELOPE, "c", None, customer(1), 1))["payload"]
    payload = {k: v for k, v in payload.items() if k != "op"} | ({"op": op} if op is not None else {})
    return json.dumps({"schema": ENVELOPE, "payload": payload}).encode()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (ce.change(ENVELOPE, "x", None, customer(1), 1), "unknown op x"),
        (ce.change(ENVELOPE, "t", None, None, 1), "unknown op t"),  # a truncate
        (ce.change(ENVELOPE, "c", customer(1), None, 1), "op c without its row image"),
        (ce.change(ENVELOPE, "d", None, customer(1), 1), "op d without its row image"),
        (no_op(None), "no op in the change event"),
    ],
)
def test_a_change_event_sparks_path_makes_a_dead_letter_of_is_one_in_its_words(value: bytes, message: str) -> None:
    rows = ConnectRows(DirectConnect(TABLE, SPEC))
    assert rows.add(ce.change(ENVELOPE, "c", None, customer(9), 0))
    assert not rows.add(value), "not a row"
    assert rows.letter(value, None) == ("decode", "DebeziumEnvelopeError", message)
    found = rows.take()
    assert found is not None
    assert found.column("id").to_pylist() == [9], "the table's other rows stay"
    keyed = keyed_rows()
    assert keyed.letter(value, ce.wrapped(KEY, {"id": 1})) == ("decode", "DebeziumEnvelopeError", message)


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (ce.change(ENVELOPE, "c", None, customer(1), 1), None),  # a change: never a letter
        (no_op(5), None),  # an op not of its schema's type: TypeMismatch on Spark's path
        (ce.change(ENVELOPE, "x", None, customer(1, name=5), 1), None),  # a value not of its schema's type
        (ce.change(ENVELOPE, "x", customer(1, id="1"), None, 1), None),  # in the other image too
        # a decimal beyond its column: ConversionFailed on Spark's path
        (ce.change(ENVELOPE, "x", None, customer(1, balance=ce.decimal_value("1" * 11, 2)), 1), None),
        (ce.change(ce.envelope_schema("p", [*ROW, ce.field("new", "int32")]), "x", None, customer(1), 1), None),
        (json.dumps({"schema": ENVELOPE, "payload": None}).encode(), None),  # NullPayload
        (b"{not json", None),
        (ce.change(ENVELOPE, "\ud800", None, customer(1), 1), None),  # a lone surrogate: no letter holds it
        (ce.change(ENVELOPE, "x", None, customer(1), 1), b"3"),  # a key Spark's path does not decode
    ],
)
def test_an_event_that_may_be_another_error_on_sparks_path_is_no_letter(value: bytes, key: bytes | None) -> None:
    rows = keyed_rows() if key is not None else ConnectRows(DirectConnect(TABLE, SPEC))
    assert rows.letter(value, key) is None


def test_an_op_with_a_default_is_no_letter() -> None:
    """Spark's path applies the op's default before it judges the event (a row there)."""
    schema = json.loads(json.dumps(ENVELOPE))
    next(f for f in schema["fields"] if f["field"] == "op")["default"] = "c"
    record = json.loads(ce.change(schema, "c", None, customer(1), 1))
    del record["payload"]["op"]
    value = json.dumps(record).encode()
    table = row_type(parse_schema(json.dumps(schema)).result_type, SPEC)
    rows = ConnectRows(DirectConnect(table, SPEC))
    assert not rows.add(value)
    assert rows.letter(value, None) is None


def test_an_image_the_schema_lacks_is_no_image() -> None:
    """A delete whose payload carries `before` where its schema has none: Spark's path reads no
    image (a dead letter), nor do the tasks."""
    schema = json.loads(json.dumps(ENVELOPE))
    schema["fields"] = [f for f in schema["fields"] if f["field"] != "before"]
    value = ce.change(schema, "d", customer(1), None, 1)
    table = row_type(parse_schema(json.dumps(schema)).result_type, SPEC)
    rows = ConnectRows(DirectConnect(table, SPEC))
    assert not rows.add(value)
    assert rows.letter(value, None) == ("decode", "DebeziumEnvelopeError", "op d without its row image")


def test_a_connect_record_of_a_table_without_an_envelope_is_no_letter() -> None:
    plain = ce.wrapped(ce.key_schema("p", [ce.field("id", "int32"), ce.field("op", "string")]), {"id": 1, "op": "x"})
    rows = ConnectRows(DirectConnect(StructType([StructField("id", IntegerType()), StructField("op", StringType())])))
    assert rows.add(plain)
    assert rows.letter(plain, None) is None


def test_a_schema_that_does_not_fit_the_table_is_declined() -> None:
    narrow = StructType(
        [f if f.name != "balance" else StructField("balance", DecimalType(10, 2)) for f in TABLE.fields]
    )
    assert taken(ConnectRows(DirectConnect(narrow, SPEC)), [ce.change(ENVELOPE, "c", None, customer(1), 1)]) is None
    arrays = StructType([f if f.name != "tags" else StructField("tags", ArrayType(LongType())) for f in TABLE.fields])
    assert taken(ConnectRows(DirectConnect(arrays, SPEC)), [ce.change(ENVELOPE, "c", None, customer(1), 1)]) is None


KEY = ce.key_schema("shop.public.customers", [ce.field("id", "int32", optional=False)])
KEY_TYPE = StructType([StructField("id", IntegerType())])


def keyed_rows() -> ConnectRows:
    table = StructType([*TABLE.fields, StructField("_key", KEY_TYPE)])
    return ConnectRows(DirectConnect(table, SPEC), True, "_key", DirectConnect(KEY_TYPE), keys=("id",))


def test_connect_record_keys_fill_the_key_column_and_a_tombstones_key_columns() -> None:
    rows = keyed_rows()
    assert rows.add(ce.change(ENVELOPE, "d", customer(3), None, 1), ("t", 0, 0), ce.wrapped(KEY, {"id": 3}))
    assert rows.add(None, ("t", 0, 1), ce.wrapped(KEY, {"id": 3}))
    found = rows.take()
    assert found is not None
    got = [(r["__icesink_tombstone"], r["id"], r["_op"], r["_key"]) for r in found.to_pylist()]
    assert got == [(False, 3, "D", {"id": 3}), (True, 3, None, {"id": 3})], "the tombstone's id is its key's"


@pytest.mark.parametrize(
    "key",
    [b"3", ce.wrapped(ce.key_schema("p", [ce.field("id", "int32"), ce.field("x", "int8")]), {"id": 3})],
    ids=["not Connect JSON", "a key field the column lacks"],
)
def test_a_key_sparks_path_would_not_decode_is_declined(key: bytes) -> None:
    rows = keyed_rows()
    assert rows.add(ce.change(ENVELOPE, "c", None, customer(3), 1), ("t", 0, 0), key)
    with pytest.raises(REFUSED):
        rows.take()


def test_a_record_spelled_with_spaces_or_a_schema_holding_payload_reads_the_same() -> None:
    """JsonConverter's compact records are read by their schema's bytes, once met (tasks/connect_payloads.py);
    any other spelling, or a schema whose bytes hold `,"payload":` themselves, parse whole."""
    odd = ce.field("n", "int32", optional=False, default=1, parameters={"x": 1, "payload": 2})
    schema = ce.struct("Value", [odd, ce.field("s", "string")])
    table = StructType([StructField("n", IntegerType()), StructField("s", StringType())])
    records = [ce.wrapped(schema, {"n": i, "s": f"s{i}"}, spaced=i % 2 == 1) for i in range(4)]
    records += [ce.wrapped(schema, {"n": None, "s": "d"})]
    found = taken(ConnectRows(DirectConnect(table)), records)
    assert found is not None
    assert found.to_pylist() == [*[{"n": i, "s": f"s{i}"} for i in range(4)], {"n": 1, "s": "d"}]
    plain = ce.struct("Value", [ce.field("n", "int32")])
    compact = [ce.wrapped(plain, {"n": i}) for i in range(3)] + [ce.wrapped(plain, {"n": "x"})]
    assert taken(ConnectRows(DirectConnect(table)), compact[:3]) is not None
    assert taken(ConnectRows(DirectConnect(table)), compact) is None, "a known schema's bad value: declined"


def test_records_of_two_schemas_interleaved_read_each_by_its_own() -> None:
    """The last schema met is matched in place (`connect_payloads.Readers.last`): a record of another schema,
    or of one that shares its first bytes, is read by its own."""
    table = StructType([StructField("n", IntegerType()), StructField("s", StringType())])
    one = ce.struct("Value", [ce.field("n", "int32")])
    two = ce.struct("Value", [ce.field("n", "int32"), ce.field("s", "string")])
    longer = ce.struct("Value", [ce.field("n", "int64")])  # n wider than the table: declined
    records = [ce.wrapped(one if i % 2 == 0 else two, {"n": i, "s": f"s{i}"}) for i in range(6)]
    found = taken(ConnectRows(DirectConnect(table)), records)
    assert found is not None
    assert found.to_pylist() == [{"n": i, "s": None if i % 2 == 0 else f"s{i}"} for i in range(6)]
    assert taken(ConnectRows(DirectConnect(table)), [*records, ce.wrapped(longer, {"n": 7})]) is None
    assert taken(ConnectRows(DirectConnect(table)), [ce.wrapped(longer, {"n": 7}), *records]) is None
