"""A table of changes (upsert or changelog) on the one-pass path, the driver's side: its keys and
operation as Spark's path resolves them, and how far back its changes may reach across batches
(`order_by`, iceberg/order_bound.py). The tasks reduce and write the changes: tasks/change_rows.py."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import IntegerType, LongType, StringType, StructType, TimestampType

from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.decode.records import change_spec
from icesink.batch.direct_keys import RecordKey
from icesink.batch.plan import TablePlan
from icesink.config import OrderScope, WriteMode
from icesink.errors import ConfigError
from icesink.iceberg.jvm import JavaObject


def table_changes(
    ctx: BatchContext, plan: TablePlan, table: JavaObject | None, schema: StructType, key: RecordKey | None
) -> tuple[ChangeSpec, Any] | None:
    """The table's keys and operation as Spark's path resolves them (records.change_spec), and the
    `order_by` value below which a change may be older than the row the table holds for its key
    (iceberg/order_bound.py; None: no change is); None where that path reports a problem, reads an
    operation that is not a string, or the floor is not known."""
    settings = ctx.config.tables.settings_for(plan.table.name)
    try:
        key_type = schema[key.column].dataType if key is not None else None
        spec = change_spec(ctx, plan.table, settings, table, key_type, schema)
    except ConfigError:
        return None
    if spec.mode is WriteMode.CHANGELOG and not isinstance(schema[spec.operation_column].dataType, StringType):
        return None
    snapshot = table.currentSnapshot() if table is not None else None
    if not spec.order_by or settings.order_by_scope is not OrderScope.TABLE or snapshot is None:
        return spec, None
    # Integers, and timestamps as their microseconds (iceberg/order_bound.py); strings' bounds
    # compare otherwise in Iceberg (truncated, by UTF-8 bytes) than in Arrow.
    if not isinstance(schema[spec.order_by].dataType, IntegerType | LongType | TimestampType):
        return None
    known, floor = ctx.order_bounds.get(plan.table, snapshot.snapshotId(), spec.order_by)
    return (spec, floor) if known else None
