"""The foreachBatch handler: one micro-batch of Kafka records into its tables, exactly once per table."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from icesink import faults, json_decode, schema_diff
from icesink.config import Config
from icesink.errors import DecodeError
from icesink.iceberg import CommitResult, DataFileRef, IcebergCatalog, JavaObject
from icesink.offsets import TopicPartition
from icesink.planning import PartitionRange, TablePlan, group_by_table, plan_table
from icesink.routing import route
from icesink.writer import DESCRIPTOR_DDL, StorageSettings, WriteTask, map_in_arrow_fn

log = logging.getLogger(__name__)


@dataclass
class _TableWork:
    plan: TablePlan
    table: JavaObject | None
    target: StructType  # the table's schema once this batch's new columns are added
    parsed: DataFrame


def keep_condition(keep_from: dict[TopicPartition, int]) -> Column:
    """Records at or above each topic-partition's committed offset (all of them where none is)."""
    if not keep_from:
        return F.lit(True)
    pairs: list[Column] = []
    for tp, off in keep_from.items():
        pairs += [F.lit(f"{tp.topic}:{tp.partition}"), F.lit(off)]
    floor = F.element_at(
        F.create_map(*pairs), F.concat_ws(":", F.col("topic"), F.col("partition").cast("string"))
    )
    return F.col("offset") >= F.coalesce(floor, F.lit(0))


