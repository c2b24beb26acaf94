"""Confluent-framed Avro records straight to Arrow columns, in Python, for the one-pass write
(batch/direct.py).

Spark's `from_avro` decodes a record in the JVM, then the row crosses to the Python writer through
Arrow; the JVM's share of that is most of a batch's time. Here the Python task decodes the raw
values itself, a writer schema's records at a time, with polars' Avro reader (Rust): the records
of one schema id are laid end to end as ONE block of an in-memory Avro container file whose schema
is the writer's, between a 5-byte field that takes the record's frame and an 8-byte marker that
ends each record. A record whose body is longer or shorter than its schema says shifts the next
marker, so a misread record cannot pass for a good one: the marker check catches it.

As tasks/decode_json.py, this takes a table's records only when they are beyond doubt the rows
Spark's decoder would make: writer schemas of flat records whose fields are all of the types below
and columns of the table with the same type (or one it widens to), every record framed with one of
them, every body decoding to its end, every union index and decimal valid. Anything else declines
the table's share of the batch, which then goes through Spark's decoder (new schema ids, dead
letters). Pure: no Spark session; polars is imported on first use.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from io import BytesIO
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
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

from icesink.kafka import wire

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
_FRAME = "__icesink_frame"
_END = "__icesink_end"
_MARK_SIZE = 8
_SYNC = b"icesink-direct-1"  # an Avro container file's 16-byte block separator
# The union check reads the records once per combination of null union fields: beyond this many
# combinations in one Arrow batch (sparse optional fields), Spark's decoder is cheaper.
_MAX_NULL_PATTERNS = 32


@dataclass(frozen=True)
class DirectWriter:
    """One writer schema the direct decoder reads, with what it checks of the decoded rows."""

    frame: bytes  # 0x00 + the 4-byte schema id: the first 5 bytes of its records
    schema: dict[str, Any]  # the writer schema (a flat record)
    fields: tuple[str, ...]
    decimals: tuple[tuple[str, int, int], ...]  # (field, precision, scale): values must fit
    unions: tuple[tuple[str, int], ...] = ()  # (field, the position of "null" in its union)


@dataclass(frozen=True)
class DirectAvro:
    """A table's share of the direct job: the writer schemas it takes; pickled into the tasks."""

    writers: tuple[DirectWriter, ...]


