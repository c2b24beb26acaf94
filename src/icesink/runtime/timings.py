"""Where a micro-batch's time goes: wall-clock seconds per step of the batch handler.

The handler logs one INFO line per batch (`batch 7 timings: read 1.20s, plan 0.05s, ...`) and hands
the same record to `BatchHandler.on_timings`, if set (the benchmark collects them there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession


@dataclass
class BatchTimings:
    batch_id: int
    records: int = 0
    # step -> seconds, in the order the steps ran: ranges (the offset ranges Spark planned), plan
    # (routing, table offsets, caching the batch when it is read more than once), direct (plain JSON
    # tables decoded and written in one job, when the batch has some), decode (schemas,
    # JSON inference when the table cannot be guessed), prepare (create, evolve), write (the Kafka
    # read, decode and Parquet files on the executors; a second pass), dead_letters, commit (all
    # tables), group.
    steps: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    spark_jobs: int | None = None  # Spark jobs the batch ran (None: not counted)
    catalog_requests: int | None = None  # requests to the Iceberg catalog the batch made
    _last: float = field(default_factory=lambda: time.monotonic(), repr=False)
    _started: float = field(default_factory=lambda: time.monotonic(), repr=False)

    def lap(self, step: str) -> None:
        """Charges the time since the previous lap (or the start) to `step`."""
        now = time.monotonic()
        self.steps[step] = self.steps.get(step, 0.0) + now - self._last
        self._last = now
        self.total = now - self._started

    def line(self) -> str:
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in self.steps.items())
        counts = ""
        if self.spark_jobs is not None:
            counts += f"; {self.spark_jobs} Spark job(s)"
        if self.catalog_requests is not None:
            counts += f"; {self.catalog_requests} catalog request(s)"
        return f"batch {self.batch_id} timings: {self.records} record(s) in {self.total:.2f}s: {parts}{counts}"


class SparkJobs:
    """Counts the Spark jobs a micro-batch runs. Spark runs foreachBatch with the query's run id as
    the job group, so the batch's jobs are the group's jobs that were not there when it started
    (ids, not counts: Spark's status store keeps only the newest `spark.ui.retainedJobs`)."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self._tracker = context.statusTracker()
        self._group = context.getLocalProperty("spark.jobGroup.id")
        self._before = set(self._ids())

    def _ids(self) -> list[int]:
        return list(self._tracker.getJobIdsForGroup(self._group)) if self._group else []

    def count(self) -> int | None:
        """Jobs of this batch so far; None when Spark runs the batch outside a job group."""
        return len(set(self._ids()) - self._before) if self._group else None
