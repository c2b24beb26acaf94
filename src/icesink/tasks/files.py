"""Executor side: Arrow record batches -> Parquet data and equality-delete files with Iceberg field ids.

Runs inside `mapInArrow`, so the rows never reach the driver: each task writes its files straight
to object storage and yields one small descriptor row per file: a `WrittenFile`, field for field
(tasks/descriptors.py). The driver commits the descriptors; a file that is never
committed is an orphan, invisible to readers.

The input columns are: the partition values (as strings, one column per partition field), the
change operation and the changes' order columns (CDC tables only, see WriteTask), then the table's
columns in the table's order. A CDC task gets every change of its keys and writes each key's last one
(last_changes.py). Otherwise rows should come sorted by partition: a task keeps one file of each
kind open and rolls it when the partition changes (unsorted input is still correct, only with more
files).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from icesink.model import WrittenFile
from icesink.runtime import faults
from icesink.tasks.descriptors import descriptor_batches
from icesink.tasks.last_changes import last_per_key, not_older
from icesink.tasks.storage import StorageSettings
from icesink.tasks.worker_imports import freeze_imports, keep_zip_directories

DATA, DELETES = "data", "deletes"
ROW_GROUP_ROWS = 256 * 1024
# A column's dictionary stops growing at this size and the rest of its row group is written plain.
# pyarrow's default (1 MB) lets a column of mostly distinct strings (uuids, free text, URLs with
# ids) fill a whole dictionary first, whose bit-packed indices then compress far worse than the
# plain strings: the benchmark's rows took 10.1 bytes each, 8.2 with 64 KB (Spark's Iceberg sink:
# 9.2), and the write got faster. A low-cardinality column still fits its dictionary.
DICTIONARY_PAGE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class WriteTask:
    """Everything one table's write needs on an executor; pickled into the Spark task."""

    table: str
    arrow_schema: pa.Schema  # target schema, with PARQUET:field_id metadata on every field
    data_location: str  # folder URI the files go to, with a trailing "/"
    file_prefix: str  # e.g. "<query id>-<batch id>": makes files of a batch easy to find
    storage: StorageSettings
    target_file_size: int = 128 * 1024 * 1024
    compression: str = "zstd"
    # zstd's own default, and parquet-mr's (Spark's Iceberg writer): ~5% smaller files than
    # pyarrow's default level 1 for the same write time.
    compression_level: int = 3
    partition_columns: int = 0  # how many leading input columns hold partition values
    # CDC tables: the equality-delete schema (the key columns, with field ids). The input then has
    # an operation column after the partition values, then `order_columns` columns that order a
    # key's changes (the first is `order_by`, when the table has one), then, with `held_column`,
    # the `order_by` value of the row the table holds for the key. Each key's last change, unless
    # older than that, goes to the writer: its key to the delete file, its row to the data file
    # unless the operation is D. A task without order columns gets one change per key.
    delete_schema: pa.Schema | None = None
    order_columns: int = 0
    held_column: bool = False
    batch_id: int = -1


class RequiredColumnError(ValueError):
    """Rows without a value in a required column reached the writer (a bug upstream of it)."""


def _cast(rows: pa.Table, schema: pa.Schema, table: str) -> pa.Table:
    # Spark hands over its own Arrow types (string, timestamp in the session zone); cast by
    # position to the Iceberg-derived schema so field ids and physical types are the table's.
    rows = rows.rename_columns(schema.names)
    for f in schema:
        nulls = rows.column(f.name).null_count
        if not f.nullable and nulls:
            # Checked here so the job fails with the table and column, not pyarrow's cast message.
            raise RequiredColumnError(
                f"table {table}: {nulls} row(s) have no value for required column {f.name} "
                "(a key column); such records should have been dead letters"
            )
    return rows.cast(schema)


