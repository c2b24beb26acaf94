"""The one-pass tasks' routing of field-routed topics' records (tasks/routing.py): the values spelled
as Spark's cast to string spells them, records of other tables passed over, anything the tasks
cannot spell alike declining the table."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from icesink.batch.direct_json import routed_values
from icesink.batch.direct_routing import route_filter
from icesink.batch.route import Targets
from icesink.config import Unmatched
from icesink.model import TableRef
from icesink.routing import Route
from icesink.tasks.carried_rows import TOMBSTONE
from icesink.tasks.decode_json import direct_columns
from icesink.tasks.plain_rows import DirectRows
from icesink.tasks.route_values import judged
from icesink.tasks.routing import RouteFilter, routable

KIND = RouteFilter("kind", frozenset({"click", "7", "true"}))


@pytest.mark.parametrize(
    ("found", "verdict"),
    [
        ({"kind": "click"}, True),
        ({"kind": 7}, True),  # Spark's cast of a long, or the raw text of a number in a string column
        ({"kind": True}, True),
        ({"kind": "buy"}, None),  # another table's
        ({"kind": None}, None),  # no table's: the routing pass made it a dead letter or skipped it
        ({"id": 1}, None),
        ({"kind": 7.0}, False),  # Spark spells a double its own way: not guessed at
        ({"kind": {"a": 1}}, False),
        ({"kind": [1]}, False),
        ({"Kind": "click"}, False),  # Spark resolves the field ignoring case
        ({"kind": 1 << 63}, False),  # beyond a long: Spark infers a decimal
        ({"kind": "\ud800"}, False),  # a lone surrogate: no string Arrow holds
        ({"kind": "cl\u00efck"}, None),
    ],
)
def test_a_json_objects_verdict(found: dict[str, object], verdict: bool | None) -> None:
    assert KIND.verdict(found) is verdict


def test_the_mask_spells_strings_integers_and_booleans_as_spark_casts_them() -> None:
    assert KIND.mask(pa.array(["click", "buy", None])).to_pylist() == [True, False, False]
    assert KIND.mask(pa.array([7, 8, None], pa.int32())).to_pylist() == [True, False, False]
    assert KIND.mask(pa.chunked_array([[True], [False, None]])).to_pylist() == [True, False, False]
    assert [routable(t) for t in (pa.string(), pa.int64(), pa.bool_(), pa.float64(), pa.struct([]))] == [
        True, True, True, False, False,
    ]  # fmt: skip


def test_routed_rows_pass_over_other_tables_records_and_tombstones() -> None:
    columns = direct_columns(StructType([StructField("id", LongType()), StructField("kind", StringType())]))
    assert columns is not None
    rows = DirectRows(columns, carry=True, key_column=None, route=RouteFilter("kind", frozenset({"click"})))
    assert rows.add(b'{"id": 1, "kind": "click"}', ("t", 0, 1))
    assert rows.add(b'{"id": 2, "kind": "buy", "extra": [1]}', ("t", 0, 2)), "another table's: passed over"
    assert rows.add(b'{"id": 3}', ("t", 0, 3)), "no table's"
    assert not rows.add(b'{"id": 4, "kind": 1.5}', ("t", 0, 4)), "not spelled as Spark would: declined"
    assert not rows.add(b'{"id": 5, "kind": "click", "extra": 1}', ("t", 0, 5)), "the table's, of a new field"
    assert rows.add(b'{"id": 6, "kind": "click"}', ("t", 0, 6))
    batch = rows.take()
    assert batch is not None
    assert batch.to_pydict() == {
        "topic": ["t", "t"], "partition": [0, 0], "offset": [1, 6], TOMBSTONE: [False, False],
        "id": [1, 6], "kind": ["click", "click"],
    }  # fmt: skip
    keyed = DirectRows(columns, carry=True, key_column="id", route=RouteFilter("kind", frozenset({"click"})))
    assert keyed.add(None, ("t", 0, 7), b"1"), "a tombstone has no routing field: passed over"
    assert keyed.take() is None
    assert not keyed.add_all([b'{"id": 1, "kind": "buy"}'], None), "a routed table's records come one at a time"


def test_a_new_tables_columns_are_inferred_from_the_records_it_takes_only() -> None:
    clicks = RouteFilter("kind", frozenset({"click"}))
    values = [b'{"kind": "click", "n": 1}', b'{"kind": "buy", "qty": 2}', b"not json", None, b'{"kind": "click"}']
    assert routed_values(values, clicks) == [values[0], values[4]]
    assert routed_values([*values, b'{"kind": 1.5}'], clicks) == [], "one the tasks cannot route: none"


def records(topic: str, values: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {"topic": [topic] * n, "partition": [0] * n, "offset": list(range(n)), "value": values}
    )


def test_the_routing_pass_in_the_tasks_words_its_dead_letters_as_sparks_pass() -> None:
    ns = TableRef("raw", "dead_letters")
    static = Route(field="kind", values=(("click", (TableRef("raw", "clicks"),)),))
    dynamic = Route(field="target", dynamic_namespace="raw")
    skip = Route(field="kind", values=(("click", (TableRef("raw", "clicks"),)),), unmatched=Unmatched.SKIP)
    found = judged(
        iter([
            records("s", [b'{"kind": "click"}', b'{"kind": "refund"}', b'{"id": 1}', b"not json", b'{"kind": 7}']),
            records("d", [b'{"target": "Alpha"}', b'{"target": "../x"}', b'{"target": "dead_letters"}']),
            records("k", [b'{"kind": "refund"}', b"[1]", b'{"kind": "click"}']),
        ]),
        {"s": static, "d": dynamic, "k": skip},
        ns,
    )  # fmt: skip
    assert dict(found["s"].values) == {"click": 1}
    assert [(x.offset, x.stage, x.error_class, x.message) for x in found["s"].letters] == [
        (1, "route", "Unrouted", "field kind = 'refund' matches none of the rule's values"),
        (2, "route", "Unrouted", "no value in field kind"),
        (3, "decode", "JsonParseError", "not valid JSON"),
        (4, "route", "Unrouted", "field kind = '7' matches none of the rule's values"),
    ]
    assert dict(found["d"].values) == {"Alpha": 1}
    assert [(x.error_class, x.message) for x in found["d"].letters] == [
        ("InvalidTableName", "field target = '../x' is not a valid table name"),
        ("InvalidTableName", "field target names the dead-letter table raw.dead_letters"),
    ]
    assert dict(found["k"].values) == {"click": 1}
    assert [(x.offset, x.error_class) for x in found["k"].letters] == [(1, "JsonTypeError")], "skip: decode errors only"
    assert not any(f.unsure for f in found.values())


@pytest.mark.parametrize(
    "value", [None, b"{'kind': 'click'}", b'{"kind": 1.5}', b'{"Kind": "click"}', b'{"schema": {}, "payload": {}}']
)
def test_a_record_the_tasks_cannot_judge_as_spark_makes_its_topic_unsure(value: bytes | None) -> None:
    route = Route(field="kind", values=(("click", (TableRef("raw", "clicks"),)),))
    found = judged(iter([records("t", [b'{"kind": "click"}', value])]), {"t": route}, TableRef("raw", "dl"))
    assert found["t"].unsure


def test_a_tables_route_in_the_one_pass_job_is_one_field_and_the_values_of_all_its_topics() -> None:
    clicks, audit = TableRef("raw", "clicks"), TableRef("raw", "audit")
    rule = Route(field="kind", values=(("click", (clicks,)), ("tap", (clicks,)), ("buy", (audit,))))
    other = Route(field="type", values=(("click", (clicks,)),))
    schema = StructType([StructField("id", LongType()), StructField("kind", StringType())])
    targets = Targets(batch=None)  # type: ignore[arg-type]  # no Spark plan is built here
    targets.field_routes = {clicks: [("e.20240101", rule, ("click",)), ("e.20240102", rule, ("click", "tap"))]}
    assert route_filter(targets, clicks, schema, None) == RouteFilter("kind", frozenset({"click", "tap"}))
    assert "filled from the record's value" in str(route_filter(targets, clicks, schema, "kind"))
    doubles = StructType([StructField("kind", DoubleType())])
    assert "not a string, an integer or a boolean" in str(route_filter(targets, clicks, doubles, None))
    targets.field_routes[clicks].append(("f", other, ("click",)))
    assert route_filter(targets, clicks, schema, None) == "its topics are routed by rules that differ"
    targets.fixed_tables = {audit: ["orders"]}
    targets.field_routes[audit] = [("e.20240101", rule, ("buy",))]
    assert route_filter(targets, audit, schema, None) == "it takes whole topics as well as records routed by a field"
