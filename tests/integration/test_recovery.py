"""`icesink run` as a user runs it, in its own process: the error a user sees. (The crashes at
the worst moments, after the commit and between the dead letters and the tables, are in
test_faults.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import Scenario
from tests.support.cli import run_cli
from tests.support.spark import snapshots, table_exists

pytestmark = pytest.mark.slow


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
