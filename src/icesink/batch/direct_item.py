"""A table's part of the one-pass job (batch/direct_tables.py says which tables take it), and the
log line of one that does not."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.direct_json import Item
from icesink.batch.direct_keys import RecordKey
from icesink.batch.plan import TablePlan
from icesink.tasks.routing import RouteFilter
from icesink.tasks.table_out import DirectDecoder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DirectItem:
    """A table the direct job writes: its item, its decoder, and its schema (for a table that does
    not exist yet, the one it is created with)."""

    item: Item
    decoder: DirectDecoder
    schema: StructType
    staged: bool = False  # a table that does not exist yet: `item`'s table is the staged one (direct_staging.stage)
    changes: ChangeSpec | None = None  # an upsert or changelog table
    key: RecordKey | None = None  # the column of the record key (batch/direct_keys.py), and its decoder
    # A table of changes ordered across batches: the order_by value below which a change may be
    # older than the row the table holds (its tasks decline such a batch, saying the least such
    # value: batch/direct_changes.py; a second round's is that least value, batch/direct_held.py).
    order_floor: Any = None
    # Its second round's rows the table holds above that floor, keys and order value (batch/direct_held.py).
    held: pa.Table | None = None
    route: RouteFilter | None = None  # a table of field-routed topics: the records it takes of them


def declined(ctx: BatchContext, plan: TablePlan, reason: str) -> DirectItem | None:
    """None, once the reason the one-pass job leaves a table's records to Spark's decoder is said
    (once per table and reason: the job runs for days; a table that keeps that reason is said once)."""
    said = (str(plan.table), reason)
    if said not in ctx.declines_said:
        ctx.declines_said.add(said)
        log.info("table %s: its records go through Spark's decoder: %s", plan.table, reason)
    return None
