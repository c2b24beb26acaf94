"""The one-pass write of plain JSON and plain Avro tables, the driver's side: steps 2 and 4 in one
Spark job for all of them. What its tasks do is tasks/one_pass.py.

Spark's decoder costs a table a decode plan (a hundred milliseconds of the driver, which a batch
routed to many tables pays many times: a Debezium-style capture of a whole database) and runs in
the JVM, whose rows then cross to the Python writer through Arrow. A table whose records are plain
JSON objects of simple columns (tasks/decode_json.py) or Confluent-framed Avro of flat records
(tasks/decode_avro.py) needs none of it: ONE job reads the batch's records of every such table,
and its Python tasks route the records to their tables, decode them and write the tables' Parquet
files, returning descriptors as the usual writer does (tasks/files.py). The commit is the same.

The direct decoders take only records they are sure of. A record Spark's path would make a dead
letter of beyond doubt (tasks/dead_letters.py) becomes one (batch/direct_letters.py) and its table
stays here. When a decoder declines a record, the whole table's share of the batch goes the usual
way instead (Spark's decoder with the table's shape, a second pass for new columns or schema ids,
dead letters) and the files the direct job wrote for that table are never committed (orphans, as
after a failed write, which `icesink maintain` removes); but a table declined for records of
writer schemas it was not planned with (Avro) or of fields it lacks (plain JSON) is evolved and
written again in one pass first (batch/direct_rounds.py). What the tasks report: batch/direct_outcome.py.

Which tables it takes, and with which decoder: batch/direct_tables.py. A table that does not exist
yet is staged first and created once its files are written: batch/direct_staging.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.batch.context import BatchContext
from icesink.batch.direct_avro import header_columns
from icesink.batch.direct_item import DirectItem
from icesink.batch.direct_json import Item
from icesink.batch.direct_letters import letter_records
from icesink.batch.direct_outcome import Outcome, direct_failed, outcome, why_declined
from icesink.batch.direct_staging import create, stage
from icesink.batch.route import Targets
from icesink.batch.route_guess import RouteGuess
from icesink.batch.sources import own_ranges, read_ranges
from icesink.batch.work import TableWork
from icesink.batch.write import Written, data_location, table_arrow_schema
from icesink.config import ErrorPolicy
from icesink.iceberg.jvm import JavaObject
from icesink.kafka import reader
from icesink.model import PartitionRange, TopicPartition, WrittenFile
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.files import (
    WriteTask,
)
from icesink.tasks.json_shape import ShapedJson
from icesink.tasks.one_pass import DIRECT_DDL, direct_fn, reading_fn
from icesink.tasks.route_judges import Judging, TopicValues
from icesink.tasks.table_out import ORDER, DirectTable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retry:
    """A table the direct job declined that a second may take: with `frames`, an Avro table whose
    records carry those writer schemas; `whole`, a table of changes whose keys had changes in
    topic-partitions that two of its tasks read (one task then reads them all); with `older`, a
    table of changes with changes below its order floor, the least of them `older` (its tasks then
    get the rows the table holds above it); else a plain JSON table."""

    item: Item
    frames: frozenset[bytes] = frozenset()
    whole: bool = False
    older: int | None = None


@dataclass(frozen=True)
class DirectWritten:
    """What the direct job did: the tables it wrote, those it declined, and the dead letters of
    the ones it wrote (records with ERROR, as batch/dead_letters.py takes them)."""

    written: list[Written]
    declined: list[Item]
    letters: list[tuple[str | Column, DataFrame]]
    # With a guess of the batch's routing (batch/route_guess.py): what the tasks found of its
    # topics (None: not judged), and why that refutes the guess (then nothing was written).
    routing: Mapping[str, TopicValues] | None = None
    refuted: str | None = None


def write_once(
    ctx: BatchContext, targets: Targets, items: list[DirectItem], ranges: list[PartitionRange], batch_id: int,
    query_id: str, learn: bool = True, guess: RouteGuess | None = None, one_task: bool = False,
) -> tuple[DirectWritten, list[Retry]]:  # fmt: skip
    """One direct job for `items`: what it wrote and declined, and (with `learn`) the tables it
    declined that a second job may take (batch/direct_rounds.py): Avro tables whose records carry
    writer schemas they were not given (those schemas' frames), tables of changes whose keys two
    tasks wrote or that hold changes below their order floor, and plain JSON tables (a record of a
    new field, or of a wider type; a new table's sample did not have it).
    With `guess`, its tasks also route the guessed topics' records (batch/route_guess.py): a guess
    they refute leaves nothing written (no table created), and the tables of values they did not
    meet are left out. With `one_task`, one task reads every record of `items`."""
    unjudged = guess.refuted(None) if guess is not None else None
    if not items:
        return DirectWritten([], [], [], refuted=unjudged), []
    items, unstaged = stage(ctx, items)
    if not items:
        return DirectWritten([], unstaged, [], refuted=unjudged), []
    found = _run(ctx, targets, items, ranges, batch_id, query_id, guess, one_task)
    if guess is not None:
        refuted = guess.refuted(found.routing)
        if refuted is not None:
            return DirectWritten([], [], [], found.routing, refuted), []
        assert found.routing is not None
        unmet = guess.unmet(found.routing, targets)
        kept = [i for i, d in enumerate(items) if d.item[0].table not in unmet]
        items, found = [items[i] for i in kept], found.only(kept)
    if found.unread:
        log.warning(
            "batch %d: the one-pass job's tasks could not read Kafka with librdkafka (see the executors' log); "
            "Spark's source reads its tables' records", batch_id,
        )  # fmt: skip
    done, new = _sorted_out(ctx, items, found, learn, batch_id)
    done.declined[:0] = unstaged
    return done, new


def _run(
    ctx: BatchContext, targets: Targets, items: list[DirectItem], ranges: list[PartitionRange], batch_id: int,
    query_id: str, guess: RouteGuess | None, one_task: bool = False,
) -> Outcome:  # fmt: skip
    """The job itself, and what its tasks report."""
    # A guessed topic's records are read whole: the tasks judge each of them.
    read = covering([*(r for d in items for r in own_ranges(d.item[0], targets.ranges[d.item[0].table])),
                     *(guess.ranges if guess is not None else ())])  # fmt: skip
    tables = ctx.tables.map(items, lambda d: _direct_table(ctx, targets, d, read, batch_id, query_id))
    avro = any(isinstance(d.decoder, DirectAvro) for d in items)
    judging = guess.judging if guess is not None else None
    try:
        rows = _job(ctx, targets, tables, read, ranges, avro, batch_id, judging, one_task).collect()
    except Exception as e:
        raise direct_failed(items, read, batch_id, e) from e
    return outcome(rows, len(items))


def _sorted_out(
    ctx: BatchContext, items: list[DirectItem], found: Outcome, learn: bool, batch_id: int
) -> tuple[DirectWritten, list[Retry]]:
    """The tables written (a staged one created now), those declined, and those a second job may take."""
    done = [i for i in range(len(items)) if i not in found.declined]
    made = dict(zip(done, ctx.tables.map([items[i] for i in done], lambda d: create(ctx, d)), strict=True))
    written: list[Written] = []
    others: list[Item] = []
    new: list[Retry] = []
    for i, d in enumerate(items):
        table = made.get(i)
        # Spark's path creates a staged table (or finds it, made meanwhile) as for any new table.
        item = (d.item[0], None, d.item[2]) if d.staged else d.item
        if table is not None:
            written.append(_written(ctx, d, table, found.files[i]))
        # An Avro table of field-routed topics is not evolved for the writer schemas of its topics'
        # records: other tables' too (a JSON one is, for the columns of its own: direct_json.py).
        elif learn and d.route is None and i in found.frames and isinstance(d.decoder, DirectAvro):
            new.append(Retry(item, found.frames[i]))
        elif learn and i in found.shared and not (found.unread or i in found.too_many):
            new.append(Retry(item, whole=True))
        elif learn and i in found.older:
            new.append(Retry(item, older=found.older[i]))
        elif learn and _plain_json(d) and not (found.unread or i in found.too_many):
            new.append(Retry(item))
        else:
            log.info(
                "batch %d: table %s: %s; its records go through Spark's decoder", batch_id, d.item[0].table,
                why_declined(d, i, found),
            )  # fmt: skip
            others.append(item)
    # A table of field-routed topics: its tasks' letters are of records the routing pass made dead
    # letters of already (every record Spark's decoder does not decode), or that the rule skips.
    letters = {
        str(d.item[0].table): found.letters[i]
        for i, d in enumerate(items)
        if made.get(i) and i in found.letters and d.route is None
    }
    return DirectWritten(written, others, letter_records(ctx, letters), found.routing), new


def _plain_json(d: DirectItem) -> bool:
    """Whether `d` is a table of plain JSON records (no envelope, no Connect schemas)."""
    return isinstance(d.decoder, tuple | ShapedJson)


def _written(ctx: BatchContext, d: DirectItem, table: JavaObject, files: list[WrittenFile]) -> Written:
    plan, _, planned = d.item
    settings = ctx.config.tables.settings_for(plan.table.name)
    work = TableWork(plan, table, d.schema, None, settings, changes=d.changes, planned=planned)
    if isinstance(d.decoder, DirectAvro):
        # Every record carried one of these schemas (a superset of those it carried: the next
        # batch plans with them all, as the registry's latest would be planned otherwise).
        frames = [w.frame for w in d.decoder.writers]
        ctx.seen.learn("value", {topic: frames for topic in plan.topics})
    if d.key is not None and isinstance(d.key.decoder, DirectAvro):
        frames = [w.frame for w in d.key.decoder.writers]
        ctx.seen.learn("key", {topic: frames for topic in plan.topics})
    return Written(work, files, bad=0, pending=0, refs=[])


# See `task_count`: at about 200,000 records a second per core, 10,000 records take ~50 ms.
RECORDS_PER_TASK = 10_000


def _job(
    ctx: BatchContext, targets: Targets, tables: list[DirectTable], read: list[PartitionRange],
    ranges: list[PartitionRange], avro: bool, batch_id: int, judging: Judging | None, one_task: bool = False,
) -> DataFrame:  # fmt: skip
    """The one-pass job: its Python tasks read `read` from Kafka themselves (librdkafka,
    `kafka.direct_read`), or take the records from Spark's Kafka source."""
    spark = targets.batch.sparkSession
    cores = ctx.spark.sparkContext.defaultParallelism
    n_tasks = 1 if one_task else task_count(sum(r.records for r in read), cores)
    librdkafka = ctx.librdkafka
    headers = header_columns(avro, any(isinstance(t.key_decoder, DirectAvro) for t in tables))
    if librdkafka is not None:
        # A table of changes reduces each key's in one task: whole topic-partitions to a task.
        shares = reader.split(read, n_tasks, whole=any(t.changes is not None for t in tables))
        # One task per share, its index the task's one row (a DataFrame of a Python list took twice as long).
        tasks = spark.range(0, len(shares), 1, len(shares))
        log.info(
            "batch %d: the one-pass job reads %d record(s) of %d topic-partition(s) with librdkafka in %d task(s)",
            batch_id, sum(r.records for r in read), len(read), len(shares),
        )  # fmt: skip
        return tasks.mapInArrow(reading_fn(tables, batch_id, shares, librdkafka, headers, judging), DIRECT_DDL)
    if _spans(read) == _spans(ranges):
        source: DataFrame = targets.source  # the batch Spark planned: no Kafka read of our own to plan
    else:
        source = read_ranges(spark, ctx.config, read)
    columns = [F.col(c) for c in ("topic", "partition", "offset", "value")]
    if any(t.key_column is not None for t in tables):
        columns.append(F.col("key"))
    for column, header in headers.items() if "headers" in source.columns else ():
        # The first such header's value, not the headers: Spark's Arrow hand-off of an array of
        # structs per record took 4.5 s per 300,000 records.
        at = F.array_position(F.col("headers.key"), header)
        columns.append(F.when(at > 0, F.element_at(F.col("headers.value"), at.cast("int"))).alias(column))
    # A few tasks for the whole batch, not one per topic-partition (a task per table-sized share
    # costs more than the share).
    source = source.select(*columns).coalesce(n_tasks)
    return source.mapInArrow(direct_fn(tables, batch_id, judging), DIRECT_DDL)


def task_count(records: int, cores: int) -> int:
    """Tasks for a one-pass job of `records`: one per core, but none with fewer than
    `RECORDS_PER_TASK` (a task's fixed cost, a Python worker's round trip and an S3 upload, is
    worth paying only for a share that takes longer than that to decode and write; and each task
    writes its own files)."""
    return max(1, min(cores, records // RECORDS_PER_TASK))


def _direct_table(
    ctx: BatchContext, targets: Targets, d: DirectItem, read: list[PartitionRange], batch_id: int, query_id: str
) -> DirectTable:
    plan, table, _ = d.item
    assert table is not None
    arrow_schema = table_arrow_schema(ctx, table)
    keys = d.changes.keys if d.changes is not None else ()
    fields = tuple(ctx.catalog.partition_fields(table))
    # The tasks judge records only where bad records become dead letters.
    letters = ctx.config.decode.on_error is not ErrorPolicy.FAIL
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
    key = d.key
    return DirectTable(
        task, d.decoder, takes, takes_all=d.route is None and _spans(mine) == _spans(read), changes=d.changes,
        partition_by=fields, key_column=key.column if key is not None else None,
        key_decoder=key.decoder if key is not None else None, order_floor=d.order_floor, held=d.held,
        letters=letters, route=d.route,
    )  # fmt: skip


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
