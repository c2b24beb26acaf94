"""Schema evolution without leaving the one-pass path: the direct job's two rounds.

A batch's Avro tables are planned with the writer schemas their topics carried last time (or the
registry's latest, batch/decode/avro.py). When a producer moves to a new schema version, or a
topic still holds records of an older one, the first direct job's tasks decline the table and say
which writer schemas its records carry that it was not planned with (tasks/one_pass.py). The
driver looks them up, evolves the table where their rows need it (batch/direct_tables.py, as
Spark's path's prepare step would), and a second direct job writes those tables alone, with every
schema. Its files and the first job's files of the other tables are committed together, as one
batch. What the second job declines goes Spark's way, as anything the first declines otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from icesink.batch.context import BatchContext
from icesink.batch.direct import DirectWritten, write_once
from icesink.batch.direct_json import Item
from icesink.batch.direct_tables import DirectItem, direct_item
from icesink.batch.route import Targets
from icesink.kafka import wire
from icesink.model import PartitionRange

log = logging.getLogger(__name__)


def write_direct(
    ctx: BatchContext, targets: Targets, items: list[DirectItem], ranges: list[PartitionRange], batch_id: int,
    query_id: str,
) -> DirectWritten:  # fmt: skip
    """Runs the direct job for `items`; then, for the Avro tables it declined for records of writer
    schemas they were not planned with (a producer's new schema version, an older one still in the
    topic), a second one for those tables alone with those schemas too, the tables evolved first
    where their rows need it (batch/direct_tables.py): schema evolution without leaving the path.
    What that one declines goes Spark's way, as before."""
    first, new = write_once(ctx, targets, items, ranges, batch_id, query_id)
    if not new:
        return first
    again = ctx.tables.map(new, lambda found: _with_writers(ctx, targets, *found))
    retry = [d for d in again if d is not None]
    left = [item for (item, _), d in zip(new, again, strict=True) if d is None]
    log.info(
        "batch %d: %d table(s) carried writer schemas they were not planned with (%s); the one-pass job writes "
        "%d of them again with those schemas", batch_id, len(new), _named(new), len(retry),
    )  # fmt: skip
    second, _ = write_once(ctx, targets, retry, ranges, batch_id, query_id, learn=False)
    return DirectWritten(first.written + second.written, first.declined + left + second.declined,
                         first.letters + second.letters)  # fmt: skip


def _with_writers(ctx: BatchContext, targets: Targets, item: Item, frames: frozenset[bytes]) -> DirectItem | None:
    """The table's part of a second direct job, planned with `frames` besides the writer schemas
    of the first (its table evolved if their rows need it), or None (Spark's path)."""
    plan, table, planned = item
    values = sorted({bytes(k) for k in planned.values or ()} | frames)
    return direct_item(ctx, targets, (plan, table, replace(planned, values=values)))


def _named(new: list[tuple[Item, frozenset[bytes]]]) -> str:
    shown = [f"{item[0].table}: {', '.join(str(wire.schema_ref(f)) for f in sorted(frames))}" for item, frames in new]
    return "; ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
