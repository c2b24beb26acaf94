"""A one-pass task's plain JSON records taken a batch and a topic at a time (tasks/json_batches.py,
called by tasks/json_records.py), field-routed topics' and other topics': wherever it takes
records, the tables' rows (an append table's, in any order), their dead letters and declines,
and the routing judges' findings are those of the record-at-a-time way (which
tests/integration/test_direct_routing.py and test_direct_json.py pin against Spark's path);
whatever it cannot take alike, it leaves to that way."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from icesink.model import TableRef
from icesink.modes import WriteMode
from icesink.routing import Route
from icesink.schema.envelope import EnvelopeSpec
from icesink.tasks import json_records as json_records_module
from icesink.tasks import plain_rows, routing
from icesink.tasks.change_rows import ChangeSpec
from icesink.tasks.decode_json import DirectColumn
from icesink.tasks.files import WriteTask
from icesink.tasks.json_records import json_records
from icesink.tasks.plain_rows import PlainEnvelope
from icesink.tasks.route_judges import Judges
from icesink.tasks.routing import RouteFilter
from icesink.tasks.storage import StorageSettings
from icesink.tasks.table_out import REFUSED, DirectTable, TableOut
from tests.support.mangle import mangled

DL = TableRef("raw", "dead_letters")
CLICKS, BUYS, AUDIT = TableRef("raw", "clicks"), TableRef("raw", "buys"), TableRef("raw", "audit")
ROUTE = Route(field="kind", values=(("click", (CLICKS,)), ("buy", (BUYS, AUDIT)), ("7", (CLICKS,))))
COLUMNS = (DirectColumn("id", "long"), DirectColumn("kind", "string"), DirectColumn("n", "string"))
# (name, route values, columns): buys and audit share a value; audit has a column the others lack.
TABLES = [
    ("clicks", {"click", "7"}, COLUMNS),
    ("buys", {"buy"}, COLUMNS),
    ("audit", {"buy"}, (*COLUMNS, DirectColumn("x", "double"))),
]
# Tables of their topics' records (not field-routed): clicks of topic t, buys and audit of topic u.
PLAIN_TOPICS = {"t": [0], "u": [1, 2]}
# The same with every table of the same columns: the batch parsed once for them all.
SAME = [(name, values, COLUMNS) for name, values, _ in TABLES]
GOOD = [
    b'{"id": 1, "kind": "click", "n": "a"}',
    b'{"id": 2, "kind": "buy", "n": "b"}',
    b'{"kind": "click"}',
    b'{"id": 3, "kind": "buy", "n": null}',
    b'{\n "id": 4,\n "kind": "click"\n}',
    b'{"id": 5, "kind": "refund", "why": [1, {"z": 2}]}',  # a value no table takes
]


def outs_of(tables: list[tuple[str, set[str], tuple[DirectColumn, ...]]] = TABLES,
            takes: tuple[int, int] = (0, 99), field: str | None = "kind") -> dict[int, TableOut]:  # fmt: skip
    """The tables' shares of a task: routed by `field`, or (None) tables of their topics'
    records, each a topic's (`PLAIN_TOPICS`)."""
    found = {}
    for i, (name, values, columns) in enumerate(tables):
        schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
        task = WriteTask(f"raw.{name}", schema, "file:///unused/", "q-00000001", storage=StorageSettings())
        takes_of = {("t", p): takes for p in (0, 1)} | {("u", p): takes for p in (0, 1)}
        route = RouteFilter(field, frozenset(values)) if field is not None else None
        table = DirectTable(task, columns, takes_of, False, route=route)
        found[i] = TableOut(table, 0)
    return found


def batch_of(values: list[bytes | None], topics: list[str] | None = None) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict({
        "topic": topics or ["t"] * n, "partition": [i % 2 for i in range(n)], "offset": list(range(n)),
        "value": pa.array(values, pa.binary()),
    })  # fmt: skip


