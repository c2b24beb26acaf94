"""The streaming query: Kafka through subscribePattern, each micro-batch to BatchHandler."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from icesink.batch import BatchHandler
from icesink.config import Config, TriggerMode

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

    def start(self) -> StreamingQuery:
        source = self.spark.readStream.format("kafka")
        for k, v in kafka_options(self.config).items():
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
