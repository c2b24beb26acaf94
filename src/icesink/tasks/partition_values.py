"""The partition values of rows, per field of a table's partition spec, as the strings Iceberg's
`DataFiles.Builder.withPartitionValues` parses back on the driver (files.py groups rows by them and
the commit describes each file with them).

The transforms are iceberg-rust's (pyiceberg-core), not ours: bucket hashes, truncation and time
ordinals are the spec's, and tests/spark/test_partition_transforms.py pins them against Iceberg
Java's `Transforms`. Rendered as strings: a date transform (`day`) as ISO dates, `year`, `month`
and `hour` as their ordinals, decimals with their scale, nulls as nulls.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from icesink.schema.partitioning import PartitionField


class UnsupportedPartitionError(ValueError):
    """A partition field the one-pass writer does not compute (the driver then leaves the table to
    Spark's path, which names it)."""


def supported(field: PartitionField, source: pa.DataType) -> bool:
    """Whether `partition_strings` computes `field` over a column of Arrow type `source`: what
    Spark's path computes too (no identity or truncate of timestamps or binaries, whose string forms
    differ between Arrow and Iceberg)."""
    if field.transform == "void":
        return True
    timestamp = bool(pa.types.is_timestamp(source))
    date = bool(pa.types.is_date32(source))
    number = bool(pa.types.is_integer(source) or pa.types.is_decimal(source))
    text = bool(pa.types.is_string(source) or pa.types.is_large_string(source))
    if field.transform == "identity":  # a float's NaN would not parse back
        return number or text or date or bool(pa.types.is_boolean(source))
    if field.transform == "truncate":
        return number or text
    if field.transform in ("year", "month", "day"):
        return timestamp or date
    if field.transform == "hour":
        return timestamp
    # bucket: not of floats (the spec has none) nor of nested values
    return field.transform == "bucket" and (
        number or text or timestamp or pa.types.is_date32(source) or _binary(source)
    )


def _binary(source: pa.DataType) -> bool:
    return bool(pa.types.is_binary(source) or pa.types.is_large_binary(source) or pa.types.is_fixed_size_binary(source))


def partition_strings(rows: pa.Table, fields: Sequence[PartitionField]) -> list[pa.Array]:
    """One string array per partition field, a value per row."""
    return [_strings(_transformed(_column(rows, f), f), rows.num_rows) for f in fields]


def _column(rows: pa.Table, field: PartitionField) -> pa.Array:
    if field.column not in rows.column_names:
        raise UnsupportedPartitionError(f"partition field {field}: no column {field.column}")
    column = rows.column(field.column)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _transformed(values: pa.Array, field: PartitionField) -> pa.Array:
    from pyiceberg_core import transform

    if not supported(field, values.type):
        raise UnsupportedPartitionError(f"partition field {field} on a column of type {values.type}")
    if field.transform == "void":
        return pa.nulls(len(values), pa.string())
    if field.transform == "identity":
        return values
    if field.transform in ("bucket", "truncate"):
        return getattr(transform, field.transform)(values, field.param)
    return getattr(transform, field.transform)(values)


def _strings(values: pa.Array, rows: int) -> pa.Array:
    if pa.types.is_boolean(values.type):
        # Arrow writes "true"/"false", as Iceberg parses them; spelled out so a change of Arrow's is seen.
        return pc.if_else(values, pa.scalar("true"), pa.scalar("false"))
    out = values.cast(pa.string())
    assert len(out) == rows
    return out
