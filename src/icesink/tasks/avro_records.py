"""A one-pass task's Avro records into their table's rows (tasks/decode_avro.py), a batch at a
time: an append table's records Spark's path beyond doubt makes dead letters of become letters
(tasks/dead_letters.py), its bodies that Avro's Java reader cannot decode too (tasks/avro_bodies.py,
looked for only when a block of them did not decode), and a table of changes' Debezium events
that path makes dead letters of (tasks/envelope_rows.py); a record of a writer schema the table was
not given declines it with the frames of those schemas (tasks/one_pass.py, batch/direct_rounds.py).
With a key column, each row takes its record key (a string, or an Avro record key's struct), and
a table of changes takes a tombstone as a delete of its key (`avro_rows`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire
from icesink.tasks import header_frames
from icesink.tasks.carried_rows import TOMBSTONE
from icesink.tasks.dead_letters import ENVELOPE, MAX_LETTERS, Letter, avro_letters, undecodable_letters
from icesink.tasks.decode_avro import DirectAvro, EnvelopeLetter
from icesink.tasks.shared_decode import decoded_once
from icesink.tasks.table_out import KEY_NAMED, NAMED, ORDER, REFUSED, TableOut


def avro_records(batch: pa.RecordBatch, out: TableOut, i: int, decline: Any) -> None:
    """The table's records of `batch`, decoded in one go; the table is declined if one is not
    taken (but for dead letters)."""
    mask = True if out.table.takes_all else taken_mask(batch, out.table.takes)
    if mask is None:
        return
    mine = batch if mask is True else batch.filter(mask)
    if out.table.letters:
        mine, letters = avro_letters(mine, NAMED, nulls=out.table.changes is None)
        if not _lettered(out, i, letters, decline) or not mine.num_rows:
            return
    taken = _lettered_rows(out, mine, i, decline)
    if taken is None:
        return
    mine, rows = taken
    changes = out.table.changes is not None
    if rows is None:
        assert isinstance(out.table.decoder, DirectAvro)
        decline(i, new_frames(out.table.decoder, mine))
    elif changes and not out.add_changes(rows):
        decline(i)
    elif not changes:
        out.add(rows)


def _lettered_rows(
    out: TableOut, mine: pa.RecordBatch, i: int, decline: Any
) -> tuple[pa.RecordBatch, pa.Table | None] | None:  # fmt: skip
    """The records left and their rows (None: not taken), the dead letters among them taken: bodies
    Avro's Java reader cannot decode (looked for when a block did not decode) and change events
    Spark's path refuses. None when no record is left or the table was declined for its letters."""
    found: list[EnvelopeLetter] = []
    rows = _rows(out, mine, found)
    if rows is None and out.table.letters:
        # A body that does not decode refuses its block: those Java cannot decode are letters.
        assert isinstance(out.table.decoder, DirectAvro)
        mine, letters = undecodable_letters(mine, {w.frame: w.schema for w in out.table.decoder.writers}, NAMED)
        if letters:
            if not _lettered(out, i, letters, decline) or not mine.num_rows:
                return None
            found.clear()
            rows = _rows(out, mine, found)
    if (
        rows is not None
        and found
        and not _lettered(out, i, [Letter(t, p, o, *ENVELOPE, w) for t, p, o, w in found], decline)
    ):
        return None
    return mine, rows


def _rows(out: TableOut, records: pa.RecordBatch, letters: list[EnvelopeLetter]) -> pa.Table | None:
    """The table's rows of `records` (of a table of field-routed topics, those it takes), or None;
    the change events that are dead letters in `letters` where the table takes letters."""
    try:
        rows = avro_rows(out, records, letters if out.table.letters else None)
    except REFUSED:
        return None
    # A table of changes' rows have their coordinates and TOMBSTONE first.
    return out.routed(rows, len(ORDER) + 1 if out.table.changes is not None else 0) if rows is not None else None


def avro_rows(out: TableOut, batch: pa.RecordBatch, letters: list[EnvelopeLetter] | None = None) -> pa.Table | None:
    """The table's rows of `batch`'s records (None when one is declined): for a table of changes,
    after their coordinates and whether each is a tombstone (`TOMBSTONE`); with a key column, the
    record key in it (a string, or the struct of an Avro record key). `letters`: where the change
    events Spark's path makes dead letters of go (a table of changes'; else they decline)."""
    table, avro = out.table, out.avro
    assert avro is not None
    if out.keys is not None:
        batch = _with_key_structs(out, batch)
        if batch is None:
            return None
    values, named = batch.column("value"), batch.column(NAMED) if NAMED in batch.schema.names else None
    carried = [*ORDER] if table.changes is not None else []
    carried += ["key"] if table.key_column is not None else []
    carry = pa.Table.from_batches([batch.select(carried)]) if carried else None
    tombstones = None
    if table.changes is not None and table.key_column is not None and values.null_count:
        assert carry is not None
        dead, kept = pc.is_null(values), pc.is_valid(values)
        tombstones = carry.filter(dead)
        values, carry = values.filter(kept), carry.filter(kept)
        named = named.filter(kept) if named is not None else None
    if carry is None:  # the same rows for every table that decodes the records alike
        assert isinstance(table.decoder, DirectAvro)
        frames = frozenset(w.frame for w in table.decoder.writers)
        rows = decoded_once(batch, out.decode_key, frames, lambda: avro.decode(values, named, None))
    else:
        rows = avro.decode(values, named, carry, letters if table.changes is not None else None)
    if rows is None:
        return None
    if table.changes is not None:
        flags = pa.array([False] * rows.num_rows, pa.bool_())
        rows = rows.add_column(len(ORDER), TOMBSTONE, flags)
        if tombstones is not None:
            rows = pa.concat_tables([rows, _tombstone_rows(tombstones, table.task.arrow_schema)])
    if table.key_column is None:
        return rows
    keys = table.changes.keys if table.changes is not None else ()
    return _with_record_key(rows, table.key_column, len(carried), keys)


