"""The streaming query: Kafka through subscribePattern, each micro-batch to BatchHandler."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from icesink.batch.handler import BatchHandler
from icesink.config import Config, TriggerMode
from icesink.kafka import admin
from icesink.ops import checkpoints
from icesink.ops import reset as reset_plan

log = logging.getLogger(__name__)


def kafka_options(config: Config) -> dict[str, str]:
    k = config.kafka
    opts = {
        "kafka.bootstrap.servers": k.bootstrap_servers,
        "subscribePattern": k.subscribe_pattern,
        "startingOffsets": k.starting_offsets,
        "failOnDataLoss": str(k.fail_on_data_loss).lower(),
        "includeHeaders": "true",
        "kafka.isolation.level": k.isolation_level,
        # New daily topics are found on a metadata refresh; Kafka's default waits 5 minutes.
        "kafka.metadata.max.age.ms": str(k.metadata_max_age_ms),
    }
    if k.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(k.max_offsets_per_trigger)
    opts.update(k.options)
    return opts


class Job:
    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.config = config
        self._query: StreamingQuery | None = None
        self.handler = BatchHandler(spark, config, self._query_id)

    def _query_id(self) -> str:
        if self._query is not None:
            return str(self._query.id)
        # The first batch can run before start() returns; active query names are unique per session.
        for q in self.spark.streams.active:
            if q.name == self.config.job.name:
                return str(q.id)
        return "unknown"

    def _starting_offsets(self) -> str | None:
        """The offsets an `icesink offsets reset` left for this fresh checkpoint, completed with
        the partitions that appeared since (from their beginning)."""
        location = self.config.job.checkpoint_location
        saved = checkpoints.read_starting(location)
        if saved is None:
            return None
        if checkpoints.has_progress(location):
            checkpoints.mark_applied(location)  # left over from a run that already started from it
            return None
        current = sorted(admin.subscribed(self.config))
        starting = reset_plan.complete(reset_plan.parse_spark_json(saved), current)
        log.info("starting from the offsets of `icesink offsets reset` (%s)", checkpoints.starting_file(location))
        return reset_plan.ResetPlan(reset_plan.Mode.FROM_TABLES, starting).spark_json()

    def start(self) -> StreamingQuery:
        source = self.spark.readStream.format("kafka")
        options = kafka_options(self.config)
        reset = self._starting_offsets()
        if reset is not None:
            options["startingOffsets"] = reset
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
        if reset is not None:
            # Once a batch is planned Spark keeps the offsets in its checkpoint; the file is then
            # retired, so a later fresh checkpoint does not start from it again.
            location = self.config.job.checkpoint_location
            self.handler.after_batch = lambda: checkpoints.mark_applied(location)
        self._query = writer.start()
        log.info(
            "query %s started: pattern %r -> namespace %s, checkpoint %s, trigger %s",
            self._query.id, self.config.kafka.subscribe_pattern, self.config.tables.namespace,
            self.config.job.checkpoint_location, trigger.mode.value,
        )  # fmt: skip
        return self._query

    def run(self) -> None:
        """Runs until the query stops (available-now: when caught up) or fails."""
        query = self.start()
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            log.info("interrupted, stopping the query")
            query.stop()
        finally:
            self.handler.close()
