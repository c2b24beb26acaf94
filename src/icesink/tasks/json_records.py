"""A one-pass task's plain JSON records (and Kafka Connect JSON's) into their tables' rows
(tasks/plain_rows.py, tasks/connect_values.py): a record a table's rows do not take is its dead
letter when Spark's path beyond doubt makes one of it (an append table's), else it declines the
table (tasks/one_pass.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from icesink.tasks.dead_letters import MAX_LETTERS, NULL_VALUE, Letter
from icesink.tasks.json_batches import ByValue, taken_whole
from icesink.tasks.route_judges import Judges
from icesink.tasks.table_out import ORDER, REFUSED, TableOut


def json_records(
    batch: pa.RecordBatch, by_topic: Mapping[str, list[int]], outs: dict[int, TableOut], decline: Any,
    judges: Judges | None = None,
) -> None:  # fmt: skip
    """Each record of `batch` into the rows of the JSON tables that take it (`by_topic`, within
    their offsets), a record at a time; first to the `judges` of its topic, if any. The records
    whose tables take them a batch at a time are taken so first (tasks/json_batches.py)."""
    routed = {topic: r for topic, tables in by_topic.items() if (r := ByValue.of(tables, outs)) is not None}
    batch = taken_whole(batch, by_topic, routed, outs, judges)
    if not len(batch):
        return
    columns = [batch.column(n).to_pylist() for n in ("topic", "partition", "offset", "value")]
    keys = batch.column("key").to_pylist() if "key" in batch.schema.names else [None] * len(batch)
    for topic, partition, offset, value, key in zip(*columns, keys, strict=True):
        if judges is not None:
            judges.record(topic, partition, offset, value)
        by_value = routed.get(topic)
        tables = by_value.tables(value) if by_value is not None else None
        for i in tables if tables is not None else by_topic.get(topic, ()):
            out = outs.get(i)
            if out is None:
                continue
            first, last = out.table.takes.get((topic, partition), (1, 0))
            assert out.rows is not None
            if not first <= offset <= last:
                continue
            at = (topic, partition, offset)
            if not out.rows.add(value, at, key, routed=tables is not None):
                _not_taken(out, i, value, key, at, decline)


def json_values(batch: pa.RecordBatch, out: TableOut, i: int, decline: Any) -> None:
    """`json_records` for the one JSON table of the job, which takes every record it reads: a
    table of changes gets the batch's coordinates as its columns, a keyed table its keys."""
    assert out.rows is not None
    table = out.table
    values = batch.column("value").to_pylist()
    if table.changes is not None or table.key_column is not None:
        coordinates = tuple(batch.column(n) for n in ORDER) if table.changes is not None else None
        keys = batch.column("key").to_pylist() if table.key_column is not None else None
        if out.rows.add_all(values, coordinates, keys):
            return
        if not table.letters:
            decline(i)
            return
        # A record the rows did not take (none of the batch was): the batch a record at a time,
        # its dead letters made, between flushes (its rows written apart from the batches taken whole).
        _one_at_a_time(batch, values, keys, out, i, decline)
        return
    if out.rows.add_parsed(values):
        return
    add = out.rows.add
    for row, value in enumerate(values):
        if not add(value):
            topic, partition, offset = (batch.column(n)[row].as_py() for n in ("topic", "partition", "offset"))
            if not _not_taken(out, i, value, None, (topic, partition, offset), decline):
                return


def _one_at_a_time(
    batch: pa.RecordBatch, values: list[bytes | None], keys: list[bytes | None] | None, out: TableOut, i: int,
    decline: Any,
) -> None:  # fmt: skip
    try:
        out.flush()
        coordinates = zip(*(batch.column(n).to_pylist() for n in ORDER), strict=True)
        for at, value, key in zip(coordinates, values, keys or [None] * len(values), strict=True):
            assert out.rows is not None
            if not out.rows.add(value, at, key) and not _not_taken(out, i, value, key, at, decline):
                return
        out.flush()
    except REFUSED:
        decline(i)


def _not_taken(
    out: TableOut, i: int, value: bytes | None, key: bytes | None, at: tuple[str, int, int], decline: Any
) -> bool:  # fmt: skip
    """A JSON record the table's rows did not take: its dead letter (an append table's null value,
    or what the rows' `letter` says: a plain JSON value beyond doubt not an object, a Debezium
    event beyond doubt not a change), or else its table declined, as it is past `MAX_LETTERS`
    letters. False when the table was declined. Of a field-routed topic, such a record is no
    table's: the routing pass made it a dead letter, or skipped it as its rule says (batch/route.py)."""
    why = None
    if out.table.letters or out.table.route is not None:
        assert out.rows is not None
        # A table of changes: a null value is a tombstone, or not a record Spark's path words so.
        why = (NULL_VALUE if out.table.changes is None else None) if value is None else out.rows.letter(value, key)
    if why is not None and out.table.route is not None:
        return True
    if why is not None and len(out.letters) < MAX_LETTERS:
        out.letters.append(Letter(*at, *why))
        return True
    decline(i)
    return False
