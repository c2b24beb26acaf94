"""The commit of one batch to one table through Iceberg's Java API: ONE snapshot holding the
batch's data files (an append) or its data and equality delete files (a RowDelta), whose summary
advances the table's offsets past the batch. It lands only on the offsets the batch was planned
with (the fence, fence.py); when the catalog's answer is lost, the table itself says whether the
batch landed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from py4j.protocol import Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

from icesink.errors import CommitError, CommitOutcomeUnknownError
from icesink.iceberg import ancestry, fence, offsets_marker
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.file_descriptions import Described
from icesink.iceberg.jvm import JavaObject
from icesink.model import Offsets, OffsetsPlan, TableRef, WrittenFile, advance
from icesink.runtime import faults

log = logging.getLogger(__name__)

_VALIDATION_FAILED = "org.apache.iceberg.exceptions.ValidationException"
_OUTCOME_UNKNOWN = "org.apache.iceberg.exceptions.CommitStateUnknownException"
_OTHERS_MOVED_ATTEMPTS = 3


@dataclass(frozen=True)
class CommitResult:
    table: TableRef
    snapshot_id: int
    files: int
    records: int
    delete_files: int = 0
    deletes: int = 0
    parent_id: int | None = None  # the snapshot it was committed on top of
    # The committed snapshot (Java), read only by whoever needs its summary (job/maintainer.py),
    # off the batch's path: its figures cost a py4j call each.
    snapshot: JavaObject | None = field(default=None, compare=False, repr=False)


def commit_files(
    spark: SparkSession,
    table: JavaObject,
    files: Sequence[WrittenFile],
    plan: OffsetsPlan,
    query_id: str,
    batch_id: int,
    key_columns: Sequence[str] = (),
    last: JavaObject | None = None,
) -> CommitResult:
    """ONE snapshot holding `files`, with the table's offsets advanced past this batch: an
    append, or a RowDelta when there are equality deletes (over `key_columns`). `last`: the job's
    own last commit to the table (its snapshot), where a catalog without history hides the offsets
    behind a rewrite (offsets_marker.committed_offsets).

    The batch was planned against `plan.committed`. If the table moved past those offsets for
    any topic-partition of this batch in the meantime (another job writing the same topics),
    committing would double rows: refuse instead.
    """
    ref = plan.table
    data = [f for f in files if f.content == "data"]
    deletes = [f for f in files if f.content == "deletes"]
    if deletes and not key_columns:
        raise CommitError(f"table {ref}: delete files without key columns")
    # The table as loaded while planning this batch: Iceberg refreshes it as it commits (one
    # request before its one commit request) and the fence checks the offsets there. It is
    # refreshed here only when another writer moved offsets of topic-partitions this batch does
    # not carry, which the summary carries forward.
    for _ in range(_OTHERS_MOVED_ATTEMPTS):
        now = offsets_marker.committed_offsets(table, last)
        if any(now.get(tp) != plan.committed.get(tp) for tp in plan.batch_tps):
            raise _offsets_moved(ref, plan, now)
        update = pending_update(spark, table, data, deletes, key_columns)
        intended = advance(now, plan.next_offsets)
        for k, v in codec.summary_properties(intended, query_id, batch_id).items():
            update.set(k, v)
        faults.maybe_pause("before-table-commit", batch_id)
        try:
            snapshot_id, parent_id, snapshot = _commit_fenced(
                spark, table, update, plan, now, intended, query_id, batch_id
            )
            break
        except _OthersMovedError as e:
            log.info("table %s: %s; committing on top", ref, e.reason)
    else:
        raise CommitError(
            f"table {ref}: other writers kept committing to it while batch {batch_id} did; nothing was committed, "
            "the batch is replayed"
        )
    return CommitResult(
        ref,
        snapshot_id,
        files=len(data),
        records=sum(f.record_count for f in data),
        delete_files=len(deletes),
        deletes=sum(f.record_count for f in deletes),
        parent_id=parent_id,
        snapshot=snapshot,
    )


def _ids(snapshot: JavaObject) -> tuple[int, int | None, JavaObject]:
    parent = snapshot.parentId()
    return int(snapshot.snapshotId()), int(parent) if parent is not None else None, snapshot


class _OthersMovedError(Exception):
    """The fence refused a commit that may go on top once the table is read again: offsets of
    topic-partitions the batch does not carry moved, or rewrites served alone hide the offsets."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _offsets_moved(ref: TableRef, plan: OffsetsPlan, now: Offsets) -> CommitError:
    tps = sorted(set(plan.batch_tps) | set(now) | set(plan.committed))
    moved = [tp for tp in tps if now.get(tp) != plan.committed.get(tp)]
    detail = ", ".join(f"{tp}: planned {plan.committed.get(tp)}, now {now.get(tp)}" for tp in moved[:5])
    return CommitError(
        f"table {ref}: offsets changed while the batch was written ({detail}); is another job writing "
        "this table? nothing was committed; the batch is replayed from the table's offsets"
    )


