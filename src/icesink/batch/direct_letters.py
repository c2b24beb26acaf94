"""The one-pass job's dead letters (tasks/dead_letters.py) as Spark's path's bad records: each
record read back from Kafka (its key, value, headers and timestamp byte for byte, as Spark's
source gives them), with the error its task gave it. batch/dead_letters.py writes them as it writes
Spark's path's, before the tables are committed, and a replay skips those the dead-letter table holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.batch.context import BatchContext
from icesink.batch.decode import ERROR
from icesink.batch.sources import read_ranges
from icesink.model import PartitionRange, TopicPartition
from icesink.tasks.dead_letters import Letter

_TARGET = "__icesink_target"
_LETTERS = (
    f"topic string, partition int, offset long, {_TARGET} string, stage string, error_class string, message string"
)


def letter_ranges(letters: Mapping[str, list[Letter]]) -> list[PartitionRange]:
    """One range per topic-partition, from its first letter's offset to its last."""
    spans: dict[TopicPartition, tuple[int, int]] = {}
    for found in letters.values():
        for x in found:
            tp = TopicPartition(x.topic, x.partition)
            first, last = spans.get(tp, (x.offset, x.offset))
            spans[tp] = (min(first, x.offset), max(last, x.offset))
    return [PartitionRange(tp, first, last, last - first + 1) for tp, (first, last) in sorted(spans.items())]


def letter_records(ctx: BatchContext, letters: Mapping[str, list[Letter]]) -> list[tuple[str | Column, DataFrame]]:
    """(the target table's column, the letters' records with ERROR) for `letters` (by target
    table), or nothing when there are none. Lazy: read when the dead letters are written."""
    if not any(letters.values()):
        return []
    rows = [(x.topic, x.partition, x.offset, target, x.stage, x.error_class, x.message) for target, found in
            letters.items() for x in found]  # fmt: skip
    judged = ctx.spark.createDataFrame(rows, _LETTERS)
    records = read_ranges(ctx.spark, ctx.config, letter_ranges(letters))
    joined = records.join(F.broadcast(judged), ["topic", "partition", "offset"])
    error = F.struct(F.col("stage"), F.col("error_class"), F.col("message")).alias(ERROR)
    return [(F.col(_TARGET), joined.select(*[F.col(c) for c in records.columns], F.col(_TARGET), error))]
