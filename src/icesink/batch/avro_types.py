"""What Spark's from_avro makes of an Avro type, for the one-pass decoder (batch/direct_avro.py):
the Spark type of each Avro type the tasks decode exactly as Spark's path does, None for the others.

Taken: the primitives, fixed (as bytes), date, timestamp-millis/micros, local-timestamp-millis/micros,
time-millis/micros (as their int and long), uuid, decimals (on bytes, or on a fixed of at most 16
bytes) and enums (as strings), alone or in a union with null, and records, arrays and string-keyed
maps of those at any depth; Kafka Connect's and Debezium's annotations as Spark's path reads them (a
Debezium semantic type as Debezium writes it; the others by their Avro type). Inside an array or a
map: no union or semantic type (the tasks check those per field path; decimals they check in every
element). The types are pinned against from_avro in tests/integration/test_direct_avro_rows.py.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from icesink.schema.connect import DEBEZIUM_PARSE, VARIABLE_DECIMAL
from icesink.tasks.decode_avro import reserved

# polars reads a decimal of at most 16 bytes (Arrow's decimal128).
MAX_DECIMAL_BYTES = 16
_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "bytes": BinaryType(),
}
# (Avro type, logical type) -> what Spark's from_avro makes of it.
_LOGICAL: dict[tuple[str, str], DataType] = {
    ("int", "date"): DateType(),
    ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(),
    ("long", "local-timestamp-millis"): TimestampNTZType(),
    ("long", "local-timestamp-micros"): TimestampNTZType(),
    ("string", "uuid"): StringType(),
    ("int", "time-millis"): IntegerType(),  # from_avro gives no time of day (Spark 4.1 has one): the int
    ("long", "time-micros"): LongType(),
}
# The Avro type Debezium writes each of its semantic types as (semantic.CONVERSIONS): the one
# Connect JSON's values of it parse as (schema/connect.py DEBEZIUM_PARSE), named as Avro names it.
_AVRO_NAMES = {IntegerType: "int", LongType: "long", StringType: "string", StructType: "record"}
SEMANTIC_BASE = {name: _AVRO_NAMES[type(t)] for name, t in DEBEZIUM_PARSE.items()}


def avro_type(avro: Any, repeated: bool = False) -> tuple[DataType, bool] | None:
    """(the type Spark's from_avro gives an Avro type, whether it is nullable), or None when the
    one-pass decoder does not take it: anything but the primitives, fixed, enums, date,
    (local-)timestamp-millis/micros, time-millis/micros, uuid and decimals (`_fixed` says which on a
    fixed), records of those, each alone or in a union with null, and arrays and string-keyed maps
    of them. `avro` has its named types written out (`inlined`).

    `repeated`: inside an array or a map: no union there (its branch indexes are checked a record
    at a time), no Debezium semantic type (converted by field path)."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if repeated or len(avro) != 2 or len(branches) != 1:
            return None
        found = avro_type(branches[0])
        return None if found is None else (found[0], True)
    if isinstance(avro, str):
        t = _PRIMITIVES.get(avro)
        return None if t is None else (t, False)
    return _described(avro, repeated) if isinstance(avro, dict) else None


def _described(avro: dict[str, Any], repeated: bool) -> tuple[DataType, bool] | None:
    """`avro_type` of a type written as an object: a record, an array, a map, an annotated primitive."""
    base, name = avro.get("type"), avro.get("connect.name")
    if name in SEMANTIC_BASE and (repeated or SEMANTIC_BASE[name] != base or "logicalType" in avro):
        return None  # not as Debezium writes it: Spark's path decides what it means
    if base == "record":
        struct = record_struct(avro, repeated)
        if struct is None or (name == VARIABLE_DECIMAL and not _same_fields(struct, DEBEZIUM_PARSE[name])):
            return None
        return struct, False
    if base in ("array", "map"):
        element = avro_type(avro.get("items" if base == "array" else "values"), repeated=True)
        if element is None:
            return None
        # Spark's path reads with from_avro's PERMISSIVE mode, whose type is nullable throughout.
        inner = nullable(element[0])
        return (ArrayType(inner, True) if base == "array" else MapType(StringType(), inner, True)), False
    if base == "enum":
        # A string, as from_avro makes it; the tasks read its index (tasks/avro_enums.py).
        symbols = avro.get("symbols")
        valid = isinstance(symbols, list) and symbols and all(isinstance(s, str) for s in symbols)
        return (StringType(), False) if valid else None
    if base == "fixed":
        return _fixed(avro)
    if not isinstance(base, str) or base not in _PRIMITIVES:
        return None
    return _logical(avro, base)


def nullable(t: DataType) -> DataType:
    """`t` with every field, element and value nullable (Spark's `asNullable`)."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(t.keyType, nullable(t.valueType), True)
    return t


def _same_fields(struct: StructType, want: DataType) -> bool:
    """Whether `struct` has `want`'s fields and types (from_avro makes a record's fields required)."""
    return isinstance(want, StructType) and [(f.name, f.dataType) for f in struct.fields] == [
        (f.name, f.dataType) for f in want.fields
    ]


def _logical(avro: dict[str, Any], base: str) -> tuple[DataType, bool] | None:
    logical = avro.get("logicalType")
    if logical is None:
        return _PRIMITIVES[base], False
    if (base, logical) == ("bytes", "decimal"):
        return _decimal(avro)
    t = _LOGICAL.get((base, logical))
    return None if t is None else (t, False)


def _fixed(avro: dict[str, Any]) -> tuple[DataType, bool] | None:
    """Bytes of its size, as from_avro reads a fixed, or a decimal on it. A fixed of no byte, one of
    another logical type (a duration, a uuid), and a decimal of more than 16 bytes (polars reads
    none of them as from_avro does) go to Spark's path; so does a decimal of more digits than its
    size holds, which Avro's Java parser drops as invalid (from_avro then reads the fixed as bytes)."""
    size, logical = avro.get("size"), avro.get("logicalType")
    if type(size) is not int or size < 1:
        return None
    if logical is None:
        return BinaryType(), False
    if logical != "decimal" or size > MAX_DECIMAL_BYTES:
        return None
    found = _decimal(avro)
    return found if found is not None and avro["precision"] <= fixed_digits(size) else None


