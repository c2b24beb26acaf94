"""Debezium's semantic types (`connect.name` on an Avro type) into natural Iceberg types.

Pure over the writer schema: `semantic_paths` finds the annotated fields, `converted_type` says
what each becomes; `convert` is the Spark expression that does it after from_avro.

  io.debezium.time.Date              int days           -> date
  io.debezium.time.Timestamp         long millis        -> timestamp without zone
  io.debezium.time.MicroTimestamp    long micros        -> timestamp without zone
  io.debezium.time.NanoTimestamp     long nanos         -> timestamp without zone
  io.debezium.time.ZonedTimestamp    ISO-8601 string    -> timestamp with zone
  io.debezium.time.Time / MicroTime  millis / micros    -> long micros of the day (Spark has no time type)
Others (e.g. VariableScaleDecimal, a struct of scale and unscaled bytes) are kept as they come.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DateType, LongType, StructType, TimestampNTZType, TimestampType

Path = tuple[str, ...]

_CONVERSIONS: dict[str, tuple[DataType, Callable[[Column], Column]]] = {
    "io.debezium.time.Date": (DateType(), lambda c: F.date_from_unix_date(c)),
    "io.debezium.time.Timestamp": (TimestampNTZType(), lambda c: F.timestamp_millis(c).cast("timestamp_ntz")),
    "io.debezium.time.MicroTimestamp": (TimestampNTZType(), lambda c: F.timestamp_micros(c).cast("timestamp_ntz")),
    "io.debezium.time.NanoTimestamp": (
        TimestampNTZType(),
        lambda c: F.timestamp_micros(F.floor(c / 1000).cast("long")).cast("timestamp_ntz"),
    ),
    "io.debezium.time.ZonedTimestamp": (TimestampType(), lambda c: F.to_timestamp(c)),
    "io.debezium.time.Time": (LongType(), lambda c: c.cast("long") * 1000),
    "io.debezium.time.MicroTime": (LongType(), lambda c: c.cast("long")),
}


def semantic_paths(schema_text: str) -> dict[Path, str]:
    """Field paths (record field names from the top) carrying a known `connect.name`."""
    out: dict[Path, str] = {}
    named: dict[str, Any] = {}

    def walk(t: Any, path: Path) -> None:
        if isinstance(t, str):
            t = named.get(t, t)
        if isinstance(t, list):
            for branch in t:
                walk(branch, path)
            return
        if not isinstance(t, dict):
            return
        name = t.get("connect.name")
        if name in _CONVERSIONS:
            out[path] = name
        kind = t.get("type")
        if kind == "record":
            named[t.get("name", "")] = t
            if t.get("namespace"):
                named[f"{t['namespace']}.{t['name']}"] = t
            for f in t.get("fields", []):
                walk(f.get("type"), (*path, f["name"]))
        elif kind == "array":
            walk(t.get("items"), path)
        elif isinstance(kind, (dict, list)):
            walk(kind, path)

    walk(json.loads(schema_text), ())
    return out


def converted_type(dtype: DataType, paths: dict[Path, str], path: Path = ()) -> DataType:
    if path in paths:
        return _CONVERSIONS[paths[path]][0]
    if isinstance(dtype, StructType):
        return StructType(
            [f.__class__(f.name, converted_type(f.dataType, paths, (*path, f.name)), f.nullable) for f in dtype.fields]
        )
    if isinstance(dtype, ArrayType):
        return ArrayType(converted_type(dtype.elementType, paths, path), dtype.containsNull)
    return dtype


def convert(col: Column, dtype: DataType, paths: dict[Path, str], path: Path = ()) -> Column:
    """`col` (of `dtype`, as from_avro yields it) with the semantic fields converted."""
    if path in paths:
        return _CONVERSIONS[paths[path]][1](col)
    if not any(p[: len(path)] == path for p in paths):
        return col
    if isinstance(dtype, StructType):
        fields = [convert(col[f.name], f.dataType, paths, (*path, f.name)).alias(f.name) for f in dtype.fields]
        return F.when(col.isNull(), F.lit(None).cast(converted_type(dtype, paths, path))).otherwise(F.struct(*fields))
    if isinstance(dtype, ArrayType):
        return F.transform(col, lambda x: convert(x, dtype.elementType, paths, path))
    return col
