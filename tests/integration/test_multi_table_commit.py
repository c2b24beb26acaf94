"""A batch's tables committed in one catalog request (catalog.multi_table_commit, the REST
catalog's `POST /v1/transactions/commit`: iceberg/transaction.py), at its worst moments: killed
before the request and right after its answer, a compaction and another writer's append between
the batch's staging and the request (the catalog refuses the request: table by table), and the
request's answer lost after the catalog applied it, or a 503 for a request never applied. Each
time every record is in its table once, the offsets at the topics' ends; and a catalog that
answers the request with a Bad Request gets no other one. (Another job taking one
table's records in that window: test_faults.py's twelve tables, in one request and per table.)"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit import oracle
from dev.kit.endpoints import CATALOG_URI
from dev.kit.kafka import create_topics
from dev.kit.oracle import Ledger
from dev.kit.scenario import Scenario
from icesink.runtime import faults
from tests.support.catalog_proxy import CatalogProxy
from tests.support.cli import finish, pause_env, paused, run_cli, start_cli
from tests.support.spark import snapshots, table_exists

pytestmark = [pytest.mark.slow]

ONE_REQUEST = "commits: a batch's tables in one catalog request (POST /v1/{prefix}/transactions/commit)"


def topics_of(scenario: Scenario, ledger: Ledger, names: list[str], records: int) -> list[str]:
    topics = [scenario.topic(n) for n in names]
    create_topics(*topics, partitions=1)
    for t in topics:
        ledger.good(t, records)
    return topics


def held(spark: SparkSession, table: str) -> int:
    """The table's snapshots (0 when it was never created)."""
    return len(snapshots(spark, table)) if table_exists(spark, table) else 0


def killed(result: subprocess.CompletedProcess[str], point: str, batch_id: int) -> None:
    returncode, stderr = result.returncode, result.stderr
    assert returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), stderr[-3000:]
    assert f"SIGKILL at {point} of batch {batch_id}" in stderr


def three_batches_through_a_proxy(
    scenario: Scenario, tmp_path: Path, transaction_faults: list[str]
) -> tuple[subprocess.CompletedProcess[str], CatalogProxy]:
    """The job run once through a catalog proxy losing the multi-table commits' answers as told:
    30 records a topic at 20 a batch (three batches, the first creating the tables)."""
    with CatalogProxy(CATALOG_URI, [], transaction_faults=transaction_faults) as proxy:
        config = scenario.write_config(
            tmp_path / "job.yaml", **{"catalog.uri": proxy.url, "kafka.max_offsets_per_trigger": 20}
        )
        result = run_cli(config)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, proxy


def each_batch_once(
    spark: SparkSession, scenario: Scenario, ledger: Ledger, names: list[str], topics: list[str]
) -> None:
    for n, t in zip(names, topics, strict=True):
        assert len(snapshots(spark, scenario.table(n))) == 3, "each batch exactly once"
        oracle.check(spark, ledger, scenario.table(n), [t], checkpoint=scenario.checkpoint)


def test_killed_before_and_after_the_request_each_record_lands_once(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    names = ["orders", "lines", "payments"]
    ledger = Ledger()
    topics = topics_of(scenario, ledger, names, 12)
    config = scenario.write_config(tmp_path / "job.yaml")

    # Staged (every table's manifests written), the request not sent: no table holds the batch.
    first = run_cli(config, env={faults.ENV: "before-multi-table-commit:0"})
    killed(first, "before-multi-table-commit", 0)
    assert ONE_REQUEST in first.stderr
    assert [held(spark, scenario.table(n)) for n in names] == [0, 0, 0]

    # The request answered: every table holds batch 0, Spark's checkpoint does not know it.
    second = run_cli(config, env={faults.ENV: "after-multi-table-commit:0"})
    killed(second, "after-multi-table-commit", 0)
    assert [held(spark, scenario.table(n)) for n in names] == [1, 1, 1]

    for t in topics:
        ledger.good(t, 5)
    last = run_cli(config)
    assert last.returncode == 0, last.stderr[-3000:]
    assert [held(spark, scenario.table(n)) for n in names] == [2, 2, 2], "batch 0 once, batch 1 once"
    for n, t in zip(names, topics, strict=True):
        oracle.check(spark, ledger, scenario.table(n), [t], checkpoint=scenario.checkpoint)


def test_a_compaction_and_another_writer_between_staging_and_the_request(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    names = ["carts", "views"]
    ledger = Ledger()
    topics = topics_of(scenario, ledger, names, 40)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 40})
    assert run_cli(config).returncode == 0  # batches 0 and 1: two small files in each table
    carts, views = (scenario.table(n) for n in names)

    for t in topics:
        ledger.good(t, 10)
    env, release = pause_env(tmp_path, "before-multi-table-commit", 2)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)
    spark.sql(f"CALL icesink.system.rewrite_data_files(table => '{carts}', options => map('min-input-files', '2'))")
    spark.sql(f"INSERT INTO {views} (id, v) VALUES (-1, 'written by someone else')")
    release.touch()
    output = finish(job, log)

    assert job.returncode == 0, output[-3000:]
    assert "the catalog refused the multi-table commit" in output
    assert [s["operation"] for s in snapshots(spark, carts)][-2:] == ["replace", "append"]
    assert [s["operation"] for s in snapshots(spark, views)][-2:] == ["append", "append"]
    oracle.check(spark, ledger, carts, [topics[0]], checkpoint=scenario.checkpoint)
    oracle.check(spark, ledger, views, [topics[1]], extra_ids=[-1])


