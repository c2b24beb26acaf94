"""The one-pass job's Python tasks: read the records (from Spark's Kafka source or, with
`_reading_fn`, from Kafka itself through librdkafka), route them to their tables, decode them,
reduce a changelog table's changes to the last per key, compute partition values and write the
Parquet files, returning one `DIRECT_DDL` row per file written, per table declined, and per table
of changes (the fingerprints of the keys it wrote). The driver's side is batch/direct.py.

A table is declined, and its files never committed, when one of its records is not taken (the
decoders say which) or Arrow refuses a value; its share of the batch then goes Spark's way.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.config import WriteMode
from icesink.kafka import reader
from icesink.model import PartitionRange, WrittenFile
from icesink.runtime import faults
from icesink.schema.partitioning import PartitionField
from icesink.tasks.change_rows import OP, ChangeSpec, key_fingerprints, keys_set, operation_codes
from icesink.tasks.decode_avro import AvroRows, DirectAvro
from icesink.tasks.decode_json import DeclinedValueError, DirectColumn, DirectRows
from icesink.tasks.files import (
    DESCRIPTOR_DDL,
    DESCRIPTOR_FIELDS,
    ROW_GROUP_ROWS,
    TableFiles,
    WriteTask,
    descriptor_columns,
)
from icesink.tasks.last_changes import last_per_key
from icesink.tasks.partition_values import UnsupportedPartitionError, partition_strings
from icesink.tasks.worker_imports import freeze_imports, keep_zip_directories

log = logging.getLogger(__name__)

# A row per file written, per table declined, and per table of changes and task: the fingerprints
# of the keys it wrote (direct_changes.py).
DIRECT_DDL = f"table int, declined boolean, keys binary, {DESCRIPTOR_DDL}"
# Rows a task gathers per table before Arrow takes them (bounds the Python lists it holds).
_CHUNK_ROWS = 8192
# Tables a task finishes at once (200 tables in two tasks: 1.5-2.5 s a task one at a time).
_WRITERS = 8
# The table index of the row a task returns when it could not read its records (kafka/reader.py).
UNREAD = -1
# The direct job's column saying whether an Avro record names its schema in a header.
NAMED = "__icesink_named_in_header"
# The Kafka coordinates that order a key's changes after `order_by` (changes.change_order).
ORDER = ("topic", "partition", "offset")
# What Arrow raises for a value it does not take (a string with a lone surrogate), and the JSON
# decoder for a value not of its column's type.
# A partition value the task cannot compute declines the table too (the driver checked the spec first).
_REFUSED = (pa.ArrowException, UnicodeError, OverflowError, DeclinedValueError, UnsupportedPartitionError)


DirectDecoder = tuple[DirectColumn, ...] | DirectAvro


@dataclass(frozen=True)
class DirectTable:
    """One table's part of the direct job; pickled into its tasks."""

    task: WriteTask
    decoder: DirectDecoder
    takes: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> first and last offset it takes
    takes_all: bool = False  # every record the job reads (then no record is looked at to route it)
    changes: ChangeSpec | None = None  # an upsert or changelog table: the task writes each key's last change
    partition_by: tuple[PartitionField, ...] = ()  # the table's current spec: the task computes its values


class _TableOut:
    """A task's rows and files of one table."""

    def __init__(self, table: DirectTable, partition_id: int) -> None:
        self.table = table
        # JSON: the rows are gathered a record at a time; Avro: decoded a batch at a time.
        decoder = table.decoder
        self.rows = (
            DirectRows(decoder, carry=table.changes is not None) if not isinstance(decoder, DirectAvro) else None
        )
        self.avro = AvroRows(table.decoder, table.task.arrow_schema) if isinstance(table.decoder, DirectAvro) else None
        self._pid = partition_id
        self._chunks: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._files: TableFiles | None = None
        # A table of changes: every change the task reads (the operation, the order columns, the
        # table's columns), reduced to each key's last once the task has them all.
        self._changes: list[pa.Table] = []
        self.fingerprints: bytes | None = None  # of the keys the task wrote changes for

    def add(self, rows: pa.Table) -> None:
        self._chunks += rows.to_batches()
        self._chunk_rows += rows.num_rows

    def add_changes(self, rows: pa.Table) -> bool:
        """Changes decoded with their Kafka coordinates before the table's columns (`ORDER`);
        False when one would not be applied (no key, an unknown operation): the table is declined."""
        spec = self.table.changes
        assert spec is not None
        coordinates = len(ORDER)  # by position: a table may have a column named offset too
        values = rows.select(list(range(coordinates, rows.num_columns)))
        if not keys_set(values, spec.keys):
            return False
        raw = values.column(spec.operation_column) if spec.mode is WriteMode.CHANGELOG else None
        codes = operation_codes(raw, rows.num_rows)
        if codes is None:
            return False
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

    def _write_changes(self) -> None:
        """Each key's last change among all the task read: its key to the delete file, its row to
        the data file unless it is a delete (files.py)."""
        if not self._changes:
            return
        rows = pa.concat_tables(self._changes)
        self._changes = []
        files = self._files = TableFiles(self.table.task, self._pid)
        last = last_per_key(rows, files.writer.key_positions, files.writer.order_positions)
        self.fingerprints = key_fingerprints(last.select(files.writer.key_positions))
        files.write(last)

    def flush(self, last: bool = False) -> None:
        """Moves the gathered rows into Arrow, and into a file once a row group's worth (or the
        task's last rows) are there. Raises pyarrow's error for a value Arrow refuses, and
        DeclinedValueError for a change that would not be applied."""
        if self.table.changes is not None:
            chunk = self.rows.take() if self.rows is not None else None
            if chunk is not None and not self.add_changes(pa.Table.from_batches([chunk])):
                raise DeclinedValueError("a change without its key or with an unknown operation")
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
            self._files.write(rows)
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


