"""The one-pass write of plain JSON and plain Avro tables: steps 2 and 4 in one Spark job for all of them.

Spark's decoder costs a table a decode plan (a hundred milliseconds of the driver, which a batch
routed to many tables pays many times: a Debezium-style capture of a whole database) and runs in
the JVM, whose rows then cross to the Python writer through Arrow. A table whose records are plain
JSON objects of simple columns (decode/json_direct.py) or Confluent-framed Avro of flat records
(decode/avro_direct.py) needs none of it: ONE job reads the batch's records of every such table,
and its Python tasks route the records to their tables, decode them and write the tables' Parquet
files, returning descriptors as the usual writer does (files.py). The commit is the same.

The direct decoders take only records they are sure of. When one declines a record, the whole
table's share of the batch goes the usual way instead (Spark's decoder with the table's shape, a
second pass for new columns or schema ids, dead letters) and the files the direct job wrote for
that table are never committed (orphans, as after a failed write, which `icesink maintain`
removes).

Which tables: values of no envelope, no Connect schemas and no decoded key, routed by topic into an
unpartitioned table: an append table, or for Avro an upsert or changelog table too (`_changes_item`:
each task reads whole topic-partitions and writes each key's last change of them, and the driver
checks that no key was written by two tasks, batch/direct_changes.py). JSON: a table whose
columns are all nullable longs, doubles, strings, booleans or arrays of them
(`decode.direct_json`); for a table that does not exist yet, the columns Spark infers from a
sample of the batch (`_new_json_item`). Avro: writer schemas (those
the topics carried last time, or the registry's latest) whose fields are all columns of the table
with the same type (`decode.direct_avro`); for a table that does not exist yet, the columns of
those writer schemas, as Spark's path would create it.

A table that does not exist yet is staged (`_staged`: the catalog's stage-create gives its location
and field ids, and creates nothing), its files are written, and only then is it created
(`_create`, at that location) and committed as any table. So a table the job declines is never
created, and Spark's path creates it from all of the batch's records, as it would have; a crash
leaves at most an empty table.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StringType, StructType

from icesink.batch import changes
from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.decode import VALUE
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.avro_direct import AvroRows, DirectAvro, direct_avro, writer_struct
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.decode.json_direct import DeclinedValueError, DirectColumn, DirectRows, direct_columns
from icesink.batch.decode.records import change_spec
from icesink.batch.direct_changes import key_fingerprints, keys_set, operation_codes, shared_keys
from icesink.batch.files import (
    DESCRIPTOR_DDL,
    DESCRIPTOR_FIELDS,
    ROW_GROUP_ROWS,
    TableFiles,
    WriteTask,
    descriptor_columns,
    written_file,
)
from icesink.batch.last_changes import last_per_key
from icesink.batch.plan import TablePlan
from icesink.batch.route import Targets
from icesink.batch.sources import own_ranges, read_ranges
from icesink.batch.work import Planned, TableWork, partition_fields
from icesink.batch.worker_imports import freeze_imports, keep_zip_directories
from icesink.batch.write import CHANGES_PER_TASK, Written, data_location, error_cause, table_arrow_schema
from icesink.config import Envelope, KeyFormat, OrderScope, ValueFormat, WriteMode
from icesink.errors import ConfigError, WriteError
from icesink.iceberg.jvm import JavaObject
from icesink.kafka import reader
from icesink.model import PartitionRange, TopicPartition, WrittenFile
from icesink.runtime import faults
from icesink.schema.evolution import conflicts, merged
from icesink.schema.partitioning import PartitionField
from icesink.tasks.partition_values import UnsupportedPartitionError, partition_strings, supported

log = logging.getLogger(__name__)

Item = tuple[TablePlan, JavaObject | None, Planned]

# A row per file written, per table declined, and per table of changes and task: the fingerprints
# of the keys it wrote (direct_changes.py).
DIRECT_DDL = f"table int, declined boolean, keys binary, {DESCRIPTOR_DDL}"
# Rows a task gathers per table before Arrow takes them (bounds the Python lists it holds).
_CHUNK_ROWS = 8192
# Tables a task finishes at once (200 tables in two tasks: 1.5-2.5 s a task one at a time).
_WRITERS = 8
# The table index of the row a task returns when it could not read its records (kafka/reader.py).
_UNREAD = -1
# The direct job's column saying whether an Avro record names its schema in a header.
NAMED = "__icesink_named_in_header"
# Records of each topic-partition a new JSON table's columns are inferred from (`_new_json_item`).
SAMPLE_RECORDS = 1000
# The Kafka coordinates that order a key's changes after `order_by` (changes.change_order).
_ORDER = ("topic", "partition", "offset")
# What Arrow raises for a value it does not take (a string with a lone surrogate), and the JSON
# decoder for a value not of its column's type.
# A partition value the task cannot compute declines the table too (the driver checked the spec first).
_REFUSED = (pa.ArrowException, UnicodeError, OverflowError, DeclinedValueError, UnsupportedPartitionError)


DirectDecoder = tuple[DirectColumn, ...] | DirectAvro


@dataclass(frozen=True)
class DirectItem:
    """A table the direct job writes: its item, its decoder, and its schema (for a table that does
    not exist yet, the one it is created with)."""

    item: Item
    decoder: DirectDecoder
    schema: StructType
    staged: bool = False  # a table that does not exist yet: `item`'s table is the staged one (`_staged`)
    changes: ChangeSpec | None = None  # an upsert or changelog table (Avro only)


@dataclass(frozen=True)
class DirectTable:
    """One table's part of the direct job; pickled into its tasks."""

    task: WriteTask
    decoder: DirectDecoder
    takes: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> first and last offset it takes
    takes_all: bool = False  # every record the job reads (then no record is looked at to route it)
    changes: ChangeSpec | None = None  # an upsert or changelog table: the task writes each key's last change
    partition_by: tuple[PartitionField, ...] = ()  # the table's current spec: the task computes its values