def taken(
    batches: list[pa.RecordBatch], whole: bool, monkeypatch: pytest.MonkeyPatch, judged: bool = True, **kw: Any
) -> tuple[Any, ...]:
    """What the tables and the judges made of `batches`: each table's rows (None: declined) and
    dead letters, and the judges' findings; `whole`: with the batch-at-a-time way, or without it."""
    with monkeypatch.context() as m:
        if not whole:
            m.setattr(json_records_module, "taken_whole", lambda batch, *_: batch)
        outs = outs_of(**kw)
        declined: set[int] = set()

        def decline(i: int, frames: Any = None) -> None:
            declined.add(i)
            outs.pop(i)

        by_topic = {"t": list(outs), "u": list(outs)} if kw.get("field", "kind") else PLAIN_TOPICS
        judges = Judges({"t": ROUTE, "u": ROUTE}, DL) if judged and kw.get("field", "kind") else None
        for batch in batches:
            json_records(batch, by_topic, outs, decline, judges)
        tables: dict[int, Any] = {}
        for i in range(len(kw.get("tables", TABLES))):
            try:
                rows = outs[i].rows.take() if i not in declined else None  # type: ignore[union-attr]
            except REFUSED:  # a value not of its column's type: the task declines the table
                declined.add(i)
            tables[i] = None if i in declined else (_rows(rows), outs[i].letters)
        found = {t: (dict(f.values), sorted(f.letters), f.unsure) for t, f in (judges.found if judges else {}).items()}
        return tables, found


def _rows(batch: pa.RecordBatch | None) -> dict[str, list[Any]]:
    """A table's rows as columns, the rows in a set order (an append table's have none)."""
    if batch is None:
        return {}
    columns = _plain(batch.to_pydict())
    rows = sorted(zip(*columns.values(), strict=True), key=repr)
    return {name: [row[k] for row in rows] for k, name in enumerate(columns)}


def _plain(found: Any) -> Any:
    """`found` with each NaN as a string: equal where the rows are."""
    if isinstance(found, dict):
        return {k: _plain(v) for k, v in found.items()}
    if isinstance(found, list):
        return [_plain(v) for v in found]
    return "NaN" if isinstance(found, float) and math.isnan(found) else found


