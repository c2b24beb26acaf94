"""A table's snapshots as Iceberg's Java API (through py4j) gives them, adapted to the offsets
reader: the current snapshot's ancestry newest first, and the table's offsets on it. The job's
planning, its commit and the commit fence all read a table's offsets here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.jvm import JavaObject
from icesink.iceberg.snapshot_offsets import OffsetsFound
from icesink.model import Offsets

# The summary properties icesink reads: fetched one by one, since copying a whole Java summary
# (a dozen of Iceberg's own counters) costs a py4j round trip per entry, at every commit.
_OURS = (codec.OFFSETS_KEY, codec.FORMAT_KEY, codec.QUERY_ID_KEY, codec.BATCH_ID_KEY)


def summary(snapshot: JavaObject) -> dict[str, str]:
    """icesink's properties of the snapshot's summary (the others are not read)."""
    props = snapshot.summary()
    offsets = props.get(codec.OFFSETS_KEY)
    if offsets is None:
        return {}  # a compaction, another writer's commit: nothing of ours
    found = {codec.OFFSETS_KEY: str(offsets)}
    for k in _OURS[1:]:
        v = props.get(k)
        if v is not None:
            found[k] = str(v)
    return found


def of_table(table: JavaObject) -> Iterator[JavaObject]:
    """The current snapshot, then its parent, and so on: the history the table's offsets are read from."""
    snap = table.currentSnapshot()
    while snap is not None:
        yield snap
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None


def each(snapshots: JavaObject) -> Iterator[JavaObject]:
    """The items of a java.lang.Iterable, such as the ancestry Iceberg hands a validator."""
    it = snapshots.iterator()
    while it.hasNext():
        yield it.next()


def newest_offsets(snapshots: Iterable[JavaObject]) -> OffsetsFound[JavaObject] | None:
    """The newest offset-bearing snapshot of `snapshots` (newest first)."""
    return codec.newest_offsets(snapshots, summary)


def committed_offsets(table: JavaObject) -> Offsets:
    """The table's offsets: those of its newest offset-bearing snapshot; empty when none has any."""
    found = newest_offsets(of_table(table))
    return found.offsets if found is not None else {}
