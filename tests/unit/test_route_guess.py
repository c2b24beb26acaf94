"""A batch of field-routed topics planned with the values they held before (batch/route_guess.py,
batch/routed_before.py): what refutes the guess, which tables it leaves out, and the one-pass
task's routing of the records beside its tables (tasks/one_pass.py, tasks/route_values.Judges)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from icesink.batch.direct_avro import direct_avro
from icesink.batch.direct_outcome import outcome
from icesink.batch.route import Targets
from icesink.batch.route_guess import RouteGuess
from icesink.batch.routed_before import KEEP_BATCHES, RoutedBefore
from icesink.kafka import wire
from icesink.model import TableRef
from icesink.routing import Route
from icesink.tasks.dead_letters import Letter
from icesink.tasks.decode_avro import AvroRows
from icesink.tasks.decode_json import DirectColumn
from icesink.tasks.files import WriteTask
from icesink.tasks.one_pass import ROUTING, direct_fn
from icesink.tasks.route_judges import AvroTopic, Judging, TopicValues, routing_blob, routing_of
from icesink.tasks.routing import RouteFilter
from icesink.tasks.storage import StorageSettings
from icesink.tasks.table_out import DirectTable

DL = TableRef("raw", "dead_letters")
CLICKS, BUYS, AUDIT = TableRef("raw", "clicks"), TableRef("raw", "buys"), TableRef("raw", "audit")
STATIC = Route(field="kind", values=(("click", (CLICKS,)), ("buy", (BUYS, AUDIT))))
DYNAMIC = Route(field="target", dynamic_namespace="raw")


def guess(values: dict[str, set[str]]) -> RouteGuess:
    routes = {"s": STATIC, "d": DYNAMIC}
    return RouteGuess({t: frozenset(v) for t, v in values.items()}, Judging(routes, DL), ())


def found(values: dict[str, dict[str, int]], unsure: set[str] = frozenset()) -> dict[str, TopicValues]:  # type: ignore[assignment]
    return {t: TopicValues(Counter(v), [], t in unsure) for t, v in values.items()}


def test_the_job_remembers_the_values_of_its_last_batches() -> None:
    before = RoutedBefore()
    assert before.values("s", 0) is None, "a topic not routed yet: sampled"
    before.learn(0, {"s": {"click", "buy"}})
    before.learn(1, {"s": {"click"}})
    assert before.values("s", 2) == {"click", "buy"}
    before.learn(KEEP_BATCHES + 1, {"s": {"click"}})
    assert before.values("s", KEEP_BATCHES + 2) == {"click"}, "buy not met for KEEP_BATCHES batches"
    before.learn(5, {"d": set()})
    assert before.values("d", 6) == frozenset(), "routed, no value: nothing to plan"
    before.hold_off(["s"], 30)
    assert before.held_off("s", 30 + KEEP_BATCHES)
    assert not before.held_off("s", 31 + KEEP_BATCHES)


def test_a_guess_holds_when_the_tasks_met_only_values_it_was_planned_with() -> None:
    planned = guess({"s": {"click", "buy"}, "d": {"alpha"}})
    assert planned.refuted(found({"s": {"click": 3}, "d": {"alpha": 1}})) is None
    assert planned.refuted(found({"s": {"click": 3}})) is None, "a topic of letters only, or skipped records"
    assert planned.refuted(found({"d": {"alpha": 1, "beta": 2}})) == (
        "topic d holds value(s) 'beta' of field target the batch was not planned with"
    )
    assert planned.refuted(found({"s": {"click": 1}}, unsure={"s"})) == (
        "topic s holds a record the tasks cannot judge as Spark's decoder would"
    )
    assert planned.refuted(None) == "the one-pass job's tasks did not judge all of their records"
    assert planned.routing["s"].values == {"click", "buy"}
    assert planned.routing["s"].letters == (), "no dead letters in a guess: the tasks make them"


def test_the_tables_of_values_not_met_are_left_out_but_those_of_whole_topics() -> None:
    planned = guess({"s": {"click", "buy"}, "d": {"alpha", "beta"}})
    alpha, beta = TableRef("raw", "alpha"), TableRef("raw", "beta")
    targets = Targets(batch=None)  # type: ignore[arg-type]  # no Spark plan is built here
    targets.field_routes = {ref: [] for ref in (CLICKS, BUYS, AUDIT, alpha, beta)}
    targets.fixed_tables = {AUDIT: ["orders"]}
    assert planned.unmet(found({"s": {"click": 2}, "d": {"beta": 1}}), targets) == {BUYS, alpha}, (
        "audit takes the whole topic orders as well"
    )
    assert planned.unmet(found({"s": {"buy": 1}}), targets) == {CLICKS, alpha, beta}, "buy fans out to buys and audit"


def test_the_tasks_findings_cross_to_the_driver_and_add_up() -> None:
    one = {"s": TopicValues(Counter({"click": 2}), [Letter("s", 0, 4, "route", "Unrouted", "no value in field kind")])}
    two = {"s": TopicValues(Counter({"click": 1, "buy": 5}), [], unsure=False), "d": TopicValues(Counter(), [], True)}
    merged = routing_of([routing_blob(one), routing_blob(two)])
    assert dict(merged["s"].values) == {"click": 3, "buy": 5}
    assert merged["s"].letters == one["s"].letters
    assert not merged["s"].unsure
    assert merged["d"].unsure


def records(values: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {"topic": ["s"] * n, "partition": [0] * n, "offset": list(range(n)), "value": values}
    )


def test_a_one_pass_task_routes_the_records_beside_writing_its_tables(tmp_path: Path) -> None:
    schema = pa.schema([
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("kind", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ])  # fmt: skip
    task = WriteTask("raw.clicks", schema, f"file://{tmp_path}/", "q-00000001", storage=StorageSettings())
    columns = (DirectColumn("id", "long"), DirectColumn("kind", "string"))
    clicks = DirectTable(task, columns, {("s", 0): (0, 9)}, False, route=RouteFilter("kind", frozenset({"click"})))
    task = WriteTask("raw.buys", schema, f"file://{tmp_path}/", "q-00000001", storage=StorageSettings())
    buys = DirectTable(task, columns, {("s", 0): (0, 9)}, False, route=RouteFilter("kind", frozenset({"buy"})))
    run = direct_fn([clicks, buys], batch_id=1, judging=Judging({"s": STATIC}, DL))
    values = [b'{"id": 1, "kind": "click"}', b'{"id": 2, "kind": "buy"}', b'{"id": 3, "kind": "refund"}', b"oops",
              b'{"id": 4, "kind": "click"}', b'{"id": 5}']  # fmt: skip
    rows = [SimpleNamespace(**r) for r in pa.Table.from_batches(list(run(iter([records(values)])))).to_pylist()]
    assert sorted((r.table, r.record_count) for r in rows if r.table != ROUTING) == [(0, 2), (1, 1)]
    seen: Any = outcome(rows, 2)
    assert [f.record_count for f in seen.files[0]] == [2], "the two clicks"
    assert [f.record_count for f in seen.files[1]] == [1], "the buy"
    assert dict(seen.routing["s"].values) == {"click": 2, "buy": 1}
    assert [(x.offset, x.error_class, x.message) for x in seen.routing["s"].letters] == [
        (2, "Unrouted", "field kind = 'refund' matches none of the rule's values"),
        (3, "JsonParseError", "not valid JSON"),
        (5, "Unrouted", "no value in field kind"),
    ]
    assert not seen.letters, "the routing's dead letters are not the table's"
    assert outcome([r for r in rows if r.table != ROUTING], 2).routing is None, "not judged"


def test_an_outcome_of_some_tables_numbers_them_in_that_order() -> None:
    rows = [
        SimpleNamespace(table=0, declined=True, keys=None, letters=None, frames=None, older=None),
        SimpleNamespace(table=2, declined=True, keys=None, letters=None, frames=None, older=None),
    ]
    seen = outcome(rows, 3).only([1, 2])
    assert seen.declined == {1}
    assert seen.files[0] == []


WRITER = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}, {"name": "ok", "type": "boolean"}]}


def test_avro_records_are_decoded_once_for_the_tables_and_the_routing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = direct_avro({wire.id_key(1): json.dumps(WRITER)}, T.StructType([
        T.StructField("id", T.LongType()), T.StructField("ok", T.BooleanType()),
    ]))  # fmt: skip
    assert direct is not None
    schema = pa.schema([
        pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("ok", pa.bool_(), metadata={b"PARQUET:field_id": b"2"}),
    ])  # fmt: skip
    route = Route(field="ok", values=(("true", (CLICKS,)), ("false", (BUYS,))))

    def table(name: str, value: str) -> DirectTable:
        (tmp_path / name).mkdir()
        task = WriteTask(name, schema, f"file://{tmp_path}/{name}/", "q-00000001", storage=StorageSettings())
        return DirectTable(task, direct, {("s", 0): (0, 9)}, False, route=RouteFilter("ok", frozenset({value})))

    decodes: list[int] = []
    real = AvroRows.decode
    monkeypatch.setattr(AvroRows, "decode", lambda self, *a, **k: decodes.append(1) or real(self, *a, **k))
    merged = pa.schema([pa.field("id", pa.int64()), pa.field("ok", pa.bool_())])
    run = direct_fn([table("raw.yes", "true"), table("raw.no", "false")], batch_id=1,
                    judging=Judging({"s": route}, DL, {"s": AvroTopic(direct, merged)}))  # fmt: skip
    values = []
    for i in range(7):
        buf = io.BytesIO()
        buf.write(wire.id_key(1))
        fastavro.schemaless_writer(buf, fastavro.parse_schema(WRITER), {"id": i, "ok": i % 3 == 0})
        values.append(buf.getvalue())
    rows = [SimpleNamespace(**r) for r in pa.Table.from_batches(list(run(iter([records(values)])))).to_pylist()]
    seen: Any = outcome(rows, 2)
    assert [f.record_count for f in seen.files[0]] == [3], "ids 0, 3, 6"
    assert [f.record_count for f in seen.files[1]] == [4]
    assert dict(seen.routing["s"].values) == {"true": 3, "false": 4}
    assert len(decodes) == 1, "one decode for both tables and the routing"