def parses(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many records the record-at-a-time way parsed (every look at a routed record goes
    through tasks/routing.json_object_once; at another, through plain_rows' json_object)."""
    count = [0]

    def counting(module: Any) -> None:
        real = module.json_object

        def counted(value: bytes | None) -> Any:
            count[0] += 1
            return real(value)

        monkeypatch.setattr(module, "json_object", counted)

    counting(routing)
    counting(plain_rows)
    return lambda: count[0]


@pytest.mark.parametrize("tables", [TABLES, SAME], ids=["columns-apart", "columns-shared"])
def test_a_routed_batch_is_taken_whole_as_a_record_at_a_time_takes_it(
    tables: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = [batch_of(GOOD[:5]), batch_of(GOOD), batch_of(GOOD[:2])]
    expected = taken(batches, False, monkeypatch, tables=tables)
    count = parses(monkeypatch)
    got = taken(batches, True, monkeypatch, tables=tables)
    assert got == expected
    assert count() == 1, "only the record of a value no table takes is parsed on its own"
    rows, found = got
    assert rows[0][0] == {"id": [1, 1, 1, 4, 4, None, None], "kind": ["click"] * 7, "n": ["a"] * 3 + [None] * 4}
    assert len(rows[2][0]["id"]) == 5, "audit takes the buys too"
    ((values, letters, unsure),) = found.values()
    assert (values, unsure) == ({"click": 7, "buy": 5}, False)
    assert [(x.offset, x.message) for x in letters] == [(5, "field kind = 'refund' matches none of the rule's values")]


def test_without_judges_and_with_an_integer_field(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = [("clicks", {"7"}, (DirectColumn("id", "long"), DirectColumn("code", "long")))]
    records = [b'{"id": 1, "code": 7}', b'{"id": 2, "code": 8}', b'{"code": 7}']
    kw: dict[str, Any] = {"tables": tables, "field": "code"}
    expected = taken([batch_of(records)], False, monkeypatch, judged=False, **kw)
    count = parses(monkeypatch)
    assert taken([batch_of(records)], True, monkeypatch, judged=False, **kw) == expected
    assert count() == 1, "the code 8 is another's"
    assert expected[0][0][0] == {"id": [1, None], "code": [7, 7]}


@pytest.mark.parametrize(
    "odd",
    [
        b"not json", b'{"id": 6, "kind": null}', b'{"id": 6}', b'{"id": 6, "Kind": "click"}', b'{"kind": 7}',
        b'{"kind": true}', b'{"kind": 7.5}', b'{"kind": "click", "kind": "buy"}', b'{"kind": "buy", "kind": "click"}',
        b'{"kind": "click", "new": 1}', b'{"kind": "click", "id": "1"}', b'{"kind": "click", "n": "\xff"}',
        b'{"kind": "click", "id": 1e2}', b'{"kind": "buy", "x": NaN}', b'{"kind": "buy", "x": -0}',
        b'{"kind": "click"} {"kind": "click"}', b'{"kind": "cl\\u0069ck"}', b'{"schema": {}, "payload": {}}',
        b'["click"]', b"", b'{"kind": "\\ud800"}', None,
    ],
)  # fmt: skip
@pytest.mark.parametrize("tables", [TABLES, SAME], ids=["columns-apart", "columns-shared"])
def test_a_record_in_doubt_is_decided_as_a_record_at_a_time_decides_it(
    odd: bytes | None, tables: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for batch in ([*GOOD[:3], odd, *GOOD[3:]], [*GOOD[:3], odd]):
        for judged in (True, False):
            got = taken([batch_of(batch)], True, monkeypatch, judged=judged, tables=tables)
            assert got == taken([batch_of(batch)], False, monkeypatch, judged=judged, tables=tables)


@pytest.mark.parametrize("tables", [TABLES, SAME], ids=["columns-apart", "columns-shared"])
def test_mangled_records_are_taken_whole_only_as_a_record_at_a_time_takes_them(
    tables: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(36)
    alphabet = b'{}[]",:0123456789.eE+-\\untrfasl \n\xff\xc3ckiby'
    for _ in range(400):
        records: list[bytes | None] = list(GOOD[:5])
        at = rng.randrange(len(records))
        records[at] = record = mangled(GOOD[at], rng, alphabet)
        batches = [batch_of(records)]
        got = taken(batches, True, monkeypatch, tables=tables)
        assert got == taken(batches, False, monkeypatch, tables=tables), record


def test_a_batch_of_two_topics_and_offsets_a_table_does_not_take(monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = batch_of([*GOOD, *GOOD], ["t"] * len(GOOD) + ["u"] * len(GOOD))
    count = parses(monkeypatch)
    assert taken([mixed], True, monkeypatch) == taken([mixed], False, monkeypatch)
    assert count() == 1 + 1 + len(GOOD) * 2, "each topic's refund, then every record the other way"
    # A table that takes only some of the batch's offsets: the record-at-a-time way passes over the others.
    assert taken([mixed], True, monkeypatch, takes=(2, 5)) == taken([mixed], False, monkeypatch, takes=(2, 5))


def test_tables_of_topics_take_each_topics_records_whole_as_a_record_at_a_time_takes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = [*GOOD[:5], b'{"id": 9, "n": "z", "kind": "any"}']
    mixed = batch_of([*records, *records], ["t"] * len(records) + ["u"] * len(records))
    batches = [batch_of(records), mixed, batch_of(records, ["u"] * len(records))]
    count = parses(monkeypatch)
    got = taken(batches, True, monkeypatch, field=None)
    assert count() == 0, "every record parsed a batch and a topic at a time"
    assert got == taken(batches, False, monkeypatch, field=None)
    rows, _ = got
    assert [len(rows[i][0]["id"]) for i in range(3)] == [12, 12, 12], "every record of its topics"
    assert rows[2][0]["x"] == [None] * 12
    # A topic with a record in doubt goes a record at a time; the other still whole.
    poisoned = batch_of([*records, *records[:3], b'{"id": 1, "new": 2}'], ["t"] * len(records) + ["u"] * 4)
    count = parses(monkeypatch)
    got = taken([poisoned], True, monkeypatch, field=None)
    assert count() == 4 + 4, "topic u's four records, by each of its two tables"
    assert got == taken([poisoned], False, monkeypatch, field=None)
    assert got[0][1] is None, "buys declined: a record of a new field"
    # A table that does not take the batch's every offset: its topic a record at a time.
    assert taken([mixed], True, monkeypatch, field=None, takes=(2, 5)) == taken(
        [mixed], False, monkeypatch, field=None, takes=(2, 5)
    )


def test_mangled_records_of_a_topic_are_taken_whole_only_as_a_record_at_a_time_takes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(37)
    alphabet = b'{}[]",:0123456789.eE+-\\untrfasl \n\xff\xc3ckiby'
    for _ in range(300):
        records: list[bytes | None] = list(GOOD[:5])
        at = rng.randrange(len(records))
        records[at] = record = mangled(GOOD[at], rng, alphabet)
        batch = batch_of([*records, *GOOD[:5]], ["u"] * 5 + ["t"] * 5)
        got = taken([batch], True, monkeypatch, field=None)
        assert got == taken([batch], False, monkeypatch, field=None), record


def test_interleaved_topics_and_a_record_that_makes_the_judge_unsure(monkeypatch: pytest.MonkeyPatch) -> None:
    interleaved = batch_of([r for r in GOOD[:5] for _ in (0, 1)], [t for _ in GOOD[:5] for t in ("t", "u")])
    assert taken([interleaved], True, monkeypatch) == taken([interleaved], False, monkeypatch)
    assert taken([interleaved], True, monkeypatch, field=None) == taken([interleaved], False, monkeypatch, field=None)
    # A record Spark's pass judges (Connect JSON's keys): the topic's findings are only that.
    unsure = batch_of([b'{"schema": 1, "payload": 2, "kind": "refund"}', *GOOD[:2]])
    got = taken([unsure], True, monkeypatch)
    assert got == taken([unsure], False, monkeypatch)
    assert got[1] == {"t": ({}, [], True)}


def test_a_topics_one_table_of_changes_takes_its_batch_whole_with_tombstones_and_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job of several JSON topics, one a Debezium topic into its changelog table (the capture of
    a database, a topic per source table): its batches as the job's one table's."""
    key = DirectColumn("_key", "struct", fields=(DirectColumn("id", "long"),))
    columns = (DirectColumn("id", "long"), DirectColumn("n", "string"), DirectColumn("_op", "string"), key)
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    changes = ChangeSpec(WriteMode.CHANGELOG, ("id",), "_op", "_key")
    values = [
        b'{"before": null, "after": {"id": 1, "n": "a"}, "op": "c", "source": {"lsn": 1}}',
        b'{"before": {"id": 1, "n": "a"}, "after": {"id": 1, "n": "b"}, "op": "u", "ts_ms": 2}',
        b'{"before": {"id": 1, "n": "b"}, "after": null, "op": "d"}',
        None,  # the delete's tombstone
    ]
    batch = pa.RecordBatch.from_pydict({
        "topic": ["d"] * 4, "partition": [0] * 4, "offset": [5, 6, 7, 8],
        "value": pa.array(values, pa.binary()), "key": [b'{"id": 1}'] * 4,
    })  # fmt: skip

    def taken(whole: bool, batches: list[pa.RecordBatch] | None = None) -> Any:
        with monkeypatch.context() as m:
            if not whole:
                m.setattr(json_records_module, "taken_whole", lambda batch, *_: batch)
            task = WriteTask("raw.users", schema, "file:///unused/", "q-00000001", storage=StorageSettings())
            decoder = PlainEnvelope(columns, EnvelopeSpec())
            table = DirectTable(task, decoder, {("d", 0): (0, 99)}, changes=changes, key_column="_key", key_decoder=key)
            # The users table first, then the plain topics' tables of outs_of, renumbered after it.
            outs = {0: TableOut(table, 0), **{i + 1: out for i, out in outs_of(field=None).items()}}
            for each in batches or [batch]:
                json_records(each, {"d": [0], **{t: [i + 1 for i in ids] for t, ids in PLAIN_TOPICS.items()}}, outs,
                             lambda i, f=None: pytest.fail(f"table {i} declined"))  # fmt: skip
            rows = outs[0].rows
            assert rows is not None
            found = rows.take()
            assert found is not None
            return found.to_pydict()

    expected = taken(False)
    count = parses(monkeypatch)
    assert taken(True) == expected
    assert count() == len(values), "only the record keys are parsed on their own (as the job's one table's)"
    # Batches taken both ways into the same rows: whole, a record at a time (an event Arrow's
    # reader is not given: a leading space), whole again; their rows and coordinates in order.
    odd = batch.slice(1, 1).set_column(3, "value", pa.array([b" " + values[1]], pa.binary()))
    mixed = [batch.slice(0, 1), odd, batch.slice(2, 2)]
    assert taken(True, mixed) == taken(False, mixed) == expected
    assert expected["_op"] == ["I", "U", "D", None]
    assert expected["_key"] == [{"id": 1}] * 4