def spark_type(avro: Any) -> tuple[DataType, bool] | None:
    """(the type Spark's from_avro gives an Avro type, whether it is nullable), or None when the
    direct decoder does not take it: anything but the primitives, date, timestamp-millis/micros,
    uuid and decimal bytes, alone or in a union with null; also any type carrying Kafka Connect's
    or Debezium's semantic names, which Spark's path converts."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(avro) != 2 or len(branches) != 1:
            return None
        found = spark_type(branches[0])
        return None if found is None else (found[0], True)
    if isinstance(avro, str):
        t = _PRIMITIVES.get(avro)
        return None if t is None else (t, False)
    if not isinstance(avro, dict) or any(k.startswith(("connect.", "io.debezium")) for k in avro):
        return None
    base = avro.get("type")
    if not isinstance(base, str) or base not in _PRIMITIVES:
        return None
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


def writer_struct(schema_text: str) -> StructType | None:
    """The row type Spark's from_avro gives a writer schema the direct decoder takes, else None."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return None
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(schema.get("fields"), list):
        return None
    fields = []
    for f in schema["fields"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or f["name"] in (_FRAME, _END):
            return None
        found = spark_type(f.get("type"))
        if found is None:
            return None
        fields.append(StructField(f["name"], found[0], found[1]))
    return StructType(fields) if fields else None


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


def direct_avro(writers: Mapping[bytes, str], table: StructType) -> DirectAvro | None:
    """What the direct decoder reads a table's records with (`writers`: frame key -> the writer
    schema's text), or None when some writer schema is not one it takes or does not fit the table
    as it is: a field the table lacks or types differently, a nullable field for a required column,
    a required column the schema lacks."""
    if not writers:
        return None
    columns = {f.name: f for f in table.fields}
    out = []
    for frame, text in sorted(writers.items()):
        if len(frame) != wire.HEADER_SIZE or frame[0] != 0:
            return None  # a GUID reference: records name it in a header, unframed
        struct = writer_struct(text)
        if struct is None:
            return None
        for f in struct.fields:
            column = columns.get(f.name)
            if column is None or not _fits(f.dataType, column.dataType) or (f.nullable and not column.nullable):
                return None
        if any(not c.nullable and c.name not in struct.fieldNames() for c in table.fields):
            return None
        decimals = tuple(
            (f.name, t.precision, t.scale) for f in struct.fields if isinstance(t := f.dataType, DecimalType)
        )
        schema = json.loads(text)
        unions = tuple((f["name"], f["type"].index("null")) for f in schema["fields"] if isinstance(f["type"], list))
        if len(unions) > 62:  # the union check groups records by a 64-bit mask of null fields
            return None
        out.append(DirectWriter(bytes(frame), schema, tuple(struct.fieldNames()), decimals, unions))
    return DirectAvro(tuple(out))


# ---------------------------------------------------------------- executors


def _varint(n: int) -> bytes:
    """Avro's zig-zag varint of a non-negative int."""
    n <<= 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _container_header(schema: dict[str, Any]) -> bytes:
    meta = {b"avro.schema": json.dumps(schema).encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += _varint(len(meta))
    for k, v in meta.items():
        out += _varint(len(k)) + k + _varint(len(v)) + v
    return bytes(out + b"\x00" + _SYNC)


def _framed(fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A record of `fields` with the frame before them and the end marker after them."""
    return {
        "type": "record",
        "name": "IcesinkFramed",
        "fields": [
            {"name": _FRAME, "type": {"type": "fixed", "name": "IcesinkFrame", "size": wire.HEADER_SIZE}},
            *fields,
            {"name": _END, "type": {"type": "fixed", "name": "IcesinkEnd", "size": _MARK_SIZE}},
        ],
    }


def _union_column(j: int) -> str:
    return f"__icesink_union_{j}"


def _with_union_indexes(w: DirectWriter, nulls: frozenset[str]) -> list[dict[str, Any]]:
    """The writer's fields for records whose null union fields are `nulls`: each union read as
    its branch index (a long), then the value's own type where it is not null. polars reads any
    index but the null one as the value, where Avro (Spark's decoder) refuses an index beyond the
    union; this reading checks the index of each record."""
    out = []
    j = 0
    for f in w.schema["fields"]:
        if not isinstance(f["type"], list):
            out.append(f)
            continue
        out.append({"name": _union_column(j), "type": "long"})
        j += 1
        if f["name"] not in nulls:
            [branch] = [b for b in f["type"] if b != "null"]
            out.append({"name": f["name"], "type": branch})
    return out


class AvroRows:
    """Decodes one table's records in a task; `decode` declines by returning None."""

    def __init__(self, direct: DirectAvro, schema: pa.Schema) -> None:
        os.environ.setdefault("POLARS_MAX_THREADS", "1")  # one task per core already
        import polars  # noqa: F401  (fails here, at the task's start, if it is missing)

        self._direct = direct
        self._schema = schema  # the table's Arrow schema (field ids), in column order
        self._headers = {w.frame: _container_header(_framed(w.schema["fields"])) for w in direct.writers}
        self._index_headers: dict[tuple[bytes, frozenset[str]], bytes] = {}
        self._mark = secrets.token_bytes(_MARK_SIZE)  # unguessable: no body can fake it

    def decode(self, values: pa.Array, named: pa.Array | None = None, carry: pa.Table | None = None) -> pa.Table | None:
        """The records' rows in the table's columns, or None when any record is declined. `named`:
        whether each record names its schema in a header (its body is unframed: declined).
        `carry`: columns of the same records (their Kafka coordinates) put before the table's, row
        for row (the rows come a writer schema at a time, not in the records' order)."""
        if values.null_count or (named is not None and pc.any(named).as_py()):
            return None
        frames = pc.binary_slice(values, 0, wire.HEADER_SIZE)
        parts = []
        taken = 0
        for w in self._direct.writers:
            mine = pc.equal(frames, pa.scalar(w.frame, pa.binary()))
            count = pc.sum(mine).as_py() or 0
            if not count:
                continue
            taken += count
            every = count == len(values)
            rows = self._decoded(w, values if every else values.filter(mine))
            if rows is None:
                return None
            if carry is not None:
                extra = carry if every else carry.filter(mine)
                rows = pa.Table.from_arrays(
                    [*extra.columns, *rows.columns], names=[*extra.column_names, *rows.column_names]
                )
            parts.append(rows)
        if taken != len(values):  # unframed, or another schema id: Spark's path (a second pass)
            return None
        if parts:
            return pa.concat_tables(parts)
        empty = self._schema.empty_table()
        return (
            empty
            if carry is None
            else pa.Table.from_arrays(
                [*carry.slice(0, 0).columns, *empty.columns], names=[*carry.column_names, *empty.column_names]
            )
        )

    def _decoded(self, w: DirectWriter, values: pa.Array) -> pa.Table | None:
        decoded = self._read(self._headers[w.frame], values, [*w.fields, _END])
        if decoded is None or (w.unions and not self._union_indexes_valid(w, values, decoded)):
            return None
        for name, precision, scale in w.decimals:
            if not _within(decoded.column(name), precision, scale):
                return None
        try:
            return self._in_columns(decoded, w)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a value the column cannot hold
            return None

    def _read(self, header: bytes, values: pa.Array, columns: list[str] | None = None) -> pa.Table | None:
        """`values` read as one block of a container file with `header` (`columns` only: the others
        are parsed, not kept); None unless every record decodes and ends exactly at its end marker."""
        import polars as pl

        records = pc.binary_join_element_wise(values, pa.scalar(self._mark, pa.binary()), b"")
        if isinstance(records, pa.ChunkedArray):
            records = records.combine_chunks()
        body = _data(records)
        blob = b"".join([header, _varint(len(values)), _varint(len(body)), body, _SYNC])
        try:
            decoded = pl.read_avro(BytesIO(blob), columns=columns).to_arrow()
        except BaseException as e:  # polars' Rust panics are BaseExceptions (pyo3's PanicException)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            return None
        if decoded.num_rows != len(values):
            return None
        mark = pa.scalar(self._mark, decoded.schema.field(_END).type)
        return decoded if pc.all(pc.equal(decoded.column(_END), mark)).as_py() else None

    def _union_indexes_valid(self, w: DirectWriter, values: pa.Array, decoded: pa.Table) -> bool:
        """Whether each record's union indexes are the ones of its branches: the records read
        again, grouped by which union fields are null, with the indexes as columns."""
        pattern = None
        for j, (name, _) in enumerate(w.unions):
            bit = pc.multiply(pc.cast(pc.is_null(decoded.column(name)), pa.int64()), 1 << j)
            pattern = bit if pattern is None else pc.add(pattern, bit)
        assert pattern is not None
        pattern = pattern.combine_chunks() if isinstance(pattern, pa.ChunkedArray) else pattern
        patterns = pc.unique(pattern).to_pylist()
        if len(patterns) > _MAX_NULL_PATTERNS:
            return False
        # Only the indexes kept: a third of the cost of keeping every column.
        kept = [*(_union_column(j) for j in range(len(w.unions))), _END]
        for p in patterns:
            nulls = frozenset(name for j, (name, _) in enumerate(w.unions) if p >> j & 1)
            header = self._index_headers.get((w.frame, nulls))
            if header is None:
                header = _container_header(_framed(_with_union_indexes(w, nulls)))
                self._index_headers[(w.frame, nulls)] = header
            mine = values if len(patterns) == 1 else values.filter(pc.equal(pattern, p))
            checked = self._read(header, mine, kept)
            if checked is None:
                return False
            for j, (name, null_at) in enumerate(w.unions):
                want = null_at if name in nulls else 1 - null_at
                if not pc.all(pc.equal(checked.column(_union_column(j)), want)).as_py():
                    return False
        return True

    def _in_columns(self, decoded: pa.Table, w: DirectWriter) -> pa.Table:
        n = decoded.num_rows
        columns = []
        for f in self._schema:
            if f.name in w.fields:
                columns.append(decoded.column(f.name).cast(f.type, safe=True))
            else:
                columns.append(pa.chunked_array([pa.nulls(n, f.type)]))
        return pa.Table.from_arrays(columns, schema=self._schema)


def _data(records: pa.Array) -> memoryview:
    """The bytes of a binary array's values, end to end (no copy)."""
    offsets = records.buffers()[1]
    width = 8 if pa.types.is_large_binary(records.type) else 4
    view = memoryview(offsets).cast("b").cast("q" if width == 8 else "i")
    first, last = view[records.offset], view[records.offset + len(records)]
    return memoryview(records.buffers()[2])[first:last]


def _within(column: Any, precision: int, scale: int) -> bool:
    """Whether every decimal fits `precision` (polars keeps a value of more digits than its
    schema says, up to 16 bytes; Spark's from_avro refuses it). Compared as 256-bit decimals,
    which hold any 16-byte value."""
    wide = column.cast(pa.decimal256(76, scale))
    bound = pa.scalar(Decimal(10) ** (precision - scale), pa.decimal256(76, scale))
    return not pc.any(pc.greater_equal(pc.abs(wide), bound)).as_py()