def pending_update(
    spark: SparkSession,
    table: JavaObject,
    data: Sequence[WrittenFile],
    deletes: Sequence[WrittenFile],
    key_columns: Sequence[str],
    into: JavaObject | None = None,
) -> JavaObject:
    """The uncommitted snapshot: an append of `data`, or with `deletes` a RowDelta; of the table,
    or `into` a transaction of it (transaction.py)."""
    described = Described(spark, table)
    target = table if into is None else into
    if not deletes:
        # A fast append, as Spark's own streaming sink commits: one new manifest, none merged (a
        # merging append cost a small batch's commit 94-105 ms against 74; `icesink maintain`
        # rewrites the manifests the appends add).
        append = target.newFastAppend()
        for f in data:
            append.appendFile(described.data_file(f))
        return append
    delta = target.newRowDelta()
    for f in data:
        delta.addRows(described.data_file(f))
    for f in deletes:
        delta.addDeletes(described.equality_deletes(f, key_columns))
    return delta


def _commit_fenced(
    spark: SparkSession,
    table: JavaObject,
    update: JavaObject,
    plan: OffsetsPlan,
    now: Offsets,
    intended: Offsets,
    query_id: str,
    batch_id: int,
) -> tuple[int, int | None, JavaObject]:
    """`update.commit()`, valid only on the offsets `now` (see fence.py). Returns the snapshot's id,
    its parent's and the snapshot.
    When the outcome is unclear (the catalog's answer was lost, or a re-sent request found its
    first attempt applied), the table itself says whether this batch landed."""
    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    planned = table.currentSnapshot()  # the table as loaded while planning (the commit refreshes it)
    update.validateWith(fence.OffsetsUnchanged(now, planned)).deleteWith(fence.KeepFiles())
    try:
        update.commit()
        return _ids(table.currentSnapshot())
    except Py4JJavaError as e:
        failure = str(e.java_exception.getClass().getName())
        if failure not in (_VALIDATION_FAILED, _OUTCOME_UNKNOWN):
            raise
        cause = e
    table.refresh()
    newest = ancestry.newest_offsets(ancestry.of_table(table))
    offsets = newest.offsets if newest else {}
    if codec.is_our_commit(newest.summary if newest else None, query_id, batch_id, intended):
        log.warning(
            "table %s: the commit of batch %d was not confirmed (%s), but the table holds it; going on",
            plan.table, batch_id, failure.rsplit(".", 1)[-1],
        )  # fmt: skip
        # Its parent is not known for sure (the table may have moved on since): none is said.
        current = table.currentSnapshot()
        return int(current.snapshotId()), None, current
    if failure == _OUTCOME_UNKNOWN:
        raise CommitOutcomeUnknownError(
            f"table {plan.table}: the catalog did not confirm the commit of batch {batch_id} and the "
            "table does not hold it; nothing was committed, the batch is retried"
        ) from cause
    if newest is None and offsets_marker.hidden(table.currentSnapshot()):
        # Rewrites served alone (the job's own maintenance: a compaction, its offsets marker, then
        # the removal of dangling deletes) came after the snapshot the batch was planned on; the
        # fence cannot place them, but the marker that carries the offsets again follows: read
        # them then (offsets_marker.committed_offsets waits for it), and commit on top if unmoved.
        raise _OthersMovedError("rewrites served alone hide its offsets") from cause
    if all(offsets.get(tp) == plan.committed.get(tp) for tp in plan.batch_tps):
        raise _OthersMovedError("another writer committed offsets of other topics") from cause
    raise _offsets_moved(plan.table, plan, offsets) from cause
