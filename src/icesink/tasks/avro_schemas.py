"""What the tasks give polars to read: a writer schema (its named types written out) rewritten type
by type where polars would read a type otherwise than Spark's from_avro, or not at all (enums:
tasks/avro_enums.py; maps: tasks/avro_maps.py; times of day, here). Each rewritten type has the
encoding of the type it replaces, so the reading stays exact.

Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# What polars reads as a time of day, where from_avro gives the int or long itself.
_TIMES = {("int", "time-millis"), ("long", "time-micros")}


def rewritten(schema: Any, change: Callable[[Any], Any]) -> Any:
    """`schema` with `change` applied to every type in it, innermost first: a record's fields', an
    array's items, a map's values, a union's branches, then the type itself."""
    if isinstance(schema, list):
        return change([rewritten(b, change) for b in schema])
    if not isinstance(schema, dict):
        return change(schema)
    kind = schema.get("type")
    if kind == "record" and isinstance(schema.get("fields"), list):
        schema = {**schema, "fields": [{**f, "type": rewritten(f.get("type"), change)} for f in schema["fields"]]}
    elif kind in ("array", "map"):
        inner = "items" if kind == "array" else "values"
        schema = {**schema, inner: rewritten(schema.get(inner), change)}
    elif isinstance(kind, dict | list):
        schema = {**schema, "type": rewritten(kind, change)}
    return change(schema)


def without_times(schema: Any) -> Any:
    """`schema` with each time-millis an int and each time-micros a long: polars would read them as
    times of day, from_avro gives their int and long (it has no time type)."""

    def change(t: Any) -> Any:
        if isinstance(t, dict) and isinstance(t.get("type"), str) and (t["type"], t.get("logicalType")) in _TIMES:
            return t["type"]
        return t

    return rewritten(schema, change)
