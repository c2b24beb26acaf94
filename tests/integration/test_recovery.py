"""`icesink run` as a user runs it, in its own process: crash recovery and the error a user sees."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.runtime import faults
from tests.support.cli import run_cli
from tests.support.spark import snapshots, table_exists

pytestmark = pytest.mark.slow


def test_driver_killed_after_commit_before_commit_log(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("payments.20240110")
    create_topics(topic)
    produce(topic, [{"id": i, "v": f"a{i}"} for i in range(200)])
    config = scenario.write_config(tmp_path / "job.yaml")

    crashed = run_cli(config, env={faults.ENV: "after-commit:0"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    commits = scenario.checkpoint / "commits"
    assert not (commits / "0").exists(), "the kill must land before Spark's commit log"
    assert (scenario.checkpoint / "offsets" / "0").exists(), "Spark planned batch 0 and will replay it"
    table = scenario.table("payments")
    assert len(snapshots(spark, table)) == 1, "the Iceberg commit happened before the kill"

    produce(topic, [{"id": i, "v": f"a{i}"} for i in range(200, 260)])
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already holds these offsets" in resumed.stderr

    rows = spark.sql(f"SELECT id, v FROM {table}").collect()
    assert sorted((r.id, r.v) for r in rows) == [(i, f"a{i}") for i in range(260)], "no loss, no duplicate"
    snaps = snapshots(spark, table)
    assert len(snaps) == 2, "the replayed batch commits nothing; the new records one snapshot"
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
    assert (commits / "0").exists()


def test_fail_policy_a_value_that_is_not_json_fails_the_batch_and_commits_nothing(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    good, bad = scenario.topic("visits.20240111"), scenario.topic("signups.20240111")
    create_topics(good, bad, partitions=1)
    produce(good, [{"id": i} for i in range(10)])
    produce(bad, [{"id": 0}, {"id": 1}, "not json {", {"id": 3}])

    result = run_cli(scenario.write_config(tmp_path / "job.yaml", **{"decode.on_error": "fail"}))

    assert result.returncode == 1
    last = result.stderr.strip().splitlines()
    error = "\n".join(line for line in last if line.startswith(("icesink: error", "  topic")))
    assert f"icesink: error: batch 0: 1 record(s) for table {scenario.namespace}.{scenario.prefix}_signups" in error
    assert f"topic {bad} partition 0 offset 2: not valid JSON [decode/JsonParseError]" in error
    assert "nothing of this batch was committed" in error
    # Neither the bad topic's table nor the good one's got anything from that batch.
    for name in ("signups", "visits"):
        table = scenario.table(name)
        assert not table_exists(spark, table) or snapshots(spark, table) == []


def test_killed_between_the_dead_letter_commit_and_the_table_commit(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("logins.20240112")
    create_topics(topic, partitions=1)
    stream = [{"id": 0}, "not json", {"id": 1}, {"id": 2}, "[3]", {"id": 4}]
    produce(topic, stream)
    config = scenario.write_config(tmp_path / "job.yaml")
    table, dlq = scenario.table("logins"), f"icesink.{scenario.namespace}.dead_letters"

    crashed = run_cli(config, env={faults.ENV: "after-dead-letters:0"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert spark.sql(f"SELECT count(*) FROM {dlq}").first()[0] == 2, "dead letters committed first"
    assert not table_exists(spark, table) or snapshots(spark, table) == [], "the data table not yet"

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == [0, 1, 2, 4]
    letters = spark.sql(f"SELECT offset FROM {dlq}").collect()
    assert sorted(r.offset for r in letters) == [1, 4], "each dead letter once, after the replay too"