def direct_item(ctx: BatchContext, targets: Targets, item: Item) -> DirectItem | None:
    """The table's part of the direct job when it can write the table's share of the batch, else
    None. A partitioned table too, when its tasks compute its partition values (the table's
    current spec; a new table's from `tables.partition_by`)."""
    found = _decoder_item(ctx, targets, item)
    if found is None:
        return None
    plan, table, _ = item
    fields = (
        ctx.catalog.partition_fields(table)
        if table is not None
        else partition_fields(ctx.config.tables.settings_for(plan.table.name))
    )
    if not all(
        f.column in found.schema.fieldNames() and supported(f, to_arrow_type(found.schema[f.column].dataType))
        for f in fields
    ):
        return None
    return found


def _decoder_item(ctx: BatchContext, targets: Targets, item: Item) -> DirectItem | None:
    plan, table, planned = item
    config = ctx.config
    if ctx.key_decoder is not None or config.decode.key_format is not KeyFormat.NONE:
        return None
    if planned.keys is not None or plan.table not in targets.topic_routed:
        return None
    settings = config.tables.settings_for(plan.table.name)
    if settings.flatten_separator or settings.case_insensitive:
        return None
    if settings.is_cdc:
        return _changes_item(ctx, item)
    if config.decode.format is ValueFormat.JSON and config.decode.direct_json:
        if table is None:
            return _new_json_item(ctx, targets, item)
        # A JSON guess is the table's own shape, made only for plain JSON (no envelope, no Connect
        # schemas met) and tables that spell and nest columns as the records do (records.guess).
        columns = direct_columns(planned.values) if planned.values is not None else None
        return DirectItem(item, columns, planned.values) if columns is not None else None
    if config.decode.format is ValueFormat.AVRO and config.decode.direct_avro and planned.values is not None:
        return _avro_item(ctx, item)
    return None


def _new_json_item(ctx: BatchContext, targets: Targets, item: Item) -> DirectItem | None:
    """A JSON table that does not exist yet, with the columns Spark infers from the first
    `SAMPLE_RECORDS` records of each of its topic-partitions in the batch, where Spark's decoder
    infers them from all of its records. The direct decoder takes a record only when it is a row of
    exactly those columns, so a batch the sample does not represent (a key, or a wider type, only
    further on) is declined and goes Spark's way: the table comes out as it would have."""
    plan = item[0]
    decoder = ctx.decoder
    if not isinstance(decoder, JsonDecoder):
        return None
    sample = [
        PartitionRange(r.tp, r.first_offset, last, last - r.first_offset + 1)
        for r in own_ranges(plan, targets.ranges[plan.table])
        for last in [min(r.last_offset, r.first_offset + SAMPLE_RECORDS - 1)]
    ]
    schema = decoder.plain_columns(read_ranges(targets.batch.sparkSession, ctx.config, sample))
    columns = direct_columns(schema) if schema is not None else None
    return DirectItem(item, columns, schema) if columns is not None and schema is not None else None


