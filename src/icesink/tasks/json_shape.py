"""Plain JSON records into a flattened or case-insensitive table's columns, in the tasks
(`tables.flatten_separator`, `tables.case_insensitive`; the driver's side: batch/direct_shape.py).

A record's object is reshaped before the table's columns take it (tasks/plain_rows.DirectRows):
flattened, each leaf named by its path joined with the separator (`{"meta": {"os": 1}}` ->
`meta_os`; arrays are leaves, as Spark's path flattens the struct it infers), and its names
matched to the columns ignoring case. As Spark's path, which infers these tables' records over
the whole batch and drops a field null in all of them (`dropFieldIfAllNull`), a null that is no
column (`"meta": null` beside columns `meta_*`) is no value; anything else that is no column
declines the table, as for plain tables (a new column: the evolution round). Where Spark's path
would not make one row of a record, the record declines the table: two fields for one column
(`a_b` and `a.b`, or `Id` and `ID`), or a column spelled two ways by the records of one task
(Spark's path parses each column with one spelling per batch). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icesink.tasks.decode_json import DirectColumn


@dataclass(frozen=True)
class ShapedJson:
    """A flattened or case-insensitive table's share of the direct job: its columns as
    tasks/decode_json.py fills them, and how records are reshaped to them; pickled into the tasks."""

    columns: tuple[DirectColumn, ...]
    separator: str | None = None
    case_insensitive: bool = False


class JsonShape:
    """One task's reshaping of a table's records (it remembers each column's spelling)."""

    def __init__(self, shaped: ShapedJson) -> None:
        self._separator = shaped.separator
        self._names = frozenset(c.name for c in shaped.columns)
        self._spelling = {c.name.lower(): c.name for c in shaped.columns} if shaped.case_insensitive else None
        self._spelled: dict[str, str] = {}  # column -> the name the task's records give it

    def row(self, found: dict[str, Any]) -> dict[str, Any] | None:
        """The record's object in the table's names and shape, or None (the table is declined)."""
        flat = _flattened(found, self._separator) if self._separator else found
        if flat is None:
            return None
        if self._spelling is None:
            if self._names.issuperset(flat):
                return flat
            return {name: value for name, value in flat.items() if value is not None or name in self._names}
        out: dict[str, Any] = {}
        for name, value in flat.items():
            column = self._spelling.get(name.lower(), name)
            if self._spelled.setdefault(column, name) != name or column in out:
                return None
            if value is not None or column in self._names:
                out[column] = value
        return out


def _flattened(found: dict[str, Any], separator: str, prefix: str = "") -> dict[str, Any] | None:
    """`found` with its nested objects' fields as top-level fields named by their path; None when
    two paths give one name."""
    out: dict[str, Any] = {}
    leaves = 0
    for key, value in found.items():
        if type(value) is dict:
            inner = _flattened(value, separator, prefix + key + separator)
            if inner is None:
                return None
            out.update(inner)
            leaves += len(inner)
        else:
            out[prefix + key] = value
            leaves += 1
    return out if len(out) == leaves else None
