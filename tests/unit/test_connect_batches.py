"""Connect JSON records read a batch at a time (tasks/connect_batches.py, taken by
tasks/decode_connect.ConnectRows.add_whole): wherever a batch is taken whole, its rows are the ones
the record-at-a-time way makes (which tests/unit/test_decode_connect.py and
tests/integration/test_direct_connect.py pin against Spark's path); whatever that way would refuse
or decide otherwise, it leaves to it."""

from __future__ import annotations

import base64
import json
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DecimalType, IntegerType, StringType, StructField, StructType

from icesink.schema.connect import parse_schema
from icesink.schema.envelope import EnvelopeSpec, row_type
from icesink.tasks import connect_payloads
from icesink.tasks.decode_connect import ConnectRows, DirectConnect
from icesink.tasks.table_out import REFUSED
from tests.support import debezium as ce
from tests.support.mangle import mangled

ROW = [
    ce.field("id", "int32", optional=False, default=0),
    ce.field("name", "string"),
    ce.decimal_field("balance", 12, 2),
    ce.field("created_at", "string", name="io.debezium.time.ZonedTimestamp", version=1),
    ce.field("born", "int32", name="io.debezium.time.Date", version=1),
    ce.field("seen", "int64", name="io.debezium.time.MicroTimestamp", version=1),
    ce.field("ratio", "float"),
    ce.field("score", "double"),
    ce.field("vip", "boolean"),
    ce.field("raw", "bytes"),
    ce.field("tags", "array", items={"type": "string", "optional": True}),
    ce.struct("Address", [ce.field("city", "string"), ce.field("zip", "int32")], optional=True, field="address"),
]
ENVELOPE = ce.envelope_schema("shop.public.customers", ROW)
SPEC = EnvelopeSpec("_op", ("lsn", "db"))
KEY = ce.key_schema("shop.public.customers", [ce.field("id", "int32", optional=False)])
KEY_TYPE = StructType([StructField("id", IntegerType())])
TABLE = StructType(
    [*row_type(parse_schema(json.dumps(ENVELOPE)).result_type, SPEC).fields, StructField("_key", KEY_TYPE)]
)


def customer(i: int, **extra: Any) -> dict[str, Any]:
    row = {
        "id": i, "name": f"n{i}", "balance": ce.decimal_value("-12.34", 2), "created_at": "2024-01-02T03:04:05.5+02:00",
        "born": 19_000 + i, "seen": 1_700_000_000_000_000 + i, "ratio": 0.5, "score": 2.25, "vip": i % 2 == 0,
        "raw": "AAE=", "tags": ["a", None], "address": {"city": "c", "zip": 10 + i},
    }  # fmt: skip
    return {**row, **extra}


GOOD = [
    ce.change(ENVELOPE, "r", None, customer(1), 10),
    ce.change(ENVELOPE, "c", None, customer(2, name=None, tags=None, address=None, balance=None), 11),
    ce.change(ENVELOPE, "u", customer(1), customer(1, name="\u00e9\\n", id=None, score=3), 12),
    ce.change(ENVELOPE, "d", customer(2), None, 13),
    ce.change(ENVELOPE, "c", None, customer(3, tags=[], address={"city": None}, balance=ce.decimal_value("0", 2)), 14),
    ce.wrapped(ENVELOPE, {"op": "c", "after": customer(4), "source": None, "extra": {"x": [1, "y"]}}),
    ce.wrapped(ENVELOPE, {"op": "d", "before": customer(5), "after": None}),
]


def event(payload: dict[str, Any]) -> bytes:
    return ce.wrapped(ENVELOPE, payload)


def _change(row: dict[str, Any], op: str = "c") -> bytes:
    return ce.change(ENVELOPE, op, None, row, 1)


