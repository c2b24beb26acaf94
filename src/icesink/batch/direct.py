"""The one-pass write of plain JSON and plain Avro tables, the driver's side: steps 2 and 4 in one
Spark job for all of them. What its tasks do is tasks/one_pass.py.

Spark's decoder costs a table a decode plan (a hundred milliseconds of the driver, which a batch
routed to many tables pays many times: a Debezium-style capture of a whole database) and runs in
the JVM, whose rows then cross to the Python writer through Arrow. A table whose records are plain
JSON objects of simple columns (tasks/decode_json.py) or Confluent-framed Avro of flat records
(tasks/decode_avro.py) needs none of it: ONE job reads the batch's records of every such table,
and its Python tasks route the records to their tables, decode them and write the tables' Parquet
files, returning descriptors as the usual writer does (tasks/files.py). The commit is the same.

The direct decoders take only records they are sure of. When one declines a record, the whole
table's share of the batch goes the usual way instead (Spark's decoder with the table's shape, a
second pass for new columns or schema ids, dead letters) and the files the direct job wrote for
that table are never committed (orphans, as after a failed write, which `icesink maintain`
removes).

Which tables: values of no envelope, no Connect schemas and no decoded key, routed by topic into a
table partitioned or not (its tasks compute the partition values of its current spec,
tasks/partition_values.py): an append, upsert or changelog table (`_change_spec`: each task reads
whole topic-partitions and writes each key's last change of them, and the driver checks that no key
was written by two tasks, tasks/change_rows.py). JSON: a table whose columns are all longs,
doubles, strings, booleans or arrays of them, nullable but for the key columns
(`decode.direct_json`); for a table that does not exist yet, the columns Spark infers from a
sample of the batch (`_new_json_schema`). Avro: writer schemas (those
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StringType, StructType

from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.decode import VALUE
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.decode.records import change_spec
from icesink.batch.plan import TablePlan
from icesink.batch.route import Targets
from icesink.batch.sources import own_ranges, read_ranges
from icesink.batch.work import Planned, TableWork, partition_fields
from icesink.batch.write import CHANGES_PER_TASK, Written, data_location, error_cause, table_arrow_schema
from icesink.config import Envelope, KeyFormat, OrderScope, ValueFormat, WriteMode
from icesink.errors import ConfigError, WriteError
from icesink.iceberg.jvm import JavaObject
from icesink.kafka import reader
from icesink.model import PartitionRange, TopicPartition, WrittenFile
from icesink.schema.evolution import conflicts, merged
from icesink.tasks.change_rows import shared_keys
from icesink.tasks.decode_avro import DirectAvro, direct_avro, writer_struct
from icesink.tasks.decode_json import direct_columns
from icesink.tasks.files import (
    WriteTask,
    written_file,
)
from icesink.tasks.one_pass import DIRECT_DDL, NAMED, ORDER, UNREAD, DirectDecoder, DirectTable, direct_fn, reading_fn
from icesink.tasks.partition_values import supported

log = logging.getLogger(__name__)

Item = tuple[TablePlan, JavaObject | None, Planned]

# Records of each topic-partition a new JSON table's columns are inferred from (`_new_json_schema`).
SAMPLE_RECORDS = 1000


@dataclass(frozen=True)
class DirectItem:
    """A table the direct job writes: its item, its decoder, and its schema (for a table that does
    not exist yet, the one it is created with)."""

    item: Item
    decoder: DirectDecoder
    schema: StructType
    staged: bool = False  # a table that does not exist yet: `item`'s table is the staged one (`_staged`)
    changes: ChangeSpec | None = None  # an upsert or changelog table


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
    plan, _, planned = item
    config = ctx.config
    if ctx.key_decoder is not None or config.decode.key_format is not KeyFormat.NONE:
        return None
    if planned.keys is not None or plan.table not in targets.topic_routed:
        return None
    settings = config.tables.settings_for(plan.table.name)
    if settings.flatten_separator or settings.case_insensitive:
        return None
    if config.decode.format is ValueFormat.JSON and config.decode.direct_json:
        return _json_item(ctx, targets, item, settings.is_cdc)
    if config.decode.format is ValueFormat.AVRO and config.decode.direct_avro and planned.values is not None:
        found = _avro_item(ctx, item)
        return _with_changes(ctx, found) if found is not None and settings.is_cdc else found
    return None


def _json_item(ctx: BatchContext, targets: Targets, item: Item, cdc: bool) -> DirectItem | None:
    """A plain JSON table: an existing one with its own shape (the guess, made only for plain JSON,
    no envelope, no Connect schemas met, and tables that spell and nest columns as the records do:
    records.guess), a new one with the columns of a sample (`_new_json_schema`)."""
    plan, table, planned = item
    schema = planned.values if table is not None else _new_json_schema(ctx, targets, item)
    if schema is None:
        return None
    spec = _change_spec(ctx, plan, table, schema) if cdc else None
    if cdc and spec is None:
        return None
    columns = direct_columns(schema, spec.keys if spec is not None else ())
    return DirectItem(item, columns, schema, changes=spec) if columns is not None else None


def _new_json_schema(ctx: BatchContext, targets: Targets, item: Item) -> StructType | None:
    """A JSON table that does not exist yet: the columns Spark infers from the first
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
    return decoder.plain_columns(read_ranges(targets.batch.sparkSession, ctx.config, sample))


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


