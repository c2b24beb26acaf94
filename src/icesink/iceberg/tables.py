"""The driver's edge to Iceberg: Iceberg's Java API inside Spark's JVM, through py4j.

Tables are created, evolved and committed here (the commit itself is commit.py). PyIceberg is not
used for commits: it cannot write delete files correctly, and one JVM client keeps create, evolve
and commit consistent.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from icesink.errors import CommitError
from icesink.iceberg import ancestry, offsets_marker, schema_update, table_layout, transaction
from icesink.iceberg.commit import CommitResult, commit_files
from icesink.iceberg.jvm import JavaObject, java_list, jsession, jvm, string_array, table_identifier
from icesink.iceberg.kept_tables import KeptTables
from icesink.iceberg.snapshot_offsets import OffsetsFound
from icesink.iceberg.transaction import TableFiles
from icesink.model import Offsets, OffsetsPlan, TableRef, WrittenFile
from icesink.schema import partitioning
from icesink.schema.evolution import AddColumn, WidenColumn
from icesink.schema.partitioning import PartitionField

log = logging.getLogger(__name__)

_ALREADY_EXISTS = "org.apache.iceberg.exceptions.AlreadyExistsException"
_NO_SUCH_TABLE = "org.apache.iceberg.exceptions.NoSuchTableException"
_SERVER_ERROR = "org.apache.iceberg.exceptions.ServiceFailureException"


class IcebergCatalog:
    """One Spark catalog's Iceberg tables, seen through the JVM."""

    def __init__(self, spark: SparkSession, catalog_name: str, keep_tables_s: float = 0.0) -> None:
        self._spark = spark
        self._jvm = jvm(spark)
        self._name = catalog_name
        self._catalog = self._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(jsession(spark), catalog_name)
        # Requests to the catalog made here (Iceberg's own retries inside a call not counted): the
        # batch's timings line reports how many a batch needed.
        self.requests = 0
        self.multi_table = False  # a batch's tables in one commit request (use_multi_table_commit)
        self._requests_lock = threading.Lock()  # the per-table steps run in several threads
        # Whether new tables get their key columns as identifier fields: Nessie 0.99 fails (HTTP
        # 500, a NullPointerException in its schema mapping) to create a table that has any. The
        # key columns stay required and remain the equality deletes' columns either way.
        self._identifiers = True
        # The job's last commit to each table (its Java snapshot): offsets_marker.committed_offsets.
        self._last_commits: dict[TableRef, JavaObject] = {}
        # Tables a batch plans on without loading them (catalog.keep_tables_s; kept_tables.py).
        self.kept = KeptTables(keep_tables_s)

    # ------------------------------------------------------------------ tables

    def _count(self, n: int) -> None:
        with self._requests_lock:
            self.requests += n

    def _namespace(self, namespace: str) -> JavaObject:
        return self._jvm.org.apache.iceberg.catalog.Namespace.of(string_array(self._spark, namespace.split(".")))

    def _identifier(self, ref: TableRef) -> JavaObject:
        return table_identifier(self._spark, ref)

    def ensure_namespace(self, namespace: str) -> None:
        ns = self._namespace(namespace)
        self._count(1)
        if not self._catalog.namespaceExists(ns):
            self._count(1)
            try:
                self._catalog.createNamespace(ns)
                log.info("created namespace %s", namespace)
            except Py4JJavaError as e:  # a concurrent creator is fine
                if e.java_exception.getClass().getName() == _ALREADY_EXISTS:
                    return
                if not self._catalog.namespaceExists(ns):
                    raise CommitError(f"cannot create namespace {namespace}: {e}") from e

    def load(self, ref: TableRef) -> JavaObject | None:
        # One request: loadTable, its 404 as NoSuchTableException (tableExists first was a second);
        # none for a table kept since the catalog last said it.
        kept = self.kept.get(ref)
        if kept is not None:
            return kept
        self._count(1)
        try:
            table = self._catalog.loadTable(self._identifier(ref))
        except Py4JJavaError as e:
            if e.java_exception.getClass().getName() == _NO_SUCH_TABLE:
                return None
            raise
        self.kept.heard(ref, table)
        return table

    def create(
        self,
        ref: TableRef,
        schema: StructType,
        properties: Mapping[str, str],
        partition_by: Sequence[PartitionField] = (),
        key_columns: Sequence[str] = (),
        sort_by: Sequence[str] = (),
        location: str | None = None,
    ) -> JavaObject:
        """Creates a format-v2 table with the Spark schema's fields, all optional except the key
        columns, which become its identifier fields; partitioned and sorted as asked; at
        `location`, else where the catalog puts it."""
        identifiers = self._identifiers
        builder = self._builder(ref, schema, properties, partition_by, key_columns, sort_by)
        if location is not None:
            builder = builder.withLocation(location)
        try:
            self._count(1)
            try:
                table = builder.create()
            except Py4JJavaError as e:
                if not (identifiers and self._without_identifiers(ref, key_columns, e)):
                    raise
                return self.create(ref, schema, properties, partition_by, key_columns, sort_by, location)
            self.kept.heard(ref, table)  # the catalog's answer to the create: the table as it holds it
            log.info(
                "created table %s (format v2) with %d columns%s%s", ref, len(schema.fields),
                f", key {list(key_columns)}" if key_columns else "",
                f", partitioned by {', '.join(map(str, partition_by))}" if partition_by else "",
            )  # fmt: skip
            return table
        except Exception:
            # Another writer may have created it between our check and our create.
            table = self.load(ref)
            if table is None:
                raise
            return table

    def stage(
        self,
        ref: TableRef,
        schema: StructType,
        properties: Mapping[str, str],
        key_columns: Sequence[str] = (),
        sort_by: Sequence[str] = (),
        partition_by: Sequence[PartitionField] = (),
    ) -> JavaObject | None:
        """The table as the catalog would create it now (its location, field ids and partition
        spec), with nothing created (the catalog's stage-create, whose transaction is never
        committed): files can be written for a table that `create` makes only once they are. None
        when it exists by now."""
        identifiers = self._identifiers
        builder = self._builder(ref, schema, properties, partition_by, key_columns, sort_by)
        self._count(1)
        try:
            return builder.createTransaction().table()
        except Py4JJavaError as e:
            if e.java_exception.getClass().getName() == _ALREADY_EXISTS:
                return None
            if identifiers and self._without_identifiers(ref, key_columns, e):
                return self.stage(ref, schema, properties, key_columns, sort_by, partition_by)
            raise

    def _without_identifiers(self, ref: TableRef, key_columns: Sequence[str], e: Py4JJavaError) -> bool:
        """Whether to create `ref` again without identifier fields: the catalog failed on a table
        with them as Nessie 0.99 does (a server error naming a NullPointerException); said once.
        Another server error is not taken for it: a transient one must not change the tables made."""
        if not key_columns or e.java_exception.getClass().getName() != _SERVER_ERROR:
            return False
        if "NullPointerException" not in str(e.java_exception.getMessage()):
            return False
        with self._requests_lock:
            first, self._identifiers = self._identifiers, False
        if not first:
            return True  # another table's thread found it first: this one is made again too
        log.warning(
            "catalog %s failed to create table %s with its key columns %s as identifier fields (%s); its new tables "
            "are created without identifier fields (the key columns stay required, and the equality deletes' columns)",
            self._name, ref, list(key_columns), str(e.java_exception.getMessage()).splitlines()[0],
        )  # fmt: skip
        return True

    def same_layout(self, table: JavaObject, staged: JavaObject, located: bool = True) -> bool:
        """Whether files written for `staged` (from `stage`) fit `table`: the same location (unless
        not `located`), the same field ids, names and types, the same partition spec."""
        return bool(
            (not located or table.location() == staged.location())
            and table.schema().sameSchema(staged.schema())
            and table.spec().compatibleWith(staged.spec())
        )

    def _builder(
        self,
        ref: TableRef,
        schema: StructType,
        properties: Mapping[str, str],
        partition_by: Sequence[PartitionField],
        key_columns: Sequence[str],
        sort_by: Sequence[str],
    ) -> JavaObject:
        self.ensure_namespace(ref.namespace)
        jschema = table_layout.table_schema(self._jvm, schema, key_columns, self._identifiers)
        builder = self._catalog.buildTable(self._identifier(ref), jschema)
        builder = builder.withPartitionSpec(table_layout.partition_spec(self._jvm, jschema, partition_by))
        builder = builder.withProperties(table_layout.table_properties(self._jvm, properties))
        order = table_layout.sort_order(self._jvm, jschema, sort_by)
        return builder.withSortOrder(order) if order is not None else builder

    def partition_fields(self, table: JavaObject) -> list[PartitionField]:
        fields = java_list(table.spec().fields())
        if not fields:
            return []
        schema = table.schema()
        return [partitioning.from_iceberg(str(f.transform()), str(schema.findColumnName(f.sourceId()))) for f in fields]

    def identifier_columns(self, table: JavaObject) -> list[str]:
        schema = table.schema()
        return sorted(str(schema.findColumnName(i)) for i in self._elements(schema.identifierFieldIds()))

    def _elements(self, collection: JavaObject) -> list[Any]:
        """The elements of any java.util.Collection (see `java_list`), in its iteration order."""
        return java_list(self._jvm.java.util.ArrayList(collection))

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
        optional (schema_update.py); a no-op when the refreshed table has them already. Returns
        whether anything changed."""
        self._count(1)
        table.refresh()
        changes = schema_update.evolve(self._jvm, table, add, widen, optional)
        if not changes:
            return False
        self._count(1)
        log.info("table %s: schema change: %s", ref, ", ".join(changes))
        return True

    # ------------------------------------------------------------------ offsets and commits

    def committed_offsets(self, table: JavaObject, ref: TableRef | None = None) -> Offsets:
        """The table's offsets: those of its newest offset-bearing snapshot (compactions carry none;
        where the catalog serves no history, see offsets_marker.committed_offsets: `ref`'s last
        commit by this job helps)."""
        return offsets_marker.committed_offsets(table, self._last_commits.get(ref) if ref is not None else None)

    def newest_offsets(self, table: JavaObject) -> OffsetsFound[JavaObject] | None:
        """The table's newest offset-bearing snapshot, its offsets and summary; None when none has any."""
        return ancestry.newest_offsets(ancestry.of_table(table))

    def commit(
        self,
        table: JavaObject,
        files: Sequence[WrittenFile],
        plan: OffsetsPlan,
        query_id: str,
        batch_id: int,
        key_columns: Sequence[str] = (),
    ) -> CommitResult:
        """ONE fenced snapshot holding `files` with the table's offsets advanced (see commit.py)."""
        self._count(2)  # Iceberg refreshes the table as it applies the commit, then sends it
        result = commit_files(
            self._spark, table, files, plan, query_id, batch_id, key_columns, self._last_commits.get(plan.table)
        )
        self._remember([result])
        self.kept.heard(plan.table, table)  # Iceberg took the table from the commit's answer
        return result

    def use_multi_table_commit(self, wanted: bool) -> str:
        """From now on, a batch's tables in one commit request where `wanted` and served; says how
        the job commits, for its log (transaction.decided)."""
        self.multi_table, said = transaction.decided(self._catalog, wanted)
        return said

    def commit_together(
        self, tables: Sequence[TableFiles], query_id: str, batch_id: int, prepare: transaction.Prepare
    ) -> list[CommitResult] | None:
        """Every table's fenced snapshot in one request, or None: commit them one by one instead
        (transaction.commit_together)."""
        self._count(1)
        try:
            staged = transaction.commit_together(self._spark, self._catalog, tables, query_id, batch_id, prepare)
        except transaction.MultiTableUnsupportedError as e:
            # A request built on metadata a request made before may be what the catalog refuses
            # (a kept table behind on what leaves main alone: another branch's sequence numbers).
            # Only a request on tables as loaded says the catalog does not take such requests.
            if not any(self.kept.set_on(t.table) for t in tables):
                raise
            log.warning("batch %d: %s, on tables kept from earlier batches; committing table by table, the "
                        "tables loaded again for the next", batch_id, e)  # fmt: skip
            self.kept.forget_all()
            return None
        if staged is None:
            return None
        results = [r for r, _ in staged]
        self._remember(results)
        for t, (r, metadata) in zip(tables, staged, strict=True):
            self.kept.committed_together(t.plan.table, t.table, metadata, r.snapshot_id)
        return results

    def _remember(self, results: Sequence[CommitResult]) -> None:
        # No py4j call here: the snapshot is read only where a catalog hides a table's offsets.
        for r in results:
            if r.snapshot is not None:
                self._last_commits[r.table] = r.snapshot
