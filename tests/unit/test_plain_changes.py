"""Debezium change events in plain JSON parsed a batch at a time (tasks/plain_changes.py, taken by
tasks/plain_rows.DirectRows): wherever it takes a batch, its rows are the ones the record-at-a-time
`_change` makes (which tests/unit/test_json_direct.py and tests/integration/test_direct_cdc.py pin
against Spark's path); whatever that way would refuse or decide otherwise, it leaves to it."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from icesink.schema.envelope import EnvelopeSpec
from icesink.tasks import plain_rows
from icesink.tasks.decode_json import DirectColumn, direct_columns
from icesink.tasks.plain_changes import parsed_changes
from icesink.tasks.plain_rows import DirectRows
from icesink.tasks.table_out import REFUSED
from tests.support.mangle import mangled

SPEC = EnvelopeSpec(source_columns=("lsn", "table"))
TABLE = StructType([
    StructField("id", LongType()), StructField("email", StringType()), StructField("score", DoubleType()),
    StructField("tags", StructType([StructField("a", StringType())])),
    StructField("_op", StringType()), StructField("_source_lsn", LongType()),
    StructField("_source_table", StringType()),
])  # fmt: skip


def columns() -> tuple[DirectColumn, ...]:
    found = direct_columns(TABLE)
    assert found is not None
    return found


IMAGE = frozenset({"id", "email", "score", "tags"})


def event(op: str, before: object, after: object, source: object = None, **more: object) -> bytes:
    found = {"before": before, "after": after, "op": op, "ts_ms": 5, **more}
    if source is not None:
        found["source"] = source
    return json.dumps(found).encode()


ROW = {"id": 1, "email": "a@x", "score": 0.5, "tags": {"a": "t"}}
SOURCE = {"version": "3.6.1", "connector": "postgresql", "lsn": 10, "table": "users", "snapshot": "false"}
GOOD = [
    event("c", None, ROW, SOURCE),
    event("u", ROW, {**ROW, "email": "b@x", "score": 2}, {**SOURCE, "lsn": 11}, transaction=None),
    event("r", None, {"id": 2}, {"lsn": 12}),
    event("d", ROW, None, {}),
    event("d", {"id": 3, "tags": None}, {"id": 3}),
    b'{"op": "c", "after": {"\\u0069d": 4, "email": "\\u00e9"}, "source": {"lsn": 13, "db": {"n": [1]}}}',
    b'{\n "op": "u",\n "before": null,\n "after": {"id": 5}\n}',
]
# Each refused by the record-at-a-time way, or one Arrow's reader may read otherwise than it does.
DOUBTFUL = [
    event("t", None, None), event("m", None, ROW), json.dumps({"after": ROW}).encode(), event("c", None, None),
    event("d", None, ROW), event("c", None, {**ROW, "name": "n"}), event("u", {"id": 1, "name": "n"}, ROW),
    event("c", None, {"id": 1, "_op": "x"}), event("c", None, [1]), event("c", None, {"id": "1"}),
    event("c", None, {"id": 1.0}), event("c", None, {"score": "1"}), event("u", {"email": 5}, ROW),
    event("c", None, ROW, {"lsn": "9"}), event("c", None, ROW, "source"), event("c", None, ROW, [1]),
    event("c", None, {"tags": {"a": "x", "b": 1}}), event("c", None, {"tags": "x"}), event("C", None, ROW),
    b'{"op": "c", "op": "d", "after": {"id": 1}}', b'{"op": "c", "after": {"id": 1, "id": 2}}',
    b'{"op": "c", "After": {"id": 1}}', b'{"op": "c", "after": {"id": 1}, "after": {"id": 2}}',
    b'{"op": "c", "after": {"score": NaN}}', b'{"op": "c", "after": {"score": -0}}',
    b'{"op": "u", "before": {"score": 1e999}, "after": {"id": 1}}',
    b'{"op": "c", "after": {"score": 9007199254740993}}',
    b'{"op": "c", "after": {"email": "\xff"}}', b'{"op": "c", "after": {"id": 1}} x', b'{"op": "c"}{"op": "c"}',
    b'{"op": 1, "after": {"id": 1}}', b'{"op": "c", "after": {"id": 1},}', b"[]", b"", b"null",
    b'{"schema": {"type": "struct"}, "payload": {"op": "c", "after": {"id": 1}}}',
    event("c", None, ROW, {"lsn": 1, "x": 1}, ts_ms="a"),  # another top-level type: the reader refuses it
    b'{"op": "c", "after": {"id": 1}, "x": ' + b"[" * 1100 + b"]" * 1100 + b"}",  # deeper than Python reads
    b'{"op": "c", "after": {"id": 1}, "source": {"lsn": 1, "x": Inf}}', b'{"op": "c", "after": {"id": 1}, "x": -NaN}',
]  # fmt: skip


def one_at_a_time(values: list[bytes]) -> list[pa.Array] | None:
    rows = DirectRows(columns(), envelope=SPEC)
    if not all(rows.add(v) for v in values):
        return None
    try:
        batch = rows.take()
    except REFUSED:
        return None
    assert batch is not None
    return batch.columns


def test_a_batch_of_change_events_is_parsed_whole_into_the_rows_of_a_record_at_a_time() -> None:
    expected = one_at_a_time(GOOD)
    assert expected is not None
    got = parsed_changes(columns(), SPEC, IMAGE, GOOD)
    assert got is not None, "a batch of change events of the table's columns is parsed whole"
    assert [g.to_pylist() for g in got] == [e.to_pylist() for e in expected]
    assert got[4].to_pylist() == ["I", "U", "I", "D", "D", "I", "U"]
    assert got[0].to_pylist() == [1, 1, 2, 1, 3, 4, 5], "a delete's row is its before image"
    assert got[5].to_pylist() == [10, 11, 12, None, None, 13, None]


@pytest.mark.parametrize("doubtful", DOUBTFUL, ids=range(len(DOUBTFUL)))
def test_an_event_in_doubt_leaves_its_batch_to_the_record_at_a_time_way(doubtful: bytes) -> None:
    assert parsed_changes(columns(), SPEC, IMAGE, [GOOD[0], doubtful, GOOD[1]]) is None


def test_mangled_events_are_parsed_whole_only_into_the_rows_a_record_at_a_time_makes() -> None:
    rng = random.Random(38)
    alphabet = b'{}[]",:0123456789.eE+-\\untrfasl \n\xff\xc3cdopbefi'
    parsed = 0
    for _ in range(1500):
        record = mangled(rng.choice(GOOD), rng, alphabet)
        batch = [GOOD[2], record]
        got = parsed_changes(columns(), SPEC, IMAGE, batch)
        if got is None:
            continue
        parsed += 1
        expected = one_at_a_time(batch)
        assert expected is not None, record
        assert [g.to_pylist() for g in got] == [e.to_pylist() for e in expected], record
    assert parsed > 100, "most mangled events are refused by both, but not all"


def test_a_changelog_table_takes_a_batch_whole_with_its_tombstones_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    key = DirectColumn("_key", "struct", fields=(DirectColumn("id", "long"),))
    keyed = direct_columns(
        StructType([*TABLE.fields, StructField("_key", StructType([StructField("id", LongType())]))])
    )
    assert keyed is not None
    values: list[bytes | None] = [*GOOD, None]
    keys = [b'{"id": %d}' % i for i in range(len(values))]
    coordinates = tuple(pa.array(x) for x in (["t"] * len(values), [0] * len(values), list(range(len(values)))))

    def taken(whole: bool) -> Any:
        rows = DirectRows(keyed, True, "_key", SPEC, key, keys=("id",))
        if whole:
            assert rows.add_all(values, coordinates, keys)  # type: ignore[arg-type]
        else:
            for offset, (value, k) in enumerate(zip(values, keys, strict=True)):
                assert rows.add(value, ("t", 0, offset), k)
        batch = rows.take()
        assert batch is not None
        return batch.to_pydict()

    expected = taken(False)
    count = [0]
    real = plain_rows.json_object
    monkeypatch.setattr(plain_rows, "json_object", lambda v: count.__setitem__(0, count[0] + 1) or real(v))
    assert taken(True) == expected
    assert count[0] == len(keys), "no event parsed on its own (the keys are)"
    assert expected["_key"][-1] == {"id": len(values) - 1}, "the tombstone: its key"
    assert expected["_op"][-1] is None


def test_a_struct_source_column_takes_no_field_it_lacks() -> None:
    meta = DirectColumn("_source_meta", "struct", fields=(DirectColumn("v", "string"),))
    table = (DirectColumn("id", "long"), DirectColumn("_op", "string"), meta)
    spec = EnvelopeSpec(source_columns=("meta",))
    good = [b'{"op": "c", "after": {"id": 1}, "source": {"meta": {"v": "m"}, "db": "x"}}']
    got = parsed_changes(table, spec, frozenset({"id"}), good)
    assert got is not None
    assert got[2].to_pylist() == [{"v": "m"}]
    wider = [*good, b'{"op": "c", "after": {"id": 2}, "source": {"meta": {"v": "m", "w": 1}}}']
    assert parsed_changes(table, spec, frozenset({"id"}), wider) is None, "refused a record at a time too"
    rows = DirectRows(table, envelope=spec)
    assert all(rows.add(v) for v in wider)
    with pytest.raises(REFUSED):
        rows.take()
