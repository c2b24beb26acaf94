"""A batch's per-table steps side by side (icesink.runtime.parallel.TablePool): results in order,
every call run to its end when one fails, and Spark jobs that carry the batch's job group (so the
query's stop cancels them and the batch counts them) in a FAIR pool per thread."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import SparkSession

from icesink.runtime import parallel
from icesink.runtime.parallel import POOL_PREFIX, TablePool
from icesink.runtime.timings import SparkJobs


def test_results_come_in_item_order_and_the_jobs_carry_the_callers_job_group(spark: SparkSession) -> None:
    context = spark.sparkContext
    context.setJobGroup("batch-group-under-test", "a batch")
    pool = TablePool(spark, 3)
    try:
        jobs = SparkJobs(spark)
        pools: list[str] = []

        def count(n: int) -> int:
            pools.append(context.getLocalProperty("spark.scheduler.pool") or "")
            return spark.range(n).count()

        assert pool.map([5, 1, 7, 3, 2], count) == [5, 1, 7, 3, 2]
        assert (jobs.count() or 0) >= 5, "every table's job is the batch's (its job group)"
        assert set(pools) <= {f"{POOL_PREFIX}{i}" for i in range(3)}
        assert len(set(pools)) > 1, "each thread has its own pool"
    finally:
        pool.close()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_each_call_carries_the_callers_properties_of_that_call(spark: SparkSession) -> None:
    """The pool's threads live across batches: a call's jobs carry the job group and description
    the calling thread has at that call (each batch's own), not those of an earlier call."""
    context = spark.sparkContext
    pool = TablePool(spark, 2)
    try:
        seen: dict[str, set[tuple[str | None, str | None, str | None]]] = {}
        for group in ("batch-1-group", "batch-2-group"):
            context.setJobGroup(group, f"description of {group}")
            context.setLocalProperty("spark.sql.execution.id", "7")  # the caller's own, never a thread's
            jobs = SparkJobs(spark)
            props: set[tuple[str | None, str | None, str | None]] = set()

            def step(n: int, props: set[tuple[str | None, str | None, str | None]] = props) -> int:
                props.add(
                    (
                        context.getLocalProperty("spark.jobGroup.id"),
                        context.getLocalProperty("spark.job.description"),
                        context.getLocalProperty("spark.sql.execution.id"),
                    )
                )
                return spark.range(n).count()

            assert pool.map([3, 4, 5, 6], step) == [3, 4, 5, 6]
            assert (jobs.count() or 0) >= 4, f"every job of the call carries {group}"
            seen[group] = props
            context.setLocalProperty("spark.sql.execution.id", None)  # type: ignore[arg-type]
        assert seen == {
            "batch-1-group": {("batch-1-group", "description of batch-1-group", None)},
            "batch-2-group": {("batch-2-group", "description of batch-2-group", None)},
        }
    finally:
        pool.close()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_the_callers_properties_are_copied_once_per_call_not_per_item(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is py4j calls: once per item, it was a tenth of the driver's Python samples in a
    batch of 200 tables (the fan-out benchmark under py-spy)."""
    copies: list[object] = []
    real = parallel._properties_template

    def counted(spark: SparkSession, utils: object) -> object:
        copies.append(utils)
        return real(spark, utils)

    monkeypatch.setattr(parallel, "_properties_template", counted)
    pool = TablePool(spark, 2)
    try:
        assert pool.map(list(range(12)), lambda n: n * 2) == [n * 2 for n in range(12)]
        assert len(copies) == 1
        assert pool.map([1, 2, 3], lambda n: n) == [1, 2, 3]
        assert len(copies) == 2, "each call copies the caller's properties of that call"
    finally:
        pool.close()


def test_a_failure_lets_every_other_call_finish_and_the_first_in_item_order_is_raised(spark: SparkSession) -> None:
    pool = TablePool(spark, 4)
    finished: list[int] = []
    lock = threading.Lock()

    def step(i: int) -> int:
        if i in (2, 5):
            raise ValueError(f"table {i} failed")
        with lock:
            finished.append(i)
        return i

    try:
        with pytest.raises(ValueError, match="table 2 failed"):
            pool.map(list(range(8)), step)
    finally:
        pool.close()
    assert sorted(finished) == [0, 1, 3, 4, 6, 7]