def _avro_item(ctx: BatchContext, item: Item) -> DirectItem | None:
    _, table, planned = item
    decoder = ctx.decoder
    if ctx.config.decode.envelope is not Envelope.NONE or not isinstance(decoder, AvroDecoder):
        return None
    writers = decoder.writer_schemas(planned.values)
    if writers is None:
        return None
    if table is not None:
        schema = ctx.catalog.spark_schema(table)
    else:  # created with the writer schemas' columns, as the usual path would (records.decode_table)
        schema = StructType([])
        for _, text in sorted(writers.items()):
            struct = writer_struct(text)
            if struct is None or conflicts(schema, struct):
                return None
            schema = merged(schema, struct)
    found = direct_avro(writers, schema)
    return DirectItem(item, found, schema) if found is not None else None


def _changes_item(ctx: BatchContext, item: Item) -> DirectItem | None:
    """An Avro upsert or changelog table, when the one-pass job can write its changes; not when
    the rows the table holds take part in ordering them (`order_by` across batches: Spark's path
    joins them, write._held_order). How many changes the job takes: `split_direct`."""
    plan, table, planned = item
    config = ctx.config
    if config.decode.format is not ValueFormat.AVRO or not config.decode.direct_avro or planned.values is None:
        return None
    found = _avro_item(ctx, item)
    if found is None:
        return None
    spec = _change_spec(ctx, plan, table, found.schema)
    return replace(found, changes=spec) if spec is not None else None


def _change_spec(ctx: BatchContext, plan: TablePlan, table: JavaObject | None, schema: StructType) -> ChangeSpec | None:
    """The table's keys and operation as Spark's path resolves them (records.change_spec), or None
    where that path reports a problem, reads an operation that is not a string, or orders changes
    by the rows the table holds."""
    settings = ctx.config.tables.settings_for(plan.table.name)
    try:
        spec = change_spec(ctx, plan.table, settings, table, None, schema)
    except ConfigError:
        return None
    if spec.mode is WriteMode.CHANGELOG and not isinstance(schema[spec.operation_column].dataType, StringType):
        return None
    held = settings.order_by_scope is OrderScope.TABLE and table is not None and table.currentSnapshot() is not None
    return None if spec.order_by and held else spec


def split_direct(ctx: BatchContext, targets: Targets, todo: list[Item]) -> tuple[list[DirectItem], list[Item]]:
    """(the tables the direct job writes, the others)."""
    found = ctx.tables.map(todo, lambda item: direct_item(ctx, targets, item))  # a new JSON table's sample: a job
    # A task holds every change it reads until it has them all: the tables of changes the job
    # takes hold no more than Spark's path would give its tasks (the others take that path).
    budget = CHANGES_PER_TASK * ctx.spark.sparkContext.defaultParallelism
    for i, d in enumerate(found):
        if d is not None and d.changes is not None:
            budget -= d.item[0].records
            if budget < 0:
                found[i] = None
    direct = [d for d in found if d is not None]
    others = [item for item, d in zip(todo, found, strict=True) if d is None]
    return direct, others


