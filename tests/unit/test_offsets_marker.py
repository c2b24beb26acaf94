"""The offsets of a table whose catalog serves its current snapshot only (Nessie), read behind a
rewrite: iceberg/offsets_marker.py's reading and fence.py's commit check, on stand-ins for
Iceberg's Java snapshots (their methods only; the Java side is test_nessie's)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from icesink.errors import OffsetsError
from icesink.iceberg import offsets_marker
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.fence import OffsetsUnchanged
from icesink.model import TopicPartition

TP = TopicPartition("orders", 0)


@dataclass
class Snap:
    id: int
    sequence: int
    op: str
    parent: int | None = None
    props: Mapping[str, str] = field(default_factory=dict)

    def snapshotId(self) -> int:  # noqa: N802 (Java's names)
        return self.id

    def parentId(self) -> int | None:  # noqa: N802
        return self.parent

    def sequenceNumber(self) -> int:  # noqa: N802
        return self.sequence

    def operation(self) -> str:
        return self.op

    def summary(self) -> Mapping[str, str]:
        return self.props


def carrying(offset: int) -> dict[str, str]:
    return codec.summary_properties({TP: offset}, "query", 7)


class Ancestors:
    """A java.lang.Iterable of snapshots, newest first."""

    def __init__(self, *snaps: Snap) -> None:
        self._snaps = snaps

    def iterator(self) -> Any:
        it: Iterator[Snap] = iter(self._snaps)

        class _It:
            def __init__(self) -> None:
                self._next = next(it, None)

            def hasNext(self) -> bool:  # noqa: N802
                return self._next is not None

            def next(self) -> Snap:
                out, self._next = self._next, next(it, None)
                assert out is not None
                return out

        return _It()


class Table:
    """A table as a catalog without history serves it: its current snapshot alone."""

    def __init__(self, *served: Snap) -> None:
        self.served = list(served)  # what each refresh serves next, the last one kept
        self.refreshes = 0

    def currentSnapshot(self) -> Snap:  # noqa: N802
        return self.served[0]

    def snapshot(self, snapshot_id: int) -> Snap | None:
        return next((s for s in self.served[:1] if s.id == snapshot_id), None)

    def refresh(self) -> None:
        self.refreshes += 1
        if len(self.served) > 1:
            self.served.pop(0)

    def name(self) -> str:
        return "nessie.db.orders"


def test_a_rewrite_served_alone_hides_the_offsets_an_append_or_a_first_snapshot_does_not() -> None:
    assert offsets_marker.hidden(Snap(9, 5, "replace"))
    assert not offsets_marker.hidden(Snap(9, 5, "replace", parent=8)), "its parent is served: walked past"
    assert not offsets_marker.hidden(Snap(9, 5, "append")), "an append carries what it holds"
    assert not offsets_marker.hidden(Snap(9, 1, "replace")), "a table's first snapshot"
    assert not offsets_marker.hidden(None)


def test_the_offsets_beneath_a_rewrite_are_the_jobs_last_commit_when_the_rewrite_sits_on_it() -> None:
    last = Snap(8, 4, "append", props=carrying(300))
    rewrite = Snap(9, 5, "replace")
    assert offsets_marker.committed_offsets(Table(rewrite), last) == {TP: 300}


def test_a_rewrite_not_on_the_jobs_last_commit_is_waited_past_until_the_marker_comes(monkeypatch: Any) -> None:
    monkeypatch.setattr(offsets_marker, "_HIDDEN_WAIT_S", 0)
    last = Snap(8, 4, "append", props=carrying(300))
    rewrite = Snap(10, 6, "replace")  # another commit (sequence 5) came between
    marker = Snap(11, 7, "append", props=carrying(350))
    table = Table(rewrite, rewrite, marker)
    assert offsets_marker.committed_offsets(table, last) == {TP: 350}
    assert table.refreshes == 2


def test_offsets_that_never_come_back_stop_the_job_rather_than_read_as_none(monkeypatch: Any) -> None:
    monkeypatch.setattr(offsets_marker, "_HIDDEN_WAIT_S", 0)
    with pytest.raises(OffsetsError, match=r"nessie.db.orders: its offsets cannot be read.*snapshot 9"):
        offsets_marker.committed_offsets(Table(Snap(9, 5, "replace")))
    assert offsets_marker.committed_offsets(Table(Snap(9, 5, "append"))) == {}, "a table without offsets"


def test_the_fence_takes_a_rewrite_served_alone_on_the_planned_snapshot_for_the_planned_offsets() -> None:
    planned = {TP: 300}
    rewrite = Ancestors(Snap(9, 5, "replace"))
    on_it = OffsetsUnchanged(planned, Snap(8, 4, "append"))
    assert on_it.validate(rewrite)
    assert on_it.found == planned
    assert OffsetsUnchanged(planned, Snap(9, 5, "replace")).validate(rewrite), "planned on the rewrite itself"
    assert not OffsetsUnchanged(planned, Snap(7, 3, "append")).validate(rewrite), "a commit between: refused"
    added = Ancestors(Snap(9, 5, "overwrite"))
    assert not OffsetsUnchanged(planned, Snap(8, 4, "append")).validate(added), "rows added: not a rewrite"
    assert not OffsetsUnchanged(planned).validate(rewrite), "no planned snapshot known"


def test_the_fence_still_refuses_offsets_another_commit_moved() -> None:
    moved = Snap(9, 5, "append", props=carrying(320))
    assert not OffsetsUnchanged({TP: 300}, Snap(8, 4, "append")).validate(Ancestors(moved))
    assert OffsetsUnchanged({TP: 320}, Snap(8, 4, "append")).validate(Ancestors(moved))


def test_the_fence_reads_no_sequence_of_a_format_v1_table() -> None:
    """Format v1 numbers every snapshot 0: a rewrite served alone proves nothing of what is beneath."""
    assert not OffsetsUnchanged({TP: 300}, Snap(8, 0, "append")).validate(Ancestors(Snap(9, 0, "replace")))
    assert OffsetsUnchanged({TP: 300}, Snap(9, 0, "replace")).validate(Ancestors(Snap(9, 0, "replace"))), (
        "the planned snapshot itself"
    )


def test_a_rewrite_whose_marker_is_missing_carries_the_jobs_commit_beneath_it_to_the_next_step() -> None:
    rewrite = Snap(9, 5, "replace")
    was = offsets_marker.before(Table(rewrite), {4: carrying(300)}.get)
    assert was is not None
    assert (was.snapshot_id, was.sequence_number) == (9, 5)
    assert codec.from_summary(was.summary) == {TP: 300}
    assert offsets_marker.before(Table(rewrite), {3: carrying(300)}.get) is None, "not directly beneath"
    assert offsets_marker.before(Table(rewrite)) is None, "`icesink maintain` knows no commit of the job"
