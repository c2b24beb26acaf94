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
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

# Local properties of the handler's thread that a table's Spark jobs must carry; the SQL execution
# ids stay with the thread that set them (a thread's own action sets its own).
_NOT_INHERITED = frozenset({"spark.sql.execution.id", "spark.sql.execution.root.id", "spark.scheduler.pool"})
POOL_PREFIX = "icesink-table-"


def _local_properties(spark: SparkSession) -> dict[str, str]:
    props = spark.sparkContext._jsc.sc().getLocalProperties()
    names = [str(n) for n in props.stringPropertyNames().toArray()]
    return {n: str(props.getProperty(n)) for n in names if n not in _NOT_INHERITED}


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
        props = _local_properties(self._spark)
        context = self._spark.sparkContext

        def run(item: T) -> R:
            pool = getattr(self._slots, "pool", None)
            if pool is None:
                with self._lock:
                    pool = self._slots.pool = f"{POOL_PREFIX}{next(self._names)}"
            for k, v in props.items():
                context.setLocalProperty(k, v)
            context.setLocalProperty("spark.scheduler.pool", pool)
            return fn(item)

        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="icesink-table")
        results: dict[int, R] = {}
        errors: dict[int, BaseException] = {}
        futures = {self._executor.submit(run, item): i for i, item in enumerate(items)}
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

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
