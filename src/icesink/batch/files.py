"""Executor side: Arrow record batches -> Parquet data and equality-delete files with Iceberg field ids.

Runs inside `mapInArrow`, so the rows never reach the driver: each task writes its files straight
to object storage and yields one small descriptor row per file. The driver commits the
descriptors; a file that is never committed is an orphan, invisible to readers.

The input columns are: the partition values (as strings, one column per partition field), the
change operation (CDC tables only), then the table's columns in the table's order. Rows should
come sorted by partition: a task keeps one file of each kind open and rolls it when the partition
changes (unsorted input is still correct, only with more files).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from icesink.runtime import faults

DESCRIPTOR_DDL = "path string, record_count long, file_size long, content string, partition array<string>"
DATA, DELETES = "data", "deletes"
_ROW_GROUP_ROWS = 256 * 1024


@dataclass(frozen=True)
class StorageSettings:
    """Where and how executors reach object storage. Secrets are kept out of repr()."""

    endpoint: str | None = None
    region: str = "us-east-1"
    path_style_access: bool = True
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    def filesystem_for(self, uri: str) -> tuple[pafs.FileSystem, str]:
        """The pyarrow filesystem and in-filesystem path of `uri` (s3://, s3a://, file:// or a local path)."""
        scheme, sep, rest = uri.partition("://")
        if not sep or scheme == "file":
            return pafs.LocalFileSystem(), (rest if sep else uri)
        if scheme not in ("s3", "s3a", "s3n"):
            raise ValueError(f"unsupported storage scheme in {uri!r}")
        kwargs: dict[str, object] = {
            "region": self.region,
            "force_virtual_addressing": not self.path_style_access,
        }
        if self.endpoint:
            ep_scheme, _, host = self.endpoint.partition("://")
            kwargs["endpoint_override"] = host or ep_scheme
            kwargs["scheme"] = ep_scheme if host else "https"
        if self.access_key_id and self.secret_access_key:
            kwargs["access_key"] = self.access_key_id
            kwargs["secret_key"] = self.secret_access_key
        return pafs.S3FileSystem(**kwargs), rest


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
    partition_columns: int = 0  # how many leading input columns hold partition values
    # CDC tables: the equality-delete schema (the key columns, with field ids). The input then has
    # an operation column after the partition values; every row's key goes to the delete file and
    # the rows whose operation is not D to the data file.
    delete_schema: pa.Schema | None = None
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


_File = tuple[str, int, int, str, tuple[str | None, ...]]


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
        self._sink: pa.NativeFile | None = None
        self._path = ""
        self._rows = 0
        self.partition: tuple[str | None, ...] = ()
        self.done: list[_File] = []

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
            self._writer = pq.ParquetWriter(
                self._sink, self._schema, compression=self._task.compression, store_schema=False
            )
        self._writer.write_table(table, row_group_size=_ROW_GROUP_ROWS)
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
        self.done.append((self._path, self._rows, size, self._content, self.partition))
        self._writer, self._sink, self._rows = None, None, 0


def split_by_partition(table: pa.Table, columns: int) -> Iterator[tuple[tuple[str | None, ...], pa.Table]]:
    """(partition values, rows) for each distinct value of the first `columns` columns, in order of
    first appearance."""
    if columns == 0:
        yield (), table
        return
    keys = table.select(list(range(columns))).to_pylist()
    order: dict[tuple[str | None, ...], list[int]] = {}
    for i, row in enumerate(keys):
        order.setdefault(tuple(row.values()), []).append(i)
    if len(order) == 1:
        yield next(iter(order)), table
        return
    for key, rows in order.items():
        yield key, table.take(pa.array(rows, pa.int64()))


class _TaskWriter:
    """Splits incoming rows into data and delete rows per partition."""

    def __init__(self, task: WriteTask, fs: pafs.FileSystem, folder: str, partition_id: int) -> None:
        self._task = task
        self._meta = task.partition_columns + (1 if task.delete_schema is not None else 0)
        self._data = _RollingWriter(task, task.arrow_schema, DATA, fs, folder, partition_id)
        self._deletes = (
            _RollingWriter(task, task.delete_schema, DELETES, fs, folder, partition_id)
            if task.delete_schema is not None
            else None
        )
        names = task.arrow_schema.names
        if task.delete_schema is not None:
            self._key_positions = [self._meta + names.index(n) for n in task.delete_schema.names]

    def write(self, table: pa.Table) -> None:
        n_data = len(self._task.arrow_schema)
        for partition, rows in split_by_partition(table, self._task.partition_columns):
            data = rows.select(list(range(self._meta, self._meta + n_data)))
            if self._deletes is not None and self._task.delete_schema is not None:
                op = rows.column(self._task.partition_columns)
                self._deletes.write(
                    _cast(rows.select(self._key_positions), self._task.delete_schema, self._task.table), partition
                )
                data = data.filter(pc.not_equal(op, pa.scalar("D")))
            self._data.write(_cast(data, self._task.arrow_schema, self._task.table), partition)

    def close(self) -> list[_File]:
        self._data.close()
        if self._deletes is not None:
            self._deletes.close()
            return self._data.done + self._deletes.done
        return self._data.done


def write_files(task: WriteTask, batches: Iterator[pa.RecordBatch], partition_id: int) -> list[_File]:
    """Writes the batches to Parquet files; returns (uri, record count, size, content, partition) per file."""
    fs, folder = task.storage.filesystem_for(task.data_location)
    uri_prefix = task.data_location[: len(task.data_location) - len(folder)]
    writer = _TaskWriter(task, fs, folder, partition_id)
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            pending_rows += batch.num_rows
            # Spark's Arrow batches are small; gather them so row groups are not tiny.
            if pending_rows >= _ROW_GROUP_ROWS:
                writer.write(pa.Table.from_batches(pending))
                pending, pending_rows = [], 0
        if pending:
            writer.write(pa.Table.from_batches(pending))
    finally:
        done = writer.close()
    return [(uri_prefix + path, rows, size, content, part) for path, rows, size, content, part in done]


def descriptor_batches(files: list[_File]) -> Iterator[pa.RecordBatch]:
    if files:
        paths, rows, sizes, contents, parts = zip(*files, strict=True)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(paths, pa.string()),
                pa.array(rows, pa.int64()),
                pa.array(sizes, pa.int64()),
                pa.array(contents, pa.string()),
                pa.array([list(p) for p in parts], pa.list_(pa.string())),
            ],
            names=["path", "record_count", "file_size", "content", "partition"],
        )


