"""Running the job in the test's SparkSession, as the one-pass tests do."""

from __future__ import annotations

from pyspark.sql import SparkSession

from icesink.config import Config
from icesink.job.query import Job
from icesink.runtime.timings import BatchTimings


def timed_run(spark: SparkSession, config: Config) -> list[BatchTimings]:
    """Runs the job (to the end of what Kafka holds) and returns each batch's step timings."""
    job = Job(spark, config)
    seen: list[BatchTimings] = []
    job.handler.on_timings = seen.append
    job.run()
    return seen


# The steps of Spark's decode path in a batch's timings (a one-pass batch has none of them).
SPARK_STEPS = frozenset({"decode", "prepare", "write"})


def one_pass(timings: list[BatchTimings]) -> list[tuple[bool, list[str]]]:
    """Per batch: whether it took the one-pass job, and the steps of Spark's path it ran (none)."""
    return [("direct" in t.steps, sorted(SPARK_STEPS & set(t.steps))) for t in timings]
