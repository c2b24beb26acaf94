"""Parquet files of one kind (data or equality deletes) for a task: one open file per partition,
rolled at the target size, each closed file described (a `WrittenFile`, with its footer for
Iceberg's metrics). The table's side of a task (which rows go to which kind) is tasks/files.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from icesink.model import WrittenFile

DATA, DELETES = "data", "deletes"
ROW_GROUP_ROWS = 256 * 1024
# A column's dictionary stops growing at this size and the rest of its row group is written plain.
# pyarrow's default (1 MB) lets a column of mostly distinct strings (uuids, free text, URLs with
# ids) fill a whole dictionary first, whose bit-packed indices then compress far worse than the
# plain strings: the benchmark's rows took 10.1 bytes each, 8.2 with 64 KB (Spark's Iceberg sink:
# 9.2), and the write got faster. A low-cardinality column still fits its dictionary.
DICTIONARY_PAGE_LIMIT = 64 * 1024


class FileOptions(Protocol):
    """What a file takes of its table's write (tasks/files.WriteTask)."""

    @property
    def file_prefix(self) -> str: ...
    @property
    def target_file_size(self) -> int: ...
    @property
    def compression(self) -> str: ...
    @property
    def compression_level(self) -> int: ...


class RollingWriter:
    """One Parquet file at a time of one kind and partition, rolled when it reaches the target size."""

    def __init__(
        self,
        task: FileOptions,
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

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    def close(self) -> None:
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        footer = footer_file(self._footers[0]) if self._footers else b""
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


def footer_file(metadata: pq.FileMetaData) -> bytes:
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
    positions = pa.array(np.arange(table.num_rows, dtype=np.int64))
    keys = table.select(list(range(columns))).rename_columns(names).append_column("i", positions)
    # Without threads, groups come in order of first appearance; 4x faster than a Python dict of
    # the rows' values (150,000 rows in 4 partitions: 65 -> 16 ms).
    groups = keys.group_by(names, use_threads=False).aggregate([("i", "list")])
    values = [tuple(groups.column(n)[g].as_py() for n in names) for g in range(groups.num_rows)]
    if len(values) == 1:
        yield values[0], table
        return
    # One take of every row, grouped, then a slice per partition: a take per partition cost twice
    # as much (a bucket(16) changelog task's 105,000 rows: 85 -> 40 ms).
    lists = groups.column("i_list").combine_chunks()
    grouped = table.take(lists.flatten())
    starts = lists.offsets.to_pylist()
    for g, value in enumerate(values):
        yield value, grouped.slice(starts[g], starts[g + 1] - starts[g])


# A task's open files are closed this many at a time: closing a small file is its one PUT to object
# storage (tasks/storage.py), a round trip each (a bucket(16) changelog batch is 32 files: 0.7 s one
# after another).
CLOSING_THREADS = 8


def close_all(writers: Sequence[RollingWriter]) -> None:
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


class Closer:
    """Closes writers in the background, `CLOSING_THREADS` at a time: a partition's files, once a
    task has written its last rows, are uploaded while the next partition's rows are encoded."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[None]] = []

    def submit(self, writers: Sequence[RollingWriter]) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(CLOSING_THREADS)
        self._futures += [self._pool.submit(w.close) for w in writers]

    def wait(self) -> None:
        """Every close submitted, awaited; the first failure raised."""
        if self._pool is None:
            return
        self._pool.shutdown(wait=True)
        self._pool = None
        futures, self._futures = self._futures, []
        for f in futures:
            f.result()


class PartitionWriters:
    """A rolling writer of one kind per partition: rows of a partition met again later (unsorted
    input, a task's next chunk) go on into its open file."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._open: dict[tuple[str | None, ...], RollingWriter] = {}

    def write(self, table: pa.Table, partition: tuple[str | None, ...]) -> None:
        writer = self._open.get(partition)
        if writer is None:
            writer = self._open[partition] = self._make()
        writer.write(table, partition)

    def writer_of(self, partition: tuple[str | None, ...]) -> RollingWriter | None:
        return self._open.get(partition)

    @property
    def writers(self) -> list[RollingWriter]:
        return list(self._open.values())

    def done(self) -> list[WrittenFile]:
        """The files written, once closed (`close_all`)."""
        return [f for writer in self._open.values() for f in writer.done]
