"""Iceberg's descriptions of the Parquet files a batch wrote (DataFile, equality DeleteFile), for
the commit (iceberg/commit.py), with the metrics of the footers the writers sent along, so the
commit reads nothing from storage.

A file is described from JSON (file_json.py; `ContentFileParser.fromJson`: two py4j calls) whose
metrics this process reads from the footer as Iceberg would (footer_metrics.py); a file that reading
declines goes through Iceberg's builders and footer reader (~13 calls).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from icesink.iceberg import file_json
from icesink.iceberg.jvm import JavaObject, jvm
from icesink.model import WrittenFile

log = logging.getLogger(__name__)


class Described:
    """Iceberg's descriptions of the Parquet files a batch wrote to one table, for one commit (a
    commit's thread is its only user)."""

    def __init__(self, spark: SparkSession, table: JavaObject, from_footers: bool = True) -> None:
        """`from_footers`: the metrics read here from the footers, where this reading takes them;
        else by Iceberg's reader, through its builders."""
        self._jvm = jvm(spark)
        self._gateway: Any = spark.sparkContext._gateway
        self._java = java_members(self._jvm)
        self._from_footers = from_footers
        self._table = table
        self._spec = table.spec()
        self._schema = table.schema()
        self._facts = (
            file_json.facts_of(id(self._java), table, self._schema, self._spec, self._java.metrics_config)
            if from_footers
            else None
        )
        self._partitioned = self._facts.partitioned if self._facts else bool(self._spec.isPartitioned())
        self._metrics_config: JavaObject | None = self._facts.metrics_config if self._facts else None
        self._footers: JavaObject | None = None
        self._partitions: dict[tuple[str | None, ...], JavaObject] = {}  # a data file's, by its values

    def data_file(self, f: WrittenFile) -> JavaObject:
        described = self._from_json(f, None)
        if described is not None:
            if self._partitioned:
                self._partitions.setdefault(f.partition, described)
            return described
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

    def equality_deletes(self, f: WrittenFile, columns: Sequence[str]) -> JavaObject:
        """The equality delete file `f`, of the key `columns`."""
        if self._facts is not None:
            ids = self._facts.field_ids(self._schema, columns)
        else:
            ids = [int(self._schema.findField(c).fieldId()) for c in columns]
        described = self._from_json(f, ids)
        if described is not None:
            return described
        java_ids = self._gateway.new_array(self._jvm.int, len(ids))
        for i, field_id in enumerate(ids):
            java_ids[i] = field_id
        builder = (
            self._java.delete_file_builder(self._spec)
            .ofEqualityDeletes(java_ids)
            .withPath(f.path)
            .withFormat(self._java.parquet)
            .withFileSizeInBytes(f.file_size)
            .withRecordCount(f.record_count)
            .withMetrics(self._metrics(f))
        )
        if self._partitioned:
            builder = builder.withPartition(self._partition(f.partition))
        return builder.build()

    def _from_json(self, f: WrittenFile, equality_ids: list[int] | None) -> JavaObject | None:
        """`f` read by ContentFileParser from its JSON (file_json.py), or None where that JSON
        cannot be made (Iceberg's builders describe it then)."""
        java = self._java
        if java.from_json is None or self._facts is None or not self._from_footers:
            return None
        doc = file_json.document(f, self._facts, equality_ids)
        return None if doc is None else java.from_json(java.mapper.readTree(json.dumps(doc)), self._spec)

    def _metrics(self, f: WrittenFile) -> JavaObject:
        # From the footer the writer sent along (no read of the file); a file without one is read.
        java = self._java
        if self._metrics_config is None:
            self._metrics_config = java.metrics_config(self._table)
        options = parquet_read_options(self._jvm) if f.footer else None
        if options is None:
            source = java.in_memory_file(f.footer) if f.footer else self._table.io().newInputFile(f.path)
            return java.file_metrics(source, self._metrics_config)
        # A footer-only file: PAR1, the footer, its 4-byte length, PAR1.
        if self._footers is None:
            self._footers = _parquet(self._jvm).format.converter.ParquetMetadataConverter(options)
        footer = self._footers.readParquetMetadata(java.byte_stream(f.footer, 4, len(f.footer) - 12))
        return java.footer_metrics(footer, java.empty_stream(), self._metrics_config)

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
    mapper: Any  # Iceberg's JSON mapper (JsonUtil.mapper())
    from_json: Any  # ContentFileParser.fromJson(JsonNode, PartitionSpec); None: not in the runtime


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
        mapper=ice.util.JsonUtil.mapper(),
        from_json=_from_json_method(view),
    )


# Jackson as Iceberg's runtime jar relocates it.
JACKSON = "org.apache.iceberg.shaded.com.fasterxml.jackson.databind"


def _from_json_method(view: Any) -> JavaObject | None:
    """`ContentFileParser.fromJson`, once its (JsonNode, PartitionSpec) overload is found. Its other
    overload takes a Map, which a PartitionSpec is not: py4j cannot take the wrong one (it may
    where an argument fits both, e.g. a null). None, with a warning, when the runtime jar has no
    such method or carries Jackson elsewhere: files are then described through the builders."""
    try:
        node = _class(view, f"{JACKSON}.JsonNode")
        spec = view.org.apache.iceberg.PartitionSpec._java_lang_class
        types = view.java.lang.reflect.Array.newInstance(view.java.lang.Class._java_lang_class, 2)
        types[0], types[1] = node, spec
        view.org.apache.iceberg.ContentFileParser._java_lang_class.getMethod("fromJson", types)
    except (Py4JError, TypeError, AttributeError) as e:
        log.warning("ContentFileParser.fromJson(%s.JsonNode, PartitionSpec) not found in the Iceberg runtime (%s); "
                    "files are described through Iceberg's builders", JACKSON, e)  # fmt: skip
        return None
    return view.org.apache.iceberg.ContentFileParser.fromJson


def _class(view: Any, name: str) -> JavaObject:
    package = view
    for part in name.split("."):
        package = getattr(package, part)
    return package._java_lang_class


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
