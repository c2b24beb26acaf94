"""The one-pass tasks' routing of field-routed topics' records (tasks/routing.py): the values spelled
as Spark's cast to string spells them, records of other tables passed over, anything the tasks
cannot spell alike declining the table."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.direct_json import routed_values
from icesink.tasks.decode_json import direct_columns
from icesink.tasks.plain_rows import TOMBSTONE, DirectRows
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
