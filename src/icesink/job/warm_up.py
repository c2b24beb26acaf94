"""What a job's first batch would otherwise pay for the first time, done while it is planned:
the Python workers started with their imports (tasks/warm_up.py), by a Spark job of one task per
core on a thread of its own, in a job group of its own (so no batch counts it), whose workers the
batch's tasks then run on (PySpark reuses a worker); and, on another thread, the driver JVM's first
commit (iceberg/warm_up.py: the S3 client, Iceberg's commit path on a throwaway in-memory table).
It never fails the job: a warm-up that fails says so and the batch pays the cost itself."""

from __future__ import annotations

import logging
import threading
import time

from pyspark.sql import SparkSession

from icesink.errors import first_line

log = logging.getLogger(__name__)

JOB_GROUP = "icesink-warm-up"


class WarmUp:
    """The workers' Spark job and the driver's commit path, each on a daemon thread; `stop` cancels
    the Spark job (and waits a little for the driver's part) if the job ended first."""

    def __init__(self, spark: SparkSession, catalog_name: str) -> None:
        self._spark = spark
        self._catalog_name = catalog_name
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._warm_up, name="icesink-warm-up", daemon=True)
        self._driver = threading.Thread(target=self._warm_driver, name="icesink-warm-up-driver", daemon=True)

    def start(self) -> WarmUp:
        self._thread.start()
        self._driver.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive() or self._driver.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancels the warm-up's tasks when the job ends before them (an available-now run with
        little to do): left running, they die with the session and Spark logs each as a crashed
        Python worker, with a stack trace, at the end of a run that went well."""
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        # Cancelled again until the thread ends: a first cancel can come before the job's submission.
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:
                self._spark.sparkContext.cancelJobGroup(JOB_GROUP)
            except Exception as e:  # the session already stopped (its tasks with it): nothing to cancel
                log.debug("warm-up not cancelled: %s", e)
                return
            self._thread.join(0.5)
        # Work in the driver's JVM alone (no task to cancel), a few seconds at most.
        self._driver.join(max(0.0, deadline - time.monotonic()))

    def _warm_up(self) -> None:
        from icesink.tasks.warm_up import WARM_UP_DDL, warm_fn

        started = time.monotonic()
        try:
            sc = self._spark.sparkContext
            sc.setJobGroup(JOB_GROUP, "icesink: Python workers' imports before the first batch", False)
            n = sc.defaultParallelism
            rows = self._spark.range(0, n, 1, n).mapInArrow(warm_fn, WARM_UP_DDL).collect()
        except Exception as e:  # the session stopped first, or the workers cannot start: the batch will say
            if self._stopping.is_set():
                log.debug("Python workers' warm-up cancelled: the job ended first")
            else:
                log.info("Python workers not warmed up (%s)", first_line(e))
            return
        log.info("%d Python worker(s) warmed up in %.2fs", len({r.pid for r in rows}), time.monotonic() - started)

    def _warm_driver(self) -> None:
        from icesink.iceberg.warm_up import warm_driver

        started = time.monotonic()
        try:
            done = warm_driver(self._spark, self._catalog_name)
        except Exception as e:  # an API this Iceberg lacks, or the session stopped: the first commit pays
            if not self._stopping.is_set():
                log.info("driver JVM not warmed up (%s)", first_line(e))
            return
        log.info("driver JVM warmed up in %.2fs (%s)", time.monotonic() - started, ", ".join(done))
