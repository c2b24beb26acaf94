"""The words every part of icesink shares: where a record came from (TopicPartition, offsets,
PartitionRange), where it goes (TableRef) and what a write produced (WrittenFile). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


Offsets = dict[TopicPartition, int]


def advance(committed: Mapping[TopicPartition, int], consumed: Mapping[TopicPartition, int]) -> Offsets:
    """The offsets after a commit: never moves a topic-partition backwards."""
    out = dict(committed)
    for tp, nxt in consumed.items():
        out[tp] = max(nxt, out.get(tp, 0))
    return out


@dataclass(frozen=True, order=True)
class TableRef:
    namespace: str
    name: str

    def qualified(self, catalog: str) -> str:
        """`catalog.namespace.name` as Spark and Iceberg's Spark3Util expect it."""
        return f"{catalog}.{self.namespace}.{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


@dataclass(frozen=True)
class PartitionRange:
    """What one topic-partition contributed to the batch."""

    tp: TopicPartition
    first_offset: int
    last_offset: int
    records: int


@dataclass(frozen=True)
class WrittenFile:
    """A file an executor wrote: data, or equality deletes over the table's key columns."""

    path: str
    record_count: int
    file_size: int
    content: str = "data"  # "data" | "deletes"
    partition: tuple[str | None, ...] = ()  # the partition values as Iceberg parses them from strings
    # The file's Parquet footer, serialized as a footer-only file (PAR1, footer, length, PAR1): the
    # commit takes the file's metrics from it instead of reading the footer back from storage.
    footer: bytes = b""


class OffsetsPlan(Protocol):
    """What a table's commit is fenced on and records (batch/plan.py's TablePlan is one): the
    offsets the batch was planned against, those its snapshot records, and the topic-partitions
    the batch carries for the table. A protocol, so the Iceberg edge needs nothing of the batch's steps."""

    @property
    def table(self) -> TableRef: ...

    @property
    def committed(self) -> Mapping[TopicPartition, int]: ...

    @property
    def next_offsets(self) -> Mapping[TopicPartition, int]: ...

    @property
    def batch_tps(self) -> Sequence[TopicPartition]: ...
