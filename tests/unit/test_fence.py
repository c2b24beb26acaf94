"""The commit fence's validator as Iceberg's JVM calls it (py4j proxies stood in for)."""

from __future__ import annotations

from icesink.iceberg import fence
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition
from tests.support.java import JavaIterable

TP0 = TopicPartition("t", 0)


class _Snapshot:
    def __init__(self, summary: dict[str, str]) -> None:
        self._summary = summary

    def summary(self) -> dict[str, str]:
        return self._summary


def ancestors(*summaries: dict[str, str]) -> JavaIterable[_Snapshot]:
    """The ancestry (newest first) Iceberg hands the validator."""
    return JavaIterable([_Snapshot(s) for s in summaries])


def summary(n: int, query: str = "q1", batch: int = 7) -> dict[str, str]:
    return codec.summary_properties({TP0: n}, query, batch)


def test_the_fence_passes_compactions_on_the_planned_offsets() -> None:
    guard = fence.OffsetsUnchanged({TP0: 10})
    assert guard.validate(ancestors({"operation": "replace"}, summary(10), summary(5)))
    assert guard.found == {TP0: 10}


def test_the_fence_stops_a_commit_when_another_writer_moved_the_offsets() -> None:
    guard = fence.OffsetsUnchanged({TP0: 10})
    assert not guard.validate(ancestors(summary(12, "zombie"), summary(10)))
    assert guard.found == {TP0: 12}
    assert guard.errorMessage() == fence.REFUSED


def test_the_fence_stops_a_commit_over_a_rewind() -> None:
    guard = fence.OffsetsUnchanged({TP0: 10})
    assert not guard.validate(ancestors(codec.summary_properties({TP0: 3}, "reset", -1), summary(10)))
    assert guard.found == {TP0: 3}


def test_a_new_table_has_no_offsets_to_move() -> None:
    assert fence.OffsetsUnchanged({}).validate(ancestors())
    assert fence.OffsetsUnchanged({}).validate(ancestors({"operation": "replace"}))
    assert not fence.OffsetsUnchanged({}).validate(ancestors(summary(1))), "another writer created it"


def test_files_are_kept_on_a_failed_commit() -> None:
    fence.KeepFiles().accept("s3://bucket/t/metadata/snap-1.avro")  # deletes nothing, raises nothing
