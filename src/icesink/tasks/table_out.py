"""One table's share of a one-pass task (tasks/one_pass.py): its records decoded (JSON a record at
a time, Avro a batch at a time), a changelog table's changes gathered and reduced to the last per
key, partition values computed, and its files written (tasks/files.py).

A table of changes takes its rows with their Kafka coordinates and whether each is a tombstone
(`TOMBSTONE`, a record without a value keyed by a string or Avro record key: a delete of that
key). Rows whose key or operation Spark's path refuses are dead letters where the table takes
them (tasks/change_rows.change_problems), else they make the table declined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.model import WrittenFile
from icesink.modes import WriteMode
from icesink.schema.partitioning import PartitionField
from icesink.tasks.change_rows import DELETE, OP, ChangeSpec, change_problems, key_fingerprints, operation_codes
from icesink.tasks.dead_letters import MAX_LETTERS, Letter
from icesink.tasks.decode_avro import AvroRows, DirectAvro
from icesink.tasks.decode_connect import ConnectRows, DirectConnect
from icesink.tasks.decode_json import DECLINED, DeclinedValueError, DirectColumn
from icesink.tasks.files import TableFiles, WriteTask
from icesink.tasks.json_shape import JsonShape, ShapedJson
from icesink.tasks.last_changes import last_per_key, not_older_than_held, order_values
from icesink.tasks.parquet_files import ROW_GROUP_ROWS
from icesink.tasks.partition_values import UnsupportedPartitionError, partition_strings
from icesink.tasks.plain_rows import DirectRows, PlainEnvelope
from icesink.tasks.routing import RouteFilter
from icesink.tasks.shared_decode import decode_key

# Rows a task gathers per table before Arrow takes them (bounds the Python lists it holds).
_CHUNK_ROWS = 8192
# The direct job's columns of an Avro record's first schema-id header of its value and of its key
# (null: none; tasks/header_frames.py).
NAMED = "__icesink_named_in_header"
KEY_NAMED = "__icesink_key_named_in_header"
# The Kafka coordinates that order a key's changes after `order_by` (changes.change_order).
ORDER = ("topic", "partition", "offset")
# What declines a table in a task: a value (decode_json.DECLINED), and a partition value the task
# cannot compute (the driver checked the spec first).
REFUSED = (*DECLINED, UnsupportedPartitionError)


DirectDecoder = tuple[DirectColumn, ...] | PlainEnvelope | ShapedJson | DirectAvro | DirectConnect


@dataclass(frozen=True)
class DirectTable:
    """One table's part of the direct job; pickled into its tasks."""

    task: WriteTask
    decoder: DirectDecoder
    takes: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> first and last offset it takes
    takes_all: bool = False  # every record the job reads (then no record is looked at to route it)
    changes: ChangeSpec | None = None  # an upsert or changelog table: the task writes each key's last change
    partition_by: tuple[PartitionField, ...] = ()  # the table's current spec: the task computes its values
    # The column of the record key, a string (`decode.key_format: string`) or a record key's
    # struct (`key_decoder`); a table of changes then takes tombstones too, as deletes of their key.
    key_column: str | None = None
    # Avro, Connect JSON or plain JSON (the key column's own) record keys: the key column is their struct
    key_decoder: DirectAvro | DirectConnect | DirectColumn | None = None
    # A table of changes ordered across batches (batch/direct_tables.py): a change whose order_by
    # value is below this may be older than the row the table holds: the table is declined, and
    # says the least such value (`TableOut.older`).
    order_floor: Any = None
    # Its second round (batch/direct_held.py): the key columns and order value (int64) of the rows
    # the table holds above `order_floor`, against which each key's last change is compared.
    held: pa.Table | None = None
    # The records Spark's path would make dead letters of beyond doubt (tasks/dead_letters.py, the
    # JSON rows' `letter`) become letters, the table's other records staying here; else (with
    # `decode.on_error: fail`) they decline it.
    letters: bool = False
    # A table of field-routed topics: the records it takes of them (tasks/routing.py). Plain JSON
    # records are looked at before they are decoded, Avro rows once decoded (`routed`).
    route: RouteFilter | None = None


