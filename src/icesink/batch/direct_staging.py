"""New tables of the one-pass job (batch/direct.py): staged before their files are written,
created once they are.

A table that does not exist yet is staged (`stage`: the catalog's stage-create gives its location,
field ids and partition spec, and creates nothing), its files are written, and only then is it
created (`create`, at that location) and committed as any table. So a table the job declines is
never created, and Spark's path creates it from all of the batch's records, as it would have; a
crash leaves at most an empty table.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from icesink.batch.context import BatchContext
from icesink.batch.direct_item import DirectItem
from icesink.batch.direct_json import Item
from icesink.batch.work import partition_fields
from icesink.iceberg.jvm import JavaObject

log = logging.getLogger(__name__)


def stage(ctx: BatchContext, items: list[DirectItem]) -> tuple[list[DirectItem], list[Item]]:
    """`items`, each table that does not exist yet staged: its location and field ids as the
    catalog would create it, for the direct job's files, and nothing created (`create` creates it
    once its files are written, so a table the job declines is never created with the columns of a
    guess). And the tables left to Spark's path: created meanwhile, or sorted by a column they
    lack (which that path reports)."""
    settings = ctx.config.tables.settings_for

    def one(d: DirectItem) -> DirectItem | None:
        plan, table, planned = d.item
        if table is not None:
            return d
        sort_by = settings(plan.table.name).sort_by
        if not set(sort_by) <= set(d.schema.fieldNames()):
            return None
        keys = d.changes.keys if d.changes is not None else ()
        staged = ctx.catalog.stage(
            plan.table, d.schema, settings(plan.table.name).properties, keys, sort_by,
            partition_fields(settings(plan.table.name)),
        )  # fmt: skip
        if staged is None:
            return None
        return replace(d, item=(plan, staged, planned), schema=ctx.catalog.spark_schema(staged), staged=True)

    found = ctx.tables.map(items, one)
    return [d for d in found if d is not None], [d.item for d, f in zip(items, found, strict=True) if f is None]


def create(ctx: BatchContext, d: DirectItem) -> JavaObject | None:
    """The table the direct job wrote files for: a staged one created now, at its staged location
    (when another writer created it meanwhile, that table); None when that table's location or
    field ids are not those the files were written with."""
    plan, table, _ = d.item
    if not d.staged:
        return table
    assert table is not None
    settings = ctx.config.tables.settings_for(plan.table.name)
    made = ctx.catalog.create(
        plan.table,
        d.schema,
        settings.properties,
        partition_by=partition_fields(settings),
        key_columns=d.changes.keys if d.changes is not None else (),
        sort_by=settings.sort_by,
        location=str(table.location()),
    )
    if not ctx.catalog.same_layout(made, table):
        if made.location() != table.location() and ctx.catalog.same_layout(made, table, located=False):
            # Nessie puts a new table where it chooses: the files are outside the table's location.
            log.info(
                "table %s: the catalog created it at %s, not at the staged location; its first batch is written "
                "by Spark's path", plan.table, made.location(),
            )  # fmt: skip
        else:
            log.warning(
                "table %s: created elsewhere or with other field ids than staged (another writer?); the files "
                "written for it are not committed", plan.table,
            )  # fmt: skip
        return None
    return made