HALFWAY = 1 + 2**-24  # a double exactly between two floats
_AFTER = json.dumps(customer(9), separators=(",", ":"))[:-1]  # an image's text, to add a field to
# Each refused by the record-at-a-time way, or one Arrow's reader may read otherwise than it does.
DOUBTFUL = [
    _change(customer(1, id="1")), _change(customer(1, id=1.0)), _change(customer(1, id=2**31)),
    _change(customer(1, id=2**63)), _change(customer(1, name=5)), _change(customer(1, vip=1)),
    _change(customer(1, balance="AAE")), _change(customer(1, balance="!!==")), _change(customer(1, balance="")),
    _change(customer(1, balance=ce.decimal_value("1" * 11, 2))), _change(customer(1, raw="AAF=")),
    _change(customer(1, created_at="2024-01-02 03:04:05")), _change(customer(1, ratio=HALFWAY)),
    _change(customer(1, ratio=2**24 + 1)), _change(customer(1, ratio=1e39)), _change(customer(1, tags="a")),
    _change(customer(1, tags=[1])), _change(customer(1, address="a")), _change(customer(1, address={"zip": "1"})),
    _change(customer(1), "x"), _change(customer(1), "C"), ce.change(ENVELOPE, "c", customer(1), None, 1),
    ce.change(ENVELOPE, "d", None, customer(1), 1), event({"after": customer(1)}),
    event({"op": 1, "after": customer(1)}), event({"op": "c", "after": customer(1), "source": "s"}),
    event({"op": "c", "after": customer(1), "source": {"lsn": "1"}}),
    event({"op": "c", "after": [1]}),
    _change(customer(1)).replace(b'"score":2.25', b'"score":NaN'),
    _change(customer(1)).replace(b'"score":2.25', b'"score":-0'),
    _change(customer(1)).replace(b'"score":2.25', b'"score":1e999'),
    _change(customer(1)).replace(b'"score":2.25', b'"score":9007199254740993'),
    _change(customer(1)).replace(b'"name":"n1"', b'"name":"\xff"'),
    _change(customer(1)).replace(b'"name":"n1"', b'"name":"\\ud800"'),
    _change(customer(1)).replace(b'"name":"n1"', b'"name":"n1","name":"n2"'),
    _change(customer(1)).replace(b'"op":"c"', b'"op":"c","op":"d"'),
    _change(customer(1))[:-1] + b',"x":{"y":1}}',  # a field after the payload: that way parses it whole
    _change(customer(1))[:-1] + b' }', _change(customer(1)) + b" ",
    _change(customer(1))[:-2] + b',"deep":' + b"[" * 1100 + b"]" * 1100 + b"}}",  # deeper than Python reads
    ce.wrapped(ENVELOPE, {"op": "c", "after": customer(1)}, spaced=True),  # not as JsonConverter lays it out
    ce.change(ce.envelope_schema("p", ROW), "c", None, customer(1), 1),  # another schema (of the same fields)
    # Another schema of the same length, whose default for a null id differs.
    ce.change(ce.envelope_schema("shop.public.customers", [{**ROW[0], "default": 7}, *ROW[1:]]), "c", None,
              customer(1, id=None), 1),
    json.dumps({"id": 1}).encode(), b"{}", b"",
    # Numbers Arrow's reader takes and Python's readers refuse, in fields no column holds.
    _change(customer(1))[:-2] + b',"x":Inf}}', _change(customer(1)).replace(b'"zip":11', b'"zip":11,"q":-NaN'),
    _change(customer(1)).replace(b'"db":"shop"', b'"db":"shop","x":[-Inf]'),
]  # fmt: skip


def rows() -> ConnectRows:
    return ConnectRows(DirectConnect(TABLE, SPEC), True, "_key", DirectConnect(KEY_TYPE), keys=("id",))


def coordinates(n: int, first: int = 0) -> tuple[pa.Array, pa.Array, pa.Array]:
    return pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(first, first + n), pa.int64())


def keys_of(values: list[bytes | None]) -> list[bytes | None]:
    return [ce.wrapped(KEY, {"id": i}) for i in range(len(values))]


def one_at_a_time(values: list[bytes | None], keys: list[bytes | None] | None = None) -> dict[str, Any] | None:
    """The rows the record-at-a-time way makes, or None where it declines one."""
    found = rows()
    for i, (v, k) in enumerate(zip(values, keys or keys_of(values), strict=True)):
        if not found.add(v, ("t", 0, i), k):
            return None
    try:
        batch = found.take()
    except REFUSED:
        return None
    assert batch is not None
    return batch.to_pydict()


def whole(values: list[bytes | None], keys: list[bytes | None] | None = None) -> dict[str, Any] | None:
    """The rows of the batch taken whole, or None where it is not."""
    found = rows()
    if not found.add_whole(values, coordinates(len(values)), keys or keys_of(values)):
        return None
    batch = found.take()
    assert batch is not None
    return batch.to_pydict()


