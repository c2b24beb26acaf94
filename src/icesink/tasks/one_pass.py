"""The one-pass job's Python tasks: read the records (from Spark's Kafka source or, with
`reading_fn`, from Kafka itself through librdkafka), route them to their tables, decode them,
reduce a changelog table's changes to the last per key, compute partition values and write the
Parquet files, returning one `DIRECT_DDL` row per file written, per table declined, and per table
of changes (the fingerprints of the keys it wrote). The driver's side is batch/direct.py.

A table is declined, and its files never committed, when one of its records is not taken (the
decoders say which) or Arrow refuses a value; its share of the batch then goes Spark's way. A
record of an append table that is beyond doubt a dead letter there is one here instead
(tasks/dead_letters.py), and its table stays. An Avro
table declined for records of writer schemas it was not given reports their frames (every one its
records carry, the rest of its records only looked at): the driver may learn them, evolve the
table and run it again in one pass (batch/direct_rounds.py). With `judging`, the tasks also route
the records of field-routed topics as the routing pass would (tasks/route_judges.py) and report
what they found (`ROUTING`): the driver planned the batch with the values those topics held
before, and checks that guess (batch/route_guess.py).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from icesink.kafka import reader
from icesink.model import PartitionRange, WrittenFile
from icesink.runtime import faults
from icesink.tasks import shared_decode
from icesink.tasks.avro_records import avro_records, more_frames
from icesink.tasks.dead_letters import encoded
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.descriptors import DESCRIPTOR_DDL, DESCRIPTOR_FIELDS, descriptor_columns
from icesink.tasks.json_records import json_records, json_values
from icesink.tasks.route_judges import Judges, Judging, routing_blob
from icesink.tasks.table_out import DirectTable, TableOut, finish, flush_or_decline
from icesink.tasks.worker_imports import freeze_imports, keep_zip_directories

log = logging.getLogger(__name__)

# A row per file written, per table declined (with the frames of the writer schemas it was not
# given, end to end, or the least order_by value of its changes below its order floor), per table
# of changes and task: the fingerprints of the keys it wrote (tasks/change_rows.py), and per table
# and task with dead letters: their letters.
DIRECT_DDL = f"table int, declined boolean, keys binary, letters binary, frames binary, older long, {DESCRIPTOR_DDL}"
# Tables a task finishes at once (200 tables in two tasks: 1.5-2.5 s a task one at a time).
_WRITERS = 8
# The table index of the row a task returns when it could not read its records (kafka/reader.py).
UNREAD = -1
# The table index of the row that holds a task's routing of field-routed topics (`judging`).
ROUTING = -2


def _json_by_topic(tables: Sequence[DirectTable]) -> dict[str, list[int]]:
    """The JSON tables (their indexes) each topic's records go to."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(tables):
        if not isinstance(t.decoder, DirectAvro):
            for topic in sorted({topic for topic, _ in t.takes}):
                by_topic[topic].append(i)
    return by_topic


def _finished(
    outs: Mapping[int, TableOut], done: Sequence[list[WrittenFile] | None], declined: set[int]
) -> tuple[list[tuple[int, WrittenFile]], list[tuple[int, bytes]]]:
    """(each file written, each table of changes' key fingerprints); a table whose last rows were
    refused joins `declined`."""
    written: list[tuple[int, WrittenFile]] = []
    keys: list[tuple[int, bytes]] = []
    for (i, out), files in zip(list(outs.items()), done, strict=True):
        if files is None:
            declined.add(i)
        else:
            written += [(i, f) for f in files]
            keys += [(i, out.fingerprints)] if out.fingerprints is not None else []
    return written, keys


