"""The workers' warm-up (job/warm_up.py) when the job ends before it: its tasks are cancelled,
not left to die with the session (which Spark logs as crashed Python workers, with stack traces,
at the end of a run that went well)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from icesink.job.warm_up import JOB_GROUP, WarmUp


def test_a_warm_up_stopped_at_once_leaves_no_task_running(spark: SparkSession) -> None:
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(JOB_GROUP))
    warming = WarmUp(spark, "no_such_catalog").start()  # the driver's part fails and is logged
    warming.stop()

    assert not warming.running, "the thread ended with its Spark job"
    # The status tracker hears of the job's end on Spark's listener bus, a moment after the job
    # itself ended (one CI run read it RUNNING): drained first. An internal of SparkContext's, which
    # fails here loudly if a release drops it.
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    jobs = [tracker.getJobInfo(j) for j in set(tracker.getJobIdsForGroup(JOB_GROUP)) - before]
    assert [j.status for j in jobs if j is not None and j.status == "RUNNING"] == []
    assert not tracker.getActiveStageIds(), "no stage of it left"
