"""The operations CLI against the real stack: offsets show, status, and the consumer group."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTP
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.endpoints import KAFKA, REPO
from dev.kit.kafka import create_topics, end_offsets, produce, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.config import S3Config
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.model import TableRef, TopicPartition
from icesink.ops import checkpoints
from icesink.ops.maintain import MaintenanceResult, maintain_table
from icesink.runtime import faults
from tests.support.cli import run_cli
from tests.support.spark import snapshots, table_exists, table_offsets
from tests.support.values import cdc_config, records, table_state
from tests.support.wait import wait_until


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icesink", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def as_json(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def test_offsets_show_status_and_the_consumer_group(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("clicks")
    create_topics(topic, partitions=2)
    produce(topic, [{"id": i} for i in range(10)], partition=0)
    produce(topic, [{"id": i} for i in range(10, 14)], partition=1)
    produce(topic, ["not json"], partition=1)
    group = f"icesink-it-{uuid.uuid4().hex[:6]}"
    overrides = {"kafka.consumer_group": group}
    # Two batches: the group's progress goes through one client kept for the job (the second
    # batch's commit must land through it).
    Job(spark, scenario.config(**overrides, **{"kafka.max_offsets_per_trigger": 8})).run()
    config = str(scenario.write_config(tmp_path / "job.yaml", **overrides))
    table = f"{scenario.namespace}.{scenario.prefix}_clicks"

    rows = as_json(cli("offsets", "show", "-c", config, "--table", f"{scenario.prefix}_clicks", "--json"))
    assert [(r["table"], r["topic"], r["partition"], r["committed"], r["end"], r["lag"]) for r in rows] == [
        (table, topic, 0, 10, 10, 0),
        (table, topic, 1, 5, 5, 0),
    ]
    assert rows[0]["snapshot_id"] is not None

    produce(topic, [{"id": i} for i in range(100, 103)], partition=0)
    text = cli("offsets", "show", "-c", config)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].split()[:7] == [
        "TABLE",
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "EARLIEST",
        "END",
        "LAG",
    ]
    assert f"{table}  {topic}  0          10         0         13   3" in text.stdout

    status = {r["table"]: r for r in as_json(cli("status", "-c", config, "--json"))}
    assert status[table]["rows"] == 14
    assert status[table]["lag"] == 3
    assert status[table]["last_batch"] == 1
    assert status[table]["data_files"] >= 1
    assert status[table]["dead_letters_1d"] == 1

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": group})
    try:
        committed = consumer.committed([KafkaTP(topic, 0), KafkaTP(topic, 1)], timeout=10)
    finally:
        consumer.close()
    assert [(c.partition, c.offset) for c in committed] == [(0, 10), (1, 5)]

    missing = cli("offsets", "show", "-c", config, "--table", "nope")
    assert missing.returncode == 1
    assert f"icesink: error: no table {scenario.namespace}.nope in the catalog" in missing.stderr


def test_status_counts_the_live_rows_of_a_changelog_table(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=2)
    first = list(random_changes(3_000, 400, 2, seed=31))
    second = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(2_000, 400, 2, seed=32)]
    overrides = cdc_config()
    for batch in (first, second):  # the second batch updates and deletes rows of the first
        produce_keyed(topic, records(batch))
        Job(spark, scenario.config(**overrides)).run()
    config = str(scenario.write_config(tmp_path / "job.yaml", **overrides))
    table = scenario.table("accounts")
    name = f"{scenario.namespace}.{scenario.prefix}_accounts"

    def status() -> dict[str, Any]:
        started = time.monotonic()
        rows = {
            r["table"]: r
            for r in as_json(cli("status", "-c", config, "--table", f"{scenario.prefix}_accounts", "--json"))
        }
        print(f"icesink status --json: {time.monotonic() - started:.1f} s")
        return rows[name]

    live = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
    assert live == len(oracle(first + second))
    total = int(snapshots(spark, table)[-1]["summary"]["total-records"])
    assert total > live, "equality deletes: total-records counts the rows they delete"
    row = status()
    assert row["rows"] == live
    assert row["total_records"] == total
    assert row["rows_counted"] == "deletes-applied"
    assert row["delete_files"] >= 2

    # Spark's own merge-on-read DELETE adds position deletes on top of icesink's equality deletes.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"DELETE FROM {table} WHERE id % 7 = 0")
    kinds = spark.sql(f"SELECT content, count(*) AS n FROM {table}.delete_files GROUP BY content").collect()
    assert {r.content for r in kinds} == {1, 2}, "position and equality delete files"
    live = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
    assert live == len({k for k in oracle(first + second) if k % 7})
    row = status()
    assert row["rows"] == live != row["total_records"]

    text = cli("status", "-c", config)
    assert text.returncode == 0, text.stderr
    assert "rows: live rows" in text.stdout


@pytest.mark.slow
def test_lost_checkpoint_reset_from_tables_then_run(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("orders")
    create_topics(topic, partitions=2)
    produce(topic, [{"id": i} for i in range(300)])
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 100})
    crashed = run_cli(config, env={faults.ENV: "after-commit:1"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    shutil.rmtree(scenario.checkpoint)  # the checkpoint is lost

    dry = cli("offsets", "reset", "-c", str(config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing changed" in dry.stderr
    assert checkpoints.read_starting(str(scenario.checkpoint), S3Config()) is None

    reset = cli("offsets", "reset", "-c", str(config), "--json")
    plan = {(r["topic"], r["partition"]): r["start"] for r in as_json(reset)}
    table = scenario.table("orders")
    held = codec.decode(snapshots(spark, table)[-1]["summary"][codec.OFFSETS_KEY])
    assert plan == {(tp.topic, tp.partition): o for tp, o in held.items()}, "exactly where the table is"
    assert 0 < sum(plan.values()) < 300, "batches 0 and 1 were committed before the crash, not all"

    produce(topic, [{"id": i} for i in range(300, 350)])
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "starting from the offsets of `icesink offsets reset`" in resumed.stderr
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == list(range(350))
    assert checkpoints.read_starting(str(scenario.checkpoint), S3Config()) is None, "retired after the first batch"
    assert list(scenario.checkpoint.parent.glob("checkpoint.starting-offsets.json.applied-*"))


def test_a_rewind_needs_the_flag_and_leaves_an_audit_record(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("audits")
    create_topics(topic, partitions=1)
    produce(topic, [{"id": i} for i in range(20)])
    Job(spark, scenario.config()).run()
    config = str(scenario.write_config(tmp_path / "job.yaml"))
    table = scenario.table("audits")
    before = len(snapshots(spark, table))

    refused = cli("offsets", "reset", "-c", config, "--to-earliest")
    assert refused.returncode == 1
    assert "would re-ingest records that tables already hold" in refused.stderr
    assert f"{scenario.namespace}.{scenario.prefix}_audits {topic}[0]: holds up to 20, reset to 0" in refused.stderr
    assert "pass --rewind" in refused.stderr
    assert len(snapshots(spark, table)) == before, "nothing changed"
    assert scenario.checkpoint.exists(), "the checkpoint stays where it was"
    for args, message in [
        (["--table", "nope"], f"--table: no table nope in namespace {scenario.namespace}"),
        (["--to-timestamp", "yesterday"], "--to-timestamp 'yesterday' is not an ISO time"),
    ]:
        bad = cli("offsets", "reset", "-c", config, "--dry-run", *args)
        assert bad.returncode == 1
        assert message in bad.stderr

    done = cli("offsets", "reset", "-c", config, "--to-earliest", "--rewind", "--table", f"{scenario.prefix}_audits")
    assert done.returncode == 0, done.stderr
    last = snapshots(spark, table)[-1]["summary"]
    assert codec.decode(last[codec.OFFSETS_KEY]) == {TopicPartition(topic, 0): 0}
    audit = json.loads(last["icesink.rewind"])
    assert (audit["mode"], audit["from"], audit["to"]) == ("earliest", {f"{topic}[0]": 20}, {f"{topic}[0]": 0})
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 20, "the audit snapshot changes no rows"
    assert list(scenario.checkpoint.parent.glob("checkpoint.moved-*")), "the old checkpoint was moved aside"

    Job(spark, scenario.config()).run()
    ids = sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())
    assert ids == sorted([*range(20), *range(20)]), "re-ingested, as asked"


@pytest.mark.slow
def test_maintain_rewrites_the_manifests_the_appends_add(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Each batch of an append table adds a manifest (a fast append, as Spark's streaming sink
    commits); `maintain` leaves one, with every row and the offsets as they were."""
    topic = scenario.topic("visits")
    create_topics(topic)
    produce(topic, [{"id": i, "page": f"p{i % 7}"} for i in range(60)])
    overrides = {"kafka.max_offsets_per_trigger": 10}
    Job(spark, scenario.config(**overrides)).run()
    table = scenario.table("visits")

    def manifests() -> int:
        spark.sql(f"REFRESH TABLE {table}")
        return int(spark.sql(f"SELECT count(*) FROM {table}.manifests").first()[0])

    batches = len(snapshots(spark, table))
    assert batches >= 6
    assert manifests() == batches, "one manifest per batch"
    offsets = table_offsets(spark, table)
    config = scenario.write_config(tmp_path / "job.yaml", **overrides)
    results = {r["table"]: r for r in as_json(cli("maintain", "-c", str(config), "--json"))}
    assert results[f"{scenario.namespace}.{scenario.prefix}_visits"]["rewritten_manifests"] > 0
    assert manifests() == 1
    assert sorted(r.id for r in spark.table(table).collect()) == list(range(60)), "every row once"
    assert table_offsets(spark, table) == offsets == end_offsets(topic), "the offsets survive"


