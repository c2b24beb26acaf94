"""Which records of a field-routed topic a table takes, inside a one-pass task: those whose routing
field holds one of the values the driver's routing pass found for the table (batch/route.py).

The values are the field's, as Spark's cast to string spells them; a task compares only what it
spells the same way (strings, integers, booleans), and declines the table for any other value
(a float, an object, a field whose name differs only in case). A record whose field is missing or
null is no table's: the routing pass made it a dead letter, or skipped it as the rule says.
Pure: no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.decode_json import json_object

# The Arrow types of a routing column whose values the tasks spell as Spark's cast does.
_SPELLED = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean)
_LONG = 1 << 63


def routable(kind: pa.DataType) -> bool:
    """Whether a column of this type can route records in the tasks."""
    return any(test(kind) for test in _SPELLED)


@dataclass(frozen=True)
class RouteFilter:
    """A field-routed table's share of its topics' records: `field` (a top-level column of the
    table, not its record key column) holding one of `values`. Pickled into the tasks."""

    field: str
    values: frozenset[str]

    def verdict(self, found: dict[str, Any]) -> bool | None:
        """A JSON object's: True when the table takes it, None when it is another table's (or no
        table's), False when the task cannot tell as Spark would (the table is declined)."""
        spelled = self.spelled(found)
        if spelled is False or spelled is None:
            return spelled
        return True if spelled in self.values else None

    def spelled(self, found: dict[str, Any]) -> str | Literal[False] | None:
        """A JSON object's value of the field as Spark's cast spells it; None when it has none
        (missing or null), False when the task cannot tell as Spark would."""
        if self.field not in found:
            folded = self.field.lower()
            # Spark resolves the field ignoring case: another spelling is not one to guess at.
            return False if any(k.lower() == folded for k in found) else None
        value = found[self.field]
        if value is None:
            return None
        spelled = _spelled(value)
        return False if spelled is None else spelled

    def mask(self, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """Which decoded rows the table takes (`column`: the routing column, of a `routable` type)."""
        taken = pc.is_in(spelled_column(column), value_set=pa.array(sorted(self.values), pa.string()))
        return pc.fill_null(taken, False)


def spelled_column(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A routing column of a `routable` type as Spark's cast to string spells its values."""
    return column if pa.types.is_string(column.type) else pc.cast(column, pa.string())


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _spelled(value: Any) -> str | None:
    """A JSON value as Spark's cast to string spells it, or None when it might not."""
    if type(value) is str:
        # A lone surrogate (Python's reader takes it) is no string Arrow, or Spark, holds.
        return value if value.isascii() or _utf8(value) else None
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int and -_LONG <= value < _LONG:
        return str(value)
    return None


# The last record parsed for a table of field-routed topics, and its object: the task hands each
# record to every table of its topic in turn, and each looks at it whole (the JSON object is only
# read, never changed).
_last: tuple[bytes | None, dict[str, Any] | None] = (None, None)


def json_object_once(value: bytes | None) -> dict[str, Any] | None:
    """`decode_json.json_object`, parsed once for all the tables that look at the same record."""
    global _last
    if value is not None and value is _last[0]:
        return _last[1]
    found = json_object(value)
    _last = (value, found)
    return found
