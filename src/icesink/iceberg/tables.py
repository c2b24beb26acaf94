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

from py4j.protocol import Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from icesink.batch.plan import TablePlan
from icesink.errors import CommitError, CommitOutcomeUnknownError
from icesink.iceberg import fence as commit_guard
from icesink.iceberg import snapshot_offsets as offsets_codec
from icesink.iceberg.jvm import jsession, jvm, string_array
from icesink.model import Offsets, TableRef, WrittenFile, advance
from icesink.runtime import faults
from icesink.schema import partitioning
from icesink.schema.evolution import AddColumn, WidenColumn
from icesink.schema.partitioning import PartitionField

log = logging.getLogger(__name__)

JavaObject = Any  # a py4j proxy

_VALIDATION_FAILED = "org.apache.iceberg.exceptions.ValidationException"
_OUTCOME_UNKNOWN = "org.apache.iceberg.exceptions.CommitStateUnknownException"


def _offsets_moved(ref: TableRef, plan: TablePlan, now: Offsets) -> CommitError:
    tps = sorted(set(plan.batch_tps) | set(now) | set(plan.committed))
    moved = [tp for tp in tps if now.get(tp) != plan.committed.get(tp)]
    detail = ", ".join(f"{tp}: planned {plan.committed.get(tp)}, now {now.get(tp)}" for tp in moved[:5])
    return CommitError(
        f"table {ref}: offsets changed while the batch was written ({detail}); is another job writing "
        "this table? nothing was committed; the batch is replayed from the table's offsets"
    )


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
        sort_by: Sequence[str] = (),
    ) -> JavaObject:
        """Creates a format-v2 table with the Spark schema's fields, all optional except the key
        columns, which become its identifier fields; partitioned and sorted as asked."""
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
            builder = self._catalog.buildTable(self._identifier(ref), jschema).withPartitionSpec(spec)
            builder = builder.withProperties(props)
            if sort_by:
                order = ice.SortOrder.builderFor(jschema)
                for column in sort_by:
                    order = order.asc(column)
                builder = builder.withSortOrder(order.build())
            table = builder.create()
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

    def evolve(
        self,
        ref: TableRef,
        table: JavaObject,
        add: Sequence[AddColumn] = (),
        widen: Sequence[WidenColumn] = (),
        optional: Sequence[str] = (),
    ) -> bool:
        """ONE metadata commit: new optional columns, promoted types, required columns made
        optional. Re-checked against the refreshed table, so re-running it (a replay, a concurrent
        job) is a no-op. Returns whether anything changed."""
        ice = self._jvm.org.apache.iceberg
        table.refresh()
        schema = table.schema()
        have = {str(n) for n in ice.types.TypeUtil.indexByName(schema.asStruct()).keySet()}
        identifiers = set(self.identifier_columns(table))
        todo_add = [c for c in add if c.path not in have]
        todo_widen = []
        for w in widen:
            field = schema.findField(w.path)
            new_type = self._itype(w.new)
            if field is not None and not field.type().equals(new_type):
                todo_widen.append((w, new_type))
        todo_optional = [
            p
            for p in optional
            if p not in identifiers and schema.findField(p) is not None and schema.findField(p).isRequired()
        ]
        if not (todo_add or todo_widen or todo_optional):
            return False
        update = table.updateSchema()
        for c in todo_add:
            itype = self._itype(c.type)
            if c.parent is None:
                update.addColumn(c.name, itype)
            else:
                update.addColumn(c.parent, c.name, itype)
        for w, new_type in todo_widen:
            update.updateColumn(w.path, new_type)
        for p in todo_optional:
            update.makeColumnOptional(p)
        update.commit()
        changes = [f"added {c.path}" for c in todo_add]
        changes += [f"widened {w.path} {w.old.simpleString()} -> {w.new.simpleString()}" for w, _ in todo_widen]
        changes += [f"made {p} optional" for p in todo_optional]
        log.info("table %s: schema change: %s", ref, ", ".join(changes))
        return True

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
        files: Sequence[WrittenFile],
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
            raise _offsets_moved(ref, plan, now)
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
        intended = advance(now, plan.next_offsets)
        for k, v in offsets_codec.summary_properties(intended, query_id, batch_id).items():
            update.set(k, v)
        faults.maybe_pause("before-table-commit", batch_id)
        snapshot_id = self._commit_fenced(table, update, plan, now, intended, query_id, batch_id)
        return CommitResult(
            ref,
            snapshot_id,
            files=len(data),
            records=sum(f.record_count for f in data),
            delete_files=len(deletes),
            deletes=sum(f.record_count for f in deletes),
        )

    def _commit_fenced(
        self,
        table: JavaObject,
        update: JavaObject,
        plan: TablePlan,
        now: Offsets,
        intended: Offsets,
        query_id: str,
        batch_id: int,
    ) -> int:
        """`update.commit()`, valid only on the offsets `now` (see `commit_guard`). Returns the
        snapshot id. When the outcome is unclear (the catalog's answer was lost, or a re-sent
        request found its first attempt applied), the table itself says whether this batch landed."""
        ensure_callback_server_started(self._spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
        update.validateWith(commit_guard.OffsetsUnchanged(now)).deleteWith(commit_guard.KeepFiles())
        try:
            update.commit()
            return int(table.currentSnapshot().snapshotId())
        except Py4JJavaError as e:
            failure = str(e.java_exception.getClass().getName())
            if failure not in (_VALIDATION_FAILED, _OUTCOME_UNKNOWN):
                raise
            cause = e
        table.refresh()
        newest = commit_guard.newest_offset_summary(self._summaries(table))
        if commit_guard.is_our_commit(newest, query_id, batch_id, intended):
            snapshot = table.currentSnapshot()
            log.warning(
                "table %s: the commit of batch %d was not confirmed (%s), but the table holds it; going on",
                plan.table, batch_id, failure.rsplit(".", 1)[-1],
            )  # fmt: skip
            return int(snapshot.snapshotId())
        if failure == _OUTCOME_UNKNOWN:
            raise CommitOutcomeUnknownError(
                f"table {plan.table}: the catalog did not confirm the commit of batch {batch_id} and the "
                "table does not hold it; nothing was committed, the batch is retried"
            ) from cause
        raise _offsets_moved(plan.table, plan, self.committed_offsets(table)) from cause

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

    def _itype(self, dtype: Any) -> JavaObject:
        """The Iceberg type of a Spark type (py4j picks convert(StructType) -> Schema for structs)."""
        converted = self._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(self._jtype(dtype))
        if converted.getClass().getName() == "org.apache.iceberg.Schema":
            return converted.asStruct()
        return converted

    def _jtype(self, dtype: Any) -> JavaObject:
        return self._jvm.org.apache.spark.sql.types.DataType.fromJson(dtype.json())