def test_lost_answers_of_the_request_are_settled_from_the_tables(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Three batches: the request applied and its answer a 503, applied and the connection
    dropped, never applied and a 503. The job cannot know; each table's fence says whether it
    holds the batch, and the others are committed one by one."""
    names = ["a", "b"]
    ledger = Ledger()
    topics = topics_of(scenario, ledger, names, 30)
    lost = ["503", "drop", "unsent"]
    result, proxy = three_batches_through_a_proxy(scenario, tmp_path, lost)
    assert proxy.faults == [f"transaction {f}" for f in lost]
    # Iceberg's client may send a request again whose answer it lost: the catalog then refuses it.
    settled = ("the multi-table commit's outcome is unknown", "the catalog refused the multi-table commit")
    assert sum(result.stderr.count(s) for s in settled) == 3, result.stderr[-3000:]
    each_batch_once(spark, scenario, ledger, names, topics)


def test_a_catalog_that_does_not_take_the_request_is_committed_table_by_table_from_then_on(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    names = ["c", "d"]
    ledger = Ledger()
    topics = topics_of(scenario, ledger, names, 30)
    result, proxy = three_batches_through_a_proxy(scenario, tmp_path, ["400"])
    assert proxy.transactions == 1, "the request was sent once, then never again"
    assert "the catalog does not take the multi-table commit (BadRequestException" in result.stderr
    assert "committing table by table from now on" in result.stderr
    each_batch_once(spark, scenario, ledger, names, topics)


def test_tables_kept_between_batches_and_changed_by_others_before_the_next_plan(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """A steady batch is planned on the tables as the job's last request made them, without a
    load (catalog.keep_tables_s): one catalog request a batch, which the catalog takes (the
    metadata the previous request made, set on the tables, carries none of that request's
    changes). A compaction of one table and another writer's append to another, committed before
    the next batch is planned, are not in the kept tables: the request is refused, the tables
    are committed one by one on top, every record once, and the batch after is one request again."""
    names = ["carts", "views", "clicks"]
    ledger = Ledger()
    topics = topics_of(scenario, ledger, names, 40)
    # Kept for longer than the test takes on a slow machine: the age counts from the load (or creation).
    config = scenario.write_config(
        tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 60, "catalog.keep_tables_s": 600}
    )
    first = run_cli(config)  # batch 0 creates the tables, batch 1: two small files in each
    assert first.returncode == 0, first.stderr[-3000:]
    made = re.findall(r"batch 1 timings: .*; (\d+) catalog request", first.stderr)
    assert made == ["1"], "batch 1: planned on the tables as batch 0 created and committed them, no load"
    carts, views, clicks = (scenario.table(n) for n in names)

    for t in topics:
        ledger.good(t, 80)  # batches 2 to 5, 20 records a topic each
    env, release = pause_env(tmp_path, "before-plan", 4)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)  # batches 2 and 3 committed, each in one request
    spark.sql(f"CALL icesink.system.rewrite_data_files(table => '{carts}', options => map('min-input-files', '2'))")
    spark.sql(f"INSERT INTO {views} (id, v) VALUES (-1, 'written by someone else')")
    release.touch()
    output = finish(job, log)

    assert job.returncode == 0, output[-3000:]
    requests = {int(b): int(n) for b, n in re.findall(r"batch (\d+) timings: .*; (\d+) catalog request", output)}
    assert requests[2] == 4, "batch 2: the three tables loaded (a new process), then one request"
    assert requests[3] == 1, "batch 3: planned on the tables batch 2's request made, no load, the request taken"
    assert "batch 4: the catalog refused the multi-table commit" in output, "batch 4 was planned on the kept tables"
    assert requests[5] == 1, "batch 5: planned on the tables batch 4 committed, no load"
    assert "does not take the multi-table commit" not in output
    assert [s["operation"] for s in snapshots(spark, carts)][-4:] == ["append", "replace", "append", "append"]
    assert [s["operation"] for s in snapshots(spark, views)] == ["append"] * 7
    assert len(snapshots(spark, clicks)) == 6, "each batch exactly once"
    oracle.check(spark, ledger, carts, [topics[0]], checkpoint=scenario.checkpoint)
    oracle.check(spark, ledger, views, [topics[1]], extra_ids=[-1])
    oracle.check(spark, ledger, clicks, [topics[2]], checkpoint=scenario.checkpoint)