def test_a_batch_of_change_events_is_read_whole_into_the_rows_of_a_record_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values: list[bytes | None] = [*GOOD, None]  # a tombstone after the delete
    expected = one_at_a_time(values)
    assert expected is not None
    calls = [0]
    real = connect_payloads._parsed_payload
    monkeypatch.setattr(connect_payloads, "_parsed_payload", lambda *a: calls.__setitem__(0, calls[0] + 1) or real(*a))
    got = whole(values)
    assert got == expected
    assert calls[0] <= 2, "the payloads are read whole (but the first value's and key's, which find their schemas)"
    assert got["_op"] == ["I", "I", "U", "D", "I", "I", "D", None]
    assert got["id"] == [1, 2, 0, 2, 3, 4, 5, 7], "a delete's row is its before image; a null required its default"
    assert got["__icesink_tombstone"][-1]
    assert got["_key"][-1] == {"id": 7}
    assert got["_source_lsn"][:4] == [10, 11, 12, 13]
    assert got["_source_db"][0] == "shop"
    assert got["tags"][:2] == [["a", None], None]
    assert got["address"][4] == {"city": None, "zip": None}


@pytest.mark.parametrize("doubtful", DOUBTFUL, ids=range(len(DOUBTFUL)))
def test_a_record_in_doubt_leaves_its_batch_to_the_record_at_a_time_way(doubtful: bytes) -> None:
    assert whole([GOOD[0], doubtful, GOOD[2]]) is None


def test_an_envelope_schema_without_a_source_is_read_a_record_at_a_time() -> None:
    schema = {**ENVELOPE, "fields": [f for f in ENVELOPE["fields"] if f["field"] != "source"]}
    values: list[bytes | None] = [
        ce.wrapped(schema, {"op": "c", "after": customer(1)}),
        ce.wrapped(schema, {"op": "c", "after": customer(2), "source": 5}),
    ]
    assert whole(values) is None
    assert one_at_a_time(values) is None, "a source that is not an object"
    assert whole(values[:1]) is None
    assert one_at_a_time(values[:1]) is not None


def test_a_float_or_double_taken_whole_is_the_one_a_record_at_a_time_reads() -> None:
    values: list[bytes | None] = [
        _change(customer(1, ratio=v, score=w))
        for v, w in [(0.1, 0.1), (1e-45, 5e-324), (1234.5678, 1.7976931348623157), (-2.5, 1), (16777216, 2**53 - 1)]
    ]
    expected = one_at_a_time(values)
    assert expected is not None
    assert whole(values) == expected


def test_mangled_payloads_are_read_whole_only_into_the_rows_a_record_at_a_time_makes() -> None:
    rng = random.Random(36)
    alphabet = b'{}[]",:0123456789.eE+-\\untrfasl \n\xff\xc3cdopbefi='
    head = len(b'{"schema":') + len(json.dumps(ENVELOPE, separators=(",", ":"))) + len(b',"payload":')
    taken = 0
    for _ in range(1500):
        good = rng.choice(GOOD)
        record = good[:head] + mangled(good[head:-1], rng, alphabet) + b"}"  # the payload's text mangled
        batch: list[bytes | None] = [GOOD[0], record]
        got = whole(batch)
        if got is None:
            continue
        taken += 1
        assert got == one_at_a_time(batch), record
    assert taken > 100, "most mangled payloads are refused by both, but not all"


def test_keys_are_read_whole_and_a_key_in_doubt_a_record_at_a_time() -> None:
    values: list[bytes | None] = list(GOOD[:3])
    spaced = [ce.wrapped(KEY, {"id": 1}), ce.wrapped(KEY, {"id": 2}, spaced=True), ce.wrapped(KEY, {"id": 3})]
    assert whole(values, spaced) == one_at_a_time(values, spaced), "a key not laid out alike: the keys one at a time"
    assert whole(values, spaced) is not None
    wrong = [ce.wrapped(KEY, {"id": 1}), ce.wrapped(KEY, {"id": "2"}), ce.wrapped(KEY, {"id": 3})]
    found = rows()
    assert found.add_whole(values, coordinates(3), wrong)
    with pytest.raises(REFUSED):
        found.take()  # as a record at a time: a key of another type declines the table
    assert one_at_a_time(values, wrong) is None


