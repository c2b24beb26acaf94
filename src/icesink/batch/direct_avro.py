"""Which Avro writer schemas the one-pass tasks decode (tasks/decode_avro.py), and the rows they
make of them: the driver's side.

A writer schema is taken when its records are beyond doubt the rows Spark's path makes of them
(batch/decode/avro.py): records whose fields are the primitives, date, timestamp-millis/micros,
uuid and decimal bytes, alone or in a union with null, or records of those at any depth; Kafka
Connect's and Debezium's annotations as Spark's path reads them (the Debezium semantic types of
batch/decode/semantic.py converted, the others by their Avro type). With a Debezium envelope
(`decode.envelope: debezium`), the row is its image, operation and source columns
(batch/decode/debezium.py). The row type is Spark's own: this module types the writer schema as
from_avro would (pinned in tests/integration/test_direct_avro_rows.py), then applies the same
functions Spark's path does (`semantic.converted_type`, `debezium.row_type`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesink.batch.decode import debezium, semantic
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.kafka import wire
from icesink.schema.connect import DEBEZIUM_PARSE, VARIABLE_DECIMAL
from icesink.schema.evolution import conflicts, merged
from icesink.tasks.decode_avro import DirectAvro, DirectWriter, reserved
from icesink.tasks.envelope_rows import Envelope
from icesink.tasks.semantic_values import Path

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
    ("string", "uuid"): StringType(),
}
# The Avro type Debezium writes each of its semantic types as (semantic.CONVERSIONS): the one
# Connect JSON's values of it parse as (schema/connect.py DEBEZIUM_PARSE), named as Avro names it.
_AVRO_NAMES = {IntegerType: "int", LongType: "long", StringType: "string", StructType: "record"}
SEMANTIC_BASE = {name: _AVRO_NAMES[type(t)] for name, t in DEBEZIUM_PARSE.items()}
# The union check groups a batch's records by a 64-bit mask of which unions are null.
MAX_UNIONS = 62


def avro_type(avro: Any) -> tuple[DataType, bool] | None:
    """(the type Spark's from_avro gives an Avro type, whether it is nullable), or None when the
    one-pass decoder does not take it: anything but the primitives, date, timestamp-millis/micros,
    uuid and decimal bytes, records of those, each alone or in a union with null. `avro` has its
    named types written out (`inlined`)."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(avro) != 2 or len(branches) != 1:
            return None
        found = avro_type(branches[0])
        return None if found is None else (found[0], True)
    if isinstance(avro, str):
        t = _PRIMITIVES.get(avro)
        return None if t is None else (t, False)
    if not isinstance(avro, dict):
        return None
    base, name = avro.get("type"), avro.get("connect.name")
    if name in SEMANTIC_BASE and (SEMANTIC_BASE[name] != base or "logicalType" in avro):
        return None  # not as Debezium writes it: Spark's path decides what it means
    if base == "record":
        struct = record_struct(avro)
        if struct is None or (name == VARIABLE_DECIMAL and not _same_fields(struct, DEBEZIUM_PARSE[name])):
            return None
        return struct, False
    if not isinstance(base, str) or base not in _PRIMITIVES:
        return None
    return _logical(avro, base)


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
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision <= 38 or precision < 1:
            return None
        return DecimalType(precision, scale), False
    t = _LOGICAL.get((base, logical))
    return None if t is None else (t, False)


def record_struct(record: dict[str, Any]) -> StructType | None:
    """The struct Spark's from_avro gives an (inlined) record the decoder takes, else None."""
    fields = record.get("fields")
    if not isinstance(fields, list) or not fields:
        return None
    out = []
    for f in fields:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or reserved(f["name"]):
            return None
        found = avro_type(f.get("type"))
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
def _inlined_text(schema_text: str) -> Any:
    """The writer schema parsed, its named types written out (once per schema: every batch asks);
    None when it is not JSON. Callers do not change it."""
    try:
        return inlined(json.loads(schema_text))
    except (ValueError, RecursionError):
        return None


def writer_struct(schema_text: str) -> StructType | None:
    """The type Spark's from_avro gives a writer schema the decoder takes, else None."""
    schema = _inlined_text(schema_text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    return record_struct(schema)


@lru_cache(maxsize=1024)
def row_struct(schema_text: str, envelope: EnvelopeSpec | None = None) -> StructType | None:
    """The row type Spark's path makes of a writer schema's records (semantic types converted; an
    envelope's image, operation and source columns), or None when the decoder does not take them."""
    raw = writer_struct(schema_text)
    if raw is None:
        return None
    decoded = semantic.converted_type(raw, semantic.semantic_paths(schema_text))
    assert isinstance(decoded, StructType)
    if envelope is None:
        return decoded
    names = decoded.fieldNames()
    if "op" not in names or decoded["op"].dataType != StringType() or "after" not in names:
        return None  # no envelope, or JSON's payload wrapper: Spark's path says why
    image = decoded["after"].dataType
    if "before" in names and decoded["before"].dataType != image:
        return None
    try:
        return debezium.row_type(decoded, envelope)
    except debezium.EnvelopeError:
        return None


def merged_rows(writers: Mapping[bytes, str], envelope: EnvelopeSpec | None = None) -> StructType | None:
    """The rows of several writer schemas merged, as Spark's path merges them for a new table's
    columns (or a key column's struct); None when one is not taken or they conflict."""
    out = StructType([])
    for _, text in sorted(writers.items()):
        struct = row_struct(text, envelope)
        if struct is None or conflicts(out, struct):
            return None
        out = merged(out, struct)
    return out


def _fits(have: DataType, column: DataType) -> bool:
    """Whether a value of type `have` goes into `column` as Spark's path would put it (the same
    type, or a widening the table already has)."""
    if have == column:
        return True
    if isinstance(have, IntegerType) and isinstance(column, LongType):
        return True
    if isinstance(have, FloatType) and isinstance(column, DoubleType):
        return True
    return (
        isinstance(have, DecimalType)
        and isinstance(column, DecimalType)
        and have.scale == column.scale
        and column.precision >= have.precision
    )


def fits_table(struct: StructType, table: StructType) -> bool:
    """Whether rows of `struct` go into the table as it is: every field a column of a type it takes,
    no nullable field for a required column, no required column missing."""
    columns = {f.name: f for f in table.fields}
    for f in struct.fields:
        column = columns.get(f.name)
        if column is None or not _fits(f.dataType, column.dataType) or (f.nullable and not column.nullable):
            return False
    return all(c.nullable or c.name in struct.fieldNames() for c in table.fields)


def _typed_fields(fields: list[dict[str, Any]], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """(path, Avro type) of every field of an inlined record, at any depth through records and unions."""
    for f in fields:
        at = (*path, f["name"])
        yield at, f["type"]
        branch = f["type"]
        if isinstance(branch, list):
            branch = next(b for b in branch if b != "null")
        if isinstance(branch, dict) and branch.get("type") == "record":
            yield from _typed_fields(branch["fields"], at)


def _decimal(t: Any) -> tuple[int, int] | None:
    t = next(b for b in t if b != "null") if isinstance(t, list) else t
    if isinstance(t, dict) and t.get("type") == "bytes" and t.get("logicalType") == "decimal":
        return t["precision"], t.get("scale", 0)
    return None


@lru_cache(maxsize=1024)
def direct_writer(frame: bytes, text: str) -> DirectWriter | None:
    """What the tasks need of one writer schema (whose rows `row_struct` took)."""
    if len(frame) != wire.HEADER_SIZE or frame[0] != 0:
        return None  # a GUID reference: records name it in a header, unframed
    schema = _inlined_text(text)
    typed = list(_typed_fields(schema["fields"]))
    decimals = tuple((path, *d) for path, t in typed if (d := _decimal(t)) is not None)
    unions = tuple((path, t.index("null")) for path, t in typed if isinstance(t, list))
    if len(unions) > MAX_UNIONS:
        return None
    semantics = tuple(sorted(semantic.semantic_paths(text).items()))
    fields = tuple(f["name"] for f in schema["fields"])
    return DirectWriter(bytes(frame), schema, fields, decimals, unions, semantics)


def direct_avro(
    writers: Mapping[bytes, str], table: StructType, envelope: EnvelopeSpec | None = None
) -> DirectAvro | None:
    """What the tasks read a table's records with (`writers`: frame key -> the writer schema's
    text), or None when some writer schema is not one they take or its rows do not fit the table
    as it is (`fits_table`)."""
    if not writers:
        return None
    out = []
    for frame, text in sorted(writers.items()):
        struct = row_struct(text, envelope)
        if struct is None or not fits_table(struct, table):
            return None
        writer = direct_writer(frame, text)
        if writer is None:
            return None
        out.append(writer)
    spec = Envelope(envelope.operation_column, debezium.SOURCE_PREFIX) if envelope is not None else None
    return DirectAvro(tuple(out), spec)