def _json_by_topic(tables: Sequence[DirectTable]) -> dict[str, list[int]]:
    """The JSON tables (their indexes) each topic's records go to."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tables):
        if not isinstance(t.decoder, DirectAvro):
            for topic in sorted({topic for topic, _ in t.takes}):
                by_topic[topic].append(i)
    return by_topic


def _finished(
    outs: Mapping[int, _TableOut], done: Sequence[list[WrittenFile] | None], declined: set[int]
) -> tuple[list[tuple[int, WrittenFile]], list[tuple[int, bytes]]]:
    """(each file written, each table of changes' key fingerprints); a table whose last rows were
    refused joins `declined`."""
    written: list[tuple[int, WrittenFile]] = []
    keys: list[tuple[int, bytes]] = []
    for (i, out), files in zip(list(outs.items()), done, strict=True):
        if files is None:
            declined.add(i)
        else:
            written += [(i, f) for f in files]
            keys += [(i, out.fingerprints)] if out.fingerprints is not None else []
    return written, keys


def direct_fn(tables: Sequence[DirectTable], batch_id: int):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow: records (topic, partition, offset, value, and
    for Avro tables whether the schema is named in a header) in, one `DIRECT_DDL` row out per file
    written, and one per table declined."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        keep_zip_directories()
        freeze_imports()
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        outs = {i: _TableOut(t, pid) for i, t in enumerate(tables)}
        by_topic, avro = _json_by_topic(tables), [i for i, t in enumerate(tables) if isinstance(t.decoder, DirectAvro)]
        declined: set[int] = set()

        def decline(i: int) -> None:
            declined.add(i)
            outs.pop(i).close()  # files it wrote are never committed

        try:
            _take(batches, outs, tables, by_topic, avro, decline)
        except BaseException:
            for out in outs.values():
                out.close()  # files it wrote are never committed
            raise
        # Each table's last rows and the closing of its files, a few tables at a time: a small
        # table's file is mostly waiting on S3 (pyarrow lets go of the GIL meanwhile).
        with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
            done = list(pool.map(_finish, outs.values()))
        written, keys = _finished(outs, done, declined)
        if written:
            faults.maybe_kill_worker("executor-write", batch_id)
            faults.maybe_kill_executor("executor-lost", batch_id)
        yield from results(written, sorted(declined), keys)

    return run


def _json_records(
    batch: pa.RecordBatch, by_topic: Mapping[str, list[int]], outs: dict[int, _TableOut], decline: Any
) -> None:  # fmt: skip
    columns = [batch.column(n).to_pylist() for n in ("topic", "partition", "offset", "value")]
    for topic, partition, offset, value in zip(*columns, strict=True):
        for i in by_topic.get(topic, ()):
            out = outs.get(i)
            if out is None:
                continue
            first, last = out.table.takes.get((topic, partition), (1, 0))
            assert out.rows is not None
            if first <= offset <= last and not out.rows.add(value, (topic, partition, offset)):
                decline(i)


def _take(
    batches: Iterator[pa.RecordBatch], outs: dict[int, _TableOut], tables: Sequence[DirectTable],
    by_topic: Mapping[str, list[int]], avro: list[int], decline: Any,
) -> None:  # fmt: skip
    """Every record of `batches` into the tables that take it (their rows, flushed to files as they fill)."""
    json = sorted({i for found in by_topic.values() for i in found})
    # A table of changes carries each record's coordinates: not the values alone.
    alone = json[0] if len(json) == 1 and tables[json[0]].takes_all and tables[json[0]].changes is None else None
    for batch in batches:
        if alone is not None:
            if alone in outs:
                _json_values(batch, outs[alone], alone, decline)
        elif by_topic:
            _json_records(batch, by_topic, outs, decline)
        for i in avro:
            out = outs.get(i)
            if out is not None:
                _avro_records(batch, out, i, decline)
        for i in [i for i, out in outs.items() if out.due]:
            _flush_or_decline(outs, i, decline)


def _json_values(batch: pa.RecordBatch, out: _TableOut, i: int, decline: Any) -> None:
    """`_json_records` for the one JSON table of the job, which takes every record it reads."""
    assert out.rows is not None
    add = out.rows.add
    for value in batch.column("value").to_pylist():
        if not add(value):
            decline(i)
            return


def _avro_records(batch: pa.RecordBatch, out: _TableOut, i: int, decline: Any) -> None:
    """The table's records of `batch`, decoded in one go; the table is declined if one is not taken."""
    mask = True if out.table.takes_all else taken_mask(batch, out.table.takes)
    if mask is None:
        return
    values, named = batch.column("value"), batch.column(NAMED) if NAMED in batch.schema.names else None
    carry = pa.Table.from_batches([batch.select(list(ORDER))]) if out.table.changes is not None else None
    if mask is not True:
        values = values.filter(mask)
        named = named.filter(mask) if named is not None else None
        carry = carry.filter(mask) if carry is not None else None
    assert out.avro is not None
    try:
        rows = out.avro.decode(values, named, carry)
    except _REFUSED:
        rows = None
    if rows is None or (carry is not None and not out.add_changes(rows)):
        decline(i)
    elif carry is None:
        out.add(rows)


def taken_mask(batch: pa.RecordBatch, takes: Mapping[tuple[str, int], tuple[int, int]]) -> Any:
    """Which of the batch's records a table takes (its topic-partitions, within its offsets): an
    Arrow mask, True for all of them, None for none."""
    topic, partition, offset = (batch.column(n) for n in ("topic", "partition", "offset"))
    mask = None
    for (t, p), (first, last) in takes.items():
        here = pc.and_(pc.equal(topic, t), pc.equal(partition, p))
        here = pc.and_(here, pc.and_(pc.greater_equal(offset, first), pc.less_equal(offset, last)))
        mask = here if mask is None else pc.or_(mask, here)
    if mask is None:
        return None
    count = pc.sum(mask).as_py() or 0
    if count == 0:
        return None
    return True if count == len(batch) else mask


def _finish(out: _TableOut) -> list[WrittenFile] | None:
    """The table's files, its last rows written; None when Arrow refused one of its values (the
    table is declined, its files never committed)."""
    try:
        out.flush(last=True)
    except _REFUSED:
        out.close()
        return None
    return out.close()


def _flush_or_decline(outs: dict[int, _TableOut], i: int, decline: Any, last: bool = False) -> None:
    try:
        outs[i].flush(last)
    except _REFUSED:
        decline(i)


def results(
    written: list[tuple[int, WrittenFile]], declined: list[int], keys: Sequence[tuple[int, bytes]] = ()
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """The task's `DIRECT_DDL` rows: a file written, a table declined, a table's key fingerprints."""
    if not written and not declined and not keys:
        return
    files: list[WrittenFile | None] = [f for _, f in written] + [None] * (len(declined) + len(keys))
    arrays = [
        pa.array([i for i, _ in written] + declined + [i for i, _ in keys], pa.int32()),
        pa.array([False] * len(written) + [True] * len(declined) + [False] * len(keys), pa.bool_()),
        pa.array([None] * (len(written) + len(declined)) + [k for _, k in keys], pa.binary()),
        *descriptor_columns(files),
    ]
    yield pa.RecordBatch.from_arrays(arrays, names=["table", "declined", "keys", *DESCRIPTOR_FIELDS])


def reading_fn(  # type: ignore[no-untyped-def]
    tables: Sequence[DirectTable], batch_id: int, shares: list[list[PartitionRange]], settings: dict[str, Any],
    header: str | None,
):  # fmt: skip
    """`direct_fn` for tasks that read their share of the records from Kafka (one task a share, its
    index the task's one row). A share librdkafka does not read to its end declines every table
    (`UNREAD`): Spark's path reads them."""
    write = direct_fn(tables, batch_id)

    def run(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        mine = [i for b in tasks for i in b.column("id").to_pylist()]
        kafka = reader.RangeReader(settings)
        records = (batch for i in mine for batch in kafka.batches(shares[i], header, NAMED))
        try:
            yield from write(records)
        except reader.RangeReadError as e:
            log.warning("the one-pass job could not read its records with librdkafka: %s", e)
            yield from results([], [UNREAD])

    return run
