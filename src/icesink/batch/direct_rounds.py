"""Schema evolution without leaving the one-pass path: the direct job's two rounds.

A batch's Avro tables are planned with the writer schemas their topics carried last time (or the
registry's latest, batch/decode/avro.py). When a producer moves to a new schema version, or a
topic still holds records of an older one, the first direct job's tasks decline the table and say
which writer schemas its records carry that it was not planned with (tasks/one_pass.py). The
driver looks them up, evolves the table where their rows need it (batch/direct_tables.py, as
Spark's path's prepare step would), and a second direct job writes those tables alone, with every
schema. Its files and the first job's files of the other tables are committed together, as one
batch. What the second job declines goes Spark's way, as anything the first declines otherwise.

A table of plain JSON records gets the same second chance: the first job's tasks only say it was
declined (a record with a field the table lacks, or a value of a wider type, or any other record
they do not take), so the driver reads the table's records of the batch again (librdkafka) and
infers their columns as Spark would (schema/json_inference.py); when those add to the table's
without conflicting, the table evolves and the second job writes it. A new table, whose columns
came from a sample of the batch (batch/direct_json.py), is staged again with the columns of all
of its records.

And a table of changes whose tasks each wrote changes of one key (its producer did not key its
records by the table's key, so a key's changes landed in two topic-partitions that two tasks read:
each would keep a row for it) is written again by a second job of one task, which reads all of
the table's records of the batch and so holds every change of each key, as Spark's path's shuffle
would (as many changes as a task of the first job may hold: more take Spark's path). Its first
files are never committed.

A table of changes ordered across batches whose first round met a change older than the greatest
order value it holds is written again with the rows it holds above that change's value
(batch/direct_held.py).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql.types import ArrayType, DataType, DoubleType, LongType, StructField, StructType

from icesink.batch.context import BatchContext
from icesink.batch.decode.records import guess
from icesink.batch.direct import DirectWritten, Retry, write_once
from icesink.batch.direct_held import with_held, within_budget
from icesink.batch.direct_item import DirectItem
from icesink.batch.direct_json import Item, share_inferred
from icesink.batch.direct_shape import Shaping, shaped
from icesink.batch.direct_tables import direct_item
from icesink.batch.prepare import evolve_to
from icesink.batch.route import Targets
from icesink.batch.route_guess import RouteGuess
from icesink.batch.write import CHANGES_PER_TASK
from icesink.kafka import wire
from icesink.model import PartitionRange
from icesink.runtime import faults
from icesink.schema.evolution import conflicts, merged

log = logging.getLogger(__name__)


def write_direct(
    ctx: BatchContext, targets: Targets, items: list[DirectItem], ranges: list[PartitionRange], batch_id: int,
    query_id: str, guess: RouteGuess | None = None,
) -> DirectWritten:  # fmt: skip
    """Runs the direct job for `items` (its tasks judging the `guess` of the batch's routing:
    batch/route_guess.py); then a second one for the tables it declined that, evolved, it may take
    (`_again`): schema evolution without leaving the path, and tables of changes older than the rows
    they hold; and one of one task for the tables of changes whose keys two of its tasks wrote.
    What those decline goes Spark's way, as before."""
    first, new = write_once(ctx, targets, items, ranges, batch_id, query_id, guess=guess)
    if not new or first.refuted is not None:
        return first
    again = within_budget(ctx.tables.map(new, lambda r: _again(ctx, targets, r, batch_id)), batch_id)
    retry = [d for r, d in zip(new, again, strict=True) if d is not None and not r.whole]
    left = [r.item for r, d in zip(new, again, strict=True) if d is None and not r.whole]
    evolved = [(r, d) for r, d in zip(new, again, strict=True) if not r.whole and r.older is None]
    if evolved:
        log.info(
            "batch %d: %d table(s) carried new writer schemas or JSON fields (%s); the one-pass job writes %d of "
            "them again, evolved", batch_id, len(evolved), _named([r for r, _ in evolved]),
            sum(d is not None for _, d in evolved),
        )  # fmt: skip
    whole, unheld = _in_one_task(new, again, batch_id)
    second, _ = write_once(ctx, targets, retry, ranges, batch_id, query_id, learn=False)
    alone, _ = write_once(ctx, targets, whole, ranges, batch_id, query_id, learn=False, one_task=True)
    if second.written or alone.written:  # the second round's files written, nothing committed
        faults.maybe_kill("one-pass-again", batch_id, ctx.spark)
    return DirectWritten(
        first.written + second.written + alone.written,
        first.declined + left + unheld + second.declined + alone.declined,
        first.letters + second.letters + alone.letters, first.routing,
    )  # fmt: skip


