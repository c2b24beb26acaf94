"""Executor side: Arrow record batches -> Parquet data files with Iceberg field ids.

Runs inside `mapInArrow`, so the rows never reach the driver: each task writes its files straight
to object storage and yields one small descriptor row per file. The driver commits the
descriptors; a file that is never committed is an orphan, invisible to readers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

DESCRIPTOR_DDL = "path string, record_count long, file_size long"
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


def _to_target(batch: pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    # Spark hands over its own Arrow types (string, timestamp in the session zone); cast by
    # position to the Iceberg-derived schema so field ids and physical types are the table's.
    table = pa.Table.from_batches([batch])
    table = table.rename_columns(schema.names)
    return table.cast(schema)


class _RollingWriter:
    """One Parquet file at a time, rolled when it reaches the target size."""

    def __init__(self, task: WriteTask, fs: pafs.FileSystem, folder: str, partition_id: int) -> None:
        self._task, self._fs, self._folder, self._pid = task, fs, folder, partition_id
        self._writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._path = ""
        self._rows = 0
        self.done: list[tuple[str, int, int]] = []

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._writer is None:
            name = f"{self._task.file_prefix}-{self._pid:05d}-{uuid.uuid4().hex}.parquet"
            self._path = self._folder + name
            self._sink = self._fs.open_output_stream(self._path)
            self._writer = pq.ParquetWriter(
                self._sink, self._task.arrow_schema, compression=self._task.compression, store_schema=False
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
        self.done.append((self._path, self._rows, size))
        self._writer, self._sink, self._rows = None, None, 0


def write_files(task: WriteTask, batches: Iterator[pa.RecordBatch], partition_id: int) -> list[tuple[str, int, int]]:
    """Writes the batches to one or more Parquet files; returns (uri, record count, size) per file."""
    fs, folder = task.storage.filesystem_for(task.data_location)
    uri_prefix = task.data_location[: len(task.data_location) - len(folder)]
    writer = _RollingWriter(task, fs, folder, partition_id)
    pending: list[pa.Table] = []
    pending_rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(_to_target(batch, task.arrow_schema))
            pending_rows += batch.num_rows
            # Spark's Arrow batches are small; gather them so row groups are not tiny.
            if pending_rows >= _ROW_GROUP_ROWS:
                writer.write(pa.concat_tables(pending))
                pending, pending_rows = [], 0
        if pending:
            writer.write(pa.concat_tables(pending))
        writer.close()
    except BaseException:
        writer.close()
        raise
    return [(uri_prefix + path, rows, size) for path, rows, size in writer.done]


def descriptor_batches(files: list[tuple[str, int, int]]) -> Iterator[pa.RecordBatch]:
    if files:
        paths, rows, sizes = zip(*files, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(paths, pa.string()), pa.array(rows, pa.int64()), pa.array(sizes, pa.int64())],
            names=["path", "record_count", "file_size"],
        )


def map_in_arrow_fn(task: WriteTask):  # type: ignore[no-untyped-def]
    """The function handed to DataFrame.mapInArrow for one table."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        yield from descriptor_batches(write_files(task, batches, pid))

    return run
