"""Partition specs as the config writes them (`bucket(16, id)`, `days(ts)`, `region`). Pure.

The same small model describes a table's existing spec (read from Iceberg's `bucket[16]` form), so
the writer partitions rows the way the table says, whatever the config says now.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Iceberg's transform names; the config also accepts the plural forms Spark SQL uses.
_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour"}
# `void`: a field dropped from a v1 spec, or one a partition evolution keeps for its old files.
_TRANSFORMS = {"identity", "bucket", "truncate", "year", "month", "day", "hour", "void"}
_WITH_PARAM = {"bucket", "truncate"}
_CALL = re.compile(r"^\s*(?P<fn>[a-z]+)\s*\(\s*(?:(?P<n>\d+)\s*,\s*)?(?P<col>[A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$")
_BARE = re.compile(r"^\s*(?P<col>[A-Za-z_][A-Za-z0-9_]*)\s*$")
_ICEBERG = re.compile(r"^(?P<fn>[a-z]+)(?:\[(?P<n>\d+)\])?$")


@dataclass(frozen=True)
class PartitionField:
    transform: str  # one of _TRANSFORMS
    column: str  # the source column, top level
    param: int | None = None  # bucket count or truncate width

    def __str__(self) -> str:
        if self.transform == "identity":
            return self.column
        if self.param is not None:
            return f"{self.transform}({self.param}, {self.column})"
        return f"{self.transform}({self.column})"


def _field(fn: str, n: str | None, col: str, text: str) -> PartitionField:
    fn = _ALIASES.get(fn, fn)
    if fn not in _TRANSFORMS:
        raise ValueError(f"{text!r}: unknown transform {fn!r} (one of {', '.join(sorted(_TRANSFORMS))})")
    if (fn in _WITH_PARAM) != (n is not None):
        usage = f"{fn}(N, column)" if fn in _WITH_PARAM else f"{fn}(column)"
        raise ValueError(f"{text!r}: write it as {usage}")
    param = int(n) if n is not None else None
    if param is not None and param < 1:
        raise ValueError(f"{text!r}: the width must be at least 1")
    return PartitionField(fn, col, param)


def parse_partition_field(text: str) -> PartitionField:
    """`bucket(16, id)`, `days(ts)`, `truncate(4, name)`, `identity(region)` or just `region`."""
    bare = _BARE.match(text)
    if bare:
        return PartitionField("identity", bare.group("col"))
    m = _CALL.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a partition field such as bucket(16, id), days(ts) or region")
    if m.group("fn") == "void":
        raise ValueError(f"{text!r}: void is a transform of existing specs only; leave the field out")
    return _field(m.group("fn"), m.group("n"), m.group("col"), text)


def from_iceberg(transform: str, column: str) -> PartitionField:
    """A field of an existing table: Iceberg prints transforms as `bucket[16]`, `day`, `identity`."""
    m = _ICEBERG.match(transform)
    if not m:
        raise ValueError(f"unsupported partition transform {transform!r} on column {column}")
    return _field(m.group("fn"), m.group("n"), column, f"{transform}({column})")


def check_within_keys(partition_by: Sequence[str | PartitionField], keys: Sequence[str]) -> None:
    """Equality deletes of a key only reach rows in the key's own partition: a CDC table may only
    be partitioned by functions of its key columns, else a row that moved partition survives."""
    fields = [f if isinstance(f, PartitionField) else parse_partition_field(f) for f in partition_by]
    outside = sorted({f.column for f in fields if f.transform != "void"} - set(keys))
    if outside:
        shown = ", ".join(str(f) for f in fields if f.column in outside)
        raise ValueError(
            f"partition field(s) {shown} use column(s) {outside} that are not key columns {list(keys)}; "
            "equality deletes could miss rows in other partitions"
        )
