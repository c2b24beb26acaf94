"""A table of changes ordered across batches (`tables.order_by`) whose batch holds a change older
than the greatest order value the table holds, on the one-pass path: its second round.

The first round's tasks compare each change with that greatest value alone (the floor,
iceberg/order_bound.py) and decline the table when one is below it, saying the least such value.
A change at or above that value `v` can only be older than a row the table holds whose order value
is above `v`: the driver reads those rows (their keys and order values, at the snapshot the batch
commits on), and a second round's tasks, with `v` as their floor, drop each key's last change that
is older than the row held for its key (tasks/last_changes.not_older_than_held), as Spark's path's
join with the whole table drops it. Redelivered changes (a Debezium connector restarted) and
topic-partitions read at different paces make such batches; most tables hold few rows above `v`,
and the order column's bounds let Iceberg's scan skip the files below it. More rows than a task
should carry take Spark's path, as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from icesink.batch.changes import HELD, held_rows
from icesink.batch.context import BatchContext
from icesink.batch.direct_item import DirectItem

log = logging.getLogger(__name__)

# Rows held above the least older value that a second round carries to each of its tasks (a key
# and an order value each: ~16 MB for long keys), all of its tables' together; more go through
# Spark's path's join.
HELD_ROWS = 500_000


def with_held(ctx: BatchContext, d: DirectItem, older: int, batch_id: int) -> DirectItem | None:
    """`d` for a second round: its floor `older`, and the rows the table holds above it; None when
    there are more than HELD_ROWS of them (Spark's path)."""
    plan, table, _ = d.item
    spec = d.changes
    assert spec is not None
    assert spec.order_by is not None
    assert table is not None
    snapshot = table.currentSnapshot()
    assert snapshot is not None  # a table without one has no floor, and declines for none
    rows = held_rows(ctx.spark, f"{ctx.config.catalog.name}.{plan.table}", snapshot.snapshotId(), spec)
    order = F.col(HELD)
    timestamp = isinstance(rows.schema[HELD].dataType, TimestampType)
    above = order > (F.timestamp_micros(F.lit(older)) if timestamp else F.lit(older))
    value = F.unix_micros(order) if timestamp else order.cast("long")
    keys = [F.col(f"`{k}`") for k in spec.keys]
    started = time.monotonic()
    held = rows.where(above).select(*keys, value.alias(HELD)).limit(HELD_ROWS + 1).toArrow()
    took = time.monotonic() - started
    if held.num_rows > HELD_ROWS:
        log.info(
            "batch %d: table %s: more than %d of its rows have an %s above %s, its batch's oldest change; its "
            "records go through Spark's decoder", batch_id, plan.table, HELD_ROWS, spec.order_by, older,
        )  # fmt: skip
        return None
    log.info(
        "batch %d: table %s: changes older than its greatest %s; the one-pass job writes it again against "
        "the %d row(s) it holds above %s (read in %.2f s)", batch_id, plan.table, spec.order_by, held.num_rows,
        older, took,
    )  # fmt: skip
    return replace(d, order_floor=older, held=held)


def within_budget(items: list[DirectItem | None], batch_id: int) -> list[DirectItem | None]:
    """`items` of one second round, less (None: Spark's path) the tables of held rows beyond
    HELD_ROWS in all: every task of the round carries every table's."""
    out: list[DirectItem | None] = []
    total = 0
    for d in items:
        rows = d.held.num_rows if d is not None and d.held is not None else 0
        if rows and total + rows > HELD_ROWS:
            assert d is not None
            log.info(
                "batch %d: table %s: its %d held row(s) would make the one-pass job's second round carry more "
                "than %d; its records go through Spark's decoder", batch_id, d.item[0].table, rows, HELD_ROWS,
            )  # fmt: skip
            out.append(None)
            continue
        total += rows
        out.append(d)
    return out
