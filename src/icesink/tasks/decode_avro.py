"""Confluent-framed Avro records straight to Arrow columns, in Python, for the one-pass write
(batch/direct.py).

Spark's `from_avro` decodes a record in the JVM, then the row crosses to the Python writer through
Arrow; the JVM's share of that is most of a batch's time. Here the Python task decodes the raw
values itself, a writer schema's records at a time, with polars' Avro reader (Rust): the records
of one schema id are laid end to end as ONE block of an in-memory Avro container file whose schema
is the writer's, between a 5-byte field that takes the record's frame and an 8-byte marker that
ends each record (maps, which polars does not read, as the arrays of entries they are encoded as:
tasks/avro_maps.py). A record whose body is longer or shorter than its schema says shifts the next
marker, so a misread record cannot pass for a good one: the marker check catches it.

As tasks/decode_json.py, this takes a table's records only when they are beyond doubt the rows
Spark's decoder would make: writer schemas the driver chose (batch/direct_avro.py), every record
framed with one of them (or named by its id in a header: tasks/header_frames.py), every body
decoding to its end, every union index (at any depth) and
decimal valid, every Debezium semantic value converted exactly (tasks/semantic_values.py), every
change event one Spark's path would take (tasks/envelope_rows.py; where the caller takes them, the
events it makes dead letters of become letters, in its words). Anything else declines the
table's share of the batch, which then goes through Spark's decoder (new schema ids, dead
letters), but for the bodies Avro's reader cannot decode, which the task's loop makes dead letters
of and reads the others again (tasks/avro_records.py). Pure: no Spark session; polars is imported on first use.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from decimal import Decimal
from io import BytesIO
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire
from icesink.tasks.avro_enums import EnumIndexError, has_enum, ints_for_enums, symbols_for_ints
from icesink.tasks.avro_maps import as_column, entries_for_maps
from icesink.tasks.avro_positions import indexes_placed
from icesink.tasks.avro_schemas import without_times
from icesink.tasks.avro_unions import column_at, index_fields, indexes_as_read, is_checked, null_groups
from icesink.tasks.decode_json import DeclinedValueError
from icesink.tasks.envelope_rows import Envelope, envelope_rows, problems
from icesink.tasks.header_frames import framed
from icesink.tasks.semantic_values import Path, converted

_FRAME = "__icesink_frame"
_END = "__icesink_end"
# A change event's dead-letter reason, after the table's columns while the rows are put together.
_PROBLEM = "__icesink_problem"
_COORDINATES = ("topic", "partition", "offset")
# (topic, partition, offset, why): a change event Spark's path makes a dead letter of.
EnvelopeLetter = tuple[str, int, int, str]
_MARK_SIZE = 8
_SYNC = b"icesink-direct-1"  # an Avro container file's 16-byte block separator


@dataclass(frozen=True)
class DirectWriter:
    """One writer schema the tasks read, with what they check of the decoded rows; made by the
    driver (batch/direct_avro.py)."""

    frame: bytes  # 0x00 + the 4-byte schema id: the first 5 bytes of its records
    schema: dict[str, Any]  # the writer schema, its named types written out (polars resolves no reference)
    fields: tuple[str, ...]  # its top-level fields
    decimals: tuple[tuple[Path, int, int], ...] = ()  # (field path, precision, scale): values must fit
    unions: tuple[tuple[Path, int], ...] = ()  # (field path, the position of "null" in its union)
    semantics: tuple[tuple[Path, str], ...] = ()  # (field path, Debezium semantic type): converted
    # (table column, the path of its values) for a flattened or case-insensitive table
    # (batch/direct_shape.py); None: each column is the field of its name
    columns: tuple[tuple[str, Path], ...] | None = None


@dataclass(frozen=True)
class DirectAvro:
    """A table's share of the direct job: the writer schemas it takes, and its Debezium envelope
    if its records are change events; pickled into the tasks."""

    writers: tuple[DirectWriter, ...]
    envelope: Envelope | None = None


def reserved(name: str) -> bool:
    """Whether a field name is one the decoder's own columns could take."""
    return name.startswith("__icesink_")


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