def _with_key_structs(out: TableOut, batch: pa.RecordBatch) -> pa.RecordBatch | None:
    """`batch` with its Avro record keys (framed, or named by id in a `__key_schema_id` header)
    decoded into the key column's structs (null for a null key), or None when one does not
    decode as Spark's path would (the table is declined)."""
    assert out.keys is not None
    assert out.table.key_column is not None
    raw = batch.column("key")
    present = pc.is_valid(raw)
    taken = raw.filter(present) if raw.null_count else raw
    named = batch.column(KEY_NAMED) if KEY_NAMED in batch.schema.names else None
    named = named.filter(present) if named is not None and raw.null_count else named
    order = pa.table({"i": pa.array(range(len(taken)), pa.int64())})
    decoded = out.keys.decode(taken, named, carry=order)
    if decoded is None:
        return None
    # Rows come a writer schema at a time: back in the records' order, then a null for each null key.
    decoded = decoded.take(pc.sort_indices(decoded.column("i"))).drop_columns(["i"])
    kind = out.table.task.arrow_schema.field(out.table.key_column).type
    structs = pa.StructArray.from_arrays([c.combine_chunks() for c in decoded.columns], fields=list(kind))
    if raw.null_count:
        at = pc.subtract(pc.cumulative_sum(pc.cast(present, pa.int64())), 1)
        structs = structs.take(pc.if_else(present, at, pa.scalar(None, pa.int64())))
    return batch.set_column(batch.schema.get_field_index("key"), "key", structs)


def _tombstone_rows(carried: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows of tombstones (their coordinates and key carried): the coordinates, TOMBSTONE set, the
    key, and every column of the table null (the key column is set from the key after)."""
    n = carried.num_rows
    arrays = [*carried.columns[: len(ORDER)], pa.array([True] * n, pa.bool_()), carried.column("key")]
    names = [*ORDER, TOMBSTONE, "key"]
    return pa.Table.from_arrays([*arrays, *[pa.nulls(n, f.type) for f in schema]], names=[*names, *schema.names])


def _with_record_key(rows: pa.Table, column: str, carried: int, keys: Sequence[str]) -> pa.Table:
    """`rows` with the carried record key (the `carried` leading columns' last; after the
    coordinates and TOMBSTONE for a table of changes) in `column`, as a string (a key that is not
    UTF-8 raises Arrow's error: the table is declined) or an Avro key's struct, and dropped from the
    carried columns. A key column of the table's (`keys`) that a row lacks takes the record key's
    field of that name, as Spark's path fills it (changes.classify)."""
    names = rows.column_names
    at = names.index("key")
    record = rows.column(at)
    struct = pa.types.is_struct(record.type)
    if not struct:
        record = record.cast(pa.string())
    rows = rows.remove_column(at)
    rows = rows.set_column(rows.column_names.index(column, carried - 1), column, record)
    if not struct:
        return rows
    record = record.combine_chunks() if isinstance(record, pa.ChunkedArray) else record
    for name in [k for k in keys if k in record.type.names and k != column]:
        i = rows.column_names.index(name, carried - 1)
        own = rows.column(i)
        rows = rows.set_column(i, name, pc.coalesce(own, pc.struct_field(record, name).cast(own.type)))
    return rows


def _lettered(out: TableOut, i: int, letters: list[Letter], decline: Any) -> bool:
    """Takes the table's `letters`; False (the table declined) past `MAX_LETTERS` of them."""
    out.letters += letters
    if len(out.letters) > MAX_LETTERS:
        decline(i)
        return False
    return True


def new_frames(direct: DirectAvro, records: pa.RecordBatch) -> set[bytes]:
    """The frames of `records` (Confluent-framed, or named by id in a header) that name none of
    the writer schemas of `direct`: schemas the driver may look up, evolving the table, to run
    the table again in one pass (batch/direct_rounds.py)."""
    values = records.column("value")
    if NAMED in records.schema.names:
        headers = records.column(NAMED)
        # A record named by id: its header is its frame. One named by GUID: none (a bare body).
        values = pc.if_else(header_frames.by_id(headers), pc.cast(headers, values.type), values)
        values = values.filter(pc.invert(header_frames.by_guid(headers)))
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
