"""The job's metrics, published through Spark's metrics system as the source `icesink`, so every
Spark metrics sink carries them: the driver's Prometheus endpoint (`/metrics/prometheus` on the
Spark UI's port, which the job's session turns on), JMX, Graphite, ...

    icesink.batches                       counter  batches committed (empty ones not counted)
    icesink.records_read                  counter  Kafka records the committed batches covered
    icesink.rows_committed                counter  rows committed to the tables (key deletes not counted)
    icesink.dead_letters                  counter  records committed to the dead-letter table
    icesink.batch_seconds                 gauge    the last batch's duration
    icesink.commit_seconds                gauge    the last batch's commit step (all its tables)
    icesink.table.<table>.rows            counter  rows committed to one table
    icesink.lag.<topic>.<partition>       gauge    records in Kafka past what the last batch read
    icesink.maintenance_runs              counter  tables the job maintained (job/maintainer.py)
    icesink.maintenance_failures          counter  maintenance runs that failed (the job went on)
    icesink.maintenance_seconds           gauge    the last maintenance run's duration
    icesink.maintenance_removed_delete_files  counter  delete files its runs left no longer live
    icesink.table.<table>.live_delete_files   gauge    one table's live delete files after its last run

On Prometheus a name reads `metrics_<job name>_driver_icesink_<name with _ for .>_Count` (counters)
or `..._Value` (gauges). Spark's own streaming metrics (input and processing rate, latency) come
with them (`spark.sql.streaming.metricsEnabled`). The lag comes from the query's progress (Spark
reads the partitions' latest offsets before each batch), read by the job's main thread.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from pyspark.sql import SparkSession

from icesink.batch.handler import LastCommit
from icesink.iceberg.jvm import JavaObject, jvm
from icesink.job.maintainer import MaintenanceRun
from icesink.model import TableRef, TopicPartition
from icesink.runtime.timings import BatchTimings

log = logging.getLogger(__name__)

SOURCE = "icesink"


def metric_part(text: str) -> str:
    """A table, topic or partition as one part of a metric name (Prometheus turns the rest into _)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


Offsets = Mapping[str, Mapping[str, int]]


def _offsets(value: Offsets | str | None) -> Offsets:
    return json.loads(value) if isinstance(value, str) else (value or {})


def kafka_lag(end_offset: Offsets | str | None, latest_offset: Offsets | str | None) -> dict[TopicPartition, int]:
    """Records past the batch's end per topic-partition, from a Kafka source's progress (Spark's
    offsets, {"topic": {"0": 42}}, parsed or as JSON). Pure."""
    end, latest = _offsets(end_offset), _offsets(latest_offset)
    out = {}
    for topic, parts in latest.items():
        for p, off in parts.items():
            done = end.get(topic, {}).get(p)
            if done is not None:
                out[TopicPartition(topic, int(p))] = max(int(off) - int(done), 0)
    return out


class _Source:
    """A `org.apache.spark.metrics.source.Source` in Python; the metrics system asks it once."""

    def __init__(self, registry: JavaObject) -> None:
        self._registry = registry

    def sourceName(self) -> str:  # noqa: N802
        return SOURCE

    def metricRegistry(self) -> JavaObject:  # noqa: N802
        return self._registry

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.metrics.source.Source"]


class JobMetrics:
    """The `icesink` source's metrics; a metric named for the first time joins the source's
    registry, which the metrics system follows (a child registry's listener). One per Spark
    application (`of`): jobs run one after another in a session share its source."""

    _shared: ClassVar[dict[str, JobMetrics]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, spark: SparkSession) -> JobMetrics:
        app = spark.sparkContext.applicationId
        with cls._shared_lock:
            if app not in cls._shared:
                cls._shared[app] = cls(spark)
            return cls._shared[app]

    def __init__(self, spark: SparkSession) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        self._jvm = jvm(spark)
        self._codahale = self._jvm.com.codahale.metrics
        self._registry = self._codahale.MetricRegistry()
        self._gauges: dict[str, JavaObject] = {}
        self._counters: dict[str, JavaObject] = {}
        self._lock = threading.Lock()
        ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
        self._jvm.org.apache.spark.SparkEnv.get().metricsSystem().registerSource(_Source(self._registry))

    def _count(self, name: str, n: int) -> None:
        # A counter kept once registered: an inc is then one py4j call (a batch into 200 tables
        # counts each table's rows).
        if n:
            with self._lock:
                counter = self._counters.get(name)
                if counter is None:
                    counter = self._counters[name] = self._registry.counter(name)
            counter.inc(n)

    def _set(self, name: str, value: float | int) -> None:
        with self._lock:
            gauge = self._gauges.get(name)
            if gauge is None:
                gauge = self._gauges[name] = self._registry.register(name, self._codahale.DefaultSettableGauge(value))
        gauge.setValue(value)

    def batch_committed(self, timings: BatchTimings, commit: LastCommit, dead_letters: TableRef) -> None:
        # The batch's count last: a scrape that sees it counted sees its other figures too.
        self._count("records_read", timings.records)
        self._set("batch_seconds", round(timings.total, 3))
        self._set("commit_seconds", round(timings.steps.get("commit", 0.0), 3))
        rows = 0
        for r in commit.tables:
            if r.table == dead_letters:
                self._count("dead_letters", r.records)
            else:
                rows += r.records
                self._count(f"table.{metric_part(str(r.table))}.rows", r.records)
        self._count("rows_committed", rows)
        self._count("batches", 1)

    def maintained(self, run: MaintenanceRun) -> None:
        """A maintenance run of the job (job/maintainer.py)."""
        table = metric_part(str(run.table))
        if run.result is None:
            self._count("maintenance_failures", 1)
            return
        # The run's count last: a scrape that sees it counted sees its gauges too.
        self._set("maintenance_seconds", round(run.seconds, 3))
        self._set(f"table.{table}.live_delete_files", run.result.live_delete_files)
        self._count("maintenance_removed_delete_files", run.result.removed_delete_files)
        self._count("maintenance_runs", 1)

    def lag(self, lags: Mapping[TopicPartition, int]) -> None:
        for tp, n in lags.items():
            self._set(f"lag.{metric_part(tp.topic)}.{tp.partition}", n)

    def progress(self, progress: Mapping[str, Any]) -> None:
        """The lag gauges from a progress report of the query (`StreamingQuery.lastProgress`)."""
        for source in progress.get("sources") or []:
            self.lag(kafka_lag(source.get("endOffset"), source.get("latestOffset")))
