"""A table's offsets kept readable after a maintenance commit, on catalogs that serve a table's
current snapshot only.

The offsets are read from the newest snapshot that carries them along the current snapshot's
ancestry (snapshot_offsets.py); a compaction, a removal of dangling deletes or a manifest rewrite
carries none and is walked past. Project Nessie serves a table's metadata with its current snapshot
alone (no parent id, no older snapshot: the history is Nessie's commit log): after such a commit
the table would look as if it held no offsets until the job's next commit, and a replay in that
window (a crash, a lost checkpoint) would add records again.

So when the offsets are not readable after a maintenance commit, an empty snapshot is committed on
it that carries the offsets read before it (the summary properties of the job's own commits). It
is committed only directly on the maintenance snapshot (`CurrentIs`, checked inside every attempt
of the commit: Iceberg would otherwise re-apply it on top of a newer commit), and only when the
maintenance snapshot was itself committed directly on the snapshot the offsets were read for (its
sequence number is the next one), or on a commit of the job's whose offsets the job's own
maintenance knows (Iceberg re-applies a compaction on top of the commits that landed meanwhile).
Otherwise (another client's commit beneath) it is logged, and the job's next plan waits for
offsets it cannot read, then refuses (`committed_offsets`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from py4j.protocol import Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

from icesink.errors import OffsetsError
from icesink.iceberg import ancestry
from icesink.iceberg.jvm import JavaObject
from icesink.model import Offsets

log = logging.getLogger(__name__)

MAINTENANCE_KEY = "icesink.maintenance"  # what a maintenance snapshot of icesink did
MARKER = "offsets"
# How long a table's offsets are waited for behind a rewrite, on a catalog without history.
# A marker follows its rewrite within a second; the wait only runs out on a rewrite another client
# made, where the job stops with OffsetsError.
_HIDDEN_ROUNDS, _HIDDEN_WAIT_S = 50, 0.2


# The icesink properties of the job's commit of a sequence number, when the job made it (the job's
# own maintenance knows its commits; `icesink maintain` does not).
JobCommits = Callable[[int], "Mapping[str, str] | None"]


@dataclass(frozen=True)
class Before:
    """The table before a maintenance commit: its current snapshot, and the offsets it holds."""

    snapshot_id: int
    sequence_number: int
    summary: dict[str, str]  # icesink's properties of the newest offset-bearing snapshot


def committed_offsets(table: JavaObject, last: JavaObject | None = None) -> Offsets:
    """The table's offsets (ancestry.committed_offsets). Where the catalog serves the current
    snapshot only and it is a rewrite: those of `last` (the job's own last commit to the table)
    when the rewrite was committed directly on it (the next sequence number); else the marker that
    carries them again follows within moments: waited for (the table refreshed meanwhile). Raises
    OffsetsError when it does not come."""
    for round_ in range(_HIDDEN_ROUNDS):
        found = ancestry.newest_offsets(ancestry.of_table(table))
        if found is not None:
            return found.offsets
        current = table.currentSnapshot()
        if not hidden(current):
            return {}
        if last is not None and int(current.sequenceNumber()) == int(last.sequenceNumber()) + 1:
            beneath = _offsets_of(last)
            if beneath is not None:
                log.info(
                    "table %s: its offsets are those of the job's commit %s, beneath rewrite %s (served alone)",
                    table.name(), last.snapshotId(), current.snapshotId(),
                )  # fmt: skip
                return beneath
        if round_ == 0:
            log.info(
                "table %s: its offsets are hidden behind rewrite %s (served alone); waiting for the snapshot "
                "that carries them again", table.name(), current.snapshotId(),
            )  # fmt: skip
        time.sleep(_HIDDEN_WAIT_S)
        table.refresh()
    raise OffsetsError(
        f"table {table.name()}: its offsets cannot be read: the catalog serves its current snapshot only, a "
        f"rewrite that carries none (snapshot {table.currentSnapshot().snapshotId()}: a compaction by another "
        "client, or one of icesink's that met a commit it could not place). Nothing was committed. Compact this "
        "table with the job's own maintenance or `icesink maintain` only: they carry its offsets"
    )


def _offsets_of(snapshot: JavaObject) -> Offsets | None:
    found = ancestry.newest_offsets([snapshot])
    return found.offsets if found is not None else None


def hidden(current: JavaObject | None) -> bool:
    """Whether a table whose walk found no offsets may hold some all the same: its current snapshot,
    served alone (no parent) though not its first, is a rewrite."""
    return (
        current is not None
        and current.parentId() is None
        and int(current.sequenceNumber()) > 1
        and str(current.operation()) == "replace"
    )


def before(table: JavaObject, job_commits: JobCommits | None = None) -> Before | None:
    """The table's state to carry over a maintenance commit; None when it holds no offsets. A
    rewrite served alone whose marker is missing (an earlier step's marker not placed) holds those
    of the job's commit directly beneath it, where the job knows that commit."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None:
        return None
    found = ancestry.newest_offsets(ancestry.of_table(table))
    summary: Mapping[str, str] | None = found.summary if found is not None else None
    if summary is None and job_commits is not None and hidden(current):
        summary = job_commits(int(current.sequenceNumber()) - 1)
    if not summary:
        return None
    return Before(int(current.snapshotId()), int(current.sequenceNumber()), dict(summary))


def keep_visible(
    spark: SparkSession, table: JavaObject, was: Before, name: str, job_commits: JobCommits | None = None
) -> bool:
    """After a maintenance commit on `table` (its state before: `was`): commits the offsets marker
    when the offsets are no longer readable. Whether it committed one."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None or int(current.snapshotId()) == was.snapshot_id:
        return False  # the step committed nothing
    if ancestry.newest_offsets(ancestry.of_table(table)) is not None:
        return False  # readable: the catalog serves the ancestry
    sequence = int(current.sequenceNumber())
    carried: Mapping[str, str] | None = was.summary if sequence == was.sequence_number + 1 else None
    if carried is None and job_commits is not None:
        carried = job_commits(sequence - 1)  # a commit of the job landed between: its offsets
    if not carried:
        log.warning(
            "table %s: the catalog serves its current snapshot only, and a commit the job did not make landed "
            "before the maintenance's: its offsets are not readable until the job's next commit", name,
        )  # fmt: skip
        return False
    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    marker = table.newFastAppend()
    for key, value in carried.items():
        marker.set(key, value)
    marker.set(MAINTENANCE_KEY, MARKER)
    marker.validateWith(CurrentIs(int(current.snapshotId())))
    try:
        marker.commit()
    except Py4JJavaError as e:
        if "ValidationException" not in str(e.java_exception.getClass().getName()):
            raise
        # A commit of the job landed first: it carries the offsets (from the job's own plan).
        log.info("table %s: the offsets marker was not needed: another commit landed first", name)
        return False
    log.info("table %s: the catalog serves its current snapshot only: its offsets carried past the maintenance", name)
    return True


class CurrentIs:
    """SnapshotAncestryValidator: the marker goes directly on the maintenance snapshot, or nowhere."""

    def __init__(self, snapshot_id: int) -> None:
        self._id = snapshot_id

    def validate(self, ancestors: JavaObject) -> bool:
        first = next(ancestry.each(ancestors), None)
        return first is not None and int(first.snapshotId()) == self._id

    def errorMessage(self) -> str:  # noqa: N802 (the Java interface's name)
        return "icesink: a commit landed on the maintenance snapshot first"

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.iceberg.SnapshotAncestryValidator"]
