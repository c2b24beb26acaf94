"""Which Avro writer schemas the one-pass tasks decode (tasks/decode_avro.py), and the rows they
make of them: the driver's side.

A writer schema is taken when its records are beyond doubt the rows Spark's path makes of them
(batch/decode/avro.py): records of the types batch/avro_types.py gives from_avro's type of. With a
Debezium envelope (`decode.envelope: debezium`), the row is its image, operation and source
columns (batch/decode/debezium.py). The row type is Spark's own: the writer schema typed as
from_avro would, then the same functions Spark's path applies (`semantic.converted_type`,
`debezium.row_type`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from icesink.batch import decode
from icesink.batch.avro_types import inlined_text, nullable, writer_struct
from icesink.batch.decode import debezium, semantic
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.direct_shape import Shaping, shaped
from icesink.kafka import wire
from icesink.schema.evolution import conflicts, merged
from icesink.tasks.avro_unions import ITEMS, VALUES
from icesink.tasks.decode_avro import DirectAvro, DirectWriter
from icesink.tasks.envelope_rows import Envelope
from icesink.tasks.semantic_values import Path
from icesink.tasks.table_out import KEY_NAMED, NAMED

# The union check reads which unions are null a union at a time (tasks/avro_unions.null_groups):
# beyond this many, Spark's decoder.
MAX_UNIONS = 1_000
PLAIN = Shaping()
EMPTY = StructType([])


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
        return _nullable_within(decoded)
    names = decoded.fieldNames()
    if "op" not in names or decoded["op"].dataType != StringType() or "after" not in names:
        return None  # no envelope, or JSON's payload wrapper: Spark's path says why
    image = decoded["after"].dataType
    if "before" in names and decoded["before"].dataType != image:
        return None
    try:
        return _nullable_within(debezium.row_type(decoded, envelope))
    except debezium.EnvelopeError:
        return None


def _nullable_within(row: StructType) -> StructType:
    """`row` with its columns' nested fields, elements and values nullable, as Spark's path reads
    them (from_avro's PERMISSIVE mode) and creates the table; each column's own nullability is
    the writer schema's (a required key column stays required)."""
    return StructType([StructField(f.name, nullable(f.dataType), f.nullable, f.metadata) for f in row.fields])


def merged_rows(
    writers: Mapping[bytes, str], envelope: EnvelopeSpec | None = None, shaping: Shaping = PLAIN,
    table: StructType = EMPTY,
) -> StructType | None:  # fmt: skip
    """The rows of several writer schemas merged, as Spark's path merges them for a new table's
    columns (or a key column's struct, batch/decode/avro.py), then flattened or respelled as
    `table` spells its columns (`shaping`): widened where one writer's type is wider (an int and
    a long: a long); None when one is not taken, or its rows conflict with the merged ones (Spark's
    path makes dead letters of its records)."""
    rows = [row_struct(text, envelope) for _, text in sorted(writers.items())]
    out = StructType([])
    for struct in rows:
        if struct is None:
            return None
        out = merged(out, struct)
    if any(conflicts(out, struct) for struct in rows if struct is not None):
        return None
    reshaped = shaped(out, shaping, table)
    return reshaped[0] if reshaped is not None else None


def _fits(have: DataType, column: DataType) -> bool:
    """Whether a value of type `have` goes into `column` as Spark's path would put it (the same
    type, or a widening the table already has; a struct with fewer fields than the column's, the
    others nullable: null in its rows), at any depth."""
    if have == column:
        return True
    if isinstance(have, StructType) and isinstance(column, StructType):
        return fits_table(have, column)
    if isinstance(have, ArrayType) and isinstance(column, ArrayType):
        return _fits(have.elementType, column.elementType) and (column.containsNull or not have.containsNull)
    if isinstance(have, MapType) and isinstance(column, MapType):
        nulls = column.valueContainsNull or not have.valueContainsNull
        return have.keyType == column.keyType and _fits(have.valueType, column.valueType) and nulls
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
    no nullable field for a required column, no required column missing (nested fields too)."""
    columns = {f.name: f for f in table.fields}
    for f in struct.fields:
        column = columns.get(f.name)
        if column is None or not _fits(f.dataType, column.dataType) or (f.nullable and not column.nullable):
            return False
    return all(c.nullable or c.name in struct.fieldNames() for c in table.fields)


def _typed_fields(fields: list[dict[str, Any]], path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """(path, Avro type) of every field of an inlined record, at any depth through records and
    unions, and of the items of its arrays and the values of its maps (`ITEMS`, `VALUES` in the
    path: the tasks check every element there, tasks/avro_unions.column_at)."""
    for f in fields:
        at = (*path, f["name"])
        yield at, f["type"]
        yield from _inner_types(f["type"], at)


def _inner_types(t: Any, at: Path) -> Iterator[tuple[Path, Any]]:
    branch = next(b for b in t if b != "null") if isinstance(t, list) else t
    if not isinstance(branch, dict):
        return
    kind = branch.get("type")
    if kind == "record":
        yield from _typed_fields(branch["fields"], at)
    elif kind in ("array", "map"):
        inner, step = (branch["items"], ITEMS) if kind == "array" else (branch["values"], VALUES)
        yield (*at, step), inner
        yield from _inner_types(inner, (*at, step))


def _decimal(t: Any) -> tuple[int, int] | None:
    t = next(b for b in t if b != "null") if isinstance(t, list) else t
    if isinstance(t, dict) and t.get("type") in ("bytes", "fixed") and t.get("logicalType") == "decimal":
        return t["precision"], t.get("scale", 0)
    return None


def _repeated(path: Path) -> bool:
    return ITEMS in path or VALUES in path


@lru_cache(maxsize=1024)
def direct_writer(frame: bytes, text: str) -> DirectWriter | None:
    """What the tasks need of one writer schema (whose rows `row_struct` took)."""
    if len(frame) != wire.HEADER_SIZE or frame[0] != 0:
        return None  # a GUID reference: records name it in a header, unframed
    schema = inlined_text(text)
    typed = list(_typed_fields(schema["fields"]))
    decimals = tuple((path, *d) for path, t in typed if (d := _decimal(t)) is not None)
    # Unions are checked at record paths only (avro_types takes none inside an array or a map).
    unions = tuple((path, t.index("null")) for path, t in typed if isinstance(t, list) and not _repeated(path))
    if len(unions) > MAX_UNIONS:
        return None
    semantics = tuple(sorted(semantic.semantic_paths(text).items()))
    fields = tuple(f["name"] for f in schema["fields"])
    return DirectWriter(bytes(frame), schema, fields, decimals, unions, semantics)


def avro_declined(
    writers: Mapping[bytes, str], table: StructType, envelope: EnvelopeSpec | None = None,
    shaping: Shaping = PLAIN,
) -> str:  # fmt: skip
    """Why `direct_avro` takes no decoder for these writer schemas and table, for the job's log."""
    for frame, text in sorted(writers.items()):
        sid = wire.schema_ref(frame)
        struct = row_struct(text, envelope)
        if struct is None:
            return (
                f"writer schema {sid} has a type the one-pass Avro decoder does not take (a union beyond one type "
                "and null, a fixed of no byte or with a logical type but a decimal, a decimal on a fixed of more "
                "than 16 bytes or of more digits than its size holds, a union or a Debezium semantic type inside an "
                "array or map, or no Debezium envelope where decode.envelope says one)"
            )
        reshaped = shaped(struct, shaping, table)
        if reshaped is None:
            return (
                f"the rows of writer schema {sid} have two fields for one column, or a struct column's fields "
                "spelled otherwise than the table's (tables.flatten_separator, tables.case_insensitive)"
            )
        struct = reshaped[0]
        if not fits_table(struct, table):
            return (
                f"the rows of writer schema {sid} do not fit the table, nor an evolution of it (a type that "
                "conflicts with a column's, a nullable field for a required key column)"
            )
        if direct_writer(frame, text) is None:
            return f"writer schema {sid} is named by a GUID, or has more than {MAX_UNIONS} unions"
    return "no writer schema is known for its topics"


def direct_avro(
    writers: Mapping[bytes, str], table: StructType, envelope: EnvelopeSpec | None = None,
    shaping: Shaping = PLAIN,
) -> DirectAvro | None:  # fmt: skip
    """What the tasks read a table's records with (`writers`: frame key -> the writer schema's
    text), or None when some writer schema is not one they take or its rows (in the table's names
    and shape, batch/direct_shape.py) do not fit the table as it is (`fits_table`)."""
    if not writers:
        return None
    out = []
    for frame, text in sorted(writers.items()):
        struct = row_struct(text, envelope)
        reshaped = shaped(struct, shaping, table) if struct is not None else None
        if reshaped is None or not fits_table(reshaped[0], table):
            return None
        writer = direct_writer(frame, text)
        if writer is None:
            return None
        out.append(writer if shaping.plain else replace(writer, columns=reshaped[1]))
    spec = Envelope(envelope.operation_column, debezium.SOURCE_PREFIX) if envelope is not None else None
    return DirectAvro(tuple(out), spec)


def header_columns(values: bool, keys: bool = False) -> dict[str, str]:
    """The schema-id headers the one-pass job's readers keep, by the column they land in
    (tasks/header_frames.py): the value's for Avro values, the key's for Avro keys."""
    found = {NAMED: decode.VALUE.schema_id_header} if values else {}
    return {**found, KEY_NAMED: decode.KEY.schema_id_header} if keys else found
