"""The driver JVM's warm-up (iceberg/warm_up.py) runs on Iceberg's internals a release may change
(its in-memory catalog, S3FileIO's lazy client): it must do all its parts on the Iceberg the job
runs, from a thread of its own, and leave nothing in the job's catalog."""

from __future__ import annotations

import threading
import uuid

from pyspark.sql import SparkSession

from dev.kit.scenario import CATALOG
from icesink.iceberg.warm_up import warm_driver


def test_the_driver_runs_icebergs_commit_path_and_builds_its_s3_client_touching_no_table(spark: SparkSession) -> None:
    namespaces = {r[0] for r in spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()}
    # The job's catalog under a name no thread has looked up yet, as at a job's start (the tests'
    # session loaded the job's own before this test).
    fresh = f"warm_{uuid.uuid4().hex[:8]}"
    prefix = f"spark.sql.catalog.{CATALOG}"
    for key, value in spark.sparkContext.getConf().getAll():
        if key == prefix or key.startswith(prefix + "."):
            spark.conf.set(f"spark.sql.catalog.{fresh}{key[len(prefix) :]}", value)

    # On a thread of its own, as the job runs it.
    done: list[list[str]] = []
    thread = threading.Thread(target=lambda: done.append(warm_driver(spark, fresh)))
    thread.start()
    thread.join(120)
    assert done == [["S3 client", "Iceberg's commit path"]]

    assert {r[0] for r in spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()} == namespaces
    assert "warm_up" not in namespaces
