"""Fencing of table commits: a batch's snapshot lands only on the offsets it was planned with.

Checking the table's offsets before `commit()` is not enough. Iceberg applies a commit, and when
the catalog refuses it (another writer committed first) it refreshes the table and applies it
again on the new metadata, inside `commit()`. That re-application is where a second job running
by mistake, or a commit whose response was lost and whose HTTP request was sent again, would add
the batch a second time. So the check runs inside every attempt, through Iceberg's
`SnapshotAncestryValidator` (called with the ancestry the snapshot is about to be put on), and a
failure stops the retries. A compaction commits no offsets and so never fails the check.

The validator and the file keeper are Python objects that Spark's JVM calls back through py4j.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from icesink.iceberg import snapshot_offsets as codec
from icesink.model import Offsets

log = logging.getLogger(__name__)

# Iceberg puts this into its ValidationException ("Snapshot ancestry validation failed: ...").
REFUSED = "icesink: the table's offsets changed since the batch was planned"


def newest_offset_summary(summaries: Iterator[Mapping[str, str]]) -> Mapping[str, str] | None:
    """The summary of the newest snapshot that carries offsets (compactions carry none)."""
    for summary in summaries:
        if codec.OFFSETS_KEY in summary:
            return summary
    return None


def is_our_commit(summary: Mapping[str, str] | None, query_id: str, batch_id: int, offsets: Offsets) -> bool:
    """Whether `summary` is this very batch's commit: same query, same batch, same offsets. Used
    when a commit's outcome was unknown (lost response, retried request) to learn that it landed."""
    if summary is None:
        return False
    return (
        summary.get(codec.QUERY_ID_KEY) == query_id
        and summary.get(codec.BATCH_ID_KEY) == str(batch_id)
        and codec.from_summary(summary) == offsets
    )


def _summaries(snapshots: Any) -> Iterator[Mapping[str, str]]:
    it = snapshots.iterator()
    while it.hasNext():
        yield dict(it.next().summary())


class OffsetsUnchanged:
    """SnapshotAncestryValidator: the offsets on the ancestry must equal `expected`."""

    def __init__(self, expected: Offsets) -> None:
        self._expected = dict(expected)
        self.found: Offsets | None = None

    def validate(self, ancestors: Any) -> bool:
        summary = newest_offset_summary(_summaries(ancestors))
        self.found = codec.from_summary(summary) if summary is not None else {}
        return self.found == self._expected

    def errorMessage(self) -> str:  # noqa: N802 (the Java interface's name)
        return REFUSED

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.iceberg.SnapshotAncestryValidator"]


class KeepFiles:
    """`deleteWith` for our commits: Iceberg's clean-up after a failed commit deletes the manifests
    it wrote, and after a retried request whose first attempt did land those are the table's own.
    Files of a commit that truly failed are orphans instead, which `icesink maintain` removes."""

    def accept(self, path: str) -> None:
        log.debug("commit clean-up: keeping %s", path)

    class Java:
        implements: ClassVar[list[str]] = ["java.util.function.Consumer"]