@pytest.mark.slow
def test_maintain_while_a_cdc_stream_runs(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("balances")
    create_topics(topic, partitions=2)
    changes = list(random_changes(12_000, 1_500, 2, seed=21))
    chunks = [changes[i : i + 3_000] for i in range(0, len(changes), 3_000)]
    overrides = {
        "decode.key_format": "json",
        "decode.operation_column": "op",
        "tables.mode": "changelog",
        "kafka.max_offsets_per_trigger": 1_500,
        "job.trigger.mode": "processing-time",
        "job.trigger.interval": "1 second",
    }
    config = scenario.write_config(tmp_path / "job.yaml", **overrides)
    table = scenario.table("balances")

    def produce_chunk(chunk: list[Change]) -> None:
        produce_keyed(topic, [(c.kafka_key(), c.kafka_value(), c.partition) for c in chunk])

    def caught_up() -> bool:
        snaps = snapshots(spark, table) if table_exists(spark, table) else []
        held = [codec.decode(s["summary"][codec.OFFSETS_KEY]) for s in snaps if codec.OFFSETS_KEY in s["summary"]]
        return bool(held) and held[-1] == end_offsets(topic)

    produce_chunk(chunks[0])
    query = Job(spark, scenario.config(**overrides)).start()
    try:
        wait_until(caught_up, 180, "the first chunk")
        produce_chunk(chunks[1])
        maintenance = subprocess.Popen(
            [sys.executable, "-m", "icesink", "maintain", "-c", str(config), "--expire-after", "0m", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        produce_chunk(chunks[2])
        out, err = maintenance.communicate(timeout=600)
        assert maintenance.returncode == 0, err[-3000:]
        produce_chunk(chunks[3])
        wait_until(caught_up, 180, "all chunks")
    finally:
        query.stop()

    results = {r["table"]: r for r in json.loads(out)}
    assert results[f"{scenario.namespace}.{scenario.prefix}_balances"]["rewritten_data_files"] > 0
    assert "replace" in {s["operation"] for s in snapshots(spark, table)}, "a compaction was committed"
    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes), "compaction next to the stream lost and doubled nothing"
    shown = as_json(cli("offsets", "show", "-c", str(config), "--json"))
    assert {(r["topic"], r["partition"]): r["lag"] for r in shown} == {(topic, 0): 0, (topic, 1): 0}


def live_delete_files(spark: SparkSession, table: str) -> int:
    """Live delete files of the table's current snapshot, as its `entries` metadata table lists them."""
    spark.sql(f"REFRESH TABLE {table}")
    return int(
        spark.sql(f"SELECT count(*) FROM {table}.entries WHERE status < 2 AND data_file.content != 0").first()[0]
    )


@pytest.mark.slow
@pytest.mark.parametrize("partition_by", [[], ["bucket(3, id)"]], ids=["unpartitioned", "bucket"])
def test_maintain_leaves_no_dangling_deletes(spark: SparkSession, scenario: Scenario, partition_by: list[str]) -> None:
    """A changelog table gets an equality-delete file per batch (per partition); after `maintain`
    none is live (each was older than every row, so none could apply), the rows and offsets are as
    before, and a second run finds nothing to remove. (Iceberg's own removal skips unpartitioned
    tables; its compaction's commit drops only the delete files strictly older than every row.)"""
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=2)
    changes = list(random_changes(1_200, 150, 2, seed=5))
    produce_keyed(topic, records(changes))
    overrides = cdc_config(**{"kafka.max_offsets_per_trigger": 200, "tables.partition_by": partition_by})
    Job(spark, scenario.config(**overrides)).run()
    table = scenario.table("accounts")
    before = live_delete_files(spark, table)
    assert before >= 6, "a delete file per batch"
    offsets = table_offsets(spark, table)
    ref = TableRef(scenario.namespace, f"{scenario.prefix}_accounts")

    # In the test's session (the CLI's own run of it is test_maintain_rewrites_the_manifests_the_appends_add).
    def maintain() -> MaintenanceResult:
        return maintain_table(spark, CATALOG, ref, dt.timedelta(days=3), dt.timedelta(days=1))

    first = maintain()
    assert first.rewritten_data_files > 0
    assert 0 < first.removed_delete_files <= before, first
    assert first.live_delete_files == 0
    assert live_delete_files(spark, table) == 0, "no dangling delete file stays live"
    done = {s["summary"].get("icesink.maintenance") for s in snapshots(spark, table)}
    assert "dangling-deletes" in done
    assert "offsets" not in done, "the catalog serves the history: no snapshot carries the offsets again"
    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes), "the rows are as before"
    assert table_offsets(spark, table) == offsets == end_offsets(topic), "the offsets survive"

    assert maintain().removed_delete_files == 0
    assert live_delete_files(spark, table) == 0