def write_direct(
    ctx: BatchContext, targets: Targets, items: list[DirectItem], ranges: list[PartitionRange], batch_id: int,
    query_id: str,
) -> tuple[list[Written], list[Item]]:  # fmt: skip
    """Runs the direct job for `items`: (what it wrote, per table it took; the tables it declined)."""
    if not items:
        return [], []
    items, unstaged = _staged(ctx, items)
    if not items:
        return [], unstaged
    read = covering(r for d in items for r in own_ranges(d.item[0], targets.ranges[d.item[0].table]))
    tables = ctx.tables.map(items, lambda d: _direct_table(ctx, targets, d, read, batch_id, query_id))
    avro = any(isinstance(d.decoder, DirectAvro) for d in items)
    try:
        rows = _job(ctx, targets, tables, read, ranges, avro, batch_id).collect()
    except Exception as e:
        raise direct_failed(items, read, batch_id, e) from e
    declined = {int(r.table) for r in rows if r.declined}
    fingerprints: dict[int, list[bytes]] = defaultdict(list)
    for r in rows:
        if r.keys is not None:
            fingerprints[int(r.table)].append(bytes(r.keys))
    shared = {i for i, found in fingerprints.items() if i not in declined and shared_keys(found)}
    declined |= shared
    if _UNREAD in declined:
        log.warning(
            "batch %d: the one-pass job's tasks could not read Kafka with librdkafka (see the executors' log); "
            "Spark's source reads its tables' records", batch_id,
        )  # fmt: skip
        declined = set(range(len(items)))
    files: dict[int, list[WrittenFile]] = defaultdict(list)
    for r in rows:
        if not r.declined and r.keys is None:
            files[int(r.table)].append(written_file(r))
    done = [i for i in range(len(items)) if i not in declined]
    made = dict(zip(done, ctx.tables.map([items[i] for i in done], lambda d: _create(ctx, d)), strict=True))
    written: list[Written] = []
    others = unstaged
    for i, d in enumerate(items):
        plan, _, planned = d.item
        if i in declined or made[i] is None:
            if i in shared:
                why = "one of its keys has changes in topic-partitions that different tasks read"
            elif i in declined:
                why = _why(d)
            else:
                why = "the table as created does not fit the files written for it"
            log.info("batch %d: table %s: %s; its records go through Spark's decoder", batch_id, plan.table, why)
            # Spark's path creates a staged table (or finds it, made meanwhile) as for any new table.
            others.append((plan, None, planned) if d.staged else d.item)
            continue
        settings = ctx.config.tables.settings_for(plan.table.name)
        work = TableWork(plan, made[i], d.schema, None, settings, changes=d.changes, planned=planned)
        written.append(Written(work, files[i], bad=0, pending=0, refs=[]))
        if isinstance(d.decoder, DirectAvro):
            # Every record carried one of these schemas (a superset of those it carried: the next
            # batch plans with them all, as the registry's latest would be planned otherwise).
            frames = [w.frame for w in d.decoder.writers]
            ctx.seen.learn("value", {topic: frames for topic in plan.topics})
    return written, others


# See `task_count`: at about 200,000 records a second per core, 10,000 records take ~50 ms.
RECORDS_PER_TASK = 10_000


def _job(
    ctx: BatchContext, targets: Targets, tables: list[DirectTable], read: list[PartitionRange],
    ranges: list[PartitionRange], avro: bool, batch_id: int,
) -> DataFrame:  # fmt: skip
    """The one-pass job: its Python tasks read `read` from Kafka themselves (librdkafka,
    `kafka.direct_read`), or take the records from Spark's Kafka source."""
    spark = targets.batch.sparkSession
    n_tasks = task_count(sum(r.records for r in read), ctx.spark.sparkContext.defaultParallelism)
    librdkafka = ctx.librdkafka
    if librdkafka is not None:
        # A table of changes reduces each key's in one task: whole topic-partitions to a task.
        shares = reader.split(read, n_tasks, whole=any(t.changes is not None for t in tables))
        # One task per share, its index the task's one row (a DataFrame of a Python list took twice as long).
        tasks = spark.range(0, len(shares), 1, len(shares))
        header = VALUE.schema_id_header if avro else None
        log.info(
            "batch %d: the one-pass job reads %d record(s) of %d topic-partition(s) with librdkafka in %d task(s)",
            batch_id, sum(r.records for r in read), len(read), len(shares),
        )  # fmt: skip
        return tasks.mapInArrow(_reading_fn(tables, batch_id, shares, librdkafka, header), DIRECT_DDL)
    if _spans(read) == _spans(ranges):
        source: DataFrame = targets.source  # the batch Spark planned: no Kafka read of our own to plan
    else:
        source = read_ranges(spark, ctx.config, read)
    columns = [F.col(c) for c in ("topic", "partition", "offset", "value")]
    if avro and "headers" in source.columns:
        # Whether the record names its schema in a header (then it is declined), not the headers:
        # Spark's Arrow hand-off of an array of structs per record took 4.5 s per 300,000 records.
        named = F.array_contains(F.col("headers.key"), VALUE.schema_id_header)
        columns.append(F.coalesce(named, F.lit(False)).alias(NAMED))
    # A few tasks for the whole batch, not one per topic-partition (a task per table-sized share
    # costs more than the share).
    source = source.select(*columns).coalesce(n_tasks)
    return source.mapInArrow(direct_fn(tables, batch_id), DIRECT_DDL)


