"""The foreachBatch handler: one micro-batch of Kafka records into its tables, exactly once per table."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyarrow import schema as pa_schema
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DataType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from icesink.batch import changes, dead_letters
from icesink.batch import route as record_routing
from icesink.batch import shape as shaping
from icesink.batch.changes import ChangeSpec
from icesink.batch.decode import ERROR, ROW, Decoder, bad_records, good_rows, no_error
from icesink.batch.decode.build import build_decoder, build_key_decoder
from icesink.batch.files import DESCRIPTOR_DDL, StorageSettings, WriteTask, map_in_arrow_fn
from icesink.batch.plan import TablePlan, log_behind_table, plan_table
from icesink.batch.route_rules import Router
from icesink.config import Config, ErrorPolicy, IncompatiblePolicy, KeyFormat, OrderScope, TableSettings, WriteMode
from icesink.errors import ConfigError, DecodeError, OffsetsError, SchemaConflictError, WriteError
from icesink.iceberg.tables import CommitResult, IcebergCatalog, JavaObject
from icesink.kafka import admin as kafka_offsets
from icesink.model import PartitionRange, TableRef, TopicPartition, WrittenFile
from icesink.runtime import faults, retries
from icesink.runtime.timings import BatchTimings
from icesink.schema import evolution as schema_diff
from icesink.schema import partitioning
from icesink.schema.partitioning import PartitionField

log = logging.getLogger(__name__)
_KEY_ROW = "__icesink_key_row"
_KEY_ERROR = "__icesink_key_error"
# What the planning aggregate collected of each decoder's plan column: ("value" | "key", topic) -> set.
_Planned = dict[tuple[str, str], set[Any]]


@dataclass
class _TableWork:
    plan: TablePlan
    table: JavaObject | None
    target: StructType  # the table's schema once this batch's new columns are added
    parsed: DataFrame
    settings: TableSettings
    changes: ChangeSpec | None = None  # upsert/changelog tables only


def settings_partition(settings: TableSettings) -> list[PartitionField]:
    return [partitioning.parse_partition_field(p) for p in settings.partition_by]


def keep_condition(keep_from: dict[TopicPartition, int]) -> Column:
    """Records at or above each topic-partition's committed offset (all of them where none is)."""
    if not keep_from:
        return F.lit(True)
    pairs: list[Column] = []
    for tp, off in keep_from.items():
        pairs += [F.lit(f"{tp.topic}:{tp.partition}"), F.lit(off)]
    floor = F.element_at(F.create_map(*pairs), F.concat_ws(":", F.col("topic"), F.col("partition").cast("string")))
    return F.col("offset") >= F.coalesce(floor, F.lit(0))


