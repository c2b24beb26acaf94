"""What a production user scrapes: the job's metrics on the driver's Prometheus endpoint (Spark's
metrics system, source `icesink`) after a batch, from `icesink run` as users run it."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit import oracle
from dev.kit.kafka import create_topics
from dev.kit.oracle import JSON_POISON, Ledger
from dev.kit.scenario import Scenario
from tests.support.cli import finish, start_cli, tail, while_running
from tests.support.metrics import free_port, scraped_into
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow


def test_the_prometheus_endpoint_serves_the_jobs_metrics_after_a_batch(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("meters.20240401")
    create_topics(topic, partitions=1)
    ledger = Ledger()
    ledger.good(topic, 30)
    ledger.poison(topic, JSON_POISON[:2])
    port = free_port()
    config = scenario.write_config(
        tmp_path / "job.yaml",
        **{
            "job.trigger": {"mode": "processing-time", "interval": "1 second"},
            "spark.conf": {"spark.ui.enabled": "true", "spark.ui.port": str(port)},
        },
    )
    table = scenario.table("meters")
    name = f"table_{scenario.namespace}_{scenario.prefix}_meters_rows_Count"
    log = tmp_path / "job.log"
    job = start_cli(config, log)
    seen: dict[str, float] = {}

    def served() -> bool:
        # A batch's figures are set one by one, its count last (job/metrics.py): waited for, with
        # both tables' counts, so no scrape between them is asserted on.
        lag = "lag_" + f"{topic}_0_Value".replace(".", "_")
        if not scraped_into(port, seen):
            return False
        return seen.get("dead_letters_Count") == 2 and seen.get(name) == 30 and "batches_Count" in seen and lag in seen

    try:
        wait_until(while_running(job, log, served), 300, lambda: f"the metrics on port {port} ({seen}):\n{tail(log)}")
        job.send_signal(signal.SIGTERM)
    finally:
        finish(job, log, 120)
    assert job.returncode == 0, tail(log)
    # Its Python workers were started while the first batch was planned (job.warm_up), and
    # that job's tasks held the cores before the batch's: done before any batch was committed; its
    # driver JVM ran Iceberg's commit path once beside them.
    said = log.read_text()
    assert re.search(r"\d+ Python worker\(s\) warmed up in", said), tail(log)
    assert re.search(r"driver JVM warmed up in [0-9.]+s \(S3 client, Iceberg's commit path\)", said), tail(log)
    assert seen["records_read_Count"] == 32
    assert seen["rows_committed_Count"] == 30
    assert seen[name] == 30
    assert seen["lag_" + f"{topic}_0_Value".replace(".", "_")] == 0
    assert seen["batches_Count"] >= 1
    assert seen["batch_seconds_Value"] > 0
    oracle.check(spark, ledger, table, [topic], f"icesink.{scenario.namespace}.dead_letters")
