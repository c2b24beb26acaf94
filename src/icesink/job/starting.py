"""Where a new checkpoint starts: with `kafka.starting_offsets: tables`, every topic-partition at
the offsets the tables hold, so a lost checkpoint (or an ephemeral one on a pod's disk) costs
neither a re-read of the topics' whole retention nor a manual `icesink offsets reset`.

The tables are read through PyIceberg and Kafka's partitions through confluent-kafka, before
Spark's query starts; the checkpoint is looked into through Hadoop's file system of the session,
so an `s3a://` checkpoint is judged the same way as a local folder.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from icesink.batch.plan import log_behind_error, log_behind_table
from icesink.config import Config
from icesink.ops import reset as reset_plan

log = logging.getLogger(__name__)

SHOWN_TOPICS = 20


def has_progress(spark: SparkSession, location: str) -> bool:
    """Whether Spark has planned a batch in this checkpoint (then it ignores startingOffsets)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/offsets")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.exists(path)) and len(fs.listStatus(path)) > 0


def from_tables(config: Config) -> reset_plan.ResetPlan:
    """Every subscribed topic-partition at the lowest offset a table of the namespace holds for it
    (what a table already holds is dropped by the job), the others at the fallback."""
    from icesink.iceberg import pyiceberg
    from icesink.kafka import admin

    catalog = pyiceberg.catalog_for(config)
    loaded = pyiceberg.tables(catalog, config.tables.namespace, missing_ok=True)
    held = {ref: pyiceberg.state_of(ref, t).offsets for ref, t in loaded}
    unseen = reset_plan.Mode(config.kafka.starting_offsets_fallback.value)
    marks = admin.subscribed(config)
    ends = {tp: end for tp, (_, end) in marks.items()}
    for ref, offsets in sorted(held.items()):
        # A table ahead of Kafka's log: starting there would skip the recreated topic's records.
        behind = log_behind_table({tp: o for tp, o in offsets.items() if tp in ends}, ends)
        if behind:
            raise log_behind_error(ref, offsets, ends, behind)
    plan = reset_plan.plan_reset(reset_plan.Mode.FROM_TABLES, held, marks, unseen=unseen)
    log.info(
        "new checkpoint: starting from the offsets of the %d table(s) of namespace %s "
        "(kafka.starting_offsets: tables); partitions no table holds at %s",
        len(held), config.tables.namespace, unseen.value,
    )  # fmt: skip
    lines = reset_plan.start_lines(plan, held, unseen)
    for i, line in enumerate(lines):
        # A capture of a whole database has hundreds of topics: the first ones, then a count.
        log.log(logging.INFO if i < SHOWN_TOPICS else logging.DEBUG, "  %s", line)
    if len(lines) > SHOWN_TOPICS:
        log.info("  ... and %d more topic(s) (all of them with --verbose)", len(lines) - SHOWN_TOPICS)
    for note in plan.notes:
        log.warning("%s", note)
    return plan


def spark_value(config: Config) -> str:
    """startingOffsets as Spark takes it, where the job's config alone says (no table read)."""
    value = config.kafka.starting_offsets
    return config.kafka.starting_offsets_fallback.value if value == "tables" else value
