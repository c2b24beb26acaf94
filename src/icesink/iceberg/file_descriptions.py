"""Iceberg's descriptions of the Parquet files a batch wrote (DataFile, equality DeleteFile), for
the commit (iceberg/commit.py): built through py4j with the metrics of the footers the writers
sent along, so the commit reads nothing from storage.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from icesink.iceberg.jvm import JavaObject, jvm
from icesink.model import WrittenFile

log = logging.getLogger(__name__)


class Described:
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
