"""How a batch's schema evolves a table's schema. Pure, over pyspark's type objects (no session).

- A field the batch has and the table lacks becomes a new optional column: top level, inside
  structs, inside list elements and map values.
- A column the batch carries wider (int -> long, float -> double, a decimal with more precision
  and the same scale) is widened; a required column the batch may leave null becomes optional.
- A column the table has and the batch lacks stays (written as null): nothing is dropped or
  renamed.
- Anything else (string -> int, a narrowing) is a conflict, reported by `conflicts` for the
  per-table policy; the batch is parsed with the table's types, so a value that does not fit is
  reported, never nulled.
Also here: matching names case-insensitively, and flattening nested structs into columns.
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
    elif isinstance(have, MapType) and isinstance(new, MapType):
        _descend(have.valueType, new.valueType, f"{path}.value", out)


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
        if new is None:
            fields.append(f)
        else:
            fields.append(StructField(f.name, _merge_type(f.dataType, new.dataType), f.nullable or new.nullable))
    fields.extend(StructField(f.name, f.dataType, True) for f in incoming.values())
    return StructType(fields)


def _merge_type(have: DataType, new: DataType) -> DataType:
    if isinstance(have, StructType) and isinstance(new, StructType):
        return merged(have, new)
    if isinstance(have, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(_merge_type(have.elementType, new.elementType), have.containsNull)
    if isinstance(have, MapType) and isinstance(new, MapType):
        return MapType(have.keyType, _merge_type(have.valueType, new.valueType), have.valueContainsNull)
    return widened(have, new) or have


def widened(have: DataType, new: DataType) -> DataType | None:
    """The wider type a column of `have` becomes to hold `new`, when Iceberg can promote it."""
    if isinstance(have, DecimalType) and isinstance(new, DecimalType):
        if new.scale == have.scale and new.precision > have.precision:
            return DecimalType(new.precision, new.scale)
        return None
    if (type(have).__name__, type(new).__name__) in _PROMOTIONS:
        return new
    return None


@dataclass(frozen=True)
class WidenColumn:
    path: str  # dotted Iceberg path
    old: DataType
    new: DataType


def widened_columns(table: StructType, batch: StructType, parent: str | None = None) -> list[WidenColumn]:
    """Existing primitive columns the batch carries in a wider type Iceberg can promote to."""
    out: list[WidenColumn] = []
    have = {f.name: f.dataType for f in table.fields}
    for f in batch.fields:
        if f.name not in have:
            continue
        path = f"{parent}.{f.name}" if parent else f.name
        out.extend(_widen(have[f.name], f.dataType, path))
    return out


def _widen(have: DataType, new: DataType, path: str) -> list[WidenColumn]:
    if isinstance(have, StructType) and isinstance(new, StructType):
        return widened_columns(have, new, path)
    if isinstance(have, ArrayType) and isinstance(new, ArrayType):
        return _widen(have.elementType, new.elementType, f"{path}.element")
    if isinstance(have, MapType) and isinstance(new, MapType):
        return _widen(have.valueType, new.valueType, f"{path}.value")
    wider = widened(have, new)
    return [WidenColumn(path, have, wider)] if wider is not None else []


def optional_columns(table: StructType, batch: StructType, parent: str | None = None) -> list[str]:
    """Required columns (dotted paths) that the batch may leave null: they become optional."""
    out: list[str] = []
    have = {f.name: f for f in table.fields}
    for f in batch.fields:
        t = have.get(f.name)
        if t is None:
            continue
        path = f"{parent}.{f.name}" if parent else f.name
        if not t.nullable and f.nullable:
            out.append(path)
        if isinstance(t.dataType, StructType) and isinstance(f.dataType, StructType):
            out.extend(optional_columns(t.dataType, f.dataType, path))
    return out


# Iceberg's type promotions (Spark's small ints are stored as Iceberg int).
_PROMOTIONS = {
    ("IntegerType", "LongType"),
    ("FloatType", "DoubleType"),
    ("ShortType", "LongType"),
    ("ByteType", "LongType"),
}


def respelled(struct: StructType, spelling: StructType) -> StructType:
    """`struct` with each field renamed as `spelling` spells it where the two differ only in case,
    in nested structs too. Batch -> table spelling matches records to existing columns; table ->
    batch spelling is what a decoder, which matches names exactly, is asked to parse."""
    names = {f.name.lower(): f for f in spelling.fields}
    fields = []
    for f in struct.fields:
        other = names.get(f.name.lower())
        dtype = f.dataType
        if other is not None and isinstance(other.dataType, StructType) and isinstance(dtype, StructType):
            dtype = respelled(dtype, other.dataType)
        fields.append(StructField(other.name if other is not None else f.name, dtype, f.nullable, f.metadata))
    return StructType(fields)


def flattened(batch: StructType, separator: str) -> list[tuple[str, tuple[str, ...], DataType, bool]]:
    """(column name, path, type, nullable) of every leaf of the nested structs: `a.b` -> `a_b`.
    Lists and maps are leaves (their elements keep their shape)."""
    out: list[tuple[str, tuple[str, ...], DataType, bool]] = []

    def walk(struct: StructType, path: tuple[str, ...], nullable: bool) -> None:
        for f in struct.fields:
            if f.name == CORRUPT_COLUMN:
                continue
            p = (*path, f.name)
            if isinstance(f.dataType, StructType):
                walk(f.dataType, p, nullable or f.nullable)
            else:
                out.append((separator.join(p), p, f.dataType, nullable or f.nullable))

    walk(batch, (), False)
    return out


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
        elif isinstance(f.dataType, ArrayType) and isinstance(t, ArrayType):
            out.extend(_element_conflicts(t.elementType, f.dataType.elementType, f"{path}.element"))
        elif isinstance(f.dataType, MapType) and isinstance(t, MapType) and fits(f.dataType.keyType, t.keyType):
            out.extend(_element_conflicts(t.valueType, f.dataType.valueType, f"{path}.value"))
        else:
            out.append(f"column {path} is {t.simpleString()} in the table, {f.dataType.simpleString()} in the record")
    return out


def _element_conflicts(table: DataType, batch: DataType, path: str) -> list[str]:
    if isinstance(table, StructType) and isinstance(batch, StructType):
        return conflicts(table, batch, f"{path}.")
    if fits(batch, table):
        return []
    return [f"column {path} is {table.simpleString()} in the table, {batch.simpleString()} in the record"]


def parse_schema(table: StructType) -> StructType:
    """The table's schema plus the column that catches records that do not parse."""
    return StructType([*table.fields]).add(CORRUPT_COLUMN, "string", nullable=True)
