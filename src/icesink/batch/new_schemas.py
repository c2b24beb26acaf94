"""Step 4b, the second pass of a table whose first pass met schemas it did not know.

The first pass decodes with a guess: Avro, the writer schemas the table's topics carried last time
(seen_schemas.py); JSON, the table's own columns. A record the guess does not cover (another
writer schema; a JSON key or a value type the table lacks) is left pending: neither a row nor a
dead letter. When the pass counted some, the second one lets the decoders look at those records
(registry lookups, JSON inference), evolves the table, and writes them; the files of both passes
go into the table's one snapshot. An append table's second pass reads only the pending records.
An upsert/changelog table's reads all of its records again and its files replace the first
pass's, because the last change per key must be chosen over the whole batch; the first pass's
files are never committed (orphans, like those of a failed write)."""

from __future__ import annotations

import logging

from pyspark.sql import Column
from pyspark.sql import functions as F

from icesink.batch.context import BatchContext
from icesink.batch.dead_letters import refuse_bad_records
from icesink.batch.decode import bad_records
from icesink.batch.decode.records import decode_table
from icesink.batch.prepare import ready_tables
from icesink.batch.seen_schemas import refs_by_topic
from icesink.batch.work import Planned
from icesink.batch.write import Written, write_failed, write_table
from icesink.model import PartitionRange
from icesink.runtime import faults

log = logging.getLogger(__name__)


def second_passes(
    ctx: BatchContext, written: list[Written], ranges: list[PartitionRange], batch_id: int, query_id: str,
    refuse: bool,
) -> list[Written]:  # fmt: skip
    """`written`, with a second pass for each table whose first one left records pending (or could
    not tell: Spark did not report the count). Learns the schemas each first pass read. `refuse`:
    `on_error: fail`, bad records of a second pass fail the batch before it writes."""
    out = []
    for w in written:
        values, keys = refs_by_topic(w.refs)
        ctx.seen.learn("value", values)
        ctx.seen.learn("key", keys)
        # A pending record is never dropped: any counted one gets its pass. An unknown count
        # (Spark did not report it) gets one too, if the pass could leave some.
        if w.pending == 0 or (w.pending is None and not w.work.planned.guessed):
            out.append(w)
            continue
        out.append(_second_pass(ctx, w, ranges, batch_id, query_id, refuse))
    return out


def _second_pass(
    ctx: BatchContext, first: Written, ranges: list[PartitionRange], batch_id: int, query_id: str, refuse: bool
) -> Written:
    work = first.work
    assert work.records is not None
    replace = work.changes is not None
    records = work.records if replace else work.records.where(pending_records(ctx, work.planned))
    log.info(
        "batch %d: table %s: %s record(s) with schemas new to the table or the job; %s",
        batch_id, work.plan.table, "some" if first.pending is None else first.pending,
        "decoding all of its records again (changes per key)" if replace else "decoding them in a second pass",
    )  # fmt: skip
    faults.maybe_kill("second-pass", batch_id, ctx.spark)
    again = decode_table(ctx, records, work.plan, work.table, Planned())
    if refuse:
        refuse_bad_records([(str(work.plan.table), bad_records(again.decoded))], batch_id)
    [ready] = ready_tables(ctx, [again])  # the table exists: it is never left out
    try:
        second = write_table(ctx, ready, batch_id, query_id)
    except Exception as e:
        raise write_failed(work.plan, ranges, batch_id, e) from e
    if replace:
        return Written(ready, second.files, second.bad, 0, second.refs, second.passes)
    bad = None if first.bad is None or second.bad is None else first.bad + second.bad
    return Written(ready, first.files + second.files, bad, 0, first.refs, first.passes + second.passes)


def pending_records(ctx: BatchContext, planned: Planned) -> Column:
    """The records a guessed pass left pending: those its value's or its key's guess did not cover."""
    out = ctx.decoder.pending(planned.values) if planned.values is not None else F.lit(False)
    if ctx.key_decoder is not None and planned.keys is not None:
        out = out | ctx.key_decoder.pending(planned.keys)
    return out
