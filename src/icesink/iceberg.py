"""The driver's edge to Iceberg: Iceberg's Java API inside Spark's JVM, through py4j.

Tables are created, evolved and committed here. PyIceberg is not used for commits: it cannot
write delete files correctly, and one JVM client keeps create, evolve and commit consistent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from icesink import offsets as offsets_codec
from icesink import partitioning
from icesink.errors import CommitError
from icesink.jvm import jsession, jvm, string_array
from icesink.offsets import Offsets
from icesink.partitioning import PartitionField
from icesink.planning import TablePlan
from icesink.routing import TableRef
from icesink.schema_diff import AddColumn

log = logging.getLogger(__name__)

JavaObject = Any  # a py4j proxy


@dataclass(frozen=True)
class DataFileRef:
    """A file an executor wrote: data, or equality deletes over the table's key columns."""

    path: str
    record_count: int
    file_size: int
    content: str = "data"  # "data" | "deletes"
    partition: tuple[str | None, ...] = ()  # the partition values as Iceberg parses them from strings


@dataclass(frozen=True)
class CommitResult:
    table: TableRef
    snapshot_id: int
    files: int
    records: int
    delete_files: int = 0
    deletes: int = 0


class IcebergCatalog:
    """One Spark catalog's Iceberg tables, seen through the JVM."""

    def __init__(self, spark: SparkSession, catalog_name: str) -> None:
        self._spark = spark
        self._jvm = jvm(spark)
        self._name = catalog_name
        self._catalog = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(jsession(spark), catalog_name)

    # ------------------------------------------------------------------ tables

    def _namespace(self, namespace: str) -> JavaObject:
        return self._jvm.org.apache.iceberg.catalog.Namespace.of(string_array(self._spark, namespace.split(".")))

    def _identifier(self, ref: TableRef) -> JavaObject:
        return self._jvm.org.apache.iceberg.catalog.TableIdentifier.of(self._namespace(ref.namespace), ref.name)

    def ensure_namespace(self, namespace: str) -> None:
        ns = self._namespace(namespace)
        if not self._catalog.namespaceExists(ns):
            try:
                self._catalog.createNamespace(ns)
                log.info("created namespace %s", namespace)
            except Exception as e:  # a concurrent creator is fine
                if not self._catalog.namespaceExists(ns):
                    raise CommitError(f"cannot create namespace {namespace}: {e}") from e

    def load(self, ref: TableRef) -> JavaObject | None:
        ident = self._identifier(ref)
        if not self._catalog.tableExists(ident):
            return None
        return self._catalog.loadTable(ident)

    def create(
        self,
        ref: TableRef,
        schema: StructType,
        properties: Mapping[str, str],
        partition_by: Sequence[PartitionField] = (),
        key_columns: Sequence[str] = (),
    ) -> JavaObject:
        """Creates a format-v2 table with the Spark schema's fields, all optional except the key
        columns, which become its identifier fields."""
        self.ensure_namespace(ref.namespace)
        ice = self._jvm.org.apache.iceberg
        keys = set(key_columns)
        fields = [StructField(f.name, f.dataType, f.name not in keys, f.metadata) for f in schema.fields]
        jschema = ice.spark.SparkSchemaUtil.convert(self._jtype(StructType(fields)))
        if keys:
            ids = self._jvm.java.util.HashSet()
            for k in key_columns:
                ids.add(jschema.findField(k).fieldId())
            jschema = ice.Schema(jschema.columns(), ids)
        spec = self._spec(jschema, partition_by)
        props = self._jvm.java.util.HashMap()
        for k, v in properties.items():
            props.put(k, v)
        props.put("format-version", "2")
        try:
            table = self._catalog.createTable(self._identifier(ref), jschema, spec, props)
            log.info(
                "created table %s (format v2) with %d columns%s%s", ref, len(schema.fields),
                f", key {list(key_columns)}" if keys else "",
                f", partitioned by {', '.join(map(str, partition_by))}" if partition_by else "",
            )  # fmt: skip
            return table
        except Exception:
            # Another writer may have created it between our check and our create.
            table = self.load(ref)
            if table is None:
                raise
            return table

    def _spec(self, jschema: JavaObject, fields: Sequence[PartitionField]) -> JavaObject:
        ice = self._jvm.org.apache.iceberg
        if not fields:
            return ice.PartitionSpec.unpartitioned()
        b = ice.PartitionSpec.builderFor(jschema)
        for f in fields:
            if f.transform == "identity":
                b = b.identity(f.column)
            elif f.transform in ("bucket", "truncate"):
                b = getattr(b, f.transform)(f.column, f.param)
            else:
                b = getattr(b, f.transform)(f.column)
        return b.build()

    def partition_fields(self, table: JavaObject) -> list[PartitionField]:
        schema = table.schema()
        return [
            partitioning.from_iceberg(str(f.transform()), str(schema.findColumnName(f.sourceId())))
            for f in table.spec().fields()
        ]

    def identifier_columns(self, table: JavaObject) -> list[str]:
        schema = table.schema()
        return sorted(str(schema.findColumnName(i)) for i in schema.identifierFieldIds())

    def spark_schema(self, table: JavaObject) -> StructType:
        jstruct = self._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
        return StructType.fromJson(json.loads(jstruct.json()))

    def schema_json(self, table: JavaObject) -> str:
        return str(self._jvm.org.apache.iceberg.SchemaParser.toJson(table.schema()))

    def add_columns(self, ref: TableRef, table: JavaObject, columns: Sequence[AddColumn]) -> None:
        """One metadata commit adding optional columns; skips what is already there (re-runnable)."""
        table.refresh()
        have = {
            str(n) for n in self._jvm.org.apache.iceberg.types.TypeUtil.indexByName(table.schema().asStruct()).keySet()
        }
        todo = [c for c in columns if c.path not in have]
        if not todo:
            return
        update = table.updateSchema()
        for c in todo:
            itype = self._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(self._jtype(c.type))
            if c.parent is None:
                update.addColumn(c.name, itype)
            else:
                update.addColumn(c.parent, c.name, itype)
        update.commit()
        log.info("table %s: added column(s) %s", ref, ", ".join(c.path for c in todo))

    # ------------------------------------------------------------------ offsets

    def _summaries(self, table: JavaObject) -> Iterator[dict[str, str]]:
        snap = table.currentSnapshot()
        while snap is not None:
            yield dict(snap.summary())
            parent = snap.parentId()
            snap = table.snapshot(parent) if parent is not None else None

    def committed_offsets(self, table: JavaObject) -> Offsets:
        """The table's offsets: those of its newest offset-bearing snapshot (compactions carry none)."""
        return offsets_codec.latest_offsets(self._summaries(table))

    # ------------------------------------------------------------------ commit

    def commit(
        self,
        table: JavaObject,
        files: Sequence[DataFileRef],
        plan: TablePlan,
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
        table.refresh()
        now = self.committed_offsets(table)
        moved = sorted(tp for tp in plan.batch_tps if now.get(tp) != plan.committed.get(tp))
        if moved:
            detail = ", ".join(f"{tp}: planned {plan.committed.get(tp)}, now {now.get(tp)}" for tp in moved[:5])
            raise CommitError(
                f"table {ref}: offsets changed while the batch was written ({detail}); is another job "
                "writing this table? nothing was committed; the batch is replayed from the table's offsets"
            )
        data = [f for f in files if f.content == "data"]
        deletes = [f for f in files if f.content == "deletes"]
        if deletes and not key_columns:
            raise CommitError(f"table {ref}: delete files without key columns")
        ice = self._jvm.org.apache.iceberg
        metrics_config = ice.MetricsConfig.forTable(table)
        io = table.io()
        spec = table.spec()
        update = table.newRowDelta() if deletes else table.newAppend()
        for f in data:
            builder = (
                ice.DataFiles.builder(spec)
                .withPath(f.path)
                .withFormat(ice.FileFormat.PARQUET)
                .withFileSizeInBytes(f.file_size)
                .withMetrics(ice.parquet.ParquetUtil.fileMetrics(io.newInputFile(f.path), metrics_config))
            )
            if spec.isPartitioned():
                builder = builder.withPartitionValues(self._jlist(f.partition))
            data_file = builder.build()
            if deletes:
                update.addRows(data_file)
            else:
                update.appendFile(data_file)
        if deletes:
            schema = table.schema()
            ids = self._spark.sparkContext._gateway.new_array(self._jvm.int, len(key_columns))  # type: ignore[union-attr]
            for i, k in enumerate(key_columns):
                ids[i] = schema.findField(k).fieldId()
            for f in deletes:
                builder = (
                    ice.FileMetadata.deleteFileBuilder(spec)
                    .ofEqualityDeletes(ids)
                    .withPath(f.path)
                    .withFormat(ice.FileFormat.PARQUET)
                    .withFileSizeInBytes(f.file_size)
                    .withRecordCount(f.record_count)
                    .withMetrics(ice.parquet.ParquetUtil.fileMetrics(io.newInputFile(f.path), metrics_config))
                )
                if spec.isPartitioned():
                    builder = builder.withPartition(self._partition(spec, f.partition))
                update.addDeletes(builder.build())
        summary = offsets_codec.summary_properties(offsets_codec.advance(now, plan.next_offsets), query_id, batch_id)
        for k, v in summary.items():
            update.set(k, v)
        update.commit()
        snapshot_id = int(table.currentSnapshot().snapshotId())
        return CommitResult(
            ref,
            snapshot_id,
            files=len(data),
            records=sum(f.record_count for f in data),
            delete_files=len(deletes),
            deletes=sum(f.record_count for f in deletes),
        )

    def _jlist(self, values: Sequence[str | None]) -> JavaObject:
        out = self._jvm.java.util.ArrayList()
        for v in values:
            out.add(v)
        return out

    def _partition(self, spec: JavaObject, values: Sequence[str | None]) -> JavaObject:
        # FileMetadata's builder takes no partition strings; a throwaway DataFile parses them the
        # same way as the data files' builder does.
        probe = (
            self._jvm.org.apache.iceberg.DataFiles.builder(spec)
            .withPath("icesink-partition-probe.parquet")
            .withFormat(self._jvm.org.apache.iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(1)
            .withRecordCount(1)
            .withPartitionValues(self._jlist(values))
            .build()
        )
        return probe.partition()

    # ------------------------------------------------------------------ helpers

    def _jtype(self, dtype: Any) -> JavaObject:
        return self._jvm.org.apache.spark.sql.types.DataType.fromJson(dtype.json())