def fixed_digits(size: int) -> int:
    """The most decimal digits a fixed of `size` bytes holds (Avro's LogicalTypes.Decimal.maxPrecision)."""
    return len(str(2 ** (8 * size - 1) - 1)) - 1


def _decimal(avro: dict[str, Any]) -> tuple[DataType, bool] | None:
    """A decimal's Spark type: what from_avro reads it as, where Avro's Java parser takes it."""
    precision, scale = avro.get("precision"), avro.get("scale", 0)
    if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision <= 38 or precision < 1:
        return None
    return DecimalType(precision, scale), False


def record_struct(record: dict[str, Any], repeated: bool = False) -> StructType | None:
    """The struct Spark's from_avro gives an (inlined) record the decoder takes, else None."""
    fields = record.get("fields")
    if not isinstance(fields, list) or not fields:
        return None
    out = []
    for f in fields:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or reserved(f["name"]):
            return None
        t = f.get("type")
        found = avro_type(t, repeated)
        if found is None:
            return None
        out.append(StructField(f["name"], found[0], found[1]))
    return StructType(out)


def inlined(schema: Any) -> Any:
    """`schema` with every reference to a named type replaced by the type itself, each copy named
    apart (polars' Avro reader resolves no reference; an Avro schema may define a name only once)."""
    named: dict[str, Any] = {}
    count = [0]

    def walk(t: Any, namespace: str | None) -> Any:
        if isinstance(t, list):
            return [walk(b, namespace) for b in t]
        if isinstance(t, str):
            found = named.get(t) or named.get(f"{namespace}.{t}" if namespace else t)
            return walk(copy.deepcopy(found[0]), found[1]) if found is not None else t
        if not isinstance(t, dict):
            return t
        kind = t.get("type")
        if kind in ("record", "enum", "fixed") and isinstance(t.get("name"), str):
            name = t["name"]
            space = name.rsplit(".", 1)[0] if "." in name else t.get("namespace", namespace)
            full = name if "." in name else (f"{space}.{name}" if space else name)
            named.setdefault(full, (copy.deepcopy(t), space))
            count[0] += 1
            out = {k: v for k, v in t.items() if k != "namespace"}
            out["name"] = f"{full.replace('.', '_')}_{count[0]}"
            if kind == "record" and isinstance(t.get("fields"), list):
                out["fields"] = [{**f, "type": walk(f.get("type"), space)} for f in t["fields"]]
            return out
        if isinstance(kind, (dict, list)):
            return {**t, "type": walk(kind, namespace)}
        if kind == "array":
            return {**t, "items": walk(t.get("items"), namespace)}
        if kind == "map":
            return {**t, "values": walk(t.get("values"), namespace)}
        return t

    return walk(schema, None)


@lru_cache(maxsize=1024)
def inlined_text(schema_text: str) -> Any:
    """The writer schema parsed, its named types written out (once per schema: every batch asks);
    None when it is not JSON. Callers do not change it."""
    try:
        return inlined(json.loads(schema_text))
    except (ValueError, RecursionError):
        return None


def writer_struct(schema_text: str) -> StructType | None:
    """The type Spark's from_avro gives a writer schema the decoder takes, else None."""
    schema = inlined_text(schema_text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    return record_struct(schema)
