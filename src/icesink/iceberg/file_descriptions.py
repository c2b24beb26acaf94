"""Iceberg's descriptions of the Parquet files a batch wrote (DataFile, equality DeleteFile), for
the commit (iceberg/commit.py), with the metrics of the footers the writers sent along, so the
commit reads nothing from storage.

A file is described from JSON (`ContentFileParser.fromJson`: four py4j calls) whose metrics this
process reads from the footer as Iceberg would (footer_metrics.py); a file that reading declines
goes through Iceberg's builders and footer reader (~14 calls). What the JSON needs of the table
(its columns' metrics modes, its partition fields' types) is asked once per table version, not
per commit.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from icesink.iceberg import footer_metrics
from icesink.iceberg.jvm import JavaObject, java_list, jvm
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
        self._facts = _facts_of(self._java, table, self._schema, self._spec)
        self._partitioned = self._facts.partitioned
        self._metrics_config: JavaObject | None = None
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
        ids = self._facts.field_ids(self._schema, columns)
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
        """`f` read by ContentFileParser from the JSON of its footer's metrics, or None where that
        JSON cannot be made (Iceberg's builders describe it then)."""
        java, facts = self._java, self._facts
        if java.from_json is None or not f.footer or not self._from_footers:
            return None
        partition = _partition_json(f.partition, facts.partition_types) if self._partitioned else []
        fields = footer_metrics.metrics(f.footer, facts.mode_of) if partition is not None else None
        if fields is None:
            return None
        doc: dict[str, Any] = {
            "spec-id": facts.spec_id,
            "content": "data" if equality_ids is None else "equality-deletes",
            "file-path": f.path,
            "file-format": "parquet",
        }
        if self._partitioned:
            doc["partition"] = partition
        doc["file-size-in-bytes"] = f.file_size
        doc.update(fields)
        if equality_ids is not None:
            doc["equality-ids"] = equality_ids
        doc["sort-order-id"] = 0  # the builders': unsorted
        return java.from_json(java.mapper.readTree(json.dumps(doc)), self._spec)

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


_INTEGER = re.compile(r"-?[0-9]+")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # what Iceberg's partition strings read as null


def _partition_json(values: Sequence[str | None], types: Sequence[str]) -> list[Any] | None:
    """A file's partition strings (as `withPartitionValues` parses them) as ContentFileParser's
    JSON values, or None for a type whose JSON is left to Iceberg's builder."""
    if len(values) != len(types):
        return None
    out: list[Any] = []
    for value, kind in zip(values, types, strict=True):
        if value is None:
            out.append(None)
        elif value == _HIVE_NULL:
            return None
        elif kind in ("int", "long") and _INTEGER.fullmatch(value):
            out.append(int(value))
        elif kind == "string" or (kind == "date" and _ISO_DATE.fullmatch(value)):
            out.append(value)
        else:
            return None
    return out


@dataclass
class _TableFacts:
    """What describing a table's files as JSON needs of the table, for one version of its schema,
    sort order, properties and spec: asked of the JVM once each, then kept."""

    spec_id: int
    partitioned: bool  # PartitionSpec.isPartitioned: a spec of void fields only is not
    partition_types: tuple[str, ...]
    metrics_config: JavaObject
    modes: dict[str, str] = field(default_factory=dict)  # by column name
    ids: dict[tuple[str, ...], list[int]] = field(default_factory=dict)  # key columns' field ids
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mode_of(self, name: str) -> str:
        mode = self.modes.get(name)
        if mode is None:
            with self.lock:
                mode = self.modes[name] = str(self.metrics_config.columnMode(name))
        return mode

    def field_ids(self, schema: JavaObject, columns: Sequence[str]) -> list[int]:
        key = tuple(columns)
        ids = self.ids.get(key)
        if ids is None:
            ids = self.ids[key] = [int(schema.findField(c).fieldId()) for c in columns]
        return ids


_FACTS: dict[tuple[Any, ...], _TableFacts] = {}
_FACTS_LOCK = threading.Lock()
_FACTS_KEPT = 1024  # tables' versions; the oldest go first


def _facts_of(java: JavaMembers, table: JavaObject, schema: JavaObject, spec: JavaObject) -> _TableFacts:
    # A table's metrics modes follow from its properties, schema and sort order (MetricsConfig
    # .forTable); its partition types from its spec; its key ids from its schema. Eight py4j calls
    # say whether any changed; the table's UUID tells a table dropped and created again by name.
    key = (
        str(table.uuid().toString()), int(schema.schemaId()), int(table.sortOrder().orderId()),
        str(table.properties().toString()), int(spec.specId()),
    )  # fmt: skip
    facts = _FACTS.get(key)
    if facts is not None:
        return facts
    types = tuple(str(f.type().toString()) for f in java_list(spec.partitionType().fields()))
    facts = _TableFacts(key[-1], bool(spec.isPartitioned()), types, java.metrics_config(table))
    with _FACTS_LOCK:
        if len(_FACTS) >= _FACTS_KEPT:
            del _FACTS[next(iter(_FACTS))]
        return _FACTS.setdefault(key, facts)


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