class _RollingWriter:
    """One Parquet file at a time of one kind and partition, rolled when it reaches the target size."""

    def __init__(
        self,
        task: WriteTask,
        schema: pa.Schema,
        content: str,
        fs: pafs.FileSystem,
        folder: str,
        partition_id: int,
    ) -> None:
        self._task, self._schema, self._content = task, schema, content
        self._fs, self._folder, self._pid = fs, folder, partition_id
        self._writer: pq.ParquetWriter | None = None
        self._footers: list[pq.FileMetaData] = []
        self._sink: pa.NativeFile | None = None
        self._path = ""
        self._rows = 0
        self.partition: tuple[str | None, ...] = ()
        self.done: list[WrittenFile] = []

    def write(self, table: pa.Table, partition: tuple[str | None, ...]) -> None:
        if table.num_rows == 0:
            return
        if self._writer is not None and partition != self.partition:
            self.close()
        if self._writer is None:
            kind = "" if self._content == DATA else "-deletes"
            name = f"{self._task.file_prefix}-{self._pid:05d}-{uuid.uuid4().hex}{kind}.parquet"
            self._path = self._folder + name
            self.partition = partition
            self._sink = self._fs.open_output_stream(self._path)
            self._footers = []
            self._writer = pq.ParquetWriter(
                self._sink,
                self._schema,
                compression=self._task.compression,
                compression_level=self._task.compression_level,
                use_dictionary=dictionary_columns(self._schema),
                dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
                store_schema=False,
                metadata_collector=self._footers,
            )
        self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._rows += table.num_rows
        assert self._sink is not None
        if self._sink.tell() >= self._task.target_file_size:
            self.close()

    def close(self) -> None:
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        footer = _footer_file(self._footers[0]) if self._footers else b""
        self.done.append(WrittenFile(self._path, self._rows, size, self._content, self.partition, footer))
        self._writer, self._sink, self._rows = None, None, 0


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The leaf columns (dotted Parquet paths) to dictionary-encode: strings and binaries only.
    A dictionary of numbers or timestamps with many distinct values grows to its size limit before
    the writer gives up on it, and the bit-packed indices it wrote meanwhile compress far worse than
    plain values (2-3x the bytes of parquet-mr's files for ids and amounts); parquet-mr drops such a
    dictionary after its first page instead. Low-cardinality numbers compress well plain too."""
    out: list[str] = []

    def walk(path: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(f"{path}.{t.field(i).name}", t.field(i).type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{path}.list.element", t.value_type)
        elif pa.types.is_map(t):
            walk(f"{path}.key_value.key", t.key_type)
            walk(f"{path}.key_value.value", t.item_type)
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
            out.append(path)

    for f in schema:
        walk(f.name, f.type)
    return out


def _footer_file(metadata: pq.FileMetaData) -> bytes:
    """The footer as a file of its own (PAR1, footer, its length, PAR1), which Parquet readers, and
    so Iceberg's metrics, read like the footer of the file it describes."""
    out = pa.BufferOutputStream()
    metadata.write_metadata_file(out)
    return bytes(out.getvalue().to_pybytes())


def split_by_partition(table: pa.Table, columns: int) -> Iterator[tuple[tuple[str | None, ...], pa.Table]]:
    """(partition values, rows) for each distinct value of the first `columns` columns, in order of
    first appearance."""
    if columns == 0:
        yield (), table
        return
    names = [f"p{i}" for i in range(columns)]
    positions = pa.array(range(table.num_rows), pa.int64())
    keys = table.select(list(range(columns))).rename_columns(names).append_column("i", positions)
    # Without threads, groups come in order of first appearance; 4x faster than a Python dict of
    # the rows' values (150,000 rows in 4 partitions: 65 -> 16 ms).
    groups = keys.group_by(names, use_threads=False).aggregate([("i", "list")])
    values = [tuple(groups.column(n)[g].as_py() for n in names) for g in range(groups.num_rows)]
    if len(values) == 1:
        yield values[0], table
        return
    rows = groups.column("i_list")
    for g, value in enumerate(values):
        yield value, table.take(rows[g].values)


# A task's open files are closed this many at a time: closing a small file is its one PUT to object
# storage, a round trip each (a bucket(16) changelog batch is 32 files: 0.7 s one after another).
CLOSING_THREADS = 8


def close_all(writers: Sequence[_RollingWriter]) -> None:
    """Closes the writers' open files, several at once (pyarrow's uploads release the GIL); every
    close is awaited, and the first failure raised."""
    if len(writers) <= 1:
        for w in writers:
            w.close()
        return
    with ThreadPoolExecutor(min(CLOSING_THREADS, len(writers))) as pool:
        futures = [pool.submit(w.close) for w in writers]
    for f in futures:
        f.result()


class _PartitionWriters:
    """A rolling writer of one kind per partition: rows of a partition met again later (unsorted
    input, a task's next chunk) go on into its open file."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._open: dict[tuple[str | None, ...], _RollingWriter] = {}

    def write(self, table: pa.Table, partition: tuple[str | None, ...]) -> None:
        writer = self._open.get(partition)
        if writer is None:
            writer = self._open[partition] = self._make()
        writer.write(table, partition)

    @property
    def writers(self) -> list[_RollingWriter]:
        return list(self._open.values())

    def done(self) -> list[WrittenFile]:
        """The files written, once closed (`close_all`)."""
        return [f for writer in self._open.values() for f in writer.done]


class _TaskWriter:
    """Splits incoming rows into data and delete rows per partition."""

    def __init__(self, task: WriteTask, fs: pafs.FileSystem, folder: str, partition_id: int) -> None:
        self._task = task
        changes = 1 + task.order_columns + task.held_column if task.delete_schema is not None else 0
        self._meta = task.partition_columns + changes
        self._data = _PartitionWriters(lambda: _RollingWriter(task, task.arrow_schema, DATA, fs, folder, partition_id))
        delete_schema = task.delete_schema
        self._deletes = (
            _PartitionWriters(lambda: _RollingWriter(task, delete_schema, DELETES, fs, folder, partition_id))
            if delete_schema is not None
            else None
        )
        names = task.arrow_schema.names
        self.key_positions: list[int] = []
        if task.delete_schema is not None:
            self.key_positions = [self._meta + names.index(n) for n in task.delete_schema.names]
        first_order = task.partition_columns + 1
        self.order_positions = list(range(first_order, first_order + task.order_columns)) if changes else []
        self.held_position = first_order + task.order_columns if changes and task.held_column else None

    def write(self, table: pa.Table) -> None:
        n_data = len(self._task.arrow_schema)
        for partition, rows in split_by_partition(table, self._task.partition_columns):
            data = rows.select(list(range(self._meta, self._meta + n_data)))
            if self._deletes is not None and self._task.delete_schema is not None:
                op = rows.column(self._task.partition_columns)
                self._deletes.write(
                    _cast(rows.select(self.key_positions), self._task.delete_schema, self._task.table), partition
                )
                data = data.filter(pc.not_equal(op, pa.scalar("D")))
            self._data.write(_cast(data, self._task.arrow_schema, self._task.table), partition)

    def close(self) -> list[WrittenFile]:
        kinds = [self._data] if self._deletes is None else [self._data, self._deletes]
        close_all([w for kind in kinds for w in kind.writers])
        return [f for kind in kinds for f in kind.done()]


class TableFiles:
    """One task's files of one table: rows in (input columns as the module's doc says), files out."""

    def __init__(self, task: WriteTask, partition_id: int) -> None:
        fs, folder = task.storage.filesystem_for(task.data_location)
        self._uri_prefix = task.data_location[: len(task.data_location) - len(folder)]
        self.writer = _TaskWriter(task, fs, folder, partition_id)

    def write(self, rows: pa.Table) -> None:
        self.writer.write(rows)

    def close(self) -> list[WrittenFile]:
        """Closes the open files; every file written, by its full URI."""
        return [replace(f, path=self._uri_prefix + f.path) for f in self.writer.close()]


def write_files(task: WriteTask, batches: Iterator[pa.RecordBatch], partition_id: int) -> list[WrittenFile]:
    """Writes the batches to Parquet files; returns each file, by its full URI."""
    files = TableFiles(task, partition_id)
    try:
        for rows in _gathered(batches, files.writer):
            files.write(rows)
    finally:
        done = files.close()
    return done


def _gathered(batches: Iterator[pa.RecordBatch], writer: _TaskWriter) -> Iterator[pa.Table]:
    """The task's rows in tables of a row group or more (Spark's Arrow batches are small); a CDC
    task's as one table of each key's last change, known only once the task has all of its rows
    (a task of changes already reduced has no order columns)."""
    if writer.order_positions:
        changes = [b for b in batches if b.num_rows]
        if not changes:
            return
        last = last_per_key(pa.Table.from_batches(changes), writer.key_positions, writer.order_positions)
        if writer.held_position is not None:
            last = not_older(last, writer.order_positions[0], writer.held_position)
        yield last
        return
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows >= ROW_GROUP_ROWS:
            yield pa.Table.from_batches(pending)
            pending, pending_rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def map_in_arrow_fn(task: WriteTask):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow for one table."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        keep_zip_directories()
        freeze_imports()
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        files = write_files(task, batches, pid)
        if files:
            faults.maybe_kill_worker("executor-write", task.batch_id)
            faults.maybe_kill_executor("executor-lost", task.batch_id)
        yield from descriptor_batches(files)

    return run
