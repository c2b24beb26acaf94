"""Stopping the job with SIGTERM or Ctrl-C (SIGINT), as a supervisor or a user does: the batch in
progress commits, the job says what it committed last and exits 0; a second signal aborts at once
and the next run adds nothing twice. Run as users run it: `icesink run`, and under spark-submit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit import oracle
from dev.kit.endpoints import REPO
from dev.kit.kafka import create_topics, end_offsets
from dev.kit.oracle import Ledger
from dev.kit.scenario import Scenario
from tests.support.cli import finish, pause_env, paused, run_cli, start_cli, tail, while_running
from tests.support.spark import snapshots, table_offsets
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow

STREAMING = {"job.trigger": {"mode": "processing-time", "interval": "1 second"}}
NO_TRACE = ("Traceback", "Exception while sending command", "Py4JError")
# PySpark 4.1's worker daemon (spark.python.daemon.killWorkerOnFlushFailure, on by default) lets an
# idle Python worker raise when the JVM, stopping after the job has ended, closes its socket while
# the worker flushes: PySpark's own teardown, not icesink's stop (seen once in three CI runs).
DAEMON_TEARDOWN = re.compile(
    r"Traceback \(most recent call last\):\n(?:  File \"[^\"]*pyspark/daemon\.py\", line \d+, in \w+\n)+"
    r"BrokenPipeError: \[Errno 32\] Broken pipe\n?"
)


def traced(out: str) -> bool:
    """Whether the job's output holds a trace, PySpark's daemon teardown above left aside."""
    return any(t in DAEMON_TEARDOWN.sub("", out) for t in NO_TRACE)


def holds_all(spark: SparkSession, table: str, topic: str, job: subprocess.Popen[str], log: Path) -> None:
    """Waits until the table holds every record of `topic` (failing if the job exited before)."""
    ends = {tp: o for tp, o in end_offsets(topic).items() if o}
    done = while_running(job, log, lambda: table_offsets(spark, table) == ends)
    wait_until(done, 300, lambda: f"{table} to hold {ends}:\n{tail(log)}")


def test_sigterm_during_a_batch_lets_it_commit_then_stops_with_exit_0(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("trips.20240301")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 100)
    env, release = pause_env(tmp_path, "before-table-commit", 1)
    table, log = scenario.table("trips"), tmp_path / "job.log"
    job = start_cli(scenario.write_config(tmp_path / "job.yaml", **STREAMING), log, env=env)
    try:
        holds_all(spark, table, topic, job, log)
        ledger.good(topic, 50)
        paused(release, job, log)
        job.send_signal(signal.SIGTERM)  # batch 1 has written its files and is about to commit
        time.sleep(2)
        assert job.poll() is None, "the job waits for the batch in progress"
        release.touch()
    finally:
        out = finish(job, log, 120)
    assert job.returncode == 0, out[-3000:]
    assert "SIGTERM: stopping after the current batch commits" in out
    (stopped,) = [line for line in out.splitlines() if line.startswith("icesink: stopped by")]
    assert stopped.startswith(f"icesink: stopped by SIGTERM; the last committed batch is 1: {table[len('icesink.') :]}")
    assert f"next offsets {topic}[0]->" in stopped
    assert not traced(out), out[-3000:]
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)
    assert (scenario.checkpoint / "commits" / "1").exists(), "Spark logged batch 1 done: no replay on restart"
    assert len(snapshots(spark, table)) == 2


def test_a_second_signal_aborts_at_once_and_the_restart_adds_nothing_twice(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("fares.20240302")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 80)
    env, release = pause_env(tmp_path, "before-table-commit", 0)
    table, log = scenario.table("fares"), tmp_path / "job.log"
    job = start_cli(scenario.write_config(tmp_path / "job.yaml", **STREAMING), log, env=env)
    try:
        paused(release, job, log)
        job.send_signal(signal.SIGINT)
        time.sleep(1.5)  # later than the same stop reaching the driver's JVM
        job.send_signal(signal.SIGINT)
    finally:
        out = finish(job, log, 60)
    assert job.returncode == 128 + signal.SIGINT, out[-3000:]
    assert "SIGINT again: aborting now" in out
    assert snapshots(spark, table) == [], "batch 0 never committed"

    ledger.good(topic, 20)
    resumed = run_cli(scenario.write_config(tmp_path / "again.yaml"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)


def test_scripts_submit_runs_the_job_and_sigterm_to_spark_submit_stops_it_between_batches(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """`scripts/submit` on a local master (the package, the jars, the config through spark-submit)
    runs the job; a SIGTERM to spark-submit's JVM stops it after the batch it runs commits."""
    topic = scenario.topic("tolls.20240303")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 60)
    table, log = scenario.table("tolls"), tmp_path / "submit.log"
    config = scenario.write_config(tmp_path / "job.yaml", **STREAMING)
    with log.open("w") as out:
        # scripts/submit execs spark-submit, which execs the JVM: the pid signalled is the JVM's,
        # the parent of the Python driver, as under a supervisor.
        job = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "submit"), "--master", "local[2]", "--config", str(config)],
            env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        )  # fmt: skip
    try:
        holds_all(spark, table, topic, job, log)
        job.send_signal(signal.SIGTERM)
    finally:
        text = finish(job, log, 120)
    assert job.returncode == 0, text[-3000:]
    assert "[submit]" in text
    assert "spark-submit --master local[2]" in text
    assert "--py-files dist/icesink-" in text
    assert "SIGTERM: stopping after the current batch commits" in text
    assert "icesink: stopped by SIGTERM; the last committed batch is 0:" in text
    assert not traced(text), text[-3000:]
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)
