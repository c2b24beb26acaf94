"""The one-pass write of plain JSON tables: steps 2 and 4 in one Spark job for all of them.

A batch routed to many tables (a Debezium-style capture of a whole database, one topic per source
table) used to pay for every table a Kafka read, a decode plan and a write job of its own, each a
hundred milliseconds of the driver. A table whose records are plain JSON objects of simple columns
(decode/json_direct.py) needs none of Spark's decoding: ONE job reads the batch's records of every
such table, and its Python tasks route each record to its tables, decode it and write the tables'
Parquet files, returning descriptors as the usual writer does (files.py). The commit is the same.

The direct decoder takes only records it is sure of. When it declines one, the whole table's share
of the batch goes the usual way instead (Spark's decoder with the table's shape, a second pass
for new columns, dead letters) and the files the direct job wrote for that table are never
committed (orphans, as after a failed write, which `icesink maintain` removes).

Which tables: plain JSON values (no envelope, no Connect schemas, no decoded key) routed by topic
into an existing, unpartitioned append table whose columns are all nullable longs, doubles,
strings, booleans or arrays of them, unless `decode.direct_json` is off.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from icesink.batch.context import BatchContext
from icesink.batch.decode.json_direct import DirectColumn, DirectRows, direct_columns
from icesink.batch.files import (
    DESCRIPTOR_DDL,
    DESCRIPTOR_FIELDS,
    ROW_GROUP_ROWS,
    TableFiles,
    WriteTask,
    descriptor_columns,
    written_file,
)
from icesink.batch.plan import TablePlan
from icesink.batch.route import Targets
from icesink.batch.sources import own_ranges, read_ranges
from icesink.batch.work import Planned, TableWork
from icesink.batch.worker_imports import freeze_imports, keep_zip_directories
from icesink.batch.write import Written, data_location, error_cause, table_arrow_schema
from icesink.config import KeyFormat, ValueFormat
from icesink.errors import WriteError
from icesink.iceberg.jvm import JavaObject
from icesink.model import PartitionRange, TopicPartition, WrittenFile
from icesink.runtime import faults

log = logging.getLogger(__name__)

Item = tuple[TablePlan, JavaObject | None, Planned]

DIRECT_DDL = f"table int, declined boolean, {DESCRIPTOR_DDL}"
# Rows a task gathers per table before Arrow takes them (bounds the Python lists it holds).
_CHUNK_ROWS = 8192
# Tables a task finishes at once (200 tables in two tasks: 1.5-2.5 s a task one at a time).
_WRITERS = 8
# What Arrow raises for a value it does not take (a string with a lone surrogate).
_REFUSED = (pa.ArrowException, UnicodeError, OverflowError)


@dataclass(frozen=True)
class DirectTable:
    """One table's part of the direct job; pickled into its tasks."""

    task: WriteTask
    columns: tuple[DirectColumn, ...]
    takes: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> first and last offset it takes


def direct_columns_of(ctx: BatchContext, targets: Targets, item: Item) -> tuple[DirectColumn, ...] | None:
    """The table's columns when the direct job can write its share of the batch, else None."""
    plan, table, planned = item
    config = ctx.config
    if not config.decode.direct_json or config.decode.format is not ValueFormat.JSON:
        return None
    if ctx.key_decoder is not None or config.decode.key_format is not KeyFormat.NONE:
        return None
    # A JSON guess is the table's own shape, made only for plain JSON (no envelope, no Connect
    # schemas met) and tables that spell and nest columns as the records do (records.guess).
    shape = planned.values
    if table is None or planned.keys is not None or shape is None or plan.table not in targets.topic_routed:
        return None
    settings = config.tables.settings_for(plan.table.name)
    if settings.is_cdc or settings.flatten_separator or settings.case_insensitive:
        return None
    if ctx.catalog.partition_fields(table):
        return None
    return direct_columns(shape)


