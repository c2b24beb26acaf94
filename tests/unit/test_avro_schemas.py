"""What the tasks give polars to read (tasks/avro_schemas.py): times of day as their ints and longs
at any depth, nothing else changed."""

from __future__ import annotations

from typing import Any

from icesink.tasks.avro_enums import ints_for_enums
from icesink.tasks.avro_schemas import without_times

MILLIS = {"type": "int", "logicalType": "time-millis"}
MICROS = {"type": "long", "logicalType": "time-micros"}
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "a", "type": MILLIS},
        {"name": "b", "type": ["null", MICROS]},
        {"name": "c", "type": {"type": "array", "items": MILLIS}},
        {"name": "d", "type": {"type": "map", "values": {"type": MICROS}}},
        {"name": "e", "type": {"type": "record", "name": "E", "fields": [{"name": "t", "type": MILLIS}]}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "odd", "type": {"type": "long", "logicalType": "time-millis"}},
        {"name": "s", "type": {"type": "enum", "name": "S", "symbols": ["X"]}},
    ],
}


def test_times_of_day_are_read_as_their_ints_and_longs_at_any_depth() -> None:
    fields = {f["name"]: f["type"] for f in without_times(SCHEMA)["fields"]}
    assert fields["a"] == "int"
    assert fields["b"] == ["null", "long"]
    assert fields["c"] == {"type": "array", "items": "int"}
    assert fields["d"] == {"type": "map", "values": {"type": "long"}}
    assert fields["e"]["fields"] == [{"name": "t", "type": "int"}]
    assert fields["ts"] == SCHEMA["fields"][5]["type"], "other logical types as they are"
    assert fields["odd"] == SCHEMA["fields"][6]["type"], "time-millis on a long is not Avro's: as it is"
    assert fields["s"] == SCHEMA["fields"][7]["type"]
    assert without_times(SCHEMA) != SCHEMA
    assert SCHEMA["fields"][0]["type"] == MILLIS, "the schema itself unchanged"


def test_the_rewritings_compose() -> None:
    fields = {f["name"]: f["type"] for f in ints_for_enums(without_times(SCHEMA))["fields"]}
    assert fields["s"] == "int"
    assert fields["a"] == "int"
