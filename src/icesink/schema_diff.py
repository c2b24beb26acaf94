"""What a batch's schema adds to a table's schema. Pure, over pyspark's type objects (no session).

Only additions are derived here: a field the batch has and the table lacks becomes a new optional
column (top level, inside structs, inside list elements). Type changes are left to the reader: the
batch is parsed with the table's types, so a value that does not fit is reported, never nulled.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import ArrayType, DataType, DecimalType, MapType, StructField, StructType

CORRUPT_COLUMN = "__icesink_corrupt"


@dataclass(frozen=True)
class AddColumn:
    parent: str | None  # dotted Iceberg path of the parent struct ("a.element" inside a list), None = top level
    name: str
    type: DataType

    @property
    def path(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name


def _walk(table: StructType, batch: StructType, parent: str | None, out: list[AddColumn]) -> None:
    existing = {f.name: f for f in table.fields}
    for field in batch.fields:
        if field.name == CORRUPT_COLUMN:
            continue
        have = existing.get(field.name)
        if have is None:
            out.append(AddColumn(parent, field.name, field.dataType))
            continue
        path = f"{parent}.{field.name}" if parent else field.name
        _descend(have.dataType, field.dataType, path, out)


def _descend(have: DataType, new: DataType, path: str, out: list[AddColumn]) -> None:
    if isinstance(have, StructType) and isinstance(new, StructType):
        _walk(have, new, path, out)
    elif isinstance(have, ArrayType) and isinstance(new, ArrayType):
        _descend(have.elementType, new.elementType, f"{path}.element", out)


def added_columns(table: StructType, batch: StructType) -> list[AddColumn]:
    """Fields of `batch` missing from `table`, outermost first (a new struct is added whole)."""
    out: list[AddColumn] = []
    _walk(table, batch, None, out)
    return out


def merged(table: StructType, batch: StructType) -> StructType:
    """`table` with the fields only `batch` has appended where they belong (what evolution yields)."""
    fields = []
    incoming = {f.name: f for f in batch.fields if f.name != CORRUPT_COLUMN}
    for f in table.fields:
        new = incoming.pop(f.name, None)
        fields.append(f if new is None else StructField(f.name, _merge_type(f.dataType, new.dataType), f.nullable))
    fields.extend(StructField(f.name, f.dataType, True) for f in incoming.values())
    return StructType(fields)


def _merge_type(have: DataType, new: DataType) -> DataType:
    if isinstance(have, StructType) and isinstance(new, StructType):
        return merged(have, new)
    if isinstance(have, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(_merge_type(have.elementType, new.elementType), have.containsNull)
    return have


_WIDER = {
    ("IntegerType", "LongType"),
    ("FloatType", "DoubleType"),
    ("ShortType", "IntegerType"),
    ("ShortType", "LongType"),
    ("ByteType", "IntegerType"),
    ("ByteType", "LongType"),
}


def fits(batch: DataType, table: DataType) -> bool:
    """Can every value of `batch` be stored losslessly in a column of `table`?"""
    if batch == table:
        return True
    if isinstance(batch, StructType) and isinstance(table, StructType):
        have = {f.name: f.dataType for f in table.fields}
        return all(f.name not in have or fits(f.dataType, have[f.name]) for f in batch.fields)
    if isinstance(batch, ArrayType) and isinstance(table, ArrayType):
        return fits(batch.elementType, table.elementType)
    if isinstance(batch, MapType) and isinstance(table, MapType):
        return fits(batch.keyType, table.keyType) and fits(batch.valueType, table.valueType)
    if isinstance(batch, DecimalType) and isinstance(table, DecimalType):
        return batch.scale == table.scale and batch.precision <= table.precision
    return (type(batch).__name__, type(table).__name__) in _WIDER


def conflicts(table: StructType, batch: StructType, prefix: str = "") -> list[str]:
    """Columns whose batch type does not fit the table's type, described for an error message."""
    have = {f.name: f.dataType for f in table.fields}
    out = []
    for f in batch.fields:
        t = have.get(f.name)
        if t is None or fits(f.dataType, t):
            continue
        path = f"{prefix}{f.name}"
        if isinstance(f.dataType, StructType) and isinstance(t, StructType):
            out.extend(conflicts(t, f.dataType, f"{path}."))
        else:
            out.append(f"column {path} is {t.simpleString()} in the table, {f.dataType.simpleString()} in the record")
    return out


def parse_schema(table: StructType) -> StructType:
    """The table's schema plus the column that catches records that do not parse."""
    return StructType([*table.fields]).add(CORRUPT_COLUMN, "string", nullable=True)
