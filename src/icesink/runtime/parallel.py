"""Per-table steps of a batch run side by side: a batch routed to hundreds of tables (a Debezium
capture of a whole database) must not pay each table's Spark job and catalog round trips in turn.

Driver threads, at most `job.table_parallelism` at once. Each thread carries the batch's Spark
job group (so stopping the query cancels its jobs, and the batch counts them) and its own FAIR
scheduler pool (so one big table's job does not hold every core while small tables wait). Results
come back in the order of the items; when calls fail, every call still runs to its end (a table
whose commit went through stays committed) and the first failure, in item order, is raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

# Local properties of the handler's thread that a table's Spark jobs must not carry: the SQL
# execution ids stay with the thread that set them (a thread's own action sets its own), and each
# thread has its own scheduler pool.
_NOT_INHERITED = ("spark.sql.execution.id", "spark.sql.execution.root.id", "spark.scheduler.pool")
POOL_PREFIX = "icesink-table-"


def _properties_template(spark: SparkSession, utils: Any) -> Any:
    """A JVM copy of the calling thread's local properties, without those a thread must not share.
    Copied in the JVM: one py4j call per property (~30 of them) per table was the largest cost of
    a batch routed to 50 tables. `Utils.cloneProperties` and `SparkContext.setLocalProperties` are
    Spark-internal: a Spark without them fails every multi-table batch at once (py4j cannot find
    the method), and tests/spark/test_parallel.py pins what they do."""
    props = utils.cloneProperties(spark.sparkContext._jsc.sc().getLocalProperties())
    for name in _NOT_INHERITED:
        props.remove(name)
    return props


class TablePool:
    """Driver threads for a batch's per-table steps, kept for the job's life: each Python thread
    has its own JVM thread (py4j's pinned threads), so a pool per batch would open new ones every
    batch."""

    def __init__(self, spark: SparkSession, parallelism: int) -> None:
        self._spark = spark
        self.parallelism = parallelism
        self._executor: ThreadPoolExecutor | None = None
        self._slots = threading.local()
        self._names = iter(range(1 << 30))
        self._lock = threading.Lock()

    def map(self, items: Sequence[T], fn: Callable[[T], R], on_done: Callable[[int], None] | None = None) -> list[R]:
        """`[fn(x) for x in items]`, up to `parallelism` calls at once; `on_done(i)` runs in the
        calling thread as the i-th call ends well (in the order they end)."""
        if self.parallelism <= 1 or len(items) <= 1:
            out = []
            for i, item in enumerate(items):
                out.append(fn(item))
                if on_done is not None:
                    on_done(i)
            return out
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="icesink-table")
        run = self._in_pool(fn)  # once per call: the properties' copy is py4j calls, not per item
        futures = {self._executor.submit(run, item): i for i, item in enumerate(items)}
        results: dict[int, R] = {}
        errors: dict[int, BaseException] = {}
        try:
            for future in as_completed(futures):
                i = futures[future]
                error = future.exception()
                if error is not None:
                    errors[i] = error
                    continue
                results[i] = future.result()
                if on_done is not None:
                    on_done(i)
        finally:
            for future in futures:  # every call runs to its end before the step ends
                future.exception()
        if errors:
            raise errors[min(errors)]
        return [results[i] for i in range(len(items))]

    def _in_pool(self, fn: Callable[[T], R]) -> Callable[[T], R]:
        """`fn`, run with the calling thread's Spark jobs in its own FAIR pool (set once per thread
        and `map` call)."""
        jvm, sc = self._spark.sparkContext._jvm, self._spark.sparkContext._jsc.sc()
        assert jvm is not None
        utils = jvm.org.apache.spark.util.Utils
        template = _properties_template(self._spark, utils)
        call = object()  # this call's properties are set at most once per thread

        def run(item: T) -> R:
            slot = self._slots
            if getattr(slot, "call", None) is not call:
                if not hasattr(slot, "pool"):
                    with self._lock:
                        slot.pool = f"{POOL_PREFIX}{next(self._names)}"
                props = utils.cloneProperties(template)  # each thread its own
                props.setProperty("spark.scheduler.pool", slot.pool)
                sc.setLocalProperties(props)
                slot.call = call
            return fn(item)

        return run

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