def _with_changes(ctx: BatchContext, found: DirectItem) -> DirectItem | None:
    """An Avro upsert or changelog table, when the one-pass job can write its changes (`_change_spec`).
    How many changes the job takes: `split_direct`."""
    plan, table, _ = found.item
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


@dataclass(frozen=True)
class Outcome:
    """What the one-pass job's rows say, per table index: its files, and why a table was declined."""

    files: Mapping[int, list[WrittenFile]]
    declined: frozenset[int]  # a record or value not taken, or all of them when Kafka was not read
    shared: frozenset[int]  # tables of changes whose keys were written by two tasks
    unread: bool  # a task could not read its records with librdkafka


def outcome(rows: Sequence[Any], tables: int) -> Outcome:
    """The job's `DIRECT_DDL` rows (collected), for a job of `tables` tables."""
    declined = {int(r.table) for r in rows if r.declined}
    fingerprints: dict[int, list[bytes]] = defaultdict(list)
    for r in rows:
        if r.keys is not None:
            fingerprints[int(r.table)].append(bytes(r.keys))
    shared = {i for i, found in fingerprints.items() if i not in declined and shared_keys(found)}
    unread = UNREAD in declined
    files: dict[int, list[WrittenFile]] = defaultdict(list)
    for r in rows:
        if not r.declined and r.keys is None:
            files[int(r.table)].append(written_file(r))
    every = set(range(tables)) if unread else declined | shared
    return Outcome(files, frozenset(every), frozenset(shared), unread)


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
    found = outcome(rows, len(items))
    if found.unread:
        log.warning(
            "batch %d: the one-pass job's tasks could not read Kafka with librdkafka (see the executors' log); "
            "Spark's source reads its tables' records", batch_id,
        )  # fmt: skip
    done = [i for i in range(len(items)) if i not in found.declined]
    made = dict(zip(done, ctx.tables.map([items[i] for i in done], lambda d: _create(ctx, d)), strict=True))
    written: list[Written] = []
    others = unstaged
    for i, d in enumerate(items):
        table = made.get(i)
        if table is None:
            log.info(
                "batch %d: table %s: %s; its records go through Spark's decoder", batch_id, d.item[0].table,
                _why(d, i, found),
            )  # fmt: skip
            # Spark's path creates a staged table (or finds it, made meanwhile) as for any new table.
            others.append((d.item[0], None, d.item[2]) if d.staged else d.item)
        else:
            written.append(_written(ctx, d, table, found.files[i]))
    return written, others


def _written(ctx: BatchContext, d: DirectItem, table: JavaObject, files: list[WrittenFile]) -> Written:
    plan, _, planned = d.item
    settings = ctx.config.tables.settings_for(plan.table.name)
    work = TableWork(plan, table, d.schema, None, settings, changes=d.changes, planned=planned)
    if isinstance(d.decoder, DirectAvro):
        # Every record carried one of these schemas (a superset of those it carried: the next
        # batch plans with them all, as the registry's latest would be planned otherwise).
        frames = [w.frame for w in d.decoder.writers]
        ctx.seen.learn("value", {topic: frames for topic in plan.topics})
    return Written(work, files, bad=0, pending=0, refs=[])


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
        return tasks.mapInArrow(reading_fn(tables, batch_id, shares, librdkafka, header), DIRECT_DDL)
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


def _why(d: DirectItem, i: int, found: Outcome) -> str:
    if found.unread:
        return "a task could not read its records with librdkafka"
    if i in found.shared:
        return "one of its keys has changes in topic-partitions that different tasks read"
    if i not in found.declined:
        return "the table as created does not fit the files written for it"
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
        order_columns=len(ORDER) + bool(d.changes.order_by) if d.changes is not None else 0,
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
