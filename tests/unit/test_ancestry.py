"""A table's offsets as the job reads them through Iceberg's Java API: the current snapshot's
ancestry (parent links), not every snapshot the table has. py4j proxies are stood in for."""

from __future__ import annotations

from icesink.iceberg import ancestry
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition
from tests.support.java import JavaIterable

TP0 = TopicPartition("t", 0)


class _Snapshot:
    def __init__(self, snapshot_id: int, parent: int | None, summary: dict[str, str]) -> None:
        self._id, self._parent, self._summary = snapshot_id, parent, summary

    def snapshotId(self) -> int:  # noqa: N802
        return self._id

    def parentId(self) -> int | None:  # noqa: N802
        return self._parent

    def summary(self) -> dict[str, str]:
        return self._summary


class _Table:
    def __init__(self, current: int | None, *snapshots: _Snapshot) -> None:
        self._by_id = {s.snapshotId(): s for s in snapshots}
        self._current = current

    def currentSnapshot(self) -> _Snapshot | None:  # noqa: N802
        return self._by_id[self._current] if self._current is not None else None

    def snapshot(self, snapshot_id: int) -> _Snapshot | None:
        return self._by_id.get(snapshot_id)


def offsets(n: int, batch: int) -> dict[str, str]:
    return codec.summary_properties({TP0: n}, "q", batch)


def test_the_walk_follows_parents_from_the_current_snapshot() -> None:
    table = _Table(
        3,
        _Snapshot(1, None, offsets(10, 1)),
        _Snapshot(2, 1, offsets(20, 2)),
        _Snapshot(3, 2, {"operation": "replace"}),  # a compaction
    )
    assert [s.snapshotId() for s in ancestry.of_table(table)] == [3, 2, 1]
    assert ancestry.committed_offsets(table) == {TP0: 20}
    found = ancestry.newest_offsets(ancestry.of_table(table))
    assert found is not None
    assert found.snapshot.snapshotId() == 2
    assert found.batch_id == 2


def test_a_snapshot_off_the_current_ancestry_does_not_count() -> None:
    # Snapshot 4 is newer but was rolled back: the current snapshot is 2, whose parent is 1.
    table = _Table(
        2,
        _Snapshot(1, None, offsets(10, 1)),
        _Snapshot(2, 1, {"operation": "replace"}),
        _Snapshot(4, 1, offsets(99, 9)),
    )
    assert ancestry.committed_offsets(table) == {TP0: 10}


def test_an_expired_parent_ends_the_walk_and_a_new_table_has_no_offsets() -> None:
    table = _Table(5, _Snapshot(5, 4, {"operation": "replace"}))  # parent 4 expired
    assert ancestry.committed_offsets(table) == {}
    assert ancestry.committed_offsets(_Table(None)) == {}


def test_each_walks_a_java_iterable() -> None:
    items = [_Snapshot(2, 1, {}), _Snapshot(1, None, {})]
    assert [s.snapshotId() for s in ancestry.each(JavaIterable(items))] == [2, 1]
    assert list(ancestry.each(JavaIterable([]))) == []
