"""Step 4, write, the Spark side: each table's good rows (or its changes, by key) handed to the
executors' writer (files.py) through `mapInArrow`, which returns one descriptor per file, never rows.

The rows go in the table's column order with their partition values (computed by Iceberg's own
transform functions), sorted by partition within each task (a writer of changes sorts its own).
The same pass counts the table's bad records (an Observation), so a table with none needs no
dead-letter pass.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyarrow import schema as pa_schema
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StructType, TimestampNTZType, TimestampType

from icesink.batch import changes
from icesink.batch.context import BatchContext
from icesink.batch.decode import ERROR, ROW, fixed, good_rows, is_bad, is_pending
from icesink.batch.plan import TablePlan
from icesink.batch.seen_schemas import observed_refs
from icesink.batch.work import TableWork
from icesink.config import OrderScope
from icesink.errors import ConfigError, WriteError
from icesink.iceberg.jvm import JavaObject
from icesink.model import PartitionRange, TableRef, WrittenFile
from icesink.runtime import faults
from icesink.tasks.descriptors import DESCRIPTOR_DDL, written_file
from icesink.tasks.files import WriteTask, map_in_arrow_fn


@dataclass(frozen=True)
class Written:
    """A table's files, written and not yet committed, and what the writing pass observed."""

    work: TableWork
    files: list[WrittenFile]
    bad: int | None  # the table's bad records; None when Spark did not report the count
    pending: int | None  # records the guess did not cover, left for a second pass; None: not reported
    refs: list[Any]  # the (topic, value ref, key ref) the pass read (seen_schemas.observed_refs)
    # The decoded records of each pass that wrote these files (their bad records are the table's
    # dead letters).
    passes: tuple[DataFrame, ...] = ()


def write_tables(
    ctx: BatchContext, ready: list[TableWork], ranges: list[PartitionRange], batch_id: int, query_id: str
) -> list[Written]:
    """Every table's files, several tables at once (job.table_parallelism); a failure names the
    table and its offsets."""

    def write(w: TableWork) -> Written:
        try:
            return write_table(ctx, w, batch_id, query_id)
        except Exception as e:
            raise write_failed(w.plan, ranges, batch_id, e) from e

    def done(i: int) -> None:
        if len(ready) > 1:  # the worst moment: a table's files are written, others' are not all
            faults.maybe_kill("mid-write", batch_id, ctx.spark)

    return ctx.tables.map(ready, write, on_done=done)


def write_table(ctx: BatchContext, w: TableWork, batch_id: int, query_id: str) -> Written:
    """Writes the table's good rows; the same pass counts its bad and pending records and the
    writer schemas it read."""
    counted = Observation()
    metrics = [
        fixed("count bad", lambda: F.count_if(is_bad()).alias("bad")),
        fixed("count pending", lambda: F.count_if(is_pending()).alias("pending")),
    ]
    refs = ctx.decoder.plan_column() is not None or (
        ctx.key_decoder is not None and ctx.key_decoder.plan_column() is not None
    )
    if refs:
        metrics.append(fixed("observed refs", lambda: observed_refs().alias("refs")))
    files = _write_good(ctx, w, w.decoded.observe(counted, *metrics), batch_id, query_id)
    seen = observed(counted)
    return Written(
        w,
        files,
        bad=None if seen is None else int(seen["bad"]),
        pending=None if seen is None else int(seen["pending"]),
        refs=list(seen.get("refs") or []) if seen is not None else [],
        passes=(w.decoded,),
    )


def _write_good(ctx: BatchContext, w: TableWork, parsed: DataFrame, batch_id: int, query_id: str) -> list[WrittenFile]:
    assert w.table is not None  # the prepare step created it
    if w.changes is None:
        return write_rows(ctx, good_rows(parsed, w.target), w.table, w.plan.table, batch_id, query_id)
    good = parsed.where(F.col(ERROR).isNull()).select(
        *[F.col(f"{ROW}.`{c}`").alias(c) for c in w.target.fieldNames()], changes.OP, "topic", "partition", "offset"
    )
    held = _held_order(ctx, w)
    if held is not None:
        # The batch's own session plans the join (Spark runs each micro-batch in a clone of the
        # job's session, with dynamic partition pruning off: see job/session.py).
        good = good.join(held, on=list(w.keys), how="left")
    # Every change of a key to the same task, whose writer keeps the key's last change.
    by = [F.col(f"`{k}`") for k in w.keys]
    tasks = writer_tasks(w.plan.records, int(ctx.spark.conf.get("spark.sql.shuffle.partitions") or 1))
    by_key = good.repartition(*by) if tasks is None else good.repartition(tasks, *by)
    layout = ChangeColumns(w.keys, changes.change_order(w.changes), held=held is not None)
    return write_rows(ctx, by_key, w.table, w.plan.table, batch_id, query_id, layout)


