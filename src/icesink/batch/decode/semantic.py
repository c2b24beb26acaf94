"""Debezium's semantic types (`connect.name` on an Avro type) into natural Iceberg types.

Pure over the writer schema: `semantic_paths` finds the annotated fields, `converted_type` says
what each becomes; `convert` is the Spark expression that does it after from_avro.

  io.debezium.time.Date              int days           -> date
  io.debezium.time.Timestamp         long millis        -> timestamp without zone
  io.debezium.time.MicroTimestamp    long micros        -> timestamp without zone
  io.debezium.time.NanoTimestamp     long nanos         -> timestamp without zone
  io.debezium.time.ZonedTimestamp    ISO-8601 string    -> timestamp with zone
  io.debezium.time.Time / MicroTime  millis / micros    -> long micros of the day (Spark has no time type)
  io.debezium.data.VariableScaleDecimal  {scale, two's-complement bytes} -> decimal(38, 18), exactly:
                                     a value with more digits than that does not round, it fails
                                     (`conversion_failed`) and its record becomes a dead letter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DecimalType, StructType

from icesink.schema.connect import SEMANTIC_TYPES, VARIABLE_DECIMAL, VARIABLE_DECIMAL_TYPE, ZONED_TIMESTAMP

Path = tuple[str, ...]


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """`body(value)` with `value` computed once: Spark SQL has no LET, a one-element array does."""
    return F.transform(F.array(value), body)[0]


def exact_decimal(unscaled: Column, scale: Column, target: DecimalType) -> Column:
    """Two's-complement big-endian `unscaled` bytes and a `scale` as a `target` decimal, exactly:
    the bytes become decimal digits, the scale a decimal point, then one cast. A number that does
    not fit `target`, or that would round, yields null (the caller makes that a dead letter); no
    value ever passes through a double."""
    negative = F.substring(unscaled, 1, 1) >= F.unhex(F.lit("80"))

    def step(acc: Column, i: Column) -> Column:
        b = F.conv(F.hex(F.substring(unscaled, i, F.lit(1))), 16, 10).cast("int")
        b = F.when(negative, 255 - b).otherwise(b)  # two's complement: -x = ~x + 1
        return F.try_add(F.try_multiply(acc, F.lit(256)), b).cast("decimal(38,0)")

    digits = F.aggregate(F.sequence(F.lit(1), F.length(unscaled)), F.lit(0).cast("decimal(38,0)"), step)
    magnitude = _let(digits, lambda d: F.when(negative, F.try_add(d, F.lit(1))).otherwise(d).cast("string"))
    # lpad also truncates: never shorter than the digits themselves.
    text = _let(magnitude, lambda m: F.lpad(m, F.greatest(F.length(m), scale + 1), "0"))
    return F.when(unscaled.isNull(), F.lit(None).cast(target)).otherwise(
        _let(text, lambda t: _place_point(t, scale, negative, target))
    )


def _variable_decimal(c: Column) -> Column:
    return F.when(c.isNull(), F.lit(None).cast(VARIABLE_DECIMAL_TYPE)).otherwise(
        exact_decimal(c["value"], c["scale"], VARIABLE_DECIMAL_TYPE)
    )


def _place_point(text: Column, scale: Column, negative: Column, target: DecimalType) -> Column:
    point = F.length(text) - scale
    # A negative scale (PostgreSQL's numeric(p, -s)) multiplies by a power of ten: zeros appended.
    whole = F.when(scale >= 0, F.substring(text, F.lit(1), point)).otherwise(
        F.concat(text, F.repeat(F.lit("0"), -scale))
    )
    literal = F.concat(
        F.when(negative, F.lit("-")).otherwise(F.lit("")),
        whole,
        F.when(scale > 0, F.concat(F.lit("."), F.substring(text, point + 1, F.lit(40)))).otherwise(F.lit("")),
    )
    # A cast to a smaller scale rounds; only digits beyond the target's scale that are all zero may go.
    extra = scale - target.scale
    dropped = F.substring(text, F.length(text) - extra + 1, extra)
    exact = (extra <= 0) | F.regexp_like(dropped, F.lit("^0*$"))
    return F.when(exact, literal.try_cast(target))


_SPARK: dict[str, Callable[[Column], Column]] = {
    "io.debezium.time.Date": lambda c: F.date_from_unix_date(c),
    "io.debezium.time.Timestamp": lambda c: F.timestamp_millis(c).cast("timestamp_ntz"),
    "io.debezium.time.MicroTimestamp": lambda c: F.timestamp_micros(c).cast("timestamp_ntz"),
    # Floored as a decimal: a double (c / 1000) rounds nanoseconds beyond 2^53 to the wrong microsecond.
    "io.debezium.time.NanoTimestamp": lambda c: F.timestamp_micros(
        F.floor(c.cast("decimal(20,0)") / F.lit(1000)).cast("long")
    ).cast("timestamp_ntz"),
    # try_: a string that does not parse is null here, and `conversion_failed` makes it a dead letter.
    ZONED_TIMESTAMP: lambda c: F.try_to_timestamp(c),
    "io.debezium.time.Time": lambda c: c.cast("long") * 1000,
    "io.debezium.time.MicroTime": lambda c: c.cast("long"),
    VARIABLE_DECIMAL: _variable_decimal,
}
# Each semantic type's column type (schema/connect.py) and its conversion.
CONVERSIONS: dict[str, tuple[DataType, Callable[[Column], Column]]] = {
    name: (SEMANTIC_TYPES[name], convert) for name, convert in _SPARK.items()
}


def semantic_paths(schema_text: str) -> dict[Path, str]:
    """Field paths (record field names from the top) carrying a known `connect.name`."""
    out: dict[Path, str] = {}
    _walk(json.loads(schema_text), (), {}, out)
    return out


def _walk(t: Any, path: Path, named: dict[str, Any], out: dict[Path, str]) -> None:
    """Records into `out` the semantic fields of Avro type `t` at `path`; `named`: the named types seen so far."""
    if isinstance(t, str):
        t = named.get(t, t)
    if isinstance(t, list):
        for branch in t:
            _walk(branch, path, named, out)
        return
    if not isinstance(t, dict):
        return
    name = t.get("connect.name")
    if name in CONVERSIONS:
        out[path] = name
    kind = t.get("type")
    if kind == "record":
        _walk_record(t, path, named, out)
    elif kind == "array":
        _walk(t.get("items"), path, named, out)
    elif isinstance(kind, (dict, list)):
        _walk(kind, path, named, out)


def _walk_record(t: dict[str, Any], path: Path, named: dict[str, Any], out: dict[Path, str]) -> None:
    named[t.get("name", "")] = t
    if t.get("namespace"):
        named[f"{t['namespace']}.{t['name']}"] = t
    for f in t.get("fields", []):
        _walk(f.get("type"), (*path, f["name"]), named, out)


def converted_type(dtype: DataType, paths: dict[Path, str], path: Path = ()) -> DataType:
    if path in paths:
        return CONVERSIONS[paths[path]][0]
    if isinstance(dtype, StructType):
        return StructType(
            [f.__class__(f.name, converted_type(f.dataType, paths, (*path, f.name)), f.nullable) for f in dtype.fields]
        )
    if isinstance(dtype, ArrayType):
        return ArrayType(converted_type(dtype.elementType, paths, path), dtype.containsNull)
    return dtype


def conversion_failed(
    raw: Column, converted: Column, paths: dict[Path, str], names: frozenset[str] = frozenset({VARIABLE_DECIMAL})
) -> Column | None:
    """True where a value of a semantic type in `names` that must convert exactly (a
    VariableScaleDecimal, a ZonedTimestamp) did not: present in `raw` (as from_avro yields it),
    null in `converted`. None when the schema has no such field."""
    checks = []
    for path, name in paths.items():
        if name not in names or not path:
            continue
        before, after = raw, converted
        for part in path:
            before, after = before[part], after[part]
        checks.append(before.isNotNull() & after.isNull())
    if not checks:
        return None
    out = checks[0]
    for c in checks[1:]:
        out = out | c
    return F.coalesce(out, F.lit(False))


def convert(col: Column, dtype: DataType, paths: dict[Path, str], path: Path = ()) -> Column:
    """`col` (of `dtype`, as from_avro yields it) with the semantic fields converted."""
    if path in paths:
        return CONVERSIONS[paths[path]][1](col)
    if not any(p[: len(path)] == path for p in paths):
        return col
    if isinstance(dtype, StructType):
        fields = [convert(col[f.name], f.dataType, paths, (*path, f.name)).alias(f.name) for f in dtype.fields]
        return F.when(col.isNull(), F.lit(None).cast(converted_type(dtype, paths, path))).otherwise(F.struct(*fields))
    if isinstance(dtype, ArrayType):
        return F.transform(col, lambda x: convert(x, dtype.elementType, paths, path))
    return col