def split_direct(ctx: BatchContext, targets: Targets, todo: list[Item]) -> tuple[list[Item], list[Item]]:
    """(the tables the direct job writes, the others)."""
    direct: list[Item] = []
    others: list[Item] = []
    for item in todo:
        (direct if direct_columns_of(ctx, targets, item) is not None else others).append(item)
    return direct, others


def write_direct(
    ctx: BatchContext, targets: Targets, items: list[Item], ranges: list[PartitionRange], batch_id: int,
    query_id: str,
) -> tuple[list[Written], list[Item]]:  # fmt: skip
    """Runs the direct job for `items`: (what it wrote, per table it took; the tables it declined)."""
    if not items:
        return [], []
    tables = ctx.tables.map(items, lambda item: _direct_table(ctx, targets, item, batch_id, query_id))
    read = covering(r for item in items for r in own_ranges(item[0], targets.ranges[item[0].table]))
    if {(r.tp, r.first_offset, r.last_offset) for r in read} == {(r.tp, r.first_offset, r.last_offset) for r in ranges}:
        source: DataFrame = targets.source  # the batch Spark planned: no Kafka read of our own to plan
    else:
        source = read_ranges(targets.source.sparkSession, ctx.config, read)
    # A few tasks for the whole batch, not one per topic-partition (a task per table-sized share
    # costs more than the share).
    source = source.select("topic", "partition", "offset", "value").coalesce(ctx.spark.sparkContext.defaultParallelism)
    try:
        rows = source.mapInArrow(direct_fn(tables, batch_id), DIRECT_DDL).collect()
    except Exception as e:
        raise direct_failed(items, read, batch_id, e) from e
    declined = {int(r.table) for r in rows if r.declined}
    files: dict[int, list[WrittenFile]] = defaultdict(list)
    for r in rows:
        if not r.declined:
            files[int(r.table)].append(written_file(r))
    written, others = [], []
    for i, (plan, table, planned) in enumerate(items):
        if i in declined:
            log.info(
                "batch %d: table %s: a record the one-pass JSON decoder does not take (a new column, another "
                "type, not a JSON object); its records go through Spark's decoder",
                batch_id, plan.table,
            )  # fmt: skip
            others.append((plan, table, planned))
            continue
        settings = ctx.config.tables.settings_for(plan.table.name)
        work = TableWork(plan, table, planned.values, None, settings, planned=planned)
        written.append(Written(work, files[i], bad=0, pending=0, refs=[]))
    return written, others


def direct_failed(items: list[Item], read: list[PartitionRange], batch_id: int, e: BaseException) -> WriteError:
    """The error that ends a batch whose direct job failed: its tables, the offsets it read, the
    cause in one line, and what to do."""
    names = ", ".join(str(item[0].table) for item in items[:5])
    if len(items) > 5:
        names += f" and {len(items) - 5} more"
    where = ", ".join(f"{r.tp} offsets {r.first_offset}-{r.last_offset}" for r in read[:5])
    if len(read) > 5:
        where += f" and {len(read) - 5} more topic-partitions"
    return WriteError(
        f"batch {batch_id}: writing tables {names} in one pass failed ({where}): {error_cause(e)[:500]}. Nothing "
        "of this batch was committed; the job runs it again on restart. If it fails again the same way, set "
        "decode.direct_json: false to decode these tables through Spark, and report the records"
    )


def _direct_table(ctx: BatchContext, targets: Targets, item: Item, batch_id: int, query_id: str) -> DirectTable:
    plan, table, planned = item
    assert table is not None
    assert planned.values is not None
    columns = direct_columns(planned.values)
    assert columns is not None
    task = WriteTask(
        table=str(plan.table),
        arrow_schema=table_arrow_schema(ctx, table),
        data_location=data_location(table),
        file_prefix=f"{query_id[:8]}-{batch_id:08d}",
        batch_id=batch_id,
        storage=ctx.storage,
        target_file_size=ctx.config.tables.target_file_size_bytes,
    )
    mine = own_ranges(plan, targets.ranges[plan.table])
    return DirectTable(task, columns, {(r.tp.topic, r.tp.partition): (r.first_offset, r.last_offset) for r in mine})


