"""Reshaping decoded rows to the table's columns when the two are spelled or nested differently:
case-insensitive matching (`UserId` -> column `userid`) and flattening (`a.b` -> column `a_b`).

Decoders match names exactly and keep nesting, so they parse with the batch's own spelling and
shape; these functions then build ROW in the table's. Spark expressions only; no action runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import AtomicType, DataType, StructType

from icesink.batch.decode import ERROR, ROW, error
from icesink.schema import evolution


def respell(parsed: DataFrame, target: StructType, parse_target: StructType) -> DataFrame:
    """ROW parsed with `parse_target` (the target in the batch's spelling, same shape) -> `target`."""
    fields = []
    for t, p in zip(target.fields, parse_target.fields, strict=True):
        col = F.col(ROW)[p.name]
        fields.append((col if t.dataType == p.dataType else col.cast(t.dataType)).alias(t.name))
    row = F.when(F.col(ROW).isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
    return parsed.withColumn(ROW, row)


@dataclass(frozen=True)
class FlatColumn:
    column: str  # the table's column
    path: tuple[str, ...]  # where the value sits in the parsed (nested) row
    type: DataType  # its type there


def flat_columns(nested: StructType, separator: str, table: StructType, case_insensitive: bool) -> list[FlatColumn]:
    """The leaves of `nested` as the table's flat columns (matched ignoring case if asked)."""
    leaves = evolution.flattened(nested, separator)
    names = [name for name, _, _, _ in leaves]
    if case_insensitive:
        spelled = {f.name.lower(): f.name for f in table.fields}
        names = [spelled.get(n.lower(), n) for n in names]
    return [FlatColumn(n, path, t) for n, (_, path, t, _) in zip(names, leaves, strict=True)]


def flatten(parsed: DataFrame, target: StructType, columns: list[FlatColumn]) -> DataFrame:
    """ROW (nested, as parsed) -> the flat `target`. A value whose type does not fit its column
    (a conflict the policy lets through as dead letters) gets an error instead of a null."""
    by_name = {c.column: c for c in columns}
    fields: list[Column] = []
    errors: list[Column] = []
    for f in target.fields:
        c = by_name.get(f.name)
        if c is None:
            fields.append(F.lit(None).cast(f.dataType).alias(f.name))
            continue
        value = F.col(ROW)
        for part in c.path:
            value = value[part]
        if c.type == f.dataType:
            fields.append(value.alias(f.name))
            continue
        if evolution.fits(c.type, f.dataType):
            fields.append(value.try_cast(f.dataType).alias(f.name))
            continue
        converted, failed = _conflicting(value, c, f.name, f.dataType)
        fields.append(converted.alias(f.name))
        errors.append(failed)
    row = F.when(F.col(ROW).isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
    # The errors read the nested row: set them before ROW becomes the flat one.
    if errors:
        parsed = parsed.withColumn(ERROR, F.coalesce(F.col(ERROR), *errors))
    return parsed.withColumn(ROW, row)


def _conflicting(value: Column, c: FlatColumn, column: str, to: DataType) -> tuple[Column, Column]:
    """A value whose type conflicts with its column (a conflict the policy lets through): the value
    converted, and the error when it does not convert. Spark cannot cast every pair (int to date is
    refused at analysis, even by try_cast), so it goes through its text, which casts to every atomic
    type; a value that does not convert is a dead letter, never a silent null."""
    converted = value.cast("string").try_cast(to) if isinstance(to, AtomicType) else F.lit(None).cast(to)
    message = f"field {'.'.join(c.path)} is {c.type.simpleString()}, column {column} is {to.simpleString()}"
    return converted, F.when(value.isNotNull() & converted.isNull(), error("convert", "IncompatibleType", message))
