"""The job's metrics (`job.metrics`): names made of tables and topics, the lag read from the
query's progress, and the order a run's or a batch's metrics are set in."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from icesink.batch.handler import LastCommit
from icesink.iceberg.commit import CommitResult
from icesink.job.maintainer import MaintenanceRun
from icesink.job.metrics import JobMetrics, kafka_lag, metric_part
from icesink.model import TableRef
from icesink.model import TopicPartition as TP
from icesink.ops.maintain import MaintenanceResult
from icesink.runtime.timings import BatchTimings


def test_lag_is_the_latest_offset_past_the_batch_end_per_partition() -> None:
    end = '{"events.20240102": {"0": 100, "1": 40}, "gone": {"0": 5}}'
    latest = '{"events.20240102": {"0": 130, "1": 40, "2": 7}}'
    assert kafka_lag(end, latest) == {TP("events.20240102", 0): 30, TP("events.20240102", 1): 0}
    assert kafka_lag(None, latest) == {}


def test_a_metric_name_part_keeps_letters_digits_dashes_and_underscores() -> None:
    assert metric_part("demo.events") == "demo_events"
    assert metric_part("cdc.public.orders-v2") == "cdc_public_orders-v2"


def test_lag_takes_the_offsets_parsed_as_the_query_progress_gives_them() -> None:
    assert kafka_lag({"t": {"0": 10}}, {"t": {"0": 25}}) == {TP("t", 0): 15}


class _Registry:
    """Codahale's MetricRegistry as far as JobMetrics uses it: the order metrics are touched in."""

    def __init__(self) -> None:
        self.touched: list[str] = []
        self.registered: list[str] = []
        self.counts: dict[str, int] = {}

    def counter(self, name: str) -> SimpleNamespace:
        self.registered.append(name)

        def inc(n: int) -> None:
            self.touched.append(name)
            self.counts[name] = self.counts.get(name, 0) + n

        return SimpleNamespace(inc=inc)

    def register(self, name: str, gauge: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(setValue=lambda v: self.touched.append(name))


def _metrics() -> tuple[JobMetrics, _Registry]:
    metrics, registry = JobMetrics.__new__(JobMetrics), _Registry()
    metrics._registry, metrics._gauges, metrics._counters, metrics._lock = registry, {}, {}, threading.Lock()
    metrics._codahale = SimpleNamespace(DefaultSettableGauge=lambda v: SimpleNamespace())
    return metrics, registry


def test_a_maintenance_run_is_counted_after_its_gauges_so_a_scrape_seeing_it_sees_them() -> None:
    # A scraper (and test_job_maintenance) waits for the count, then reads the table's gauge.
    metrics, registry = _metrics()
    result = MaintenanceResult("db.t", 1, 1, 0, 2, 3, 0, 0, 1, 0.5)
    metrics.maintained(MaintenanceRun(TableRef("db", "t"), "due", result, seconds=0.5))
    assert registry.touched[-1] == "maintenance_runs"
    assert "table.db_t.live_delete_files" in registry.touched


def test_a_batch_is_counted_after_its_other_figures() -> None:
    metrics, registry = _metrics()
    timings = BatchTimings(batch_id=3, records=10, steps={"commit": 0.2}, total=1.0)
    rows = CommitResult(TableRef("db", "t"), snapshot_id=1, files=1, records=10)
    metrics.batch_committed(timings, LastCommit(3, [rows], {}), TableRef("db", "dead_letters"))
    assert registry.touched[-1] == "batches"
    assert "table.db_t.rows" in registry.touched


def test_a_batch_s_rows_are_counted_per_table_and_in_all_each_counter_registered_once() -> None:
    metrics, registry = _metrics()
    letters = TableRef("db", "dead_letters")
    for batch in (1, 2):
        timings = BatchTimings(batch_id=batch, records=16, steps={}, total=1.0)
        results = [
            CommitResult(TableRef("db", "a"), snapshot_id=batch, files=1, records=10),
            CommitResult(TableRef("db", "b"), snapshot_id=batch, files=1, records=5),
            CommitResult(letters, snapshot_id=batch, files=1, records=1),
        ]
        metrics.batch_committed(timings, LastCommit(batch, results, {}), letters)
    assert registry.counts == {
        "records_read": 32, "table.db_a.rows": 20, "table.db_b.rows": 10, "rows_committed": 30, "dead_letters": 2,
        "batches": 2,
    }  # fmt: skip
    assert sorted(registry.registered) == sorted(registry.counts), "each counter asked of the registry once"
