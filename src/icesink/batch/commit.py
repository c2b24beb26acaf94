"""Step 5, commit: one snapshot per table with its files and new offsets (iceberg/commit.py fences
it against offsets that moved meanwhile), then the consumer group's progress for Kafka's tools."""

from __future__ import annotations

import logging

from icesink.batch.context import BatchContext
from icesink.batch.plan import TablePlan
from icesink.batch.write import Written
from icesink.iceberg.commit import CommitResult
from icesink.iceberg.jvm import JavaObject
from icesink.iceberg.tables import IcebergCatalog
from icesink.iceberg.transaction import MultiTableUnsupportedError, TableFiles
from icesink.kafka.admin import GroupProgress
from icesink.model import PartitionRange, WrittenFile
from icesink.runtime import faults

log = logging.getLogger(__name__)


def commit_batch(
    ctx: BatchContext, dead: tuple[TablePlan, JavaObject, list[WrittenFile]] | None, written: list[Written],
    batch_id: int, query_id: str,
) -> list[CommitResult]:  # fmt: skip
    """The dead-letter table first (a crash after it loses no dead letter: its offsets make a replay
    skip those it holds), then the tables: in one request where the catalog takes a multi-table
    commit (iceberg/transaction.py), else (or when that request is refused or its outcome unknown)
    several at once (job.table_parallelism), each fenced on its own offsets. When one fails, the
    others still commit (a replay skips them) and the first failure is raised."""
    results = []
    if dead is not None:
        results.append(commit_table(ctx.catalog, *dead, batch_id, query_id))
        faults.maybe_kill("after-dead-letters", batch_id, ctx.spark)

    if ctx.catalog.multi_table and len(written) > 1:
        try:
            together = ctx.catalog.commit_together(
                [TableFiles(w.work.plan, w.work.table, w.files, w.work.keys) for w in written], query_id, batch_id,
                lambda fn, items: ctx.tables.map(items, fn),
            )  # fmt: skip
        except MultiTableUnsupportedError as e:
            log.warning("batch %d: %s; committing table by table from now on", batch_id, e)
            ctx.catalog.multi_table = False
            together = None
        if together is not None:
            for w, result in zip(written, together, strict=True):
                _committed(ctx, w, result, batch_id)
            return results + together

    def commit(w: Written) -> CommitResult:
        result = ctx.catalog.commit(w.work.table, w.files, w.work.plan, query_id, batch_id, w.work.keys)
        _committed(ctx, w, result, batch_id)
        return result

    return results + ctx.tables.map(written, commit)


def _committed(ctx: BatchContext, w: Written, result: CommitResult, batch_id: int) -> None:
    ctx.order_bounds.committed(w.work.plan.table, result.parent_id, result.snapshot_id, w.files)
    said(w.work.plan, result, batch_id)


def commit_table(
    catalog: IcebergCatalog, plan: TablePlan, table: JavaObject, files: list[WrittenFile], batch_id: int,
    query_id: str, keys: tuple[str, ...] = (),
) -> CommitResult:  # fmt: skip
    """Commits the table's files (an append, or with `keys` a RowDelta) with the plan's offsets."""
    result = catalog.commit(table, files, plan, query_id, batch_id, keys)
    said(plan, result, batch_id)
    return result


def said(plan: TablePlan, result: CommitResult, batch_id: int) -> None:
    """The log line of a table's commit."""
    deletes = f", {result.deletes} key delete(s) in {result.delete_files} file(s)" if result.delete_files else ""
    log.info(
        "batch %d: table %s +%d row(s) in %d file(s)%s, snapshot %d, offsets %s",
        batch_id, plan.table, result.records, result.files, deletes, result.snapshot_id,
        ", ".join(f"{tp}->{plan.next_offsets[tp]}" for tp in plan.batch_tps),
    )  # fmt: skip


def commit_group(progress: GroupProgress | None, ranges: list[PartitionRange], batch_id: int) -> None:
    """Progress for Kafka's lag tools; a failure here loses nothing (the tables hold the
    offsets), so it is logged, not raised."""
    if progress is None:
        return
    try:
        progress.commit({r.tp: r.last_offset + 1 for r in ranges})
    except Exception as e:
        log.warning("batch %d: could not commit progress to consumer group %s: %s", batch_id, progress.group, e)
