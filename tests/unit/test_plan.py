from __future__ import annotations

from icesink.batch.plan import log_behind_table, plan_table
from icesink.model import PartitionRange, TableRef
from icesink.model import TopicPartition as TP

T = TableRef("ns", "events")


def r(topic: str, p: int, first: int, last: int) -> PartitionRange:
    return PartitionRange(TP(topic, p), first, last, last - first + 1)


def test_new_table_takes_everything() -> None:
    plan = plan_table(T, [r("e.20240101", 0, 0, 9), r("e.20240101", 1, 0, 4)], {})
    assert plan.keep_from == {}
    assert plan.next_offsets == {TP("e.20240101", 0): 10, TP("e.20240101", 1): 5}
    assert plan.has_new_records
    assert plan.records == 15


def test_replayed_batch_is_skipped_entirely() -> None:
    committed = {TP("e", 0): 10}
    plan = plan_table(T, [r("e", 0, 0, 9)], committed)
    assert not plan.has_new_records
    assert plan.skipped_tps == (TP("e", 0),)
    assert plan.keep_from == {TP("e", 0): 10}


def test_partly_committed_range_keeps_only_the_tail() -> None:
    plan = plan_table(T, [r("e", 0, 0, 9), r("e", 1, 0, 9)], {TP("e", 0): 4, TP("other", 0): 77})
    assert plan.keep_from == {TP("e", 0): 4}
    # Offsets of topic-partitions not in this batch are carried forward untouched.
    assert plan.next_offsets == {TP("e", 0): 10, TP("e", 1): 10, TP("other", 0): 77}
    assert plan.batch_tps == (TP("e", 0), TP("e", 1))


def test_gaps_from_transaction_markers_are_positions_not_counts() -> None:
    # Offsets 0..9 with a commit marker at 5: 9 records, but the next offset is still 10.
    plan = plan_table(T, [PartitionRange(TP("e", 0), 0, 9, 9)], {})
    assert plan.next_offsets == {TP("e", 0): 10}


def test_a_log_that_ends_below_the_table_is_a_recreated_topic() -> None:
    tp0, tp1 = TP("events.20240101", 0), TP("events.20240101", 1)
    committed = {tp0: 60, tp1: 30}
    assert log_behind_table(committed, {tp0: 20, tp1: 30}) == [tp0]
    assert log_behind_table(committed, {tp0: 60, tp1: 45}) == []
    assert log_behind_table({}, {tp0: 5}) == []
