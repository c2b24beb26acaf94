"""Where each table's records of a micro-batch are read from.

A table that takes every topic-partition of the batch reads the batch Spark planned. A table that
takes only some of them (a batch routed to many tables: a Debezium capture of a whole database,
one topic per source table) reads its own share from Kafka, exactly its offset ranges (`assign`,
starting and ending offsets): filtering the shared batch instead would make each table's Spark job
run a task per topic-partition of the whole batch, N tables x N partitions. A source read more
than once (a decoder that looks at the records before parsing them, several tables on one shared
batch) is cached on its first read. `own_ranges` and `reads_twice` are pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from icesink.batch.context import BatchContext
from icesink.batch.plan import TablePlan, keep_condition
from icesink.batch.route import Targets
from icesink.batch.work import Planned
from icesink.config import Config
from icesink.kafka.source import range_options
from icesink.model import PartitionRange, TableRef


@dataclass
class Sources:
    records: dict[TableRef, DataFrame] = field(default_factory=dict)  # what each table reads
    persisted: list[DataFrame] = field(default_factory=list)  # to unpersist after the batch


def heads(ranges: Iterable[PartitionRange], records: int) -> list[PartitionRange]:
    """The first `records` records of each range (a sample of them)."""
    return [
        PartitionRange(r.tp, r.first_offset, last, last - r.first_offset + 1)
        for r in ranges
        for last in [min(r.last_offset, r.first_offset + records - 1)]
    ]


def own_ranges(plan: TablePlan, ranges: Iterable[PartitionRange]) -> list[PartitionRange]:
    """The table's ranges of the batch from the first offset it does not hold yet; topic-partitions
    it holds entirely are left out."""
    out = []
    for r in ranges:
        first = max(r.first_offset, plan.keep_from.get(r.tp, r.first_offset))
        if first <= r.last_offset:
            out.append(PartitionRange(r.tp, first, r.last_offset, r.last_offset - first + 1))
    return out


def reads_twice(ctx: BatchContext, planned: Planned) -> bool:
    """Whether a table's records are read twice in the common case: a side decoded without a guess
    by a decoder that scans first (registry ids, JSON inference), then parsed by the write."""
    if planned.values is None and ctx.decoder.scans:
        return True
    return ctx.key_decoder is not None and planned.keys is None and ctx.key_decoder.scans


def table_sources(
    ctx: BatchContext, targets: Targets, batch_tps: int, todo: list[tuple[TablePlan, Planned]], cached: bool
) -> Sources:
    """The records each table of `todo` (those with new records) reads; `batch_tps` is the number of
    topic-partitions in the batch; `cached`: the shared batch is cached already (field routing)."""
    out = Sources()
    shared: list[tuple[TablePlan, Planned]] = []
    for plan, planned in todo:
        mine = own_ranges(plan, targets.ranges[plan.table])
        if plan.table in targets.topic_routed and 0 < len(mine) < batch_tps:
            # In the batch's own session, as the tables read from the shared batch are.
            frame = read_ranges(targets.batch.sparkSession, ctx.config, mine)
            if reads_twice(ctx, planned):
                frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                out.persisted.append(frame)
            out.records[plan.table] = frame
        else:
            shared.append((plan, planned))
    if not shared:  # e.g. every table went the one-pass way: the shared batch is not planned at all
        return out
    source = targets.source
    if not cached and (len(shared) > 1 or any(reads_twice(ctx, planned) for _, planned in shared)):
        # Nothing has read the batch yet: every read below takes it from the cache.
        source = source.persist(StorageLevel.MEMORY_AND_DISK)
        out.persisted.append(source)
    for plan, _ in shared:
        out.records[plan.table] = source.where(targets.conditions[plan.table]).where(keep_condition(plan.keep_from))
    return out


def read_ranges(spark: SparkSession, config: Config, ranges: list[PartitionRange]) -> DataFrame:
    """A batch read from Kafka of exactly `ranges`, with the stream's connection settings."""
    reader = spark.read.format("kafka")
    for k, v in range_options(config, ranges).items():
        reader = reader.option(k, v)
    return reader.load()