def covering(ranges: Iterable[PartitionRange]) -> list[PartitionRange]:
    """One range per topic-partition, from the lowest first offset to the highest last one, that
    holds every range given (tables that share a topic share its read)."""
    spans: dict[TopicPartition, tuple[int, int]] = {}
    for r in ranges:
        first, last = spans.get(r.tp, (r.first_offset, r.last_offset))
        spans[r.tp] = (min(first, r.first_offset), max(last, r.last_offset))
    return [PartitionRange(tp, first, last, last - first + 1) for tp, (first, last) in sorted(spans.items())]


# ---------------------------------------------------------------- executors


class _TableOut:
    """A task's rows and files of one table."""

    def __init__(self, table: DirectTable, partition_id: int) -> None:
        self.table = table
        self.rows = DirectRows(table.columns)
        self._pid = partition_id
        self._chunks: list[pa.RecordBatch] = []
        self._chunk_rows = 0
        self._files: TableFiles | None = None

    def flush(self, last: bool = False) -> None:
        """Moves the gathered rows into Arrow, and into a file once a row group's worth (or the
        task's last rows) are there. Raises pyarrow's error for a value Arrow refuses."""
        chunk = self.rows.take()
        if chunk is not None:
            self._chunks.append(chunk)
            self._chunk_rows += chunk.num_rows
        if self._chunks and (last or self._chunk_rows >= ROW_GROUP_ROWS):
            if self._files is None:
                self._files = TableFiles(self.table.task, self._pid)
            self._files.write(pa.Table.from_batches(self._chunks))
            self._chunks, self._chunk_rows = [], 0

    def close(self) -> list[WrittenFile]:
        return self._files.close() if self._files is not None else []


def direct_fn(tables: Sequence[DirectTable], batch_id: int):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow: records (topic, partition, offset, value) in,
    one `DIRECT_DDL` row out per file written, and one per table declined."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        keep_zip_directories()
        freeze_imports()
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        outs = {i: _TableOut(t, pid) for i, t in enumerate(tables)}
        by_topic: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(tables):
            for topic in sorted({topic for topic, _ in t.takes}):
                by_topic[topic].append(i)
        declined: set[int] = set()

        def decline(i: int) -> None:
            declined.add(i)
            outs.pop(i).close()  # files it wrote are never committed

        for batch in batches:
            columns = [batch.column(n).to_pylist() for n in ("topic", "partition", "offset", "value")]
            for topic, partition, offset, value in zip(*columns, strict=True):
                for i in by_topic.get(topic, ()):
                    out = outs.get(i)
                    if out is None:
                        continue
                    first, last = out.table.takes.get((topic, partition), (1, 0))
                    if first <= offset <= last and not out.rows.add(value):
                        decline(i)
            for i in [i for i, out in outs.items() if out.rows.rows >= _CHUNK_ROWS]:
                _flush_or_decline(outs, i, decline)
        # Each table's last rows and the closing of its files, a few tables at a time: a small
        # table's file is mostly waiting on S3 (pyarrow lets go of the GIL meanwhile).
        with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
            done = list(pool.map(_finish, outs.values()))
        written = []
        for i, files in zip(list(outs), done, strict=True):
            if files is None:
                declined.add(i)
            else:
                written += [(i, f) for f in files]
        if written:
            faults.maybe_kill_worker("executor-write", batch_id)
            faults.maybe_kill_executor("executor-lost", batch_id)
        yield from _results(written, sorted(declined))

    return run


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


def _results(written: list[tuple[int, WrittenFile]], declined: list[int]) -> Iterator[pa.RecordBatch]:
    if not written and not declined:
        return
    files: list[WrittenFile | None] = [f for _, f in written] + [None] * len(declined)
    arrays = [
        pa.array([i for i, _ in written] + declined, pa.int32()),
        pa.array([False] * len(written) + [True] * len(declined), pa.bool_()),
        *descriptor_columns(files),
    ]
    yield pa.RecordBatch.from_arrays(arrays, names=["table", "declined", *DESCRIPTOR_FIELDS])
