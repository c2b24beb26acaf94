"""Batch planning: which records of a micro-batch each table still needs. Pure.

The driver aggregates the batch to one `PartitionRange` per topic-partition (a small result), routes
topics to tables, and for each table compares the ranges with the offsets the table has committed.
Records below a table's committed offset are already in it (a replay, a lost checkpoint, a manual
rewind): they are dropped before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from icesink.model import PartitionRange, TableRef, TopicPartition, advance


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
    )


def log_behind_table(
    committed: Mapping[TopicPartition, int], log_ends: Mapping[TopicPartition, int]
) -> list[TopicPartition]:
    """Topic-partitions whose Kafka log ends below the offset the table holds: the topic was
    deleted and recreated (or truncated), and its new records sit at offsets the table claims."""
    return sorted(tp for tp, end in log_ends.items() if end < committed.get(tp, 0))