def test_batches_taken_whole_and_a_record_at_a_time_keep_their_order() -> None:
    first, second, third = GOOD[:3], [GOOD[3], None], GOOD[4:]
    found = rows()
    assert found.add_whole(first, coordinates(3), keys_of(first))
    for i, (v, k) in enumerate(zip(second, keys_of(second), strict=True)):
        assert found.add(v, ("t", 0, 3 + i), k)
    assert found.add_whole(third, coordinates(len(third), 5), keys_of(third))
    batch = found.take()
    assert batch is not None
    got = batch.to_pydict()
    assert got["offset"] == list(range(8))
    assert got["_op"] == ["I", "I", "U", "D", None, "I", "I", "D"]
    assert got["__icesink_tombstone"] == [False] * 4 + [True, False, False, False]
    everything = one_at_a_time([*first, *second, *third], keys_of(first) + keys_of(second) + keys_of(third))
    assert everything is not None
    assert {k: v for k, v in got.items() if k != "_key"} == {k: v for k, v in everything.items() if k != "_key"}


def test_a_key_with_a_number_pythons_readers_refuse_is_refused() -> None:
    values: list[bytes | None] = list(GOOD[:2])
    keys: list[bytes | None] = [ce.wrapped(KEY, {"id": 1}), ce.wrapped(KEY, {"id": 2})[:-2] + b',"x":Inf}}']
    found = rows()
    assert found.add_whole(values, coordinates(2), keys)
    with pytest.raises(REFUSED):
        found.take()


def plain(schema: dict[str, Any], table: StructType, payloads: list[dict[str, Any]]) -> tuple[Any, Any]:
    """An append table's rows of plain Connect records, a record at a time and read whole."""
    values = [ce.wrapped(schema, p) for p in payloads]
    one = ConnectRows(DirectConnect(table))
    assert all(one.add(v) for v in values)
    batch = one.take()
    assert batch is not None
    read = ConnectRows(DirectConnect(table))
    taken = read.add_parsed(values)
    return batch.to_pylist(), read.take().to_pylist() if taken else None  # type: ignore[union-attr]


def test_a_schema_of_no_fields_gives_a_row_of_nulls_a_record_each() -> None:
    table = StructType([StructField("a", IntegerType())])
    one, whole_rows = plain({"type": "struct", "optional": False, "fields": []}, table, [{"a": 1}, {"a": 2}])
    assert one == [{"a": None}, {"a": None}]
    assert whole_rows == one


def test_a_struct_field_the_tables_struct_lacks_is_passed_over_either_way() -> None:
    inner = ce.struct("A", [ce.field("x", "string"), ce.field("y", "int32")], optional=True, field="a")
    schema = ce.struct("V", [ce.field("id", "int32"), inner])
    table = StructType(
        [StructField("id", IntegerType()), StructField("a", StructType([StructField("x", StringType())]))]
    )
    one, whole_rows = plain(schema, table, [{"id": 1, "a": {"x": "s", "y": "not an int"}}])
    assert one == [{"id": 1, "a": {"x": "s"}}]
    assert whole_rows == one


def test_a_decimal_of_38_digits_is_exact_either_way() -> None:
    schema = ce.struct("V", [ce.decimal_field("d", 38, 2)])
    table = StructType([StructField("d", DecimalType(38, 2))])
    unscaled = 123456789012345678901234567891
    text = base64.b64encode(unscaled.to_bytes(16, "big", signed=True).lstrip(b"\x00")).decode()
    one, whole_rows = plain(schema, table, [{"d": text}, {"d": None}])
    assert one == [{"d": Decimal("1234567890123456789012345678.91")}, {"d": None}]
    assert whole_rows == one


@pytest.mark.parametrize(
    ("y", "value"), [("int32", "not an int"), ("array", [1])], ids=["a value of another type", "an array"]
)
def test_a_struct_of_none_of_the_tables_fields_is_an_object_of_nulls_either_way(y: str, value: object) -> None:
    field = ce.field("y", y, items={"type": "int32", "optional": True}) if y == "array" else ce.field("y", y)
    schema = ce.struct("V", [ce.field("id", "int32"), ce.struct("A", [field], optional=True, field="a")])
    table = StructType(
        [StructField("id", IntegerType()), StructField("a", StructType([StructField("x", StringType())]))]
    )
    one, whole_rows = plain(schema, table, [{"id": 1, "a": {"y": value}}, {"id": 2, "a": None}])
    assert one == [{"id": 1, "a": {"x": None}}, {"id": 2, "a": None}]
    assert whole_rows == one
    with pytest.raises(REFUSED):  # still an object, as before
        plain(schema, table, [{"id": 3, "a": 5}])