def _in_one_task(
    new: list[Retry], again: list[DirectItem | None], batch_id: int
) -> tuple[list[DirectItem], list[Item]]:  # fmt: skip
    """Of the tables of changes whose keys two tasks wrote (`Retry.whole`), those a job of one
    task writes again (as many changes as one task holds, `CHANGES_PER_TASK`), and the others
    (Spark's path), each said in the log."""
    held: list[DirectItem] = []
    unheld: list[Item] = []
    budget = CHANGES_PER_TASK
    for r, d in zip(new, again, strict=True):
        if not r.whole:
            continue
        if d is not None and d.item[0].records <= budget:
            budget -= d.item[0].records
            held.append(d)
        else:
            unheld.append(r.item)
    if held:
        log.info(
            "batch %d: %d table(s) of changes had changes of a key in topic-partitions that two tasks read (%s); "
            "the one-pass job writes them again, in one task", batch_id, len(held),
            ", ".join(str(d.item[0].table) for d in held),
        )  # fmt: skip
    if unheld:
        log.info(
            "batch %d: %d table(s) of changes had changes of a key in topic-partitions that two tasks read, more "
            "than one task holds or no longer taken by the one-pass job (%s); their records go through Spark's "
            "decoder", batch_id, len(unheld), ", ".join(str(item[0].table) for item in unheld),
        )  # fmt: skip
    return held, unheld


def _again(ctx: BatchContext, targets: Targets, retry: Retry, batch_id: int) -> DirectItem | None:
    """The table's part of a second direct job, or None (Spark's path). An Avro table: planned
    with the writer schemas its records carried besides those of the first, the table evolved if
    their rows need it (batch/direct_tables.py). A plain JSON table: evolved to the columns Spark
    would infer from its records of the batch (read again on the driver), when they add to its
    own without conflicting; not when nothing is new (the first job declined another record). A
    new one: staged with those columns. A table of changes older than its greatest order value:
    with the rows it holds above the oldest (batch/direct_held.py)."""
    plan, table, planned = retry.item
    if retry.whole:
        return direct_item(ctx, targets, retry.item)
    if retry.older is not None:
        d = direct_item(ctx, targets, retry.item)
        return with_held(ctx, d, retry.older, batch_id) if d is not None and d.changes is not None else None
    if retry.frames:
        values = sorted({bytes(k) for k in planned.values or ()} | retry.frames)
        return direct_item(ctx, targets, (plan, table, replace(planned, values=values)))
    inferred = share_inferred(ctx, targets, retry.item)
    if inferred is None:
        return None
    if table is None:  # a new table, staged with the columns of a sample: with those of every record
        return direct_item(ctx, targets, retry.item, inferred)
    schema = ctx.catalog.spark_schema(table)
    settings = ctx.config.tables.settings_for(plan.table.name)
    reshaped = shaped(inferred, Shaping.of(settings), schema)
    if reshaped is None:
        return None
    incoming = _in_table_types(reshaped[0], schema)
    assert isinstance(incoming, StructType)
    target = merged(schema, incoming)
    if conflicts(target, incoming) or not evolve_to(ctx, plan.table, table, target):
        return None
    log.info("table %s: evolved for its JSON records' new fields or wider types (one-pass job)", plan.table)
    return direct_item(ctx, targets, (plan, table, replace(planned, values=guess(ctx, plan, table).values)))


def _in_table_types(inferred: DataType, table: DataType) -> DataType:
    """`inferred` with a long where the table has a double (JSON's integers in a double column,
    which Spark's parser and the tasks take: not a conflict), at any depth."""
    if isinstance(inferred, StructType) and isinstance(table, StructType):
        have = {f.name: f.dataType for f in table.fields}
        return StructType([
            StructField(f.name, _in_table_types(f.dataType, have[f.name]) if f.name in have else f.dataType, f.nullable)
            for f in inferred.fields
        ])  # fmt: skip
    if isinstance(inferred, ArrayType) and isinstance(table, ArrayType):
        return ArrayType(_in_table_types(inferred.elementType, table.elementType), inferred.containsNull)
    if isinstance(inferred, LongType) and isinstance(table, DoubleType):
        return DoubleType()
    return inferred


def _named(new: list[Retry]) -> str:
    shown = [
        f"{r.item[0].table}: {', '.join(str(wire.schema_ref(f)) for f in sorted(r.frames)) or 'JSON'}" for r in new
    ]
    return "; ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