class _UnchangingZip:
    """The import finder of a zip or jar on sys.path, whose archive does not change while the worker
    process lives: it finds what the zip importer finds, and has nothing to re-read."""

    def __init__(self, finder: Any) -> None:
        self.finder = finder

    def find_spec(self, fullname: str, target: object = None) -> Any:
        return self.finder.find_spec(fullname, target)

    def invalidate_caches(self) -> None:
        pass


def keep_zip_directories() -> None:
    """PySpark's workers import pyspark from pyspark.zip (and have spark-core's jar on sys.path),
    and before every task call importlib.invalidate_caches(), which makes the zip importer of every
    package imported from a zip (pyspark, pyspark/sql, pyspark/sql/pandas, ...) re-read the
    archive's whole directory: 15-60 ms each, 0.3 s and more per task on a busy machine, for
    archives that do not change. Their finders are wrapped so the re-read is skipped; what is
    imported, and from where, is unchanged."""
    import sys
    import zipimport

    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            sys.path_importer_cache[path] = _UnchangingZip(finder)


def map_in_arrow_fn(task: WriteTask):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow for one table."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        keep_zip_directories()
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        files = write_files(task, batches, pid)
        if files:
            faults.maybe_kill_worker("executor-write", task.batch_id)
        yield from descriptor_batches(files)

    return run
