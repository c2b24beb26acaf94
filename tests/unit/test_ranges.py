from icesink.batch.ranges import merge_ranges
from icesink.model import PartitionRange, TopicPartition


def test_pieces_of_one_topic_partition_merge_and_empty_ones_drop() -> None:
    found = [("t", 0, 100, 150), ("t", 0, 150, 220), ("t", 1, 7, 7), ("s.20240101", 2, 0, 1)]
    assert merge_ranges(found) == [
        PartitionRange(TopicPartition("s.20240101", 2), 0, 0, 1),
        PartitionRange(TopicPartition("t", 0), 100, 219, 120),
    ]


def test_the_next_offset_is_the_exclusive_end_spark_planned() -> None:
    # A transaction marker or a compacted-away offset at the end: the table's next offset is still
    # where Kafka's next batch starts, the range's exclusive end.
    [r] = merge_ranges([("t", 0, 10, 13)])
    assert r.last_offset + 1 == 13
    assert merge_ranges([]) == []
