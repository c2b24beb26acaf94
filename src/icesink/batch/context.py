"""What every step of a batch works with, built once per job: the config, the catalog, the decoders,
the routing rules and where executors write. Steps take it (or parts of it) as plain data; none
reaches back into the handler."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from icesink.batch.decode import Decoder
from icesink.batch.decode.build import build_decoder, build_key_decoder
from icesink.batch.routed_before import RoutedBefore
from icesink.batch.seen_schemas import SeenSchemas
from icesink.config import Config
from icesink.iceberg.order_bound import OrderBounds
from icesink.iceberg.tables import IcebergCatalog
from icesink.kafka import reader
from icesink.kafka.admin import GroupProgress
from icesink.model import TableRef
from icesink.routing import Router
from icesink.runtime.parallel import TablePool
from icesink.tasks.storage import StorageSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchContext:
    spark: SparkSession
    config: Config
    catalog: IcebergCatalog
    decoder: Decoder  # of record values
    key_decoder: Decoder | None  # of record keys; None when keys are not decoded or are plain strings
    router: Router
    dead_letter_ref: TableRef
    storage: StorageSettings
    group_progress: GroupProgress | None  # kafka.consumer_group's progress; None when not set
    seen: SeenSchemas  # the writer schemas each topic carried last time
    order_bounds: OrderBounds  # each ordered table's greatest order_by value, carried across batches
    tables: TablePool  # runs the per-table steps side by side (job.table_parallelism)
    # librdkafka's settings for the one-pass job's own Kafka reads (kafka/reader.py); None: Spark's source reads
    librdkafka: dict[str, Any] | None = None
    # (table, reason) of the plan-time declines of the one-pass job already logged (direct_tables.py)
    declines_said: set[tuple[str, str]] = field(default_factory=set)
    # The values each field-routed topic's records held in the last batches (batch/route_guess.py)
    routed_before: RoutedBefore = field(default_factory=RoutedBefore)

    @classmethod
    def build(cls, spark: SparkSession, config: Config) -> BatchContext:
        storage = StorageSettings.of(config.s3)
        catalog = IcebergCatalog(spark, config.catalog.name, config.catalog.keep_tables_s)
        log.info("commits: %s", catalog.use_multi_table_commit(config.catalog.multi_table_commit))
        return cls(
            spark=spark,
            config=config,
            catalog=catalog,
            decoder=build_decoder(spark, config),
            key_decoder=build_key_decoder(spark, config),
            router=Router(config.routing.rules, config.tables.namespace),
            dead_letter_ref=TableRef(config.tables.namespace, config.decode.dead_letter_table),
            storage=storage,
            group_progress=GroupProgress(config, group) if (group := config.kafka.consumer_group) else None,
            seen=SeenSchemas(),
            order_bounds=OrderBounds(spark, config.catalog.name),
            tables=TablePool(spark, config.job.table_parallelism),
            librdkafka=reader.settings(config) if config.kafka.direct_read else None,
        )

    def table_exists(self, ref: TableRef) -> bool:
        return self.catalog.load(ref) is not None