def direct_fn(tables: Sequence[DirectTable], batch_id: int, judging: Judging | None = None):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow: records (topic, partition, offset, value, and
    for Avro tables the schema-id header's value) in, one `DIRECT_DDL` row out per file
    written, and one per table declined (and with `judging`, one of the routing it found)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        keep_zip_directories()
        freeze_imports()
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        outs = {i: TableOut(t, pid) for i, t in enumerate(tables)}
        by_topic, avro = _json_by_topic(tables), [i for i, t in enumerate(tables) if isinstance(t.decoder, DirectAvro)]
        declined: set[int] = set()
        # Avro tables declined for writer schemas they were not given: the frames their records carry.
        seeking: dict[int, tuple[TableOut, set[bytes]]] = {}
        older: dict[int, int] = {}  # tables of changes declined for changes below their order floor
        judges = judging.judges() if judging is not None else None

        def decline(i: int, frames: set[bytes] | None = None) -> None:
            declined.add(i)
            out = outs.pop(i)
            out.close()  # files it wrote are never committed
            if out.older is not None:
                older[i] = out.older
            if frames:
                seeking[i] = (out, frames)

        try:
            _take(batches, outs, tables, by_topic, avro, decline, seeking, judges)
        except BaseException:
            shared_decode.forget()
            for out in outs.values():
                out.close()  # files it wrote are never committed
            raise
        # Each table's last rows and the closing of its files, a few tables at a time: a small
        # table's file is mostly waiting on S3 (pyarrow lets go of the GIL meanwhile).
        shared_decode.forget()
        with ThreadPoolExecutor(max_workers=_WRITERS) as pool:
            done = list(pool.map(finish, outs.values()))
        written, keys = _finished(outs, done, declined)
        older.update({i: out.older for i, out in outs.items() if i in declined and out.older is not None})
        letters = [(i, encoded(out.letters)) for i, out in outs.items() if out.letters and i not in declined]
        if written:
            faults.maybe_kill_worker("executor-write", batch_id)
            faults.maybe_kill_executor("executor-lost", batch_id)
        frames = {i: b"".join(sorted(found)) for i, (_, found) in seeking.items()}
        yield from results(written, sorted(declined), keys, letters, frames, older)
        if judges is not None:
            yield from results([], [], letters=[(ROUTING, routing_blob(judges.found))])

    return run


def _take(
    batches: Iterator[pa.RecordBatch], outs: dict[int, TableOut], tables: Sequence[DirectTable],
    by_topic: Mapping[str, list[int]], avro: list[int], decline: Any,
    seeking: Mapping[int, tuple[TableOut, set[bytes]]], judges: Judges | None,
) -> None:  # fmt: skip
    """Every record of `batches` into the tables that take it (their rows, flushed to files as they
    fill), and to the `judges` of its topic. A JSON record is judged just before its tables look
    at it (one parse for all: tasks/routing.json_object_once)."""
    json = sorted({i for found in by_topic.values() for i in found})
    # The one JSON table of the job, taking every record it reads: its records a batch at a time.
    alone = json[0] if len(json) == 1 and tables[json[0]].takes_all else None
    per_record = judges if judges is not None and not judges.avro and alone is None and by_topic else None
    for batch in batches:
        if judges is not None and per_record is None and not judges.avro:
            judges.batch(batch)
        if alone is not None:
            if alone in outs:
                json_values(batch, outs[alone], alone, decline)
        elif by_topic:
            json_records(batch, by_topic, outs, decline, per_record)
        _avro_tables(batch, outs, avro, decline, seeking)
        if judges is not None and judges.avro:  # after the tables: the rows they decoded may count the values
            judges.batch(batch)
        for i in [i for i, out in outs.items() if out.due]:
            flush_or_decline(outs, i, decline)


def _avro_tables(
    batch: pa.RecordBatch, outs: dict[int, TableOut], avro: list[int], decline: Any,
    seeking: Mapping[int, tuple[TableOut, set[bytes]]],
) -> None:  # fmt: skip
    for i in avro:
        out = outs.get(i)
        if out is not None:
            avro_records(batch, out, i, decline)
        elif i in seeking:
            more_frames(batch, *seeking[i])


def results(
    written: list[tuple[int, WrittenFile]], declined: list[int], keys: Sequence[tuple[int, bytes]] = (),
    letters: Sequence[tuple[int, bytes]] = (), frames: Mapping[int, bytes] | None = None,
    older: Mapping[int, int] | None = None,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """The task's `DIRECT_DDL` rows: a file written, a table declined (and the frames of writer
    schemas it was not given, or the least order value below its floor), a table's key
    fingerprints, a table's dead letters."""
    frames, older = frames or {}, older or {}
    n_files, n_declined, n_keys = len(written), len(declined), len(keys)
    if not n_files + n_declined + n_keys + len(letters):
        return
    files: list[WrittenFile | None] = [f for _, f in written] + [None] * (n_declined + n_keys + len(letters))
    nothing = [None] * (n_files + n_declined)
    arrays = [
        pa.array([i for i, _ in written] + declined + [i for i, _ in keys] + [i for i, _ in letters], pa.int32()),
        pa.array([False] * n_files + [True] * n_declined + [False] * (n_keys + len(letters)), pa.bool_()),
        pa.array(nothing + [k for _, k in keys] + [None] * len(letters), pa.binary()),
        pa.array(nothing + [None] * n_keys + [x for _, x in letters], pa.binary()),
        pa.array([None] * n_files + [frames.get(i) for i in declined] + [None] * (n_keys + len(letters)), pa.binary()),
        pa.array([None] * n_files + [older.get(i) for i in declined] + [None] * (n_keys + len(letters)), pa.int64()),
        *descriptor_columns(files),
    ]
    names = ["table", "declined", "keys", "letters", "frames", "older", *DESCRIPTOR_FIELDS]
    yield pa.RecordBatch.from_arrays(arrays, names=names)


def reading_fn(  # type: ignore[no-untyped-def]
    tables: Sequence[DirectTable], batch_id: int, shares: list[list[PartitionRange]], settings: dict[str, Any],
    headers: Mapping[str, str], judging: Judging | None = None,
):  # fmt: skip
    """`direct_fn` for tasks that read their share of the records from Kafka (one task a share, its
    index the task's one row). A share librdkafka does not read to its end declines every table
    (`UNREAD`): Spark's path reads them."""
    write = direct_fn(tables, batch_id, judging)

    def run(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        mine = [i for b in tasks for i in b.column("id").to_pylist()]
        kafka = reader.RangeReader(settings)
        keys = any(t.key_column is not None for t in tables)
        records = (batch for i in mine for batch in kafka.batches(shares[i], headers, keys))
        try:
            yield from write(records)
        except reader.RangeReadError as e:
            log.warning("the one-pass job could not read its records with librdkafka: %s", e)
            yield from results([], [UNREAD])

    return run