class TableOut:
    """A task's rows and files of one table."""

    def __init__(self, table: DirectTable, partition_id: int) -> None:
        self.table = table
        # JSON: the rows are gathered a record at a time; Avro: decoded a batch at a time.
        decoder = table.decoder
        carry = table.changes is not None  # a table of changes orders them by their coordinates
        self.rows: DirectRows | ConnectRows | None = None
        self.avro = AvroRows(decoder, table.task.arrow_schema) if isinstance(decoder, DirectAvro) else None
        # How its records decode, for the tables that decode them alike (tasks/shared_decode.py).
        self.decode_key = decode_key(decoder, table.task.arrow_schema) if isinstance(decoder, DirectAvro) else b""
        spec = table.changes.keys if table.changes is not None else ()
        plain_key = table.key_decoder if isinstance(table.key_decoder, DirectColumn) else None
        if isinstance(decoder, DirectConnect):
            keys = table.key_decoder if isinstance(table.key_decoder, DirectConnect) else None
            self.rows = ConnectRows(decoder, carry, table.key_column, keys, spec)
        elif isinstance(decoder, PlainEnvelope):
            self.rows = DirectRows(decoder.columns, carry, table.key_column, decoder.envelope, plain_key, spec)
        elif isinstance(decoder, ShapedJson):
            shape = JsonShape(decoder)
            self.rows = DirectRows(decoder.columns, carry, table.key_column, None, plain_key, spec, shape=shape)
        elif not isinstance(decoder, DirectAvro):
            self.rows = DirectRows(decoder, carry, table.key_column, None, plain_key, spec, route=table.route)
        avro_keys = table.key_decoder if isinstance(table.key_decoder, DirectAvro) else None
        self.keys = AvroRows(avro_keys, _key_schema(table)) if avro_keys is not None else None
        self._pid = partition_id
        self._chunks: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._files: TableFiles | None = None
        # A table of changes: every change the task reads (the operation, the order columns, the
        # table's columns), reduced to each key's last once the task has them all.
        self._changes: list[pa.Table] = []
        self.fingerprints: bytes | None = None  # of the keys the task wrote changes for
        self.letters: list[Letter] = []  # records the task made dead letters of (`DirectTable.letters`)
        # The least order_by value (an int; a timestamp's microseconds) of the task's changes below
        # the table's `order_floor`, which decline it.
        self.older: int | None = None

    def routed(self, rows: pa.Table, carried: int) -> pa.Table:
        """Decoded rows (after `carried` columns of their own) that the table takes of its
        field-routed topics: all of them for a table routed by topic."""
        route = self.table.route
        if route is None:
            return rows
        # By position: a table may have a column named like a carried one (offset).
        at = carried + rows.column_names[carried:].index(route.field)
        return rows.filter(route.mask(rows.column(at)))

    def add(self, rows: pa.Table) -> None:
        self._chunks += rows.to_batches()
        self._chunk_rows += rows.num_rows

    def add_changes(self, rows: pa.Table) -> bool:
        """Changes decoded with their Kafka coordinates (`ORDER`) and whether each is a tombstone
        before the table's columns; False when one would not be applied (no key, an unknown
        operation: dead letters where the table takes them, `change_problems`): the table is
        declined. A change that may be older than the row the table holds (below `order_floor`)
        declines it too, once all are read (`older`)."""
        spec = self.table.changes
        assert spec is not None
        coordinates = len(ORDER)  # by position: a table may have a column named offset too
        values = rows.select(list(range(coordinates + 1, rows.num_columns)))
        tombstones = rows.column(coordinates).combine_chunks()
        raw = values.column(spec.operation_column) if spec.mode is WriteMode.CHANGELOG else None
        # A table of field-routed topics keeps only the routing pass's letters (batch/direct.py):
        # its bad changes decline it, and Spark's path makes their letters.
        takes = self.table.letters and self.table.route is None
        found = change_problems(values, raw, tombstones, spec, MAX_LETTERS - len(self.letters) if takes else 0)
        if found is None:
            return False
        if found:
            self._lettered(rows, found)
            kept = np.ones(rows.num_rows, dtype=bool)
            kept[list(found)] = False
            rows, values, tombstones = rows.filter(kept), values.filter(kept), tombstones.filter(kept)
            raw = raw.filter(kept) if raw is not None else None
        if raw is not None:
            raw = pc.if_else(tombstones, pa.scalar("d"), raw)  # a tombstone deletes its key
        codes = operation_codes(raw, rows.num_rows)
        if codes is None:
            return False
        if raw is None:
            codes = pc.if_else(tombstones, pa.scalar(DELETE), codes)
        floor = self.table.order_floor
        if spec.order_by and floor is not None:
            mine = values.column(spec.order_by)
            below = pc.less(mine, pa.scalar(floor, mine.type))
            if pc.any(below).as_py():
                least = pc.min(order_values(pc.filter(mine, below))).as_py()
                self.older = least if self.older is None else min(self.older, least)
        if self.older is not None:
            # The table is declined once the task has read all of its changes (`_write_changes`),
            # the least of those below the floor known then: the second round reads the rows the
            # table holds above it once. Meanwhile its changes are only looked at.
            return True
        order = [values.column(spec.order_by)] if spec.order_by else []
        order += [rows.column(i) for i in range(coordinates)]
        parts = partition_strings(values, self.table.partition_by)
        arrays = [*parts, codes, *order, *values.columns]
        names = [
            *[f"__icesink_part_{i}" for i in range(len(parts))],
            OP,
            *[f"__icesink_order_{i}" for i in range(len(order))],
            *values.column_names,
        ]
        self._changes.append(pa.Table.from_arrays(arrays, names=names))
        return True

    def _lettered(self, rows: pa.Table, found: Mapping[int, tuple[str, str]]) -> None:
        """Takes the changes `found` as dead letters (their coordinates: `rows`' first columns)."""
        at = sorted(found)
        taken = rows.take(pa.array(at, pa.int64()))
        coordinates = zip(*(taken.column(i).to_pylist() for i in range(len(ORDER))), strict=True)
        for j, (topic, partition, offset) in zip(at, coordinates, strict=True):
            self.letters.append(Letter(topic, partition, offset, "change", *found[j]))

    def _write_changes(self) -> None:
        """Each key's last change among all the task read: its key to the delete file, its row to
        the data file unless it is a delete (files.py)."""
        if self.older is not None:
            raise DeclinedValueError(f"a change of order value {self.older}, below the table's order floor")
        if not self._changes:
            return
        rows = pa.concat_tables(self._changes)
        self._changes = []
        files = self._files = TableFiles(self.table.task, self._pid)
        last = last_per_key(rows, files.writer.key_positions, files.writer.order_positions)
        held = self.table.held
        if held is not None:
            last = not_older_than_held(last, files.writer.key_positions, files.writer.order_positions[0], held)
        self.fingerprints = key_fingerprints(last.select(files.writer.key_positions))
        files.write(last, final=True)

    def flush(self, last: bool = False) -> None:
        """Moves the gathered rows into Arrow, and into a file once a row group's worth (or the
        task's last rows) are there. Raises pyarrow's error for a value Arrow refuses, and
        DeclinedValueError for a change that would not be applied."""
        if self.table.changes is not None:
            chunk = self.rows.take() if self.rows is not None else None
            if chunk is not None and not self.add_changes(pa.Table.from_batches([chunk])):
                raise DeclinedValueError(
                    "a change without its key or operation, more dead letters than the table takes, or a change "
                    "that may be older than the row the table holds"
                )
            if last:
                self._write_changes()
            return
        chunk = self.rows.take() if self.rows is not None else None
        if chunk is not None:
            self._chunks.append(chunk)
            self._chunk_rows += chunk.num_rows
        if self._chunks and (last or self._chunk_rows >= ROW_GROUP_ROWS):
            if self._files is None:
                self._files = TableFiles(self.table.task, self._pid)
            rows = pa.Table.from_batches(self._chunks)
            for i, part in enumerate(partition_strings(rows, self.table.partition_by)):
                rows = rows.add_column(i, f"__icesink_part_{i}", part)
            self._files.write(rows, final=last)
            self._chunks, self._chunk_rows = [], 0

    @property
    def due(self) -> bool:
        """Whether enough rows are gathered to flush (JSON: a chunk; Avro, already in Arrow: a row group)."""
        if self.rows is not None:
            return self.rows.rows >= _CHUNK_ROWS
        # Avro changes are written once the task has every change (`_write_changes`).
        return self.table.changes is None and self._chunk_rows >= ROW_GROUP_ROWS

    def close(self) -> list[WrittenFile]:
        return self._files.close() if self._files is not None else []


def _key_schema(table: DirectTable) -> pa.Schema:
    """The fields of an Avro record key's struct column, as the decoder fills them."""
    assert table.key_column is not None
    return pa.schema(list(table.task.arrow_schema.field(table.key_column).type))


def finish(out: TableOut) -> list[WrittenFile] | None:
    """The table's files, its last rows written; None when Arrow refused one of its values (the
    table is declined, its files never committed)."""
    try:
        out.flush(last=True)
    except REFUSED:
        out.close()
        return None
    return out.close()


def flush_or_decline(outs: dict[int, TableOut], i: int, decline: Any, last: bool = False) -> None:
    try:
        outs[i].flush(last)
    except REFUSED:
        decline(i)
