"""A micro-batch's offset ranges, as Spark's Kafka source planned them: no Spark job, no scan.

The batch Spark hands to `foreachBatch` is an RDD whose lineage ends in the Kafka source's
`DataSourceRDD`; each of its partitions carries `KafkaBatchInputPartition`s with the resolved
range of one topic-partition (`fromOffset` inclusive, `untilOffset` exclusive; a topic-partition
may be split over several). Those ranges are exactly what the batch reads and what the snapshot's
next offsets must record: `untilOffset` also steps over transaction markers and compacted-away
offsets, which a scan of the records cannot see.

This reads Spark internals through py4j, so it checks what it finds and fails loudly rather than
guess: a lineage without the Kafka source is taken for an empty batch only when it reads local
collections without a row (how Spark plans a source without new offsets), or a look at the batch
confirms it has no record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame

from icesink.errors import UnsupportedSparkError
from icesink.model import PartitionRange, TopicPartition

_SOURCE_RDD = "org.apache.spark.sql.execution.datasources.v2.DataSourceRDD"
_KAFKA_PARTITION = "org.apache.spark.sql.kafka010.KafkaBatchInputPartition"
_LOCAL_RDD = "org.apache.spark.rdd.ParallelCollectionRDD"


def input_ranges(batch: DataFrame) -> list[PartitionRange]:
    """One range per topic-partition the batch reads (none for an empty batch), sorted."""
    sources, leaves = _source_rdds(batch._jdf.queryExecution().toRdd())
    found: list[tuple[str, int, int, int]] = []
    for rdd in sources:
        for part in rdd.partitions():
            inputs = part.inputPartitions()
            for i in range(inputs.size()):
                found.append(_kafka_range(inputs.apply(i)))
    if not sources and not _no_rows(leaves) and not batch.isEmpty():
        raise UnsupportedSparkError(
            "icesink reads each batch's offset ranges from Spark's Kafka source, and this batch's plan "
            "has none: this Spark version plans Kafka reads in a way icesink does not know. Nothing was "
            "committed; run a Spark version icesink supports (see the README)"
        )
    return merge_ranges(found)


def merge_ranges(found: Iterable[tuple[str, int, int, int]]) -> list[PartitionRange]:
    """(topic, partition, from, until) pieces merged to one range per topic-partition; empty ones dropped."""
    spans: dict[TopicPartition, tuple[int, int]] = {}
    for topic, partition, start, until in found:
        if until <= start:
            continue
        tp = TopicPartition(topic, partition)
        lo, hi = spans.get(tp, (start, until))
        spans[tp] = (min(lo, start), max(hi, until))
    return [PartitionRange(tp, lo, hi - 1, hi - lo) for tp, (lo, hi) in sorted(spans.items())]


def _source_rdds(rdd: Any) -> tuple[list[Any], list[Any]]:
    """The DataSourceRDDs in the lineage of `rdd`, and the lineage's other leaves (each once)."""
    sources, leaves, todo, seen = [], [], [rdd], set()
    while todo:
        r = todo.pop()
        if r.id() in seen:
            continue
        seen.add(r.id())
        if r.getClass().getName() == _SOURCE_RDD:
            sources.append(r)
            continue
        deps = r.dependencies()
        if deps.size() == 0:
            leaves.append(r)
        todo.extend(deps.apply(i).rdd() for i in range(deps.size()))
    return sources, leaves


def _no_rows(leaves: list[Any]) -> bool:
    """Whether the lineage's leaves are local collections without a row: how Spark plans a source
    that has nothing new (an empty local relation); told without running a job."""
    if not leaves:
        return False
    for leaf in leaves:
        if leaf.getClass().getName() != _LOCAL_RDD:
            return False
        if any(not part.values().isEmpty() for part in leaf.partitions()):
            return False
    return True


def _kafka_range(partition: Any) -> tuple[str, int, int, int]:
    name = partition.getClass().getName()
    if name != _KAFKA_PARTITION:
        raise UnsupportedSparkError(
            f"a batch reads from {name}, not Spark's Kafka source ({_KAFKA_PARTITION}); icesink reads Kafka only"
        )
    r = partition.offsetRange()
    tp = r.topicPartition()
    return str(tp.topic()), int(tp.partition()), int(r.fromOffset()), int(r.untilOffset())
