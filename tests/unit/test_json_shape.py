"""Plain JSON records into flattened or case-insensitive tables in the one-pass tasks
(tasks/json_shape.py): the object each record becomes, and what declines its table. The rows
against Spark's path's: tests/integration/test_direct_shape.py."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from icesink.tasks.decode_json import DeclinedValueError, DirectColumn
from icesink.tasks.json_shape import JsonShape, ShapedJson
from icesink.tasks.plain_rows import DirectRows

COLUMNS = (
    DirectColumn("Id", "long"), DirectColumn("Meta_OS", "string"), DirectColumn("Meta_cpu_cores", "long"),
    DirectColumn("Meta_tags", "string", array=True),
)  # fmt: skip


def shape(separator: str | None = "_", case_insensitive: bool = True) -> JsonShape:
    return JsonShape(ShapedJson(COLUMNS, separator, case_insensitive))


def test_records_are_flattened_and_matched_ignoring_case() -> None:
    s = shape()
    assert s.row({"ID": 1, "meta": {"os": "linux", "cpu": {"cores": 4}, "tags": ["a"]}}) == {
        "Id": 1, "Meta_OS": "linux", "Meta_cpu_cores": 4, "Meta_tags": ["a"],
    }  # fmt: skip
    assert s.row({"ID": 2, "meta": {"os": None, "cpu": {}}}) == {"Id": 2, "Meta_OS": None}
    assert s.row({"ID": 3, "new": {"x": 1}}) == {"Id": 3, "new_x": 1}, "a new column: the table declines later"


def test_a_null_that_is_no_column_is_no_value() -> None:
    """As Spark's path drops a field null in every record of the batch (and one non-null elsewhere
    is a new column, which declines the table)."""
    assert shape().row({"ID": 1, "meta": None, "gone": None}) == {"Id": 1}


def test_two_fields_for_one_column_decline() -> None:
    assert shape().row({"Id": 1, "ID": 2}) is None
    assert shape(case_insensitive=False).row({"Meta_OS": "a", "Meta": {"OS": "b"}}) is None
    assert shape(case_insensitive=False).row({"Meta": {"OS": "b"}, "Meta_OS": "a"}) is None


def test_a_column_spelled_two_ways_in_one_task_declines() -> None:
    s = shape()
    assert s.row({"ID": 1}) == {"Id": 1}
    assert s.row({"ID": 2}) == {"Id": 2}
    assert s.row({"iD": 3}) is None, "Spark's path parses a batch with one spelling of each column"


def test_without_flattening_only_names_are_matched() -> None:
    s = JsonShape(ShapedJson((DirectColumn("userid", "long"), DirectColumn("meta", "struct", fields=(
        DirectColumn("os", "string"),))), None, True))  # fmt: skip
    assert s.row({"UserId": 1, "Meta": {"os": "x"}}) == {"userid": 1, "meta": {"os": "x"}}


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    out = DirectRows(COLUMNS, shape=shape())
    if not all(out.add(orjson.dumps(r)) for r in records):
        return None
    taken = out.take()
    assert taken is not None
    return taken.to_pylist()


def test_the_tasks_rows_of_reshaped_records() -> None:
    assert rows([{"Id": 1, "Meta": {"OS": "a", "cpu": {"cores": 2}}}, {"Id": 2, "Meta": None}]) == [
        {"Id": 1, "Meta_OS": "a", "Meta_cpu_cores": 2, "Meta_tags": None},
        {"Id": 2, "Meta_OS": None, "Meta_cpu_cores": None, "Meta_tags": None},
    ]
    with pytest.raises(DeclinedValueError, match="Meta_cpu_cores"):  # the types, checked as for plain tables
        rows([{"Id": 1, "Meta": {"cpu": {"cores": "many"}}}])
