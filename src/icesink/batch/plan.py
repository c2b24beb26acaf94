"""Batch planning: which records of a micro-batch each table still needs.

The batch's offset ranges come from Spark (ranges.py), one `PartitionRange` per topic-partition; the
driver routes topics to tables (route.py), and for each table compares the ranges with the offsets
the table has committed. Records below a table's committed offset are already in it (a replay, a
lost checkpoint, a manual rewind): they are dropped before anything is written. `plan_table` and
`log_behind_table` are pure; the rest reads the catalog and Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from icesink.errors import OffsetsError, RoutingError
from icesink.kafka import admin
from icesink.model import PartitionRange, TableRef, TopicPartition, advance

if TYPE_CHECKING:
    from icesink.batch.context import BatchContext
    from icesink.iceberg.jvm import JavaObject


@dataclass(frozen=True)
class TablePlan:
    table: TableRef
    topics: tuple[str, ...]
    committed: Mapping[TopicPartition, int]
    # tp -> lowest offset still to write; only for tps the table already holds part of.
    keep_from: Mapping[TopicPartition, int]
    # The offsets to record with this batch's snapshot (committed ones carried forward).
    next_offsets: Mapping[TopicPartition, int]
    # The topic-partitions this batch carries for the table.
    batch_tps: tuple[TopicPartition, ...] = field(default=())
    skipped_tps: tuple[TopicPartition, ...] = field(default=())
    # The batch's offsets for the table: at most this many records (fewer in compacted or
    # transactional topics, whose offsets have gaps).
    records: int = 0

    @property
    def has_new_records(self) -> bool:
        return dict(self.next_offsets) != dict(self.committed)


def plan_table(table: TableRef, ranges: Iterable[PartitionRange], committed: Mapping[TopicPartition, int]) -> TablePlan:
    ranges_list = list(ranges)
    keep_from: dict[TopicPartition, int] = {}
    consumed: dict[TopicPartition, int] = {}
    skipped: list[TopicPartition] = []
    topics: set[str] = set()
    for r in ranges_list:
        topics.add(r.tp.topic)
        held = committed.get(r.tp)
        if held is not None and held > r.first_offset:
            keep_from[r.tp] = held
        if held is not None and held > r.last_offset:
            skipped.append(r.tp)
            continue
        consumed[r.tp] = r.last_offset + 1
    return TablePlan(
        table=table,
        topics=tuple(sorted(topics)),
        committed=dict(committed),
        keep_from=keep_from,
        next_offsets=advance(committed, consumed),
        batch_tps=tuple(sorted(r.tp for r in ranges_list)),
        skipped_tps=tuple(skipped),
        records=sum(r.records for r in ranges_list),
    )


def log_behind_table(
    committed: Mapping[TopicPartition, int], log_ends: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    """Topic-partitions whose Kafka log ends below the offset the table holds: the topic was
    deleted and recreated (or truncated), and its new records sit at offsets the table claims."""
    return sorted(tp for tp, end in log_ends.items() if end < committed.get(tp, 0))


def plan_tables(
    ctx: BatchContext, table_ranges: Mapping[TableRef, list[PartitionRange]]
) -> list[tuple[TablePlan, JavaObject | None]]:
    """Each routed table's plan (in table order) and the table as loaded, None if it does not exist."""
    if ctx.dead_letter_ref in table_ranges:
        topics = sorted({r.tp.topic for r in table_ranges[ctx.dead_letter_ref]})
        raise RoutingError(
            f"topics {topics} route to the dead-letter table {ctx.dead_letter_ref}; rename it "
            "(decode.dead_letter_table)"
        )
    refs = sorted(table_ranges)
    return ctx.tables.map(refs, lambda ref: load_and_plan(ctx, ref, sorted(table_ranges[ref], key=lambda r: r.tp)))


def load_and_plan(
    ctx: BatchContext, ref: TableRef, ranges: list[PartitionRange]
) -> tuple[TablePlan, JavaObject | None]:
    """The table's plan against the offsets it has committed; refuses a Kafka log that ends below them."""
    table = ctx.catalog.load(ref)
    committed = ctx.catalog.committed_offsets(table, ref) if table is not None else {}
    plan = plan_table(ref, ranges, committed)
    if plan.keep_from:
        # A replay, a reset, or a topic recreated under the same name: only Kafka can tell.
        ends = {tp: end for tp, (_, end) in admin.watermarks(ctx.config, plan.keep_from).items()}
        behind = log_behind_table(committed, ends)
        if behind:
            raise log_behind_error(ref, committed, ends, behind)
    return plan, table


def log_behind_error(
    ref: TableRef, committed: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
    behind: list[TopicPartition],
) -> OffsetsError:  # fmt: skip
    detail = "; ".join(f"{tp}: the table's next offset is {committed[tp]}, the log ends at {ends[tp]}" for tp in behind)
    topics = " ".join(f"--topic {t}" for t in sorted({tp.topic for tp in behind}))
    return OffsetsError(
        f"table {ref}: Kafka's log ends below the offsets the table holds ({detail}); the topic was "
        "deleted and recreated, or truncated, and its new records would be taken for ones the table "
        f"has. Nothing was committed. Rewind the table for it: icesink offsets reset {topics} "
        "--to-earliest --rewind"
    )


def keep_condition(keep_from: Mapping[TopicPartition, int]) -> Column:
    """Records at or above each topic-partition's committed offset (all of them where none is)."""
    if not keep_from:
        return F.lit(True)
    pairs: list[Column] = []
    for tp, off in keep_from.items():
        pairs += [F.lit(f"{tp.topic}:{tp.partition}"), F.lit(off)]
    floor = F.element_at(F.create_map(*pairs), F.concat_ws(":", F.col("topic"), F.col("partition").cast("string")))
    return F.col("offset") >= F.coalesce(floor, F.lit(0))
