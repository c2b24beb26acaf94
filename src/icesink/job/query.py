"""The streaming query: Kafka through subscribePattern, each micro-batch to BatchHandler."""

from __future__ import annotations

import json
import logging
import time

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from icesink.batch.handler import BatchHandler
from icesink.batch.write import changes_budget
from icesink.config import Config, TriggerMode
from icesink.errors import BatchAbandonedError
from icesink.job import metrics, starting
from icesink.job.maintainer import Maintainer
from icesink.job.stopping import StopSignals
from icesink.kafka import admin
from icesink.kafka.source import stream_options
from icesink.ops import checkpoints
from icesink.ops import reset as reset_plan

log = logging.getLogger(__name__)


def default_max_per_trigger(config: Config, parallelism: int) -> int | None:
    """Without a cap of the job's own (`kafka.max_offsets_per_trigger`, or Spark's option in
    `kafka.options`), a job whose tables may take changes (upsert, changelog) reads at most the
    changes the one-pass tasks hold on `parallelism` cores a batch: a larger batch's changes would
    go Spark's slower way (a Debezium snapshot's first batch, the whole topic without a cap, ran
    at 0.4x the records/s of the same changes in batches of that size). An append-only job keeps
    no cap: one batch of a backlog is faster than several (1.34x on 2,000,000 Avro records against
    batches of 500,000; docs/performance.md)."""
    if config.kafka.max_offsets_per_trigger or "maxOffsetsPerTrigger" in config.kafka.options:
        return None
    if not any(settings.is_cdc for _, settings in config.tables.sections()):
        return None
    return changes_budget(parallelism)


class Job:
    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.config = config
        self._query: StreamingQuery | None = None
        self._metrics: metrics.JobMetrics | None = None
        self._progress_seen: int | None = None
        self.handler = BatchHandler(spark, config, self._query_id)
        self.maintainer = Maintainer(spark, config, self.handler.dead_letter_ref, self._running)
        self.handler.on_commits = self.maintainer.committed
        self.maintainer.on_table_changed = self.handler.table_changed

    def _running(self) -> bool:
        """Whether the query runs (maintenance starts no run once it stopped)."""
        return self._query is None or bool(self._query.isActive)

    def _query_id(self) -> str:
        if self._query is not None:
            return str(self._query.id)
        # The first batch can run before start() returns; active query names are unique per session.
        for q in self.spark.streams.active:
            if q.name == self.config.job.name:
                return str(q.id)
        return "unknown"

    def _starting_offsets(self) -> str | None:
        """For a new checkpoint: the offsets an `icesink offsets reset` left (completed with the
        partitions that appeared since, from their beginning), else with `starting_offsets:
        tables` the tables' offsets; None when Spark's own option applies."""
        location = self.config.job.checkpoint_location
        fresh = not starting.has_progress(self.spark, location)
        s3 = self.config.s3
        saved = checkpoints.read_starting(location, s3)
        if saved is not None:
            if not fresh:
                checkpoints.mark_applied(location, s3)  # left over from a run that already started from it
                return None
            current = sorted(admin.subscribed(self.config))
            offsets = reset_plan.complete(reset_plan.parse_spark_json(saved), current)
            log.info(
                "starting from the offsets of `icesink offsets reset` (%s)", checkpoints.starting_file(location, s3).uri
            )
            # Once a batch is planned Spark keeps the offsets in its checkpoint; the file is then
            # retired, so a later fresh checkpoint does not start from it again.
            self.handler.after_batch = lambda: checkpoints.mark_applied(location, s3)
            return reset_plan.ResetPlan(reset_plan.Mode.FROM_TABLES, offsets).spark_json()
        if not fresh or self.config.kafka.starting_offsets != "tables":
            return None
        plan = starting.from_tables(self.config)
        return plan.spark_json() if plan.starting else None

    def start(self) -> StreamingQuery:
        source = self.spark.readStream.format("kafka")
        cap = default_max_per_trigger(self.config, self.spark.sparkContext.defaultParallelism)
        if cap is not None:
            log.info("at most %d records a batch (kafka.max_offsets_per_trigger unset: what one-pass tasks hold)", cap)
        options = stream_options(self.config, starting.spark_value(self.config), cap)
        start_at = self._starting_offsets()
        if start_at is not None:
            options["startingOffsets"] = start_at
        for k, v in options.items():
            source = source.option(k, v)
        trigger = self.config.job.trigger
        writer = (
            source.load()
            .writeStream.queryName(self.config.job.name)
            .option("checkpointLocation", self.config.job.checkpoint_location)
            .foreachBatch(self.handler)
        )
        if trigger.mode is TriggerMode.AVAILABLE_NOW:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=trigger.interval)
        self._watch_metrics()
        self._query = None  # a query of an earlier run stopped; this one's first batch may come before start() returns
        self.maintainer.resume()
        self._query = writer.start()
        log.info(
            "query %s started: pattern %r -> namespace %s, checkpoint %s, trigger %s",
            self._query.id, self.config.kafka.subscribe_pattern, self.config.tables.namespace,
            self.config.job.checkpoint_location, trigger.mode.value,
        )  # fmt: skip
        return self._query

    def _watch_metrics(self) -> None:
        """Publishes the job's metrics (job/metrics.py); a Spark whose metrics system icesink
        cannot reach runs the job without them, saying so."""
        try:
            published = metrics.JobMetrics.of(self.spark)
        except Exception as e:
            log.warning("job metrics are off: Spark's metrics system refused icesink's source (%s)", e)
            return
        self._metrics = published
        dead_letters = self.handler.dead_letter_ref
        self.handler.on_committed = lambda timings, last: published.batch_committed(timings, last, dead_letters)
        self.maintainer.on_run = published.maintained

    def run(self, stop: StopSignals | None = None) -> None:
        """Runs until the query stops (available-now: when caught up), fails, or `stop` is
        requested: then it stops between batches (see `icesink.job.stopping`)."""
        query = self.start()
        try:
            self._wait(query, stop)
        finally:
            self.maintainer.close()
            self.handler.close()

    def _wait(self, query: StreamingQuery, stop: StopSignals | None) -> None:
        while True:
            try:
                if query.awaitTermination(1):
                    return
            except Exception:
                stopping = stop is not None and stop.requested.is_set()
                if stopping and isinstance(self.handler.failure, BatchAbandonedError):
                    log.info("%s", self.handler.failure)
                    return  # a batch not begun, or abandoned before any commit: the next run replays it
                raise
            self._publish_progress(query)
            if stop is not None and stop.requested.is_set():
                self.handler.stopping.set()
                if self.handler.idle():
                    self._stop_after_commit_log(query)
                    return

    def _publish_progress(self, query: StreamingQuery) -> None:
        """The lag gauges from the query's newest progress report (once per report)."""
        if self._metrics is None:
            return
        progress = query.lastProgress
        if progress is None or progress["batchId"] == self._progress_seen:
            return
        self._progress_seen = progress["batchId"]
        try:
            # Its JSON, where a source's offsets are still Spark's (the Python objects keep a repr).
            self._metrics.progress(json.loads(progress.json))
        except Exception as e:  # metrics never stop the job
            log.debug("lag from the query's progress: %s", e)

    def _stop_after_commit_log(self, query: StreamingQuery, limit_s: float = 10) -> None:
        """Stops the query once Spark has logged the last handled batch as done (its progress is
        reported after its commit log), so the next run does not replay it only to drop it."""
        last = self.handler.last_batch
        deadline = time.monotonic() + limit_s
        while last is not None and time.monotonic() < deadline:
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= last:
                break
            time.sleep(0.2)
        query.stop()
