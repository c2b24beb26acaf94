"""A one-pass task's Avro records into their table's rows (tasks/decode_avro.py), a batch at a
time: an append table's records Spark's path beyond doubt makes dead letters of become letters
(tasks/dead_letters.py), its bodies that Avro's Java reader cannot decode too (tasks/avro_bodies.py,
looked for only when a block of them did not decode); a record of a writer schema the table was
not given declines it with the frames of those schemas (tasks/one_pass.py, batch/direct_rounds.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire
from icesink.tasks.dead_letters import MAX_LETTERS, Letter, avro_letters, undecodable_letters
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.table_out import NAMED, REFUSED, TableOut, avro_rows


def avro_records(batch: pa.RecordBatch, out: TableOut, i: int, decline: Any) -> None:
    """The table's records of `batch`, decoded in one go; the table is declined if one is not
    taken (but for dead letters)."""
    mask = True if out.table.takes_all else taken_mask(batch, out.table.takes)
    if mask is None:
        return
    mine = batch if mask is True else batch.filter(mask)
    if out.table.letters:
        mine, letters = avro_letters(mine, NAMED)
        if not _lettered(out, i, letters, decline) or not mine.num_rows:
            return
    rows = _rows(out, mine)
    if rows is None and out.table.letters:
        # A body that does not decode refuses its block: those Java cannot decode are letters.
        assert isinstance(out.table.decoder, DirectAvro)
        mine, letters = undecodable_letters(mine, {w.frame: w.schema for w in out.table.decoder.writers}, NAMED)
        if letters:
            if not _lettered(out, i, letters, decline) or not mine.num_rows:
                return
            rows = _rows(out, mine)
    changes = out.table.changes is not None
    if rows is None:
        assert isinstance(out.table.decoder, DirectAvro)
        decline(i, new_frames(out.table.decoder, mine))
    elif changes and not out.add_changes(rows):
        decline(i)
    elif not changes:
        out.add(rows)


def _rows(out: TableOut, records: pa.RecordBatch) -> pa.Table | None:
    try:
        return avro_rows(out, records)
    except REFUSED:
        return None


def _lettered(out: TableOut, i: int, letters: list[Letter], decline: Any) -> bool:
    """Takes the table's `letters`; False (the table declined) past `MAX_LETTERS` of them."""
    out.letters += letters
    if len(out.letters) > MAX_LETTERS:
        decline(i)
        return False
    return True


def new_frames(direct: DirectAvro, records: pa.RecordBatch) -> set[bytes]:
    """The frames of `records` (Confluent-framed, not named in a header) that name none of the
    writer schemas of `direct`: schemas the driver may look up, evolving the table, to
    run the table again in one pass (batch/direct_rounds.py)."""
    values = records.column("value")
    if NAMED in records.schema.names:
        values = values.filter(pc.invert(records.column(NAMED)))
    framed = pc.and_(pc.is_valid(values), pc.greater_equal(pc.binary_length(values), wire.HEADER_SIZE))
    frames = pc.unique(pc.binary_slice(values.filter(framed), 0, wire.HEADER_SIZE)).to_pylist()
    known = {w.frame for w in direct.writers}
    return {f for f in frames if f[0] == wire.MAGIC and f not in known}


def more_frames(batch: pa.RecordBatch, out: TableOut, frames: set[bytes]) -> None:
    """The frames of writer schemas `out`'s table was not given among its records of `batch`."""
    mask = True if out.table.takes_all else taken_mask(batch, out.table.takes)
    if mask is not None:
        assert isinstance(out.table.decoder, DirectAvro)
        frames |= new_frames(out.table.decoder, batch if mask is True else batch.filter(mask))


def taken_mask(batch: pa.RecordBatch, takes: Mapping[tuple[str, int], tuple[int, int]]) -> Any:
    """Which of the batch's records a table takes (its topic-partitions, within its offsets): an
    Arrow mask, True for all of them, None for none."""
    topic, partition, offset = (batch.column(n) for n in ("topic", "partition", "offset"))
    mask = None
    for (t, p), (first, last) in takes.items():
        here = pc.and_(pc.equal(topic, t), pc.equal(partition, p))
        here = pc.and_(here, pc.and_(pc.greater_equal(offset, first), pc.less_equal(offset, last)))
        mask = here if mask is None else pc.or_(mask, here)
    if mask is None:
        return None
    count = pc.sum(mask).as_py() or 0
    if count == 0:
        return None
    return True if count == len(batch) else mask
