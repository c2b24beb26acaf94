"""A flattened or case-insensitive table (`tables.flatten_separator`, `tables.case_insensitive`) on
the one-pass path: a writer schema's rows in the table's names and shape, and where each of the
table's columns sits in a decoded record (the tasks pick it there: tasks/decode_avro.py).

The rows are the ones Spark's path makes of the same records (batch/decode/records.py and
batch/shape.py): flattening names each leaf of the nested records by its path joined with the
separator (`meta.os` -> `meta_os`; lists and maps are leaves) and makes every flat column
nullable; matching ignoring case spells a field as the table does where the two differ only in
case (`UserId` -> `userid`), a new one as the records do. What the tasks cannot pick (a field
spelled otherwise than its column inside a struct column, two fields that land in one column)
returns None: such a table goes Spark's way. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from icesink.batch import shape
from icesink.config import TableSettings
from icesink.schema.evolution import respelled
from icesink.tasks.semantic_values import Path

Columns = tuple[tuple[str, Path], ...]  # (the table's column, the path of its values in a decoded record)


@dataclass(frozen=True)
class Shaping:
    separator: str | None = None
    case_insensitive: bool = False

    @classmethod
    def of(cls, settings: TableSettings) -> Shaping:
        """A table's shaping, as its settings say."""
        return cls(settings.flatten_separator, settings.case_insensitive)

    @property
    def plain(self) -> bool:
        return not self.separator and not self.case_insensitive


def shaped(row: StructType, shaping: Shaping, table: StructType) -> tuple[StructType, Columns] | None:
    """`row` (a writer schema's rows, as decoded) in the names and shape of `table` (its current
    columns; none for a new table), and the path of each of its columns; None when the tasks
    cannot pick the columns (see the module)."""
    if shaping.plain:
        return row, tuple((f.name, (f.name,)) for f in row.fields)
    if shaping.separator:
        flat = shape.flat_columns(row, shaping.separator, table, shaping.case_insensitive)
        out = StructType([StructField(c.column, c.type, True) for c in flat])
        columns = tuple((c.column, c.path) for c in flat)
    else:
        out = respelled(row, table)
        if any(_names(f.dataType) != _names(o.dataType) for f, o in zip(row.fields, out.fields, strict=True)):
            return None  # a struct column's fields respelled: the tasks take a column's values as decoded
        columns = tuple((o.name, (f.name,)) for f, o in zip(row.fields, out.fields, strict=True))
    names = [name.lower() if shaping.case_insensitive else name for name, _ in columns]
    return (out, columns) if len(set(names)) == len(names) else None


def _names(t: DataType) -> object:
    """The field names of a type at any depth (what respelling may change)."""
    if isinstance(t, StructType):
        return tuple((f.name, _names(f.dataType)) for f in t.fields)
    if isinstance(t, ArrayType):
        return _names(t.elementType)
    if isinstance(t, MapType):
        return _names(t.keyType), _names(t.valueType)
    return None