def task_count(records: int, cores: int) -> int:
    """Tasks for a one-pass job of `records`: one per core, but none with fewer than
    `RECORDS_PER_TASK` (a task's fixed cost, a Python worker's round trip and an S3 upload, is
    worth paying only for a share that takes longer than that to decode and write; and each task
    writes its own files)."""
    return max(1, min(cores, records // RECORDS_PER_TASK))


def _reading_fn(  # type: ignore[no-untyped-def]
    tables: Sequence[DirectTable], batch_id: int, shares: list[list[PartitionRange]], settings: dict[str, Any],
    header: str | None,
):  # fmt: skip
    """`direct_fn` for tasks that read their share of the records from Kafka (one task a share, its
    index the task's one row). A share librdkafka does not read to its end declines every table
    (`_UNREAD`): Spark's path reads them."""
    write = direct_fn(tables, batch_id)

    def run(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        mine = [i for b in tasks for i in b.column("id").to_pylist()]
        kafka = reader.RangeReader(settings)
        records = (batch for i in mine for batch in kafka.batches(shares[i], header, NAMED))
        try:
            yield from write(records)
        except reader.RangeReadError as e:
            log.warning("the one-pass job could not read its records with librdkafka: %s", e)
            yield from _results([], [_UNREAD])

    return run


def _why(d: DirectItem) -> str:
    if d.changes is not None:
        return (
            "a record the one-pass Avro decoder does not take (another schema id, a body that does not decode, a "
            "value out of range, no key, an operation not I, U or D)"
        )
    if isinstance(d.decoder, DirectAvro):
        return (
            "a record the one-pass Avro decoder does not take (another schema id, a body that does not decode, a "
            "value out of range)"
        )
    return "a record the one-pass JSON decoder does not take (a new column, another type, not a JSON object)"


def _staged(ctx: BatchContext, items: list[DirectItem]) -> tuple[list[DirectItem], list[Item]]:
    """`items`, each table that does not exist yet staged: its location and field ids as the
    catalog would create it, for the direct job's files, and nothing created (`_create` creates it
    once its files are written, so a table the job declines is never created with the columns of a
    guess). And the tables left to Spark's path: created meanwhile, or sorted by a column they
    lack (which that path reports)."""
    settings = ctx.config.tables.settings_for

    def stage(d: DirectItem) -> DirectItem | None:
        plan, table, planned = d.item
        if table is not None:
            return d
        sort_by = settings(plan.table.name).sort_by
        if not set(sort_by) <= set(d.schema.fieldNames()):
            return None
        keys = d.changes.keys if d.changes is not None else ()
        staged = ctx.catalog.stage(
            plan.table, d.schema, settings(plan.table.name).properties, keys, sort_by,
            partition_fields(settings(plan.table.name)),
        )  # fmt: skip
        if staged is None:
            return None
        return replace(d, item=(plan, staged, planned), schema=ctx.catalog.spark_schema(staged), staged=True)

    found = ctx.tables.map(items, stage)
    return [d for d in found if d is not None], [d.item for d, f in zip(items, found, strict=True) if f is None]


def _create(ctx: BatchContext, d: DirectItem) -> JavaObject | None:
    """The table the direct job wrote files for: a staged one created now, at its staged location
    (when another writer created it meanwhile, that table); None when that table's location or
    field ids are not those the files were written with."""
    plan, table, _ = d.item
    if not d.staged:
        return table
    assert table is not None
    settings = ctx.config.tables.settings_for(plan.table.name)
    made = ctx.catalog.create(
        plan.table,
        d.schema,
        settings.properties,
        partition_by=partition_fields(settings),
        key_columns=d.changes.keys if d.changes is not None else (),
        sort_by=settings.sort_by,
        location=str(table.location()),
    )
    if not ctx.catalog.same_layout(made, table):
        log.warning(
            "table %s: created elsewhere or with other field ids than staged (another writer?); the files written "
            "for it are not committed", plan.table,
        )  # fmt: skip
        return None
    return made


def direct_failed(items: list[DirectItem], read: list[PartitionRange], batch_id: int, e: BaseException) -> WriteError:
    """The error that ends a batch whose direct job failed: its tables, the offsets it read, the
    cause in one line, and what to do."""
    names = ", ".join(str(d.item[0].table) for d in items[:5])
    switch = "decode.direct_avro" if any(isinstance(d.decoder, DirectAvro) for d in items) else "decode.direct_json"
    if len(items) > 5:
        names += f" and {len(items) - 5} more"
    where = ", ".join(f"{r.tp} offsets {r.first_offset}-{r.last_offset}" for r in read[:5])
    if len(read) > 5:
        where += f" and {len(read) - 5} more topic-partitions"
    return WriteError(
        f"batch {batch_id}: writing tables {names} in one pass failed ({where}): {error_cause(e)[:500]}. Nothing "
        f"of this batch was committed; the job runs it again on restart. If it fails again the same way, set "
        f"{switch}: false to decode these tables through Spark, and report the records"
    )


def _direct_table(
    ctx: BatchContext, targets: Targets, d: DirectItem, read: list[PartitionRange], batch_id: int, query_id: str
) -> DirectTable:
    plan, table, _ = d.item
    assert table is not None
    arrow_schema = table_arrow_schema(ctx, table)
    keys = d.changes.keys if d.changes is not None else ()
    fields = tuple(ctx.catalog.partition_fields(table))
    task = WriteTask(
        table=str(plan.table),
        arrow_schema=arrow_schema,
        data_location=data_location(table),
        file_prefix=f"{query_id[:8]}-{batch_id:08d}",
        batch_id=batch_id,
        storage=ctx.storage,
        target_file_size=ctx.config.tables.target_file_size_bytes,
        partition_columns=len(fields),
        delete_schema=pa.schema([arrow_schema.field(k) for k in keys]) if keys else None,
        order_columns=len(_ORDER) + bool(d.changes.order_by) if d.changes is not None else 0,
    )
    mine = own_ranges(plan, targets.ranges[plan.table])
    takes = {(r.tp.topic, r.tp.partition): (r.first_offset, r.last_offset) for r in mine}
    return DirectTable(
        task, d.decoder, takes, takes_all=_spans(mine) == _spans(read), changes=d.changes, partition_by=fields
    )


def _spans(ranges: Iterable[PartitionRange]) -> set[tuple[TopicPartition, int, int]]:
    return {(r.tp, r.first_offset, r.last_offset) for r in ranges}


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
        # JSON: the rows are gathered a record at a time; Avro: decoded a batch at a time.
        self.rows = DirectRows(table.decoder) if not isinstance(table.decoder, DirectAvro) else None
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
        """Changes decoded with their Kafka coordinates before the table's columns (`_ORDER`);
        False when one would not be applied (no key, an unknown operation): the table is declined."""
        spec = self.table.changes
        assert spec is not None
        coordinates = len(_ORDER)  # by position: a table may have a column named offset too
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
            changes.OP,
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
        task's last rows) are there. Raises pyarrow's error for a value Arrow refuses."""
        if self.table.changes is not None:
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
        if self.table.changes is not None:
            return False  # written once the task has every change (`_write_changes`)
        return self.rows.rows >= _CHUNK_ROWS if self.rows is not None else self._chunk_rows >= ROW_GROUP_ROWS

    def close(self) -> list[WrittenFile]:
        return self._files.close() if self._files is not None else []


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
        by_topic: dict[str, list[int]] = defaultdict(list)  # JSON tables
        for i, t in enumerate(tables):
            if not isinstance(t.decoder, DirectAvro):
                for topic in sorted({topic for topic, _ in t.takes}):
                    by_topic[topic].append(i)
        avro = [i for i, t in enumerate(tables) if isinstance(t.decoder, DirectAvro)]
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
        written = []
        keys: list[tuple[int, bytes]] = []
        for (i, out), files in zip(list(outs.items()), done, strict=True):
            if files is None:
                declined.add(i)
            else:
                written += [(i, f) for f in files]
                keys += [(i, out.fingerprints)] if out.fingerprints is not None else []
        if written:
            faults.maybe_kill_worker("executor-write", batch_id)
            faults.maybe_kill_executor("executor-lost", batch_id)
        yield from _results(written, sorted(declined), keys)

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
            if first <= offset <= last and not out.rows.add(value):
                decline(i)


def _take(
    batches: Iterator[pa.RecordBatch], outs: dict[int, _TableOut], tables: Sequence[DirectTable],
    by_topic: Mapping[str, list[int]], avro: list[int], decline: Any,
) -> None:  # fmt: skip
    """Every record of `batches` into the tables that take it (their rows, flushed to files as they fill)."""
    json = sorted({i for found in by_topic.values() for i in found})
    alone = json[0] if len(json) == 1 and tables[json[0]].takes_all else None
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
    carry = pa.Table.from_batches([batch.select(list(_ORDER))]) if out.table.changes is not None else None
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


def _results(
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
