"""The job under spark-submit, as `scripts/submit` runs it on a local master: package, jars, config."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.endpoints import REPO
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from tests.support.spark import snapshots

pytestmark = pytest.mark.slow


def test_scripts_submit_runs_the_job_through_spark_submit(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("orders.20240105")
    create_topics(topic, partitions=1)
    produce(topic, [{"id": i, "item": f"sku-{i}"} for i in range(40)])
    config = scenario.write_config(tmp_path / "job.yaml")

    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "submit"), "--master", "local[2]", "--config", str(config)],
        env=dict(os.environ), capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    assert "[submit]" in result.stderr
    assert "spark-submit --master local[2]" in result.stderr
    assert "--py-files dist/icesink-" in result.stderr
    table = scenario.table("orders")
    rows = spark.sql(f"SELECT id, item FROM {table}").collect()
    assert sorted((r.id, r.item) for r in rows) == [(i, f"sku-{i}") for i in range(40)]
    assert codec.decode(snapshots(spark, table)[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