@contextmanager
def _session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """`key` set to `value` in the session while the block runs (its queries are planned then)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def observed_count(observation: Observation, wait_s: float = 10.0) -> int | None:
    """The count an action observed, or None when Spark did not report it (in time). Spark hands
    observed metrics over through its listener bus, a moment after the action returns."""
    future = observation._jo.future() if observation._jo is not None else None
    deadline = time.monotonic() + wait_s
    try:
        while future is not None and not future.isCompleted():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
        return int(observation.get["bad"]) if future is not None else None
    except Exception:
        return None


_CAUSE = re.compile(r"^(?:: )?(?:[\w.]+\.)?(\w+(?:Error|Exception|Invalid): .+)$", re.MULTILINE)


def write_failed(plan: TablePlan, ranges: list[PartitionRange], batch_id: int, e: BaseException) -> WriteError:
    """The error that ends a batch whose write failed on an executor: the table, its topic-partitions
    and offsets, the cause in one line (not a JVM stack trace) and what to do."""
    tps = set(plan.batch_tps)
    mine = [r for r in ranges if r.tp in tps]
    where = ", ".join(f"{r.tp} offsets {r.first_offset}-{r.last_offset}" for r in mine) or "no records"
    text = str(e)
    # The innermost exception line that says what went wrong (a Python worker's error comes last).
    found = [m for m in _CAUSE.findall(text) if not m.startswith(("Py4JJavaError", "PythonException"))]
    first = text.strip().splitlines()[0] if text.strip() else ""
    cause = found[-1].strip() if found else f"{type(e).__name__}: {first}"
    return WriteError(
        f"batch {batch_id}: writing table {plan.table} failed ({where}): {cause[:500]}. Nothing of this batch "
        "was committed; the job runs it again on restart. If it fails again the same way, the cause is in "
        "these records or the table: fix it, or route them elsewhere, then restart"
    )


class BatchHandler:
    """Called by Spark with each micro-batch; see `__call__` for the ordered steps."""

    def __init__(self, spark: SparkSession, config: Config, query_id: Callable[[], str]) -> None:
        self._spark = spark
        self._config = config
        self._query_id = query_id
        self._catalog = IcebergCatalog(spark, config.catalog.name)
        self._decoder = build_decoder(spark, config)
        self._key_decoder = build_key_decoder(spark, config)
        self._dead_letter_ref = TableRef(config.tables.namespace, config.decode.dead_letter_table)
        self._router = Router(config.routing.rules, config.tables.namespace)
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
        # Called once after the first batch is handled (the job retires a reset's starting offsets).
        self.after_batch: Callable[[], None] | None = None
        # Called with each handled batch's step timings (also logged at INFO).
        self.on_timings: Callable[[BatchTimings], None] | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Commits one micro-batch. The steps, in order:

        1. plan: aggregate the batch to first/last offset per topic-partition (small); route each
           topic to its tables by the routing rules (field-routed topics: decode the field once
           and route each record); read each table's committed offsets; records below them are
           already in the table and are dropped (replays, lost checkpoints, resets);
        2. decode: per table, look at the batch's schemas (registry ids, inferred JSON types) and
           parse every record with the table's (evolved) schema; for upsert/changelog tables,
           classify each change; a record that does not decode is a dead letter, or fails the
           whole batch before anything is written (`on_error: fail`);
        3. prepare: create missing tables (format v2) and evolve their schemas, each change its
           own metadata commit, idempotently;
        4. write: executors write Parquet data (and equality-delete) files, for every table and the
           dead letters, and return descriptors, never rows;
        5. commit: the dead-letter table first, then ONE snapshot per table (an append, or a
           RowDelta), each with its new offsets, query id and batch id in the summary, refused if
           its offsets moved meanwhile.
        Spark writes its own commit log after this returns; a crash before that replays the batch,
        and step 1 drops what step 5 already committed.
        """
        try:
            self._run_until_reachable(batch, batch_id)
        except BaseException as e:
            self.failure = e
            raise
        if self.after_batch is not None:
            done, self.after_batch = self.after_batch, None
            done()

    def _run_until_reachable(self, batch: DataFrame, batch_id: int) -> None:
        """`_run`, run again while a service it needs is unreachable (see `retries`), so an outage
        of the catalog, S3 or the registry holds the stream instead of ending it. The batch keeps
        its offset range, so memory stays bounded however long the outage lasts."""
        limit = self._config.job.retry_unreachable_for_s
        deadline = time.monotonic() + limit
        attempt = 0
        while True:
            try:
                self._run(batch, batch_id)
                if attempt:
                    log.info("batch %d: committed after %d retr%s", batch_id, attempt, "y" if attempt == 1 else "ies")
                return
            except Exception as e:
                attempt += 1
                wait = retries.backoff_seconds(attempt)
                if not retries.is_transient(e) or time.monotonic() + wait > deadline:
                    if retries.is_transient(e):
                        log.error("batch %d: still failing after %d s: %s", batch_id, limit, retries.brief(e))
                    raise
                log.warning(
                    "batch %d: %s; nothing of it is lost, running it again in %.0f s (attempt %d, for up to %d s)",
                    batch_id, retries.brief(e), wait, attempt + 1, limit,
                )  # fmt: skip
                time.sleep(wait)

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        timings = BatchTimings(batch_id)
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        persisted: list[DataFrame] = [batch]
        try:
            ranges, planned = self._ranges(batch)
            timings.lap("read")
            if not ranges:
                log.info("batch %d: empty", batch_id)
                return
            targets = record_routing.route_batch(
                batch,
                ranges,
                self._router,
                lambda records, field: self._read_field(records, field, planned),
                lambda ref: self._catalog.load(ref) is not None,
                self._dead_letter_ref,
            )
            persisted.extend(targets.persisted)
            work = []
            plans = self._plan(targets)
            timings.lap("plan")
            for plan, table, condition in plans:
                if plan.has_new_records:
                    work.append(self._decode(targets.source, plan, table, planned, condition))
                else:
                    log.info("batch %d: table %s already holds these offsets, skipped", batch_id, plan.table)
            timings.lap("decode")
            query_id = self._query_id()
            dead = None
            unrouted = [(f"(unrouted: {topic})", frame) for topic, frame in targets.unrouted]
            bad = [(str(w.plan.table), bad_records(w.parsed)) for w in work] + unrouted
            # Every file is written before anything is committed: a failure while writing leaves
            # orphan files only, and the whole batch is retried.
            if self._config.decode.on_error is ErrorPolicy.FAIL:
                self._fail_on_bad_records(bad, batch_id)
            ready = self._prepare(work)
            timings.lap("prepare")
            seen: dict[str, Observation] = {}
            written = []
            for i, w in enumerate(ready):
                if i:
                    faults.maybe_kill("mid-write", batch_id, self._spark)
                try:
                    written.append((w, self._write(w, batch_id, query_id, seen)))
                except Exception as e:
                    raise write_failed(w.plan, ranges, batch_id, e) from e
            timings.lap("write")
            if self._config.decode.on_error is not ErrorPolicy.FAIL:
                # Each table's write counted its bad records on the way: only tables with some (or
                # an unknown count) and the records no table took need the dead-letter pass.
                clean = {t for t, o in seen.items() if observed_count(o) == 0}
                todo = [(t, records) for t, records in bad if t not in clean]
                if todo:
                    dead = self._write_dead_letters(todo, ranges, batch_id, query_id)
            timings.lap("dead_letters")
            results = []
            if dead is not None:
                results.append(self._commit(*dead, batch_id, query_id))
                faults.maybe_kill("after-dead-letters", batch_id, self._spark)
            results += [
                self._commit(w.plan, w.table, files, batch_id, query_id, w.changes.keys if w.changes else ())
                for w, files in written
            ]
            timings.lap("commit")
            log.info(
                "batch %d: %d record(s) from %d topic-partition(s), %d row(s) to %d table(s) in %.1fs",
                batch_id, sum(r.records for r in ranges), len(ranges), sum(r.records for r in results),
                len(results), time.monotonic() - started,
            )  # fmt: skip
            self._commit_group(ranges, batch_id)
            timings.lap("group")
            timings.records = sum(r.records for r in ranges)
            log.info("%s", timings.line())
            if self.on_timings is not None:
                self.on_timings(timings)
            faults.maybe_kill("after-commit", batch_id, self._spark)
        finally:
            for frame in persisted:
                frame.unpersist()

    def _commit_group(self, ranges: list[PartitionRange], batch_id: int) -> None:
        """Progress for Kafka's lag tools; a failure here loses nothing (the tables hold the
        offsets), so it is logged, not raised."""
        group = self._config.kafka.consumer_group
        if not group:
            return
        try:
            kafka_offsets.commit_group(self._config, group, {r.tp: r.last_offset + 1 for r in ranges})
        except Exception as e:
            log.warning("batch %d: could not commit progress to consumer group %s: %s", batch_id, group, e)

    # ------------------------------------------------------------------ 1. plan

    def _ranges(self, batch: DataFrame) -> tuple[list[PartitionRange], _Planned]:
        """One pass over the batch: offsets per topic-partition, and per topic the sets of the
        decoders' plan columns (Avro: the schema ids), so decoding needs no scan of its own."""
        aggs = [F.min("offset").alias("lo"), F.max("offset").alias("hi"), F.count(F.lit(1)).alias("n")]
        decoders = {"value": self._decoder, "key": self._key_decoder}
        extra = {name: d.plan_column() for name, d in decoders.items() if d is not None}
        aggs += [F.collect_set(col).alias(name) for name, col in extra.items() if col is not None]
        rows = batch.groupBy("topic", "partition").agg(*aggs).collect()
        planned: _Planned = {}
        for r in rows:
            for name, col in extra.items():
                if col is not None:
                    planned.setdefault((name, r.topic), set()).update(bytes(v) for v in r[name])
        return [PartitionRange(TopicPartition(r.topic, r.partition), r.lo, r.hi, r.n) for r in rows], planned

    def _plan(self, targets: record_routing.Targets) -> list[tuple[TablePlan, JavaObject | None, Column]]:
        plans = []
        for ref in sorted(targets.ranges):
            table_ranges = targets.ranges[ref]
            if ref == self._dead_letter_ref:
                topics = sorted({r.tp.topic for r in table_ranges})
                raise DecodeError(
                    f"topics {topics} route to the dead-letter table {ref}; rename it (decode.dead_letter_table)"
                )
            plan, table = self._plan_one(ref, sorted(table_ranges, key=lambda r: r.tp))
            plans.append((plan, table, targets.conditions[ref]))
        return plans

    def _read_field(self, records: DataFrame, field: str, planned: _Planned) -> DataFrame:
        """`records` (one topic) with the routing field's value (ROUTE) and their decode error."""
        topics = [r.topic for r in records.select("topic").distinct().collect()]
        seen = None
        if self._decoder.plan_column() is not None:
            seen = sorted(set().union(*(planned.get(("value", t), set()) for t in topics)))
        prepared = self._decoder.prepare(records, seen)
        parsed = prepared.parse(prepared.schema)
        names = prepared.schema.fieldNames()
        value = F.col(ROW)[field].cast("string") if field in names else F.lit(None).cast("string")
        return parsed.select(
            *records.columns, value.alias(record_routing.ROUTE), F.col(ERROR).alias(record_routing.ROUTE_ERROR)
        )

    def _plan_one(self, ref: TableRef, ranges: list[PartitionRange]) -> tuple[TablePlan, JavaObject | None]:
        table = self._catalog.load(ref)
        committed = self._catalog.committed_offsets(table) if table is not None else {}
        plan = plan_table(ref, ranges, committed)
        if plan.keep_from:
            # A replay, a reset, or a topic recreated under the same name: only Kafka can tell.
            ends = {tp: end for tp, (_, end) in kafka_offsets.watermarks(self._config, plan.keep_from).items()}
            behind = log_behind_table(committed, ends)
            if behind:
                detail = "; ".join(
                    f"{tp}: the table's next offset is {committed[tp]}, the log ends at {ends[tp]}" for tp in behind
                )
                topics = " ".join(f"--topic {t}" for t in sorted({tp.topic for tp in behind}))
                raise OffsetsError(
                    f"table {ref}: Kafka's log ends below the offsets the table holds ({detail}); the topic was "
                    "deleted and recreated, or truncated, and its new records would be taken for ones the table "
                    f"has. Nothing was committed. Rewind the table for it: icesink offsets reset {topics} "
                    "--to-earliest --rewind"
                )
        return plan, table

    # ------------------------------------------------------------------ 2. decode

    def _decode(
        self, source: DataFrame, plan: TablePlan, table: JavaObject | None, planned: _Planned, condition: Column
    ) -> _TableWork:
        records = source.where(condition)
        records = records.where(keep_condition(dict(plan.keep_from)))
        current = self._catalog.spark_schema(table) if table is not None else StructType([])
        settings = self._config.tables.settings_for(plan.table.name)
        key_column = self._config.decode.key_column

        def seen(name: str, decoder: Decoder) -> list[Any] | None:
            if decoder.plan_column() is None:
                return None
            return sorted(set().union(*(planned.get((name, t), set()) for t in plan.topics)))

        key_type: DataType | None = None
        if self._key_decoder is not None:
            records, key_type = self._decode_keys(records, current, seen("key", self._key_decoder))
        elif self._config.decode.key_format is KeyFormat.STRING:
            records = records.withColumn(_KEY_ROW, F.col("key").cast("string")).withColumn(_KEY_ERROR, no_error())
            key_type = StringType()
        prepared = self._decoder.prepare(records, seen("value", self._decoder))
        fields = list(prepared.schema.fields)
        if key_type is not None:
            fields.append(StructField(key_column, key_type))
        if settings.is_cdc and isinstance(key_type, StructType) and prepared.schema.fields:
            # Key fields the values lack (or a batch of tombstones only) still become columns.
            have = {f.name for f in fields}
            fields += [
                f for f in key_type.fields if f.name not in have and f.name in self._key_names(settings, key_type)
            ]
        nested = StructType(fields)
        sep = settings.flatten_separator
        flat = shaping.flat_columns(nested, sep, current, settings.case_insensitive) if sep else None
        if flat is not None:
            incoming = StructType([StructField(c.column, c.type, True) for c in flat])
        elif settings.case_insensitive:
            incoming = schema_diff.respelled(nested, current)
        else:
            incoming = nested
        target = schema_diff.merged(current, incoming)
        self._check_compatible(plan.table, settings, target, incoming)
        # Decoders match names exactly and keep nesting: parse in the batch's spelling and shape.
        if flat is not None:
            parsed = prepared.parse(nested)
        elif settings.case_insensitive:
            parse_target = schema_diff.respelled(target, nested)
            parsed = shaping.respell(prepared.parse(parse_target), target, parse_target)
        else:
            parsed = prepared.parse(target)
        if key_type is not None:
            # The key joins the row.
            parsed = parsed.withColumn(ROW, F.col(ROW).withField(key_column, F.col(_KEY_ROW)))
        if flat is not None:
            parsed = shaping.flatten(parsed, target, flat)
        key = F.col(_KEY_ROW) if key_type is not None else None
        key_error = F.col(_KEY_ERROR) if key_type is not None else no_error()
        spec = None
        if settings.is_cdc and target.fields:
            spec = self._change_spec(plan.table, settings, table, key_type, target)
            parsed = changes.classify(parsed, spec, target, key, key_error)
        elif key_type is not None:
            # A value error is reported before a key error.
            parsed = parsed.withColumn(ERROR, F.coalesce(F.col(ERROR), key_error))
        parsed = parsed.drop(_KEY_ROW, _KEY_ERROR)
        return _TableWork(plan, table, target, parsed, settings, spec)

    @staticmethod
    def _check_compatible(ref: TableRef, settings: TableSettings, target: StructType, incoming: StructType) -> None:
        problems = schema_diff.conflicts(target, incoming)
        if problems and settings.on_incompatible is IncompatiblePolicy.FAIL:
            raise SchemaConflictError(
                f"table {ref}: the records' schema cannot evolve the table: {'; '.join(problems)}. Nothing of this "
                "batch was committed; fix the producer, or set tables.on_incompatible: dead-letter"
            )

    @staticmethod
    def _key_names(settings: TableSettings, key_type: StructType) -> set[str]:
        return set(settings.key_columns) if settings.key_columns else set(key_type.fieldNames())

    def _change_spec(
        self,
        ref: TableRef,
        settings: TableSettings,
        table: JavaObject | None,
        key_type: DataType | None,
        target: StructType,
    ) -> ChangeSpec:
        identifiers = self._catalog.identifier_columns(table) if table is not None else []
        key_column = self._config.decode.key_column
        keys = changes.resolve_keys(str(ref), settings.key_columns, identifiers, key_type, key_column, target)
        fields = self._catalog.partition_fields(table) if table is not None else settings_partition(settings)
        try:
            partitioning.check_within_keys(fields, keys)
        except ValueError as e:
            raise ConfigError(f"table {ref}: {e}") from None
        names = target.fieldNames()
        op_column = self._config.decode.operation_column
        if settings.mode is WriteMode.CHANGELOG and op_column not in names:
            raise ConfigError(
                f"table {ref}: changelog mode reads the operation from column {op_column}, which its rows "
                f"do not have; set decode.operation_column, or use tables.mode upsert"
            )
        if settings.order_by and settings.order_by not in names:
            raise ConfigError(f"table {ref}: order_by column {settings.order_by} is not a column of its rows")
        return ChangeSpec(settings.mode, keys, op_column, key_column, settings.order_by)

    def _decode_keys(
        self, records: DataFrame, current: StructType, planned: list[Any] | None
    ) -> tuple[DataFrame, DataType]:
        """`records` with the decoded key and its error (stage `key ...`; a null key is no error)."""
        assert self._key_decoder is not None
        prepared = self._key_decoder.prepare(records, planned)
        name = self._config.decode.key_column
        have = current[name].dataType if name in current.fieldNames() else StructType([])
        key_target = schema_diff.merged(have, prepared.schema) if isinstance(have, StructType) else prepared.schema
        parsed = prepared.parse(key_target)
        failed = F.col(ERROR)
        labelled = F.struct(
            F.concat(F.lit("key "), failed["stage"]).alias("stage"),
            failed["error_class"].alias("error_class"),
            failed["message"].alias("message"),
        )
        key_error = F.when(F.col("key").isNull() | failed.isNull(), no_error()).otherwise(labelled)
        # Exactly the key's columns: a decoder's row may carry helper fields (JSON's corrupt-record column).
        key_row = F.col(ROW)
        if isinstance(key_target, StructType):
            fields = [key_row[f.name].alias(f.name) for f in key_target.fields]
            key_row = F.when(key_row.isNull(), F.lit(None).cast(key_target)).otherwise(F.struct(*fields))
        parsed = parsed.withColumn(_KEY_ERROR, key_error).withColumn(_KEY_ROW, key_row).drop(ROW, ERROR)
        return parsed, key_target

    def _fail_on_bad_records(self, bad: list[tuple[str, DataFrame]], batch_id: int) -> None:
        for target, records in bad:
            count = records.count()
            if not count:
                continue
            first = records.select("topic", "partition", "offset", f"{ERROR}.*").orderBy("topic", "partition", "offset")
            lines = "\n  ".join(
                f"topic {r.topic} partition {r.partition} offset {r.offset}: {r.message} [{r.stage}/{r.error_class}]"
                for r in first.limit(5).collect()
            )
            raise DecodeError(
                f"batch {batch_id}: {count} record(s) for table {target} cannot be decoded; "
                f"nothing of this batch was committed. First:\n  {lines}"
            )

    # ------------------------------------------------------------------ dead letters

    def _write_dead_letters(
        self, bad: list[tuple[str, DataFrame]], ranges: list[PartitionRange], batch_id: int, query_id: str
    ) -> tuple[TablePlan, JavaObject, list[WrittenFile]] | None:
        frames = [dead_letters.rows(records, target, batch_id, query_id) for target, records in bad]
        rows = frames[0]
        for f in frames[1:]:
            rows = rows.unionByName(f)
        plan, table = self._plan_one(self._dead_letter_ref, ranges)
        rows = rows.where(keep_condition(dict(plan.keep_from)))
        if table is None:
            # Created on first use only: check cheaply whether this batch has any dead letter.
            if not rows.limit(1).collect():
                return None
            table = self._catalog.create(self._dead_letter_ref, rows.schema, self._config.tables.properties)
        files = self._write_rows(rows, table, self._dead_letter_ref, batch_id, query_id)
        if not files:
            return None
        log.warning(
            "batch %d: %d record(s) dead-lettered to %s",
            batch_id, sum(f.record_count for f in files), self._dead_letter_ref,
        )  # fmt: skip
        return plan, table, files

    # ------------------------------------------------------------------ 3. prepare

    def _prepare(self, work: list[_TableWork]) -> list[_TableWork]:
        ready = []
        for w in work:
            ref = w.plan.table
            table = w.table
            if table is None:
                if not w.target.fields:
                    log.info("table %s: no record of this batch decoded; not created", ref)
                    continue
                keys = w.changes.keys if w.changes is not None else ()
                missing = [c for c in w.settings.sort_by if c not in w.target.fieldNames()]
                if missing:
                    raise ConfigError(f"table {ref}: sort_by column(s) {missing} are not columns of its rows")
                table = self._catalog.create(
                    ref, w.target, w.settings.properties, settings_partition(w.settings), keys, w.settings.sort_by
                )
            else:
                # Its own metadata commit, before the data commit; a no-op when re-run. Nothing to
                # do against the schema loaded while planning: no catalog round trip either.
                have = self._catalog.spark_schema(table)
                add = schema_diff.added_columns(have, w.target)
                widen = schema_diff.widened_columns(have, w.target)
                optional = schema_diff.optional_columns(have, w.target)
                if add or widen or optional:
                    self._catalog.evolve(ref, table, add=add, widen=widen, optional=optional)
            ready.append(_TableWork(w.plan, table, self._catalog.spark_schema(table), w.parsed, w.settings, w.changes))
        return ready

    # ------------------------------------------------------------------ 4. write, 5. commit

    def _write(self, w: _TableWork, batch_id: int, query_id: str, seen: dict[str, Observation]) -> list[WrittenFile]:
        """Writes the table's good rows; `seen[table]` counts its bad records in the same pass."""
        seen[str(w.plan.table)] = counted = Observation()
        parsed = w.parsed.observe(counted, F.count_if(F.col(ERROR).isNotNull()).alias("bad"))
        if w.changes is None:
            return self._write_rows(good_rows(parsed, w.target), w.table, w.plan.table, batch_id, query_id)
        columns = w.target.fieldNames()
        good = parsed.where(F.col(ERROR).isNull()).select(
            *[F.col(f"{ROW}.`{c}`").alias(c) for c in columns], changes.OP, "topic", "partition", "offset"
        )
        last = changes.last_change_per_key(good, w.changes, columns)
        held = self._held_order(w)
        if held is None:
            return self._write_rows(last, w.table, w.plan.table, batch_id, query_id, w.changes.keys)
        # Dynamic partition pruning would trace the join key back through every alias of the
        # decode (a Connect envelope: thousands of expressions, rewritten at each level) and
        # exhaust the driver's memory; this join has nothing to prune anyway. The batch's own
        # session plans it (Spark runs each micro-batch in a clone of the job's session).
        with _session_conf(good.sparkSession, "spark.sql.optimizer.dynamicPartitionPruning.enabled", "false"):
            last = changes.skip_older(last, held, w.changes)
            return self._write_rows(last, w.table, w.plan.table, batch_id, query_id, w.changes.keys)

    def _held_order(self, w: _TableWork) -> DataFrame | None:
        """The key and `order_by` columns of the rows the table holds (as of the snapshot this batch
        commits on), when changes are ordered across batches; None when there is nothing to compare."""
        spec = w.changes
        if spec is None or spec.order_by is None or w.settings.order_by_scope is not OrderScope.TABLE:
            return None
        snapshot = w.table.currentSnapshot() if w.table is not None else None
        if snapshot is None or spec.order_by not in w.target.fieldNames():
            return None
        rows = (
            self._spark.read.format("iceberg")
            .option("versionAsOf", str(snapshot.snapshotId()))
            .load(f"{self._config.catalog.name}.{w.plan.table}")
        )
        return rows.select(*[F.col(f"`{k}`") for k in spec.keys], F.col(f"`{spec.order_by}`").alias(changes.HELD))

    def _write_rows(
        self,
        rows: DataFrame,
        table: JavaObject,
        ref: TableRef,
        batch_id: int,
        query_id: str,
        keys: tuple[str, ...] = (),
    ) -> list[WrittenFile]:
        """Writes `rows` (the table's columns; with `keys`, also the change operation) as files."""
        schema = self._catalog.spark_schema(table)
        # Columns in the table's order; columns another writer added since decoding stay null.
        have = set(rows.columns)
        columns = [F.col(f"`{f.name}`") if f.name in have else F.lit(None).cast(f.dataType) for f in schema.fields]
        parts = self._partition_values(table, schema)
        meta = [p.alias(f"__icesink_part_{i}") for i, p in enumerate(parts)]
        if keys:
            meta.append(F.col(changes.OP))
        rows = rows.select(*meta, *[c.alias(f.name) for c, f in zip(columns, schema.fields, strict=True)])
        if parts:
            rows = rows.sortWithinPartitions(*[f"__icesink_part_{i}" for i in range(len(parts))])
        arrow_schema = self._arrow_schema(table)
        task = WriteTask(
            table=str(ref),
            arrow_schema=arrow_schema,
            data_location=self._data_location(table),
            file_prefix=f"{query_id[:8]}-{batch_id:08d}",
            batch_id=batch_id,
            storage=self._storage,
            target_file_size=self._config.tables.target_file_size_bytes,
            partition_columns=len(parts),
            delete_schema=pa_schema([arrow_schema.field(k) for k in keys]) if keys else None,
        )
        written = rows.mapInArrow(map_in_arrow_fn(task), DESCRIPTOR_DDL).collect()
        return [WrittenFile(r.path, r.record_count, r.file_size, r.content, tuple(r.partition or ())) for r in written]

    def _partition_values(self, table: JavaObject, schema: StructType) -> list[Column]:
        """Per partition field, the row's partition value as the string Iceberg parses back, computed
        by Iceberg's own transform functions in Spark."""
        out = []
        for f in self._catalog.partition_fields(table):
            source = schema[f.column].dataType
            if f.transform in ("identity", "truncate") and isinstance(
                source, TimestampType | TimestampNTZType | BinaryType
            ):
                raise ConfigError(
                    f"table {table.name()}: partition field {f} on a {source.simpleString()} column is not supported "
                    "by icesink's writer; use hours/days/bucket"
                )
            col = f"`{f.column}`"
            catalog = self._config.catalog.name
            if f.transform == "identity":
                expr = F.col(col)
            elif f.param is not None:
                expr = F.expr(f"{catalog}.system.{f.transform}({f.param}, {col})")
            else:
                expr = F.expr(f"{catalog}.system.{f.transform}s({col})")
            out.append(expr.cast("string"))
        return out

    def _commit(
        self, plan: TablePlan, table: JavaObject, files: list[WrittenFile], batch_id: int, query_id: str,
        keys: tuple[str, ...] = (),
    ) -> CommitResult:  # fmt: skip
        result = self._catalog.commit(table, files, plan, query_id, batch_id, keys)
        deletes = f", {result.deletes} key delete(s) in {result.delete_files} file(s)" if result.delete_files else ""
        log.info(
            "batch %d: table %s +%d row(s) in %d file(s)%s, snapshot %d, offsets %s",
            batch_id, plan.table, result.records, result.files, deletes, result.snapshot_id,
            ", ".join(f"{tp}->{plan.next_offsets[tp]}" for tp in plan.batch_tps),
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
