"""The job on a real Spark standalone cluster (`dev/stack up --with-spark`: a master and two
workers of one core each, executors in their own JVMs), submitted as the README tells users:
`scripts/submit --master spark://... --deploy-mode cluster` (the driver on a worker), icesink
shipped as a zip (--py-files), the jars from the local folder.

The venv that runs these tests has icesink installed (editable, from src/), and so would every
Python the cluster starts: the job's Pythons get a sitecustomize that hides it, so they can import
icesink only from what scripts/submit shipped, as on workers that never saw this checkout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def without_installed_icesink(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for PYTHONPATH whose sitecustomize takes the installed icesink (src/) off sys.path."""
    folder = tmp_path_factory.mktemp("hide-icesink")
    (folder / "sitecustomize.py").write_text(
        f"import sys\nsys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(REPO / 'src')!r}]\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", "import icesink"], env={**os.environ, "PYTHONPATH": str(folder)},
        capture_output=True, text=True,
    )  # fmt: skip
    assert "No module named 'icesink'" in probe.stderr, f"icesink is still importable: {probe}"
    return folder


def submit(
    config: Path, log: Path, hide: Path, *spark_args: str, deploy_mode: str = "client"
) -> subprocess.CompletedProcess[str]:
    """`scripts/submit --master <cluster>`, with extra spark-submit arguments; the driver's and the
    executors' Pythons import icesink only from what it ships."""
    cmd = ["bash", str(REPO / "scripts" / "submit"), "--master", SPARK_MASTER, "--deploy-mode", deploy_mode]
    cmd += ["--config", str(config), "--", "--conf", f"spark.executorEnv.PYTHONPATH={hide}", *spark_args]
    # The driver's Python inherits this environment, on a worker too (the standalone client hands
    # its environment to the driver it launches).
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(hide)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    log.write_text(done.stdout + done.stderr)
    return done


def master_state() -> dict[str, Any]:
    with urllib.request.urlopen(f"{SPARK_MASTER_UI}/json/", timeout=5) as r:
        state: dict[str, Any] = json.load(r)
    return state


def executors_of(app_name: str) -> list[Path]:
    """The executor folders the workers made for the newest application named `app_name`."""
    apps = [a for a in master_state()["completedapps"] if a["name"] == app_name]
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


def test_in_cluster_mode_the_driver_runs_on_a_worker_and_an_executor_killed_in_the_write_is_replaced(
    cluster: str, spark: SparkSession, scenario: Scenario, tmp_path: Path, without_installed_icesink: Path
) -> None:
    """Cluster mode (the driver on a worker), the package shipped as the README ships it; the
    executor that writes the batch's files dies (SIGKILL) after writing them, before Spark hears of
    them: its worker starts a new executor with the package, Spark runs the task again, the batch
    commits once. (Client mode, the driver in the submitting process: test_signals.py submits to a
    local master; a client-mode test on the cluster as well cost CI 70 s.)"""
    topic, ledger = produced(scenario, "fares.20240402", (25, 35))
    config = cluster_config(scenario, tmp_path / "job.yaml")
    once = tmp_path / "killed-once"
    done = submit(
        config, tmp_path / "submit.log", without_installed_icesink,
        "--conf", f"spark.executorEnv.{faults.ENV}=executor-lost:0",
        "--conf", f"spark.executorEnv.{faults.ONCE_ENV}={once}",
        deploy_mode="cluster",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    driver = re.search(r"the driver (driver-[0-9-]+) finished", output)
    assert driver, output[-3000:]
    assert once.exists(), "an executor was killed in the middle of the write"

    table = scenario.table("fares")
    oracle.check(spark, ledger, table, [topic])
    assert len(snapshots(spark, table)) == 1, "the batch committed once"
    assert table_offsets(spark, table) == end_offsets(topic), "the snapshot records where Kafka ends"
    referenced = set(oracle.referenced_files(spark, table))
    stored = oracle.data_files_in_storage(spark, table)
    assert stored - referenced, "the killed attempt's files stay in storage, unreferenced"
    assert {f for f in referenced if f.endswith(".parquet")} <= stored, "every referenced file exists"

    # The master ran the driver on a worker; the driver's lines are in its folder there.
    ran = [d for d in master_state()["completeddrivers"] if d["id"] == driver.group(1)]
    assert len(ran) == 1, ran
    assert ran[0]["state"] == "FINISHED", ran
    assert ran[0]["worker"].startswith("worker-"), ran
    folder = SPARK_WORK / driver.group(1)
    log = (folder / "stdout").read_text() + (folder / "stderr").read_text()
    assert f"offsets {topic}[0]->25" in log, log[-3000:]
    assert f"{topic}[1]->35" in log, log[-3000:]
    assert "ExecutorLostFailure" in log or "Lost executor" in log, log[-3000:]
    # The driver's worker has no core left: the other worker ran the executor, and its replacement.
    executors = executors_of(f"test-{scenario.prefix}")
    assert len(executors) == 2, "the killed executor and the one that replaced it"
    for e in executors:  # each executor JVM got the package the README ships with --py-files
        assert list(e.glob("icesink-*.zip")), f"{e} has no icesink package: {[p.name for p in e.iterdir()]}"


def test_in_cluster_mode_a_driver_that_fails_fails_the_submission(
    cluster: str, scenario: Scenario, tmp_path: Path, without_installed_icesink: Path
) -> None:
    config = cluster_config(scenario, tmp_path / "job.yaml", **{"kafka.bootstrap_servers": None})
    done = submit(config, tmp_path / "submit.log", without_installed_icesink, deploy_mode="cluster")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    # spark-submit itself exits 0 for a FAILED driver.
    driver = re.search(r"submit: the driver (driver-[0-9-]+) ended FAILED \(spark-submit exit code 0\)", output)
    assert driver, output[-3000:]
    assert "kafka.bootstrap_servers" in (SPARK_WORK / driver.group(1) / "stdout").read_text()
