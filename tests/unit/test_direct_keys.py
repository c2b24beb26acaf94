"""Avro record keys in the one-pass tasks (tasks/avro_records.py `avro_rows`): each record's key
decoded into the key column's struct whatever writer schema it has, in the records' order; a
tombstone a delete of its key; a key column a value lacks filled from the key, as Spark's path
does (batch/decode/changes.py `classify`); a key that does not decode declines the table; changes
Spark's path makes dead letters of are the task's letters, the others its changes."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from icesink.batch.direct_avro import direct_avro
from icesink.config import WriteMode
from icesink.kafka import wire
from icesink.tasks.avro_records import avro_rows
from icesink.tasks.carried_rows import TOMBSTONE
from icesink.tasks.change_rows import OP, ChangeSpec
from icesink.tasks.dead_letters import Letter
from icesink.tasks.decode_json import DeclinedValueError
from icesink.tasks.files import WriteTask
from icesink.tasks.routing import RouteFilter
from icesink.tasks.table_out import KEY_NAMED, NAMED, DirectTable, TableOut

VALUE: dict[str, Any] = {
    "type": "record",
    "name": "V",
    "fields": [
        {"name": "id", "type": ["null", "long"]},
        {"name": "v", "type": "long"},
        {"name": "op", "type": "string"},
    ],
}
KEY1: dict[str, Any] = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}]}
KEY2: dict[str, Any] = {**KEY1, "fields": [*KEY1["fields"], {"name": "region", "type": ["null", "string"]}]}
KEY_STRUCT = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("region", T.StringType())])
ARROW = pa.schema(
    [
        ("id", pa.int64()), ("v", pa.int64()), ("op", pa.string()),
        ("_key", pa.struct([pa.field("id", pa.int64(), False), ("region", pa.string())])),
    ]
)  # fmt: skip


def framed(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    buf.write(wire.id_key(schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(copy.deepcopy(schema)), record)
    return buf.getvalue()


def table_out(
    letters: bool = False, route: RouteFilter | None = None, floor: int | None = None, held: pa.Table | None = None
) -> TableOut:  # fmt: skip
    values = T.StructType(
        [T.StructField(n, t) for n, t in [("id", T.LongType()), ("v", T.LongType()), ("op", T.StringType())]]
    )
    decoder = direct_avro({wire.id_key(1): json.dumps(VALUE)}, values)
    keys = direct_avro({wire.id_key(2): json.dumps(KEY1), wire.id_key(3): json.dumps(KEY2)}, KEY_STRUCT)
    assert decoder is not None
    assert keys is not None
    task = WriteTask("t", ARROW, "s3://b/t/", "p", storage=None)  # type: ignore[arg-type]
    spec = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "_key", "v" if floor is not None else None)
    table = DirectTable(task, decoder, {("t", 0): (0, 9)}, changes=spec, key_column="_key", key_decoder=keys,
                        letters=letters, route=route, order_floor=floor, held=held)  # fmt: skip
    return TableOut(table, 0)


def batch(records: list[tuple[bytes | None, bytes | None]]) -> pa.RecordBatch:
    n = len(records)
    return pa.RecordBatch.from_pydict(
        {
            "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()), "offset": list(range(n)),
            "value": pa.array([v for _, v in records], pa.binary()),
            "key": pa.array([k for k, _ in records], pa.binary()),
        }
    )  # fmt: skip


def test_keys_of_two_writer_schemas_tombstones_and_null_keys_in_the_records_order() -> None:
    records = [
        (framed(3, KEY2, {"id": 1, "region": "eu"}), framed(1, VALUE, {"id": 1, "v": 10, "op": "c"})),
        (framed(2, KEY1, {"id": 2}), framed(1, VALUE, {"id": None, "v": 20, "op": "u"})),  # the key fills id
        (None, framed(1, VALUE, {"id": 3, "v": 30, "op": "c"})),  # no key: the value's id
        (framed(3, KEY2, {"id": 4, "region": None}), None),  # a tombstone: a delete of id 4
    ]
    rows = avro_rows(table_out(), batch(records))
    assert rows is not None
    got = sorted(rows.select(["offset", TOMBSTONE, "id", "v", "op", "_key"]).to_pylist(), key=lambda r: r["offset"])
    assert got == [
        {"offset": 0, TOMBSTONE: False, "id": 1, "v": 10, "op": "c", "_key": {"id": 1, "region": "eu"}},
        {"offset": 1, TOMBSTONE: False, "id": 2, "v": 20, "op": "u", "_key": {"id": 2, "region": None}},
        {"offset": 2, TOMBSTONE: False, "id": 3, "v": 30, "op": "c", "_key": None},
        {"offset": 3, TOMBSTONE: True, "id": 4, "v": None, "op": None, "_key": {"id": 4, "region": None}},
    ]
    assert rows.schema.field("_key").type == ARROW.field("_key").type


def test_keys_and_values_named_by_id_in_headers_decode_as_framed_ones() -> None:
    """Newer Confluent serializers: bare bodies, the ids in `__key_schema_id` and
    `__value_schema_id` headers (a tombstone's key too), read as Spark's path reads them."""
    records = [
        (framed(3, KEY2, {"id": 1, "region": "eu"}), framed(1, VALUE, {"id": 1, "v": 10, "op": "c"})),
        (framed(2, KEY1, {"id": 2}), framed(1, VALUE, {"id": None, "v": 20, "op": "u"})),
        (None, framed(1, VALUE, {"id": 3, "v": 30, "op": "c"})),
        (framed(3, KEY2, {"id": 4, "region": None}), None),
    ]
    expected = avro_rows(table_out(), batch(records))
    named = batch([(k[5:] if k is not None else None, v[5:] if v is not None else None) for k, v in records])
    headers = {KEY_NAMED: [k[:5] if k is not None else None for k, _ in records],
               NAMED: [v[:5] if v is not None else None for _, v in records]}  # fmt: skip
    for column, found in headers.items():
        named = named.append_column(column, pa.array(found, pa.binary()))
    rows = avro_rows(table_out(), named)
    assert expected is not None
    assert rows is not None
    assert rows.sort_by("offset").to_pylist() == expected.sort_by("offset").to_pylist()
    # A key named by a GUID: the tasks know their schemas by id (Spark's path reads it).
    guid = named.set_column(named.schema.get_field_index(KEY_NAMED), KEY_NAMED,
                            pa.array([b"\x01" + bytes(16)] * 4, pa.binary()))  # fmt: skip
    assert avro_rows(table_out(), guid) is None


def test_a_key_that_does_not_decode_declines_the_table() -> None:
    good = (framed(2, KEY1, {"id": 2}), framed(1, VALUE, {"id": 2, "v": 20, "op": "u"}))
    assert avro_rows(table_out(), batch([good])) is not None
    unknown = (framed(9, KEY1, {"id": 2}), good[1])  # a key schema id the job did not plan
    truncated = (good[0][:-1], good[1])
    for bad in (unknown, truncated):
        assert avro_rows(table_out(), batch([good, bad])) is None


def test_changes_sparks_path_makes_dead_letters_of_are_the_tasks_letters_and_the_others_its_changes() -> None:
    records = [
        (framed(2, KEY1, {"id": 1}), framed(1, VALUE, {"id": 1, "v": 10, "op": "c"})),
        (framed(2, KEY1, {"id": 2}), framed(1, VALUE, {"id": 2, "v": 20, "op": "x"})),
        (None, framed(1, VALUE, {"id": None, "v": 30, "op": "u"})),  # no key to fill id from
        (None, None),  # a tombstone without a key
        (framed(2, KEY1, {"id": 4}), None),  # a tombstone: a delete of id 4
    ]
    out = table_out(letters=True)
    rows = avro_rows(out, batch(records))
    assert rows is not None
    assert out.add_changes(rows)
    assert sorted(out.letters) == [
        Letter("t", 0, 1, "change", "UnknownOperation", "operation column op holds 'x', not I, U or D"),
        Letter("t", 0, 2, "change", "MissingKey", "no value for key column(s) id"),
        Letter("t", 0, 3, "change", "NullValue", "null value and null key: no row to delete"),
    ]
    [changes] = out._changes
    assert sorted(zip(changes.column("id").to_pylist(), changes.column(OP).to_pylist(), strict=True)) == [
        (1, "I"), (4, "D"),
    ], "the other changes, each with its own row"  # fmt: skip
    for declines in (table_out(), table_out(letters=True, route=RouteFilter("op", frozenset({"c"})))):
        rows = avro_rows(declines, batch(records))
        assert rows is not None
        assert not declines.add_changes(rows), "no letters taken (a routed table's would be lost): declined"
        assert not declines.letters


def test_changes_below_the_order_floor_decline_the_table_once_all_are_read_with_the_least_of_them() -> None:
    """The first round's task goes on looking at the table's changes after one below the floor
    (keeping none of them), so that the second round's floor, the least of them, holds for all
    (batch/direct_held.py); the table is declined at the task's end."""

    def change(i: int, v: int) -> tuple[bytes, bytes]:
        return framed(2, KEY1, {"id": i}), framed(1, VALUE, {"id": i, "v": v, "op": "u"})

    out = table_out(floor=100)
    for chunk in ([change(1, 150), change(2, 90)], [change(3, 200)], [change(4, 50), change(5, 70)]):
        rows = avro_rows(out, batch(chunk))
        assert rows is not None
        assert out.add_changes(rows), "not declined before every change is read"
    assert out.older == 50
    assert out._changes == [], "the changes after the first below the floor are not kept"
    with pytest.raises(DeclinedValueError, match="order value 50"):
        out.flush(last=True)
    fine = table_out(floor=100)
    rows = avro_rows(fine, batch([change(1, 150), change(2, 100)]))
    assert rows is not None
    assert fine.add_changes(rows)
    assert fine.older is None, "a change at the floor is older than nothing the table holds"
