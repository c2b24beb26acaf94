"""The driver JVM's one-time costs of a job's first commit, paid while its first batch is planned
and written (job/warm_up.py runs it beside the workers' warm-up): the AWS SDK's start for the
catalog's S3 FileIO (~0.9 s on the 2-core machine, against ~10 ms for the next client), and
Iceberg's commit path (a file described from its footer, a v2 table's metadata, manifests and
manifest list, an append and a row delta in a transaction), run once on a throwaway table of
Iceberg's in-memory catalog. Nothing here reaches the catalog's tables or storage."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from icesink.iceberg.file_descriptions import Described
from icesink.iceberg.jvm import JavaObject, jsession, jvm, string_array
from icesink.model import WrittenFile
from icesink.tasks.parquet_files import footer_file


def warm_driver(spark: SparkSession, catalog_name: str) -> list[str]:
    """Runs both; returns what was warmed (for the log line). Called on a thread of its own."""
    # Spark finds a catalog's settings through the thread's active session, which a new thread
    # lacks: before the job's own thread loaded the catalog, it was not found from here.
    jvm(spark).org.apache.spark.sql.SparkSession.setActiveSession(jsession(spark))
    done = []
    if _s3_client(spark, catalog_name):
        done.append("S3 client")
    _commit_path(spark)
    done.append("Iceberg's commit path")
    return done


def _s3_client(spark: SparkSession, catalog_name: str) -> bool:
    """Builds an S3 client from the catalog's own FileIO settings, then drops it: the classes and
    the SDK's static state it loads are the JVM's, and every table's FileIO builds its client on them."""
    view = jvm(spark)
    catalog = view.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(jsession(spark), catalog_name)
    properties = catalog.properties()
    impl = properties.get("io-impl")
    if impl is None or not str(impl).endswith("S3FileIO"):
        return False  # another storage, or one the catalog names per table: its first use pays
    io = view.org.apache.iceberg.CatalogUtil.loadFileIO(impl, properties, None)
    try:
        io.client()  # S3FileIO builds its client lazily; no request is made
    finally:
        io.close()
    return True


def in_memory_namespace(spark: SparkSession, catalog_name: str, namespace: str) -> tuple[JavaObject, JavaObject]:
    """(a new catalog of Iceberg's in memory, a namespace made in it): for throwaway tables of
    the driver JVM alone (also the benchmarks' and tests' of the commit's file descriptions)."""
    view = jvm(spark)
    ice = view.org.apache.iceberg
    catalog = ice.inmemory.InMemoryCatalog()
    catalog.initialize(catalog_name, view.java.util.HashMap())
    made = ice.catalog.Namespace.of(string_array(spark, [namespace]))
    catalog.createNamespace(made)
    return catalog, made


def _commit_path(spark: SparkSession) -> None:
    view = jvm(spark)
    ice = view.org.apache.iceberg
    catalog, namespace = in_memory_namespace(spark, "icesink-warm-up", "warm_up")
    types = ice.types.Types
    fields = view.java.util.ArrayList()
    fields.add(types.NestedField.required(1, "id", types.LongType.get()))
    fields.add(types.NestedField.optional(2, "name", types.StringType.get()))
    schema = ice.Schema(fields)
    properties = view.java.util.HashMap()
    properties.put("format-version", "2")
    table = catalog.createTable(
        ice.catalog.TableIdentifier.of(namespace, "t"), schema, ice.PartitionSpec.unpartitioned(), properties
    )
    described = Described(spark, table)
    footer = _footer()
    table.newAppend().appendFile(described.data_file(_file("data", footer))).commit()
    transaction = table.newTransaction()
    deletes = described.equality_deletes(_file("deletes", footer), ["id"])
    transaction.newRowDelta().addRows(described.data_file(_file("data", footer))).addDeletes(deletes).commit()
    transaction.commitTransaction()  # the catalog, its table and files go with their Java references


def _footer() -> bytes:
    """The footer of a one-row file of the table's columns, as a writer sends it along."""
    footers: list[pq.FileMetaData] = []
    ids = [{b"PARQUET:field_id": b"1"}, {b"PARQUET:field_id": b"2"}]  # as the tasks' files carry them
    schema = pa.schema([pa.field("id", pa.int64(), False, ids[0]), pa.field("name", pa.string(), True, ids[1])])
    rows = pa.table({"id": pa.array([1], pa.int64()), "name": pa.array(["a"])}, schema=schema)
    pq.write_table(rows, pa.BufferOutputStream(), metadata_collector=footers)
    return footer_file(footers[0])


def _file(content: str, footer: bytes) -> WrittenFile:
    return WrittenFile(f"memory://warm-up/{uuid.uuid4().hex}.parquet", 1, 1024, content, (), footer)
