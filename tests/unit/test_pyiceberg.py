"""What the CLI shows of a table's offsets, read through PyIceberg (its snapshots stood in for)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from icesink.iceberg import pyiceberg
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TableRef, TopicPartition

TP0 = TopicPartition("t", 0)


def _snapshot(snapshot_id: int, parent: int | None, ms: int, summary: dict[str, str] | None) -> Any:
    return SimpleNamespace(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        timestamp_ms=ms,
        summary=SimpleNamespace(additional_properties=summary) if summary is not None else None,
    )


def _table(current: int | None, *snapshots: Any) -> Any:
    by_id = {s.snapshot_id: s for s in snapshots}
    return SimpleNamespace(
        current_snapshot=lambda: by_id.get(current) if current is not None else None,
        snapshot_by_id=by_id.get,
    )


def test_offsets_come_from_the_newest_offset_bearing_ancestor() -> None:
    table = _table(
        3,
        _snapshot(1, None, 1_790_000_000_000, codec.summary_properties({TP0: 10}, "q", 4)),
        _snapshot(2, 1, 1_790_000_001_000, codec.summary_properties({TP0: 20}, "q", 5)),
        _snapshot(3, 2, 1_790_000_002_000, {"operation": "replace", "total-records": "20"}),  # compaction
    )
    state = pyiceberg.state_of(TableRef("ns", "t"), table)
    assert state.offsets == {TP0: 20}
    assert (state.offsets_snapshot_id, state.batch_id) == (2, 5)
    assert state.offsets_committed_at == dt.datetime.fromtimestamp(1_790_000_001, tz=dt.UTC)
    assert state.last_commit_at == dt.datetime.fromtimestamp(1_790_000_002, tz=dt.UTC)
    assert state.rows == 20


def test_a_table_without_offsets_or_snapshots() -> None:
    compacted = _table(1, _snapshot(1, None, 1_790_000_000_000, None))
    state = pyiceberg.state_of(TableRef("ns", "t"), compacted)
    assert (state.offsets, state.offsets_snapshot_id, state.offsets_committed_at, state.batch_id) == (
        {},
        None,
        None,
        None,
    )
    empty = pyiceberg.state_of(TableRef("ns", "t"), _table(None))
    assert (empty.offsets, empty.last_commit_at, empty.rows) == ({}, None, 0)
