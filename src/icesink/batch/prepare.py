"""Step 3, prepare: the tables ready for the batch's rows. A missing table is created (format v2,
with its partitioning, keys and sort order); an existing one gains the batch's new columns, wider
types and relaxed requirements. Each change is its own metadata commit, before the data commit,
and a no-op when the batch runs again."""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql.types import StructType

from icesink.batch.context import BatchContext
from icesink.batch.work import TableWork, partition_fields
from icesink.errors import ConfigError
from icesink.iceberg.jvm import JavaObject
from icesink.model import TableRef
from icesink.schema import evolution

log = logging.getLogger(__name__)


def ready_tables(ctx: BatchContext, work: list[TableWork]) -> list[TableWork]:
    """`work` with each table created or evolved, and its schema as it now is; tables no record of
    the batch decoded for are left out (and not created)."""
    todo = []
    for w in work:
        if w.table is None and not w.target.fields:
            log.info("table %s: no record of this batch decoded; not created", w.plan.table)
            continue
        todo.append(w)

    def ready(w: TableWork) -> TableWork:
        table = _created(ctx, w) if w.table is None else _evolved(ctx, w, w.table)
        return replace(w, table=table, target=ctx.catalog.spark_schema(table))

    return ctx.tables.map(todo, ready)


def _created(ctx: BatchContext, w: TableWork) -> JavaObject:
    missing = [c for c in w.settings.sort_by if c not in w.target.fieldNames()]
    if missing:
        raise ConfigError(f"table {w.plan.table}: sort_by column(s) {missing} are not columns of its rows")
    return ctx.catalog.create(
        w.plan.table, w.target, w.settings.properties, partition_fields(w.settings), w.keys, w.settings.sort_by
    )


def _evolved(ctx: BatchContext, w: TableWork, table: JavaObject) -> JavaObject:
    evolve_to(ctx, w.plan.table, table, w.target)
    return table


def evolve_to(ctx: BatchContext, ref: TableRef, table: JavaObject, target: StructType) -> bool:
    """Evolves `table` to hold rows of `target` (its new columns, wider types and relaxed
    requirements): one metadata commit, or none when there is nothing to do against the schema
    loaded while planning (no catalog round trip either). Whether it changed the table."""
    have = ctx.catalog.spark_schema(table)
    add = evolution.added_columns(have, target)
    widen = evolution.widened_columns(have, target)
    optional = evolution.optional_columns(have, target)
    if add or widen or optional:
        return ctx.catalog.evolve(ref, table, add=add, widen=widen, optional=optional)
    return False