# A writer task of changes holds all of them in memory to choose each key's last
# (last_changes.py); Spark's sort would have spilled. So a batch gets enough tasks that none holds
# many more than this, however large the batch: a Debezium snapshot's first batch can be the whole
# topic. One batch of 2,000,000 changes: the Python workers' peak 870 MB in 8 tasks, 1,220 MB in 4.
CHANGES_PER_TASK = 250_000


def changes_budget(parallelism: int) -> int:
    """The changes a one-pass batch takes on `parallelism` cores (a task a core, each holding its
    changes in memory: batch/direct_tables.split_direct); a job that may take changes reads at most
    this many records a batch by default, so a batch's changes fit them (job/query.py)."""
    return CHANGES_PER_TASK * max(parallelism, 1)


def writer_tasks(records: int, shuffle_partitions: int) -> int | None:
    """How many writer tasks a table's `records` changes go to. None: Spark's shuffle partitions,
    which adaptive execution coalesces for a small batch (one data and one delete file for 1,000
    changes, not one per partition). More when that would give a task over CHANGES_PER_TASK (a
    key's changes all go to one task, so a key with more changes than that still makes its task
    larger)."""
    if records <= max(shuffle_partitions, 1) * CHANGES_PER_TASK:
        return None
    return -(-records // CHANGES_PER_TASK)


def _held_order(ctx: BatchContext, w: TableWork) -> DataFrame | None:
    """The key and `order_by` columns of the rows the table holds (as of the snapshot this batch
    commits on), when changes are ordered across batches; None when there is nothing to compare."""
    spec = w.changes
    if spec is None or spec.order_by is None or w.settings.order_by_scope is not OrderScope.TABLE:
        return None
    snapshot = w.table.currentSnapshot() if w.table is not None else None
    if snapshot is None or spec.order_by not in w.target.fieldNames():
        return None
    return changes.held_rows(ctx.spark, f"{ctx.config.catalog.name}.{w.plan.table}", snapshot.snapshotId(), spec)


@dataclass(frozen=True)
class ChangeColumns:
    """How an upsert/changelog table's changes reach the writer (files.py, last_changes.py): all of
    them, hash-partitioned by `keys`, with the change operation, the `order` columns and, with
    `held`, the HELD column (the order of the row the table holds for the key)."""

    keys: tuple[str, ...]
    order: Sequence[Column]
    held: bool = False


def write_rows(
    ctx: BatchContext, rows: DataFrame, table: JavaObject, ref: TableRef, batch_id: int, query_id: str,
    change: ChangeColumns | None = None,
) -> list[WrittenFile]:  # fmt: skip
    """Writes `rows` (the table's columns; with `change`, every change of an upsert/changelog
    table, of which the writer keeps each key's last) as files."""
    schema = ctx.catalog.spark_schema(table)
    parts = _partition_values(ctx, table, schema)
    meta = [p.alias(f"__icesink_part_{i}") for i, p in enumerate(parts)]
    keys = change.keys if change is not None else ()
    if change is not None:
        meta.append(F.col(changes.OP))
        meta += [c.alias(f"__icesink_order_{i}") for i, c in enumerate(change.order)]
        meta += [F.col(changes.HELD)] if change.held else []
    if change is None and rows.columns == schema.fieldNames():
        if meta:  # already the table's columns: no per-column py4j calls (and none at all without meta)
            rows = rows.select(*meta, fixed("*", lambda: F.col("*")))
    else:
        # Columns in the table's order; columns another writer added since decoding stay null.
        have = set(rows.columns)
        columns = [F.col(f"`{f.name}`") if f.name in have else F.lit(None).cast(f.dataType) for f in schema.fields]
        rows = rows.select(*meta, *[c.alias(f.name) for c, f in zip(columns, schema.fields, strict=True)])
    if parts and change is None:  # a writer of changes splits its rows by partition itself
        rows = rows.sortWithinPartitions(*[f"__icesink_part_{i}" for i in range(len(parts))])
    arrow_schema = table_arrow_schema(ctx, table)
    task = WriteTask(
        table=str(ref),
        arrow_schema=arrow_schema,
        data_location=data_location(table),
        file_prefix=f"{query_id[:8]}-{batch_id:08d}",
        batch_id=batch_id,
        storage=ctx.storage,
        target_file_size=ctx.config.tables.target_file_size_bytes,
        partition_columns=len(parts),
        delete_schema=pa_schema([arrow_schema.field(k) for k in keys]) if keys else None,
        order_columns=len(change.order) if change is not None else 0,
        held_column=change is not None and change.held,
    )
    return [written_file(r) for r in rows.mapInArrow(map_in_arrow_fn(task), DESCRIPTOR_DDL).collect()]


def _partition_values(ctx: BatchContext, table: JavaObject, schema: StructType) -> list[Column]:
    """Per partition field, the row's partition value as the string Iceberg parses back, computed
    by Iceberg's own transform functions in Spark."""
    out = []
    catalog = ctx.config.catalog.name
    for f in ctx.catalog.partition_fields(table):
        source = schema[f.column].dataType
        if f.transform in ("identity", "truncate") and isinstance(
            source, TimestampType | TimestampNTZType | BinaryType
        ):
            raise ConfigError(
                f"table {table.name()}: partition field {f} on a {source.simpleString()} column is not supported "
                "by icesink's writer; use hours/days/bucket"
            )
        col = f"`{f.column}`"
        if f.transform == "void":
            expr = F.lit(None)
        elif f.transform == "identity":
            expr = F.col(col)
        elif f.param is not None:
            expr = F.expr(f"{catalog}.system.{f.transform}({f.param}, {col})")
        else:
            expr = F.expr(f"{catalog}.system.{f.transform}s({col})")
        out.append(expr.cast("string"))
    return out


def table_arrow_schema(ctx: BatchContext, table: JavaObject) -> Any:
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema

    return schema_to_pyarrow(Schema.model_validate_json(ctx.catalog.schema_json(table)))


def data_location(table: JavaObject) -> str:
    # The table's location provider decides where data goes (write.data.path, object storage
    # layout); ask it for a file name and keep the folder.
    probe = str(table.locationProvider().newDataLocation("icesink-probe"))
    return probe[: -len("icesink-probe")]


def observed(observation: Observation, wait_s: float = 10.0) -> dict[str, Any] | None:
    """The metrics an action observed, or None when Spark did not report them (in time). Spark
    hands observed metrics over through its listener bus, a moment after the action returns."""
    future = observation._jo.future() if observation._jo is not None else None
    deadline = time.monotonic() + wait_s
    try:
        while future is not None and not future.isCompleted():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
        return dict(observation.get) if future is not None else None
    except Exception:
        return None


_CAUSE = re.compile(r"^(?:: )?(?:[\w.]+\.)?(\w+(?:Error|Exception|Invalid): .+)$", re.MULTILINE)


def error_cause(e: BaseException) -> str:
    """What went wrong on an executor, in one line: the innermost exception line of a Spark job's
    failure (a Python worker's error comes last), not a JVM stack trace."""
    text = str(e)
    found = [m for m in _CAUSE.findall(text) if not m.startswith(("Py4JJavaError", "PythonException"))]
    first = text.strip().splitlines()[0] if text.strip() else ""
    return found[-1].strip() if found else f"{type(e).__name__}: {first}"


def write_failed(plan: TablePlan, ranges: list[PartitionRange], batch_id: int, e: BaseException) -> WriteError:
    """The error that ends a batch whose write failed on an executor: the table, its topic-partitions
    and offsets, the cause in one line (not a JVM stack trace) and what to do."""
    tps = set(plan.batch_tps)
    mine = [r for r in ranges if r.tp in tps]
    where = ", ".join(f"{r.tp} offsets {r.first_offset}-{r.last_offset}" for r in mine) or "no records"
    cause = error_cause(e)
    return WriteError(
        f"batch {batch_id}: writing table {plan.table} failed ({where}): {cause[:500]}. Nothing of this batch "
        "was committed; the job runs it again on restart. If it fails again the same way, the cause is in "
        "these records or the table: fix it, or route them elsewhere, then restart"
    )
