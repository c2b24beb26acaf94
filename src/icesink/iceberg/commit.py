"""The commit of one batch to one table through Iceberg's Java API: ONE snapshot holding the
batch's data files (an append) or its data and equality delete files (a RowDelta), whose summary
advances the table's offsets past the batch. It lands only on the offsets the batch was planned
with (the fence, fence.py); when the catalog's answer is lost, the table itself says whether the
batch landed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

from icesink.errors import CommitError, CommitOutcomeUnknownError
from icesink.iceberg import ancestry, fence
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.jvm import JavaObject, jvm
from icesink.model import Offsets, OffsetsPlan, TableRef, WrittenFile, advance
from icesink.runtime import faults

log = logging.getLogger(__name__)

_VALIDATION_FAILED = "org.apache.iceberg.exceptions.ValidationException"
_OUTCOME_UNKNOWN = "org.apache.iceberg.exceptions.CommitStateUnknownException"
_OTHERS_MOVED_ATTEMPTS = 3


@dataclass(frozen=True)
class CommitResult:
    table: TableRef
    snapshot_id: int
    files: int
    records: int
    delete_files: int = 0
    deletes: int = 0
    parent_id: int | None = None  # the snapshot it was committed on top of


def commit_files(
    spark: SparkSession,
    table: JavaObject,
    files: Sequence[WrittenFile],
    plan: OffsetsPlan,
    query_id: str,
    batch_id: int,
    key_columns: Sequence[str] = (),
) -> CommitResult:
    """ONE snapshot holding `files`, with the table's offsets advanced past this batch: an
    append, or a RowDelta when there are equality deletes (over `key_columns`).

    The batch was planned against `plan.committed`. If the table moved past those offsets for
    any topic-partition of this batch in the meantime (another job writing the same topics),
    committing would double rows: refuse instead.
    """
    ref = plan.table
    data = [f for f in files if f.content == "data"]
    deletes = [f for f in files if f.content == "deletes"]
    if deletes and not key_columns:
        raise CommitError(f"table {ref}: delete files without key columns")
    # The table as loaded while planning this batch: Iceberg refreshes it as it commits (one
    # request before its one commit request) and the fence checks the offsets there. It is
    # refreshed here only when another writer moved offsets of topic-partitions this batch does
    # not carry, which the summary carries forward.
    for _ in range(_OTHERS_MOVED_ATTEMPTS):
        now = ancestry.committed_offsets(table)
        if any(now.get(tp) != plan.committed.get(tp) for tp in plan.batch_tps):
            raise _offsets_moved(ref, plan, now)
        update = _update(spark, table, data, deletes, key_columns)
        intended = advance(now, plan.next_offsets)
        for k, v in codec.summary_properties(intended, query_id, batch_id).items():
            update.set(k, v)
        faults.maybe_pause("before-table-commit", batch_id)
        try:
            snapshot_id, parent_id = _commit_fenced(spark, table, update, plan, now, intended, query_id, batch_id)
            break
        except _OthersMovedError:
            log.info("table %s: another writer committed offsets of other topics; committing on top", ref)
    else:
        raise CommitError(
            f"table {ref}: other writers kept committing to it while batch {batch_id} did; nothing was committed, "
            "the batch is replayed"
        )
    return CommitResult(
        ref,
        snapshot_id,
        files=len(data),
        records=sum(f.record_count for f in data),
        delete_files=len(deletes),
        deletes=sum(f.record_count for f in deletes),
        parent_id=parent_id,
    )


def _ids(snapshot: JavaObject) -> tuple[int, int | None]:
    parent = snapshot.parentId()
    return int(snapshot.snapshotId()), int(parent) if parent is not None else None


class _OthersMovedError(Exception):
    """The fence refused a commit because offsets of topic-partitions the batch does not carry moved."""


def _offsets_moved(ref: TableRef, plan: OffsetsPlan, now: Offsets) -> CommitError:
    tps = sorted(set(plan.batch_tps) | set(now) | set(plan.committed))
    moved = [tp for tp in tps if now.get(tp) != plan.committed.get(tp)]
    detail = ", ".join(f"{tp}: planned {plan.committed.get(tp)}, now {now.get(tp)}" for tp in moved[:5])
    return CommitError(
        f"table {ref}: offsets changed while the batch was written ({detail}); is another job writing "
        "this table? nothing was committed; the batch is replayed from the table's offsets"
    )


def _update(
    spark: SparkSession,
    table: JavaObject,
    data: Sequence[WrittenFile],
    deletes: Sequence[WrittenFile],
    key_columns: Sequence[str],
) -> JavaObject:
    """The uncommitted snapshot: an append of `data`, or with `deletes` a RowDelta."""
    described = _Described(spark, table)
    if not deletes:
        # A fast append, as Spark's own streaming sink commits: one new manifest, none merged (a
        # merging append cost a small batch's commit 94-105 ms against 74; `icesink maintain`
        # rewrites the manifests the appends add).
        append = table.newFastAppend()
        for f in data:
            append.appendFile(described.data_file(f))
        return append
    delta = table.newRowDelta()
    for f in data:
        delta.addRows(described.data_file(f))
    ids = described.field_ids(key_columns)
    for f in deletes:
        delta.addDeletes(described.equality_deletes(f, ids))
    return delta


class _Described:
    """Iceberg's descriptions of the Parquet files a batch wrote, with the metrics of their footers
    (as the writers sent them, so the commit reads nothing from storage)."""

    def __init__(self, spark: SparkSession, table: JavaObject) -> None:
        self._spark = spark
        self._jvm = jvm(spark)
        self._java = java_members(self._jvm)
        self._metrics_config = self._java.metrics_config(table)
        self._io = table.io()
        self._spec = table.spec()
        self._partitioned = bool(self._spec.isPartitioned())
        self._schema = table.schema()
        self._footers: JavaObject | None = None
        self._partitions: dict[tuple[str | None, ...], JavaObject] = {}  # a data file's, by its values

    def _metrics(self, f: WrittenFile) -> JavaObject:
        # From the footer the writer sent along (no read of the file); a file without one is read.
        java = self._java
        options = parquet_read_options(self._jvm) if f.footer else None
        if options is None:
            source = java.in_memory_file(f.footer) if f.footer else self._io.newInputFile(f.path)
            return java.file_metrics(source, self._metrics_config)
        # A footer-only file: PAR1, the footer, its 4-byte length, PAR1.
        if self._footers is None:  # one per commit: a commit's thread is its only user
            self._footers = _parquet(self._jvm).format.converter.ParquetMetadataConverter(options)
        footer = self._footers.readParquetMetadata(java.byte_stream(f.footer, 4, len(f.footer) - 12))
        return java.footer_metrics(footer, java.empty_stream(), self._metrics_config)

    def data_file(self, f: WrittenFile) -> JavaObject:
        java = self._java
        builder = (
            java.data_file_builder(self._spec)
            .withPath(f.path)
            .withFormat(java.parquet)
            .withFileSizeInBytes(f.file_size)
            .withMetrics(self._metrics(f))
        )
        if not self._partitioned:
            return builder.build()
        built = builder.withPartitionValues(self._jlist(f.partition)).build()
        self._partitions.setdefault(f.partition, built)
        return built

    def field_ids(self, columns: Sequence[str]) -> JavaObject:
        """The field ids of `columns` as a Java int[]."""
        ids = self._spark.sparkContext._gateway.new_array(self._jvm.int, len(columns))  # type: ignore[union-attr]
        for i, k in enumerate(columns):
            ids[i] = self._schema.findField(k).fieldId()
        return ids

    def equality_deletes(self, f: WrittenFile, ids: JavaObject) -> JavaObject:
        builder = (
            self._java.delete_file_builder(self._spec)
            .ofEqualityDeletes(ids)
            .withPath(f.path)
            .withFormat(self._java.parquet)
            .withFileSizeInBytes(f.file_size)
            .withRecordCount(f.record_count)
            .withMetrics(self._metrics(f))
        )
        if self._partitioned:
            builder = builder.withPartition(self._partition(f.partition))
        return builder.build()

    def _jlist(self, values: Sequence[str | None]) -> JavaObject:
        out = self._java.array_list()
        for v in values:
            out.add(v)
        return out

    def _partition(self, values: tuple[str | None, ...]) -> JavaObject:
        # FileMetadata's builder takes no partition strings: the partition of a data file of the
        # same values (one py4j call; a changelog batch has one for most of its delete files), or
        # of a throwaway DataFile, parsed the same way as the data files' builder does.
        same = self._partitions.get(values)
        if same is not None:
            return same.partition()
        probe = (
            self._java.data_file_builder(self._spec)
            .withPath("icesink-partition-probe.parquet")
            .withFormat(self._java.parquet)
            .withFileSizeInBytes(1)
            .withRecordCount(1)
            .withPartitionValues(self._jlist(values))
            .build()
        )
        return probe.partition()


@dataclass(frozen=True)
class JavaMembers:
    """The Java classes, static methods and constants a commit calls for every file it describes,
    looked up once per JVM: each py4j lookup of a package, class or static member is a round trip
    of its own (~0.09 ms on the 2-core machine), and looked up per file these were 19 of the ~30
    round trips of its description, ~1.7 ms a file (a Debezium batch into a bucket(16) table
    commits 32 files)."""

    data_file_builder: Any  # DataFiles.builder
    delete_file_builder: Any  # FileMetadata.deleteFileBuilder
    parquet: Any  # FileFormat.PARQUET
    metrics_config: Any  # MetricsConfig.forTable
    footer_metrics: Any  # ParquetUtil.footerMetrics
    file_metrics: Any  # ParquetUtil.fileMetrics
    in_memory_file: Any  # new InMemoryInputFile(byte[])
    byte_stream: Any  # new ByteArrayInputStream(byte[], int, int)
    empty_stream: Any  # Stream.empty
    array_list: Any  # new ArrayList()


@functools.cache
def java_members(view: Any) -> JavaMembers:
    """`JavaMembers` of the JVM whose py4j view is `view`."""
    ice = view.org.apache.iceberg
    parquet_util = ice.parquet.ParquetUtil
    return JavaMembers(
        data_file_builder=ice.DataFiles.builder,
        delete_file_builder=ice.FileMetadata.deleteFileBuilder,
        parquet=ice.FileFormat.PARQUET,
        metrics_config=ice.MetricsConfig.forTable,
        footer_metrics=parquet_util.footerMetrics,
        file_metrics=parquet_util.fileMetrics,
        in_memory_file=ice.inmemory.InMemoryInputFile,
        byte_stream=view.java.io.ByteArrayInputStream,
        empty_stream=view.java.util.stream.Stream.empty,
        array_list=view.java.util.ArrayList,
    )


# Parquet's classes as Iceberg's runtime jar carries them (relocated).
PARQUET = "org.apache.iceberg.shaded.org.apache.parquet"


def _parquet(view: Any) -> Any:
    package = view
    for name in PARQUET.split("."):
        package = getattr(package, name)
    return package


@functools.cache
def parquet_read_options(view: Any) -> JavaObject | None:
    """Parquet's read options, made once per JVM (`view`: its py4j view) for decoding footers.
    `ParquetUtil.fileMetrics` opens a Parquet reader per file, whose default options make a new
    Hadoop Configuration that parses its XML resources again: 8-10 ms a file, against 2 ms with
    these (the same metrics: tests/integration/test_metrics.py). None, with a warning, when the
    runtime jar carries Parquet elsewhere: the commit then takes the slower way."""
    try:
        return _parquet(view).ParquetReadOptions.builder().build()
    except (Py4JError, TypeError) as e:
        log.warning("Parquet not found at %s in the Iceberg runtime (%s); file metrics take the slower way", PARQUET, e)
        return None


def _commit_fenced(
    spark: SparkSession,
    table: JavaObject,
    update: JavaObject,
    plan: OffsetsPlan,
    now: Offsets,
    intended: Offsets,
    query_id: str,
    batch_id: int,
) -> tuple[int, int | None]:
    """`update.commit()`, valid only on the offsets `now` (see fence.py). Returns the snapshot's id
    and its parent's.
    When the outcome is unclear (the catalog's answer was lost, or a re-sent request found its
    first attempt applied), the table itself says whether this batch landed."""
    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    update.validateWith(fence.OffsetsUnchanged(now)).deleteWith(fence.KeepFiles())
    try:
        update.commit()
        return _ids(table.currentSnapshot())
    except Py4JJavaError as e:
        failure = str(e.java_exception.getClass().getName())
        if failure not in (_VALIDATION_FAILED, _OUTCOME_UNKNOWN):
            raise
        cause = e
    table.refresh()
    newest = ancestry.newest_offsets(ancestry.of_table(table))
    offsets = newest.offsets if newest else {}
    if codec.is_our_commit(newest.summary if newest else None, query_id, batch_id, intended):
        log.warning(
            "table %s: the commit of batch %d was not confirmed (%s), but the table holds it; going on",
            plan.table, batch_id, failure.rsplit(".", 1)[-1],
        )  # fmt: skip
        # Its parent is not known for sure (the table may have moved on since): none is said.
        return int(table.currentSnapshot().snapshotId()), None
    if failure == _OUTCOME_UNKNOWN:
        raise CommitOutcomeUnknownError(
            f"table {plan.table}: the catalog did not confirm the commit of batch {batch_id} and the "
            "table does not hold it; nothing was committed, the batch is retried"
        ) from cause
    if all(offsets.get(tp) == plan.committed.get(tp) for tp in plan.batch_tps):
        raise _OthersMovedError from cause
    raise _offsets_moved(plan.table, plan, offsets) from cause