class BatchHandler:
    """Called by Spark with each micro-batch; see `__call__` for the ordered steps."""

    def __init__(self, spark: SparkSession, config: Config, query_id: Callable[[], str]) -> None:
        self._spark = spark
        self._config = config
        self._query_id = query_id
        self._catalog = IcebergCatalog(spark, config.catalog.name)
        access, secret = config.s3.resolved_keys()
        self._storage = StorageSettings(
            endpoint=config.s3.endpoint,
            region=config.s3.region,
            path_style_access=config.s3.path_style_access,
            access_key_id=access,
            secret_access_key=secret,
        )
        # Set when a batch fails, so the CLI can print our message rather than a py4j trace.
        self.failure: BaseException | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Commits one micro-batch. The steps, in order:

        1. plan: aggregate the batch to first/last offset per topic-partition (small), route each
           topic to its table and read each table's committed offsets; records below them are
           already in the table and are dropped (replays, lost checkpoints, rewinds);
        2. decode: infer the JSON schema per table, parse with the table's (evolved) schema and
           fail the whole batch, before anything is written, if any record does not decode;
        3. prepare: create missing tables (format v2) and add new columns, idempotently;
        4. write: executors write Parquet data files and return descriptors, never rows;
        5. commit: ONE append snapshot per table with its new offsets, query id and batch id in the
           summary, refused if the table's offsets moved meanwhile.
        Spark writes its own commit log after this returns; a crash before that replays the batch,
        and step 1 drops what step 5 already committed.
        """
        try:
            self._run(batch, batch_id)
        except BaseException as e:
            self.failure = e
            raise

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            ranges = self._ranges(batch)
            if not ranges:
                log.info("batch %d: empty", batch_id)
                return
            work = []
            for plan, table in self._plan(ranges):
                if plan.has_new_records:
                    work.append(self._decode(batch, batch_id, plan, table))
                else:
                    log.info("batch %d: table %s already holds these offsets, skipped", batch_id, plan.table)
            query_id = self._query_id()
            # Every table's files are written before any table is committed: a failure while
            # writing leaves orphan files only, and the whole batch is retried.
            written = [(w, self._write(w, batch_id, query_id)) for w in self._prepare(work)]
            results = [self._commit(w, files, batch_id, query_id) for w, files in written]
            log.info(
                "batch %d: %d record(s) from %d topic-partition(s), %d row(s) to %d table(s) in %.1fs",
                batch_id, sum(r.records for r in ranges), len(ranges), sum(r.records for r in results),
                len(results), time.monotonic() - started,
            )  # fmt: skip
            faults.maybe_kill("after-commit", batch_id, self._spark)
        finally:
            batch.unpersist()

    # ------------------------------------------------------------------ 1. plan

    def _ranges(self, batch: DataFrame) -> list[PartitionRange]:
        rows = (
            batch.groupBy("topic", "partition")
            .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"), F.count(F.lit(1)).alias("n"))
            .collect()
        )
        return [PartitionRange(TopicPartition(r.topic, r.partition), r.lo, r.hi, r.n) for r in rows]

    def _plan(self, ranges: list[PartitionRange]) -> list[tuple[TablePlan, JavaObject | None]]:
        namespace = self._config.tables.namespace
        plans = []
        for ref, table_ranges in group_by_table(ranges, lambda t: route(t, namespace)).items():
            table = self._catalog.load(ref)
            committed = self._catalog.committed_offsets(table) if table is not None else {}
            plans.append((plan_table(ref, table_ranges, committed), table))
        return plans

    # ------------------------------------------------------------------ 2. decode

    def _decode(
        self, batch: DataFrame, batch_id: int, plan: TablePlan, table: JavaObject | None
    ) -> _TableWork:
        records = batch.where(F.col("topic").isin(list(plan.topics)))
        records = records.where(keep_condition(dict(plan.keep_from)))
        current = self._catalog.spark_schema(table) if table is not None else StructType([])
        inferred = json_decode.infer_schema(self._spark, records)
        target = schema_diff.merged(current, inferred)
        parsed = json_decode.parse(records, target)
        count, examples = json_decode.find_bad(parsed)
        if count:
            lines = "\n  ".join(str(b) for b in examples)
            raise DecodeError(
                f"batch {batch_id}: {count} record(s) for table {plan.table} cannot be decoded as JSON "
                f"objects; nothing of this batch was committed. First:\n  {lines}"
            )
        return _TableWork(plan, table, target, parsed)

    # ------------------------------------------------------------------ 3. prepare

    def _prepare(self, work: list[_TableWork]) -> list[_TableWork]:
        ready = []
        for w in work:
            ref = w.plan.table
            table = w.table
            if table is None:
                if not w.target.fields:
                    raise DecodeError(
                        f"table {ref}: the batch's JSON objects have no fields to create it from"
                    )
                table = self._catalog.create(ref, w.target, self._config.tables.properties)
            else:
                added = schema_diff.added_columns(self._catalog.spark_schema(table), w.target)
                if added:
                    self._catalog.add_columns(ref, table, added)
            ready.append(_TableWork(w.plan, table, self._catalog.spark_schema(table), w.parsed))
        return ready

    # ------------------------------------------------------------------ 4. write, 5. commit

    def _write(self, w: _TableWork, batch_id: int, query_id: str) -> list[DataFileRef]:
        task = WriteTask(
            table=str(w.plan.table),
            arrow_schema=self._arrow_schema(w.table),
            data_location=self._data_location(w.table),
            file_prefix=f"{query_id[:8]}-{batch_id:08d}",
            storage=self._storage,
            target_file_size=self._config.tables.target_file_size_bytes,
        )
        rows = json_decode.good_rows(w.parsed, w.target)
        # If the table gained columns another writer added since decoding, write them as nulls.
        if [f.name for f in rows.schema.fields] != [f.name for f in w.target.fields]:
            rows = rows.select(*[F.col(f.name) for f in w.target.fields])
        written = rows.mapInArrow(map_in_arrow_fn(task), DESCRIPTOR_DDL).collect()
        return [DataFileRef(r.path, r.record_count, r.file_size) for r in written]

    def _commit(self, w: _TableWork, files: list[DataFileRef], batch_id: int, query_id: str) -> CommitResult:
        result = self._catalog.commit_append(w.table, files, w.plan, query_id, batch_id)
        log.info(
            "batch %d: table %s +%d row(s) in %d file(s), snapshot %d, offsets %s",
            batch_id, w.plan.table, result.records, result.files, result.snapshot_id,
            ", ".join(f"{tp}->{w.plan.next_offsets[tp]}" for tp in w.plan.batch_tps),
        )  # fmt: skip
        return result

    def _arrow_schema(self, table: JavaObject):  # type: ignore[no-untyped-def]
        from pyiceberg.io.pyarrow import schema_to_pyarrow
        from pyiceberg.schema import Schema

        return schema_to_pyarrow(Schema.model_validate_json(self._catalog.schema_json(table)))

    @staticmethod
    def _data_location(table: JavaObject) -> str:
        # The table's location provider decides where data goes (write.data.path, object storage
        # layout); ask it for a file name and keep the folder.
        probe = str(table.locationProvider().newDataLocation("icesink-probe"))
        return probe[: -len("icesink-probe")]
