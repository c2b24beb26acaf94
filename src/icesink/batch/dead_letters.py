"""The dead-letter table: every record that could not be decoded or converted, with why.

It is an Iceberg table like the others, committed in the same batch (before the data tables, so a
crash in between never loses a dead letter) and carrying its own offsets, so a replay adds none
twice. The raw key, value and headers are kept byte for byte: a fixed record can be replayed.
With `on_error: fail`, a bad record fails the whole batch instead, before anything is written.
"""

from __future__ import annotations

import logging
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.batch.context import BatchContext
from icesink.batch.decode import ERROR, bad_records
from icesink.batch.plan import TablePlan, keep_condition, load_and_plan
from icesink.batch.work import TableWork
from icesink.batch.write import Written, write_rows
from icesink.errors import DecodeError
from icesink.iceberg.jvm import JavaObject
from icesink.model import PartitionRange, WrittenFile

log = logging.getLogger(__name__)


def rows(bad: DataFrame, target: str | Column, batch_id: int, query_id: str) -> DataFrame:
    """Dead-letter rows for the bad records of one table's share of the batch (`target`: the
    table they were meant for, or why none was; or a column of `bad` saying it per record)."""
    return bad.select(
        "topic", "partition", "offset", "timestamp", "key", "value", "headers",
        F.col(f"{ERROR}.stage").alias("stage"),
        F.col(f"{ERROR}.error_class").alias("error_class"),
        F.col(f"{ERROR}.message").alias("error_message"),
        F.lit(target).alias("target_table"),
        F.lit(batch_id).cast("long").alias("batch_id"),
        F.lit(query_id).alias("query_id"),
        F.current_timestamp().alias("failed_at"),
    )  # fmt: skip


def refuse_bad_records(bad: list[tuple[str, DataFrame]], batch_id: int) -> None:
    """`on_error: fail`: raises DecodeError naming the first bad records of the first target with any."""
    for target, records in bad:
        count = records.count()
        if not count:
            continue
        first = records.select("topic", "partition", "offset", f"{ERROR}.*").orderBy("topic", "partition", "offset")
        lines = "\n  ".join(
            f"topic {r.topic} partition {r.partition} offset {r.offset}: {r.message} [{r.stage}/{r.error_class}]"
            for r in first.limit(5).collect()
        )
        raise DecodeError(
            f"batch {batch_id}: {count} record(s) for table {target} cannot be decoded; "
            f"nothing of this batch was committed. First:\n  {lines}"
        )


def bad_sources(
    work: list[TableWork],
    written: list[Written],
    others: list[tuple[str, DataFrame]] | list[tuple[str | Column, DataFrame]],
) -> list[tuple[str | Column, DataFrame]]:
    """(target, records with ERROR) of every table's share that may hold bad records: each pass of a
    written table whose passes counted some (or could not tell), a decoded table left unwritten (no
    record of it decoded), and `others` (the records no table took, the one-pass job's letters)."""
    by_table = {w.work.plan.table: w for w in written}
    out: list[tuple[str | Column, DataFrame]] = []
    for w in work:
        done = by_table.get(w.plan.table)
        if done is None:
            out.append((str(w.plan.table), bad_records(w.decoded)))
        elif done.bad != 0:
            out += [(str(w.plan.table), bad_records(p)) for p in done.passes]
    return out + list(others)


def write_dead_letters(
    ctx: BatchContext,
    bad: list[tuple[str | Column, DataFrame]],
    ranges: list[PartitionRange],
    batch_id: int,
    query_id: str,
) -> tuple[TablePlan, JavaObject, list[WrittenFile]] | None:
    """Writes the dead letters of `bad` ((target, records with ERROR) pairs, see `bad_sources`) the
    table does not hold yet; returns what to commit, or None when there are none."""
    if not bad:
        return None
    letters = reduce(lambda a, b: a.unionByName(b), [rows(records, t, batch_id, query_id) for t, records in bad])
    ref = ctx.dead_letter_ref
    plan, table = load_and_plan(ctx, ref, ranges)
    letters = letters.where(keep_condition(plan.keep_from))
    if table is None:
        # Created on first use only: check cheaply whether this batch has any dead letter.
        if not letters.limit(1).collect():
            return None
        table = ctx.catalog.create(ref, letters.schema, ctx.config.tables.properties)
    files = write_rows(ctx, letters, table, ref, batch_id, query_id)
    if not files:
        return None
    log.warning("batch %d: %d record(s) dead-lettered to %s", batch_id, sum(f.record_count for f in files), ref)
    return plan, table, files
