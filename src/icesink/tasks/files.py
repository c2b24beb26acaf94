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

from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from icesink.model import WrittenFile
from icesink.runtime import faults
from icesink.tasks.descriptors import descriptor_batches
from icesink.tasks.last_changes import last_per_key, not_older
from icesink.tasks.parquet_files import (
    DATA,
    DELETES,
    ROW_GROUP_ROWS,
    Closer,
    PartitionWriters,
    RollingWriter,
    close_all,
    split_by_partition,
)
from icesink.tasks.storage import StorageSettings
from icesink.tasks.worker_imports import freeze_imports, keep_zip_directories


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


class _TaskWriter:
    """Splits incoming rows into data and delete rows per partition."""

    def __init__(self, task: WriteTask, fs: pafs.FileSystem, folder: str, partition_id: int) -> None:
        self._task = task
        changes = 1 + task.order_columns + task.held_column if task.delete_schema is not None else 0
        self._meta = task.partition_columns + changes
        self._data = PartitionWriters(lambda: RollingWriter(task, task.arrow_schema, DATA, fs, folder, partition_id))
        delete_schema = task.delete_schema
        self._deletes = (
            PartitionWriters(lambda: RollingWriter(task, delete_schema, DELETES, fs, folder, partition_id))
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
        self._closer = Closer()

    def write(self, table: pa.Table, final: bool = False) -> None:
        """`final`: the task's last rows of the table. A partitioned table's files of a partition
        are then closed (uploaded) in the background once its rows are written, while the next
        partition's are encoded: a bucket(16) changelog task's 32 uploads waited 0.16 s at its end."""
        n_data = len(self._task.arrow_schema)
        kinds = self._kinds()
        for partition, rows in split_by_partition(table, self._task.partition_columns):
            data = rows.select(list(range(self._meta, self._meta + n_data)))
            if self._deletes is not None and self._task.delete_schema is not None:
                op = rows.column(self._task.partition_columns)
                self._deletes.write(
                    _cast(rows.select(self.key_positions), self._task.delete_schema, self._task.table), partition
                )
                data = data.filter(pc.not_equal(op, pa.scalar("D")))
            self._data.write(_cast(data, self._task.arrow_schema, self._task.table), partition)
            if final and self._task.partition_columns:
                self._closer.submit([w for kind in kinds if (w := kind.writer_of(partition)) is not None])

    def _kinds(self) -> list[PartitionWriters]:
        return [self._data] if self._deletes is None else [self._data, self._deletes]

    def close(self) -> list[WrittenFile]:
        kinds = self._kinds()
        try:
            self._closer.wait()
        finally:
            close_all([w for kind in kinds for w in kind.writers if w.is_open])  # those not closed yet
        return [f for kind in kinds for f in kind.done()]


class TableFiles:
    """One task's files of one table: rows in (input columns as the module's doc says), files out."""

    def __init__(self, task: WriteTask, partition_id: int) -> None:
        fs, folder = task.storage.filesystem_for(task.data_location)
        self._uri_prefix = task.data_location[: len(task.data_location) - len(folder)]
        self.writer = _TaskWriter(task, fs, folder, partition_id)

    def write(self, rows: pa.Table, final: bool = False) -> None:
        self.writer.write(rows, final)

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
