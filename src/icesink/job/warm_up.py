"""The Python workers started, with their imports (tasks/warm_up.py), while the job's first batch
is planned: a Spark job of one task per core on a thread of its own, in a job group of its own
(so no batch counts it). A first batch's tasks otherwise wait for their worker's imports after
the batch's planning; with it, they run on the workers it left (PySpark reuses a worker). It
never fails the job: a warm-up that fails says so and the batch starts its workers itself."""

from __future__ import annotations

import logging
import threading
import time

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JOB_GROUP = "icesink-warm-up"


def start(spark: SparkSession) -> threading.Thread:
    """Starts the warm-up on a daemon thread and returns the thread."""
    thread = threading.Thread(target=_warm_up, args=(spark,), name="icesink-warm-up", daemon=True)
    thread.start()
    return thread


def _warm_up(spark: SparkSession) -> None:
    from icesink.tasks.warm_up import WARM_UP_DDL, warm_fn

    started = time.monotonic()
    try:
        sc = spark.sparkContext
        sc.setJobGroup(JOB_GROUP, "icesink: Python workers' imports before the first batch", interruptOnCancel=False)
        n = sc.defaultParallelism
        rows = spark.range(0, n, 1, n).mapInArrow(warm_fn, WARM_UP_DDL).collect()
    except Exception as e:  # the session stopped first, or the workers cannot start: the batch will say
        log.info("Python workers not warmed up (%s)", str(e).splitlines()[0] if str(e) else type(e).__name__)
        return
    log.info("%d Python worker(s) warmed up in %.2fs", len({r.pid for r in rows}), time.monotonic() - started)
