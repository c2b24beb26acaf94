"""The job on a real Spark standalone cluster (`dev/stack up --with-spark`: a master and two
workers of one core each, executors in their own JVMs), submitted as the README tells users:
`scripts/submit --master spark://...` in client mode, icesink shipped as a wheel (--py-files), the
jars from the local folder. A standalone master runs Python drivers in client mode only (Spark's
limit; scripts/submit refuses cluster mode, see tests/unit/test_deployment.py)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit import oracle
from dev.kit.endpoints import REPO, SPARK_MASTER, SPARK_MASTER_UI, SPARK_WORK
from dev.kit.kafka import create_topics, end_offsets
from dev.kit.oracle import Ledger
from dev.kit.scenario import Scenario
from icesink.runtime import faults
from tests.support.spark import snapshots, table_offsets

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster() -> str:
    """The cluster's master URL; fails (never skips) when its two workers are not up."""
    try:
        with urllib.request.urlopen(f"{SPARK_MASTER_UI}/json/", timeout=5) as r:
            state = json.load(r)
    except OSError as e:
        pytest.fail(f"no Spark master at {SPARK_MASTER_UI} ({e}); run `dev/stack up --with-spark`", pytrace=False)
    alive = [w for w in state["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 2, f"the cluster has {len(alive)} live worker(s), not 2"
    return SPARK_MASTER


def submit(config: Path, log: Path, *spark_args: str) -> subprocess.CompletedProcess[str]:
    """`scripts/submit --master <cluster>` (client mode), with extra spark-submit arguments."""
    cmd = ["bash", str(REPO / "scripts" / "submit"), "--master", SPARK_MASTER, "--config", str(config)]
    if spark_args:
        cmd += ["--", *spark_args]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    log.write_text(done.stdout + done.stderr)
    return done


def executors_of(app_name: str) -> list[Path]:
    """The executor folders the workers made for the newest application named `app_name`."""
    with urllib.request.urlopen(f"{SPARK_MASTER_UI}/json/", timeout=5) as r:
        apps = [a for a in json.load(r)["completedapps"] if a["name"] == app_name]
    assert apps, f"the master ran no application named {app_name}"
    newest = max(apps, key=lambda a: a["starttime"])
    return sorted(p for p in (SPARK_WORK / newest["id"]).iterdir() if p.is_dir())


def cluster_config(scenario: Scenario, path: Path, **overrides: object) -> Path:
    # The master comes from spark-submit; the session must not name one.
    return scenario.write_config(path, **{"spark.master": None, "kafka.max_offsets_per_trigger": 1000, **overrides})


def produced(scenario: Scenario, name: str, per_partition: tuple[int, int]) -> tuple[str, Ledger]:
    """A two-partition topic with that many good records in each, and their ledger."""
    topic = scenario.topic(name)
    create_topics(topic, partitions=2)
    ledger = Ledger()
    for partition, n in enumerate(per_partition):
        ledger.good(topic, n, partition=partition)
    return topic, ledger


def test_the_job_runs_on_the_cluster_with_its_wheel_shipped(
    cluster: str, spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic, ledger = produced(scenario, "rides.20240401", (40, 30))
    config = cluster_config(scenario, tmp_path / "job.yaml")
    done = submit(config, tmp_path / "submit.log")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    table = scenario.table("rides")
    oracle.check(spark, ledger, table, [topic])
    assert table_offsets(spark, table) == end_offsets(topic), "the snapshot records where Kafka ends"
    executors = executors_of(f"test-{scenario.prefix}")
    assert len(executors) == 2, f"one executor per worker: {executors}"
    for e in executors:  # each executor JVM got the wheel the README ships with --py-files
        assert list(e.glob("icesink-*.whl")), f"{e} has no icesink wheel: {[p.name for p in e.iterdir()]}"


def test_an_executor_killed_in_the_write_is_replaced_and_the_batch_commits_once(
    cluster: str, spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic, ledger = produced(scenario, "fares.20240402", (50, 50))
    config = cluster_config(scenario, tmp_path / "job.yaml")
    once = tmp_path / "killed-once"
    # The executor that writes the batch's first files dies (SIGKILL) after writing them, before
    # Spark hears of them: the worker starts a new executor, Spark runs the task again.
    done = submit(
        config, tmp_path / "submit.log",
        "--conf", f"spark.executorEnv.{faults.ENV}=executor-lost:0",
        "--conf", f"spark.executorEnv.{faults.ONCE_ENV}={once}",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert once.exists(), "an executor was killed in the middle of the write"
    assert "ExecutorLostFailure" in output or "Lost executor" in output, output[-3000:]
    assert len(executors_of(f"test-{scenario.prefix}")) == 3, "two executors, and the one that replaced the killed"

    table = scenario.table("fares")
    oracle.check(spark, ledger, table, [topic])
    assert len(snapshots(spark, table)) == 1, "the batch committed once"
    assert table_offsets(spark, table) == end_offsets(topic)
    referenced = set(oracle.referenced_files(spark, table))
    stored = oracle.data_files_in_storage(spark, table)
    assert stored - referenced, "the killed attempt's files stay in storage, unreferenced"
    assert {f for f in referenced if f.endswith(".parquet")} <= stored, "every referenced file exists"