class AvroRows:
    """Decodes one table's records in a task; `decode` declines by returning None."""

    def __init__(self, direct: DirectAvro, schema: pa.Schema) -> None:
        os.environ.setdefault("POLARS_MAX_THREADS", "1")  # one task per core already
        import polars  # noqa: F401  (fails here, at the task's start, if it is missing)

        self._direct = direct
        self._schema = schema  # the table's Arrow schema (field ids), in column order
        # What polars reads: the writer schemas with their times of day as ints and longs, their maps
        # as arrays of entries, their enums as ints (tasks/avro_schemas.py); and the top fields that
        # hold enums, whose indexes become symbols (tasks/avro_enums.py).
        entries = {w.frame: entries_for_maps(without_times(w.schema))["fields"] for w in direct.writers}
        self._fields = {frame: ints_for_enums(fields) for frame, fields in entries.items()}
        self._enums = {frame: [(f["name"], f["type"]) for f in fields if has_enum(f["type"])]
                       for frame, fields in entries.items()}  # fmt: skip
        self._headers = {frame: _container_header(_framed(fields)) for frame, fields in self._fields.items()}
        # (frame, null unions) -> the container header of the index reading, and its index columns
        self._index_readings: dict[tuple[bytes, frozenset[Path]], tuple[bytes, list[str]]] = {}
        self._mark = secrets.token_bytes(_MARK_SIZE)  # unguessable: no body can fake it

    def decode(
        self, values: pa.Array, named: pa.Array | None = None, carry: pa.Table | None = None,
        letters: list[EnvelopeLetter] | None = None,
    ) -> pa.Table | None:  # fmt: skip
        """The records' rows in the table's columns, or None when any record is declined. `named`:
        each record's schema-id header (null: none; tasks/header_frames.py: one naming an id gives
        the record its frame, one naming a GUID declines).
        `carry`: columns of the same records (their Kafka coordinates) put before the table's, row
        for row (the rows come a writer schema at a time, not in the records' order). `letters`:
        where the change events Spark's path makes dead letters of go, by the coordinates `carry`
        has (`topic`, `partition`, `offset`); without it, or them, such an event declines."""
        framed_values = framed(values, named) if not values.null_count else None
        if framed_values is None:
            return None
        values = framed_values
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
            extra = None if carry is None else carry if every else carry.filter(mine)
            if _PROBLEM in rows.column_names:
                if letters is None or extra is None or not set(_COORDINATES) <= set(extra.column_names):
                    return None
                rows, extra = _lettered(rows, extra, letters)
            if extra is not None:
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
        for path, precision, scale in w.decimals:
            if not _within(column_at(decoded, path), precision, scale):
                return None
        try:
            for name, schema in self._enums[w.frame]:
                at = decoded.schema.get_field_index(name)
                decoded = decoded.set_column(at, name, symbols_for_ints(decoded.column(at), schema))
            return self._in_columns(decoded, w)
        except (pa.ArrowException, DeclinedValueError, EnumIndexError):
            return None  # a value the column cannot hold, or Spark's path would refuse

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
        """Whether each record's union indexes are the ones of its branches: each found where its
        record's decoded values place it (tasks/avro_positions.py), else the records read again,
        grouped by which unions are null, with the indexes as columns (tasks/avro_unions.py)."""
        refused, unplaced = indexes_placed(self._fields[w.frame], w.unions, decoded, values)
        if refused:
            return False
        if not unplaced.any():
            return True
        if not unplaced.all():
            values, decoded = values.filter(pa.array(unplaced)), decoded.filter(pa.array(unplaced))
        groups = null_groups(w.unions, decoded)
        if groups is None:
            return False
        for nulls, at in groups:
            reading = self._index_readings.get((w.frame, nulls))
            if reading is None:
                fields = index_fields(self._fields[w.frame], w.unions, nulls)
                kept = [f["name"] for f in fields if is_checked(f["name"])]
                reading = self._index_readings[(w.frame, nulls)] = (_container_header(_framed(fields)), kept)
            header, kept = reading
            mine = values if at is None else values.take(at)
            checked = self._read(header, mine, [*kept, _END])
            if checked is None or not indexes_as_read(checked, w.unions, nulls):
                return False
        return True

    def _in_columns(self, decoded: pa.Table, w: DirectWriter) -> pa.Table:
        semantics = dict(w.semantics)
        if self._direct.envelope is not None:
            spelled = {column: path[0] for column, path in w.columns} if w.columns is not None else None
            rows = envelope_rows(decoded, self._direct.envelope, self._schema, semantics, spelled)
            why = problems(decoded)
            return rows if why is None else rows.append_column(_PROBLEM, why)
        n = decoded.num_rows
        paths = dict(w.columns) if w.columns is not None else {name: (name,) for name in w.fields}
        columns = []
        for f in self._schema:
            path = paths.get(f.name)
            if path is not None:
                # A flattened column's values: null where a record around them is (column_at).
                values = decoded.column(path[0]) if len(path) == 1 else column_at(decoded, path)
                columns.append(as_column(converted(values, path, semantics), f.type))
            else:
                columns.append(pa.nulls(n, f.type))
        return pa.Table.from_arrays(columns, schema=self._schema)


def _lettered(rows: pa.Table, carried: pa.Table, letters: list[EnvelopeLetter]) -> tuple[pa.Table, pa.Table]:
    """`rows` and `carried` without the change events `rows`' problem column names, which go to
    `letters` with their coordinates."""
    why = rows.column(_PROBLEM)
    bad = pc.is_valid(why)
    coordinates = carried.filter(bad)
    letters += zip(*(coordinates.column(n).to_pylist() for n in _COORDINATES), why.filter(bad).to_pylist(), strict=True)
    good = pc.invert(bad)
    return rows.drop_columns([_PROBLEM]).filter(good), carried.filter(good)


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
