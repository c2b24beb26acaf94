"""Fencing of table commits: a batch's snapshot lands only on the offsets it was planned with.

Checking the table's offsets before `commit()` is not enough. Iceberg applies a commit, and when
the catalog refuses it (another writer committed first) it refreshes the table and applies it
again on the new metadata, inside `commit()`. That re-application is where a second job running
by mistake, or a commit whose response was lost and whose HTTP request was sent again, would add
the batch a second time. So the check runs inside every attempt, through Iceberg's
`SnapshotAncestryValidator` (called with the ancestry the snapshot is about to be put on), and a
failure stops the retries. A compaction commits no offsets and so never fails the check.

On a catalog that serves a table's current snapshot only (Nessie: no parent, no older snapshot),
a maintenance commit on top hides the offsets until the snapshot that carries them again follows
it (offsets_marker.py). A batch that commits in between would be refused for offsets that only
look changed; so a rewrite ("replace": no rows added, hence nobody's batch) that is the snapshot
the batch was planned on (the plan found the offsets beneath it: offsets_marker.committed_offsets),
or was committed directly on it (the next sequence number), holds the offsets planned with. Any
other rewrite served alone (the job's maintenance committed a compaction, its marker and another
rewrite since the plan) refuses the attempt: commit.py then waits for the marker that follows it
and commits on top when the offsets it carries are those planned with.

The validator and the file keeper are Python objects that Spark's JVM calls back through py4j.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from icesink.iceberg import ancestry
from icesink.model import Offsets

log = logging.getLogger(__name__)

# Iceberg puts this into its ValidationException ("Snapshot ancestry validation failed: ...").
REFUSED = "icesink: the table's offsets changed since the batch was planned"


class OffsetsUnchanged:
    """SnapshotAncestryValidator: the offsets on the ancestry must equal `expected`."""

    def __init__(self, expected: Offsets, planned: Any = None) -> None:
        self._expected = dict(expected)
        self._planned = planned  # the snapshot the batch was planned on (read only when needed)
        self.found: Offsets | None = None

    def validate(self, ancestors: Any) -> bool:
        found = ancestry.newest_offsets(ancestry.each(ancestors))
        current = next(ancestry.each(ancestors), None) if found is None else None
        if current is not None and self._rewrite_on_planned(current):
            log.info(
                "committing on rewrite %s, served without its ancestors: its offsets are those planned with",
                current.snapshotId(),
            )
            self.found = self._expected
            return True
        self.found = found.offsets if found is not None else {}
        return self.found == self._expected

    def _rewrite_on_planned(self, current: Any) -> bool:
        """Whether the newest snapshot is a rewrite served alone (an older one, when served, would
        have said the offsets) that is the planned snapshot or was committed directly on it."""
        if current is None or self._planned is None:
            return False
        if current.parentId() is not None or str(current.operation()) != "replace":
            return False
        if int(current.snapshotId()) == int(self._planned.snapshotId()):
            return True
        # Format v1 numbers every snapshot 0: no sequence says what lies between.
        planned = int(self._planned.sequenceNumber())
        return planned > 0 and int(current.sequenceNumber()) == planned + 1

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
