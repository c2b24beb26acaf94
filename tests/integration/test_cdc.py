"""Upsert and changelog tables: equality deletes plus appends, one RowDelta per table per batch.
The big stream and the crash here take Spark's path (`SPARKS_PATH`): the same JSON changes in one
pass are test_direct_cdc.py's."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.tables import IcebergCatalog
from icesink.job.query import Job
from icesink.model import TableRef, TopicPartition
from icesink.runtime import faults
from tests.support.cli import run_cli
from tests.support.spark import snapshots
from tests.support.trino import trino_reachable, trino_rows
from tests.support.values import cdc_config, records, table_state

PARTITIONS = 3
# Plain JSON keys and values of a table that exists go in one pass since batch 1; here Spark's shuffle path.
SPARKS_PATH = {"decode.direct_json": False}


@dataclass
class Stream:
    scenario: Scenario
    topic: str
    table: str
    expected: dict[int, int]
    bad_offsets: dict[int, str]  # offset on partition 0 -> error class


@pytest.fixture(scope="module")
def big_stream(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Stream:
    """40k changes over 4k keys, 3 partitions, a bucketed table, four batches; run once."""
    scenario = Scenario.new(tmp_path_factory.mktemp("cdc"))
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=PARTITIONS)
    changes = list(random_changes(40_000, 4_000, PARTITIONS, seed=7))
    produce_keyed(topic, records(changes))
    # Changes that cannot be applied, at known offsets of partition 0 (after the good ones).
    bad = [
        (None, json.dumps({"v": 1, "op": "U"}).encode(), 0),  # no key anywhere
        (json.dumps({"id": 1}).encode(), json.dumps({"id": 1, "v": 2, "op": "X"}).encode(), 0),
        (None, None, 0),  # a tombstone without a key
    ]
    first_bad = end_offsets(topic)[TopicPartition(topic, 0)]
    produce_keyed(topic, bad)
    config = scenario.config(
        **cdc_config(
            **{"tables.partition_by": ["bucket(4, id)"], "kafka.max_offsets_per_trigger": 10_000, **SPARKS_PATH}
        )
    )
    Job(spark, config).run()
    return Stream(
        scenario,
        topic,
        scenario.table("accounts"),
        oracle(changes),
        {first_bad: "MissingKey", first_bad + 1: "UnknownOperation", first_bad + 2: "NullValue"},
    )


def test_random_change_stream_equals_the_oracle_in_spark_sql(spark: SparkSession, big_stream: Stream) -> None:
    state, rows = table_state(spark, big_stream.table)
    assert rows == len(state), "no key twice"
    assert state == big_stream.expected


@pytest.mark.trino
def test_random_change_stream_equals_the_oracle_in_trino(big_stream: Stream) -> None:
    if not trino_reachable():
        pytest.fail("Trino is not running: `dev/stack up --with-trino`", pytrace=False)
    _, namespace, name = big_stream.table.split(".")
    rows = trino_rows(f'SELECT id, v FROM iceberg."{namespace}"."{name}"')
    state = dict(rows)
    assert len(rows) == len(state), "no key twice"
    assert state == big_stream.expected


def test_each_batch_is_one_row_delta_with_its_offsets(spark: SparkSession, big_stream: Stream) -> None:
    snaps = snapshots(spark, big_stream.table)
    assert len(snaps) >= 4, "40k records at 10k per trigger"
    assert {s["operation"] for s in snaps} == {"overwrite"}, "RowDelta commits, no plain appends"
    assert all(int(s["summary"]["added-equality-deletes"]) > 0 for s in snaps)
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(big_stream.topic)
    batches = [int(s["summary"][codec.BATCH_ID_KEY]) for s in snaps]
    assert batches == sorted(set(batches)), "one snapshot per batch"
    spec = spark.sql(f"SELECT DISTINCT partition.id_bucket FROM {big_stream.table}.files").collect()
    assert sorted(r.id_bucket for r in spec) == [0, 1, 2, 3]
    # A small batch's changes go to as few writer tasks as Spark coalesces them into: one data and
    # one delete file per bucket, not one per shuffle partition and bucket.
    added = [(int(s["summary"]["added-data-files"]), int(s["summary"]["added-delete-files"])) for s in snaps]
    assert all(d <= 4 and x <= 4 for d, x in added), added
    kinds = spark.sql(f"SELECT content, count(*) AS n FROM {big_stream.table}.all_delete_files GROUP BY content")
    assert {r.content: r.n for r in kinds.collect()}.keys() == {2}, "equality deletes only"
    catalog = IcebergCatalog(spark, CATALOG)
    _, namespace, name = big_stream.table.split(".")
    table = catalog.load(TableRef(namespace, name))
    assert catalog.identifier_columns(table) == ["id"], "the key from the JSON key's fields"
    assert table.operations().current().formatVersion() == 2


def test_changes_that_cannot_be_applied_are_dead_letters(spark: SparkSession, big_stream: Stream) -> None:
    dlq = f"icesink.{big_stream.scenario.namespace}.dead_letters"
    got = spark.sql(f"SELECT partition, offset, error_class, error_message FROM {dlq}").collect()
    assert {r.offset: r.error_class for r in got} == big_stream.bad_offsets
    assert {r.partition for r in got} == {0}
    messages = {r.error_class: r.error_message for r in got}
    assert messages["MissingKey"] == "no value for key column(s) id"
    assert messages["UnknownOperation"] == "operation column op holds 'X', not I, U or D"


@pytest.mark.slow
def test_crash_after_the_commit_replays_without_doubling_or_losing(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Killed after batch 1's commit, before Spark's commit log: Spark replays the batch, the table
    already holds it. Spark's shuffle path (JSON keys); a worker killed after writing its files is
    the one-pass CDC crash test's (test_direct_cdc.py), the path most changelog batches take."""
    topic = scenario.topic("ledger")
    create_topics(topic, partitions=PARTITIONS)
    changes = list(random_changes(3_000, 300, PARTITIONS, seed=11))
    produce_keyed(topic, records(changes))
    config = scenario.write_config(
        tmp_path / "job.yaml", **cdc_config(**{"kafka.max_offsets_per_trigger": 1_200, **SPARKS_PATH})
    )

    crashed = run_cli(config, env={faults.ENV: "after-commit:1"})
    table = scenario.table("ledger")
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert len(snapshots(spark, table)) == 2, "batches 0 and 1 were committed to the table"
    assert not (scenario.checkpoint / "commits" / "1").exists(), "killed before Spark's commit log"

    more = list(random_changes(800, 300, PARTITIONS, seed=12))
    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in more]
    produce_keyed(topic, records(more))
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already holds these offsets" in resumed.stderr

    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes + more), "no delete lost, no update doubled"
    snaps = snapshots(spark, table)
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)


def debezium(op: str, key: int, email: str | None, lsn: int) -> bytes:
    row = {"id": key, "email": email}
    before, after = (row, None) if op == "d" else (None, row)
    return json.dumps({"before": before, "after": after, "op": op, "source": {"lsn": lsn}}).encode()


def test_debezium_mirror_ordered_by_lsn_across_partitions(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("customers")
    create_topics(topic, partitions=2)
    key = {i: json.dumps({"id": i}).encode() for i in (1, 2, 3)}
    produce_keyed(
        topic,
        [
            # Key 1 moved partition: the newest change (lsn 30) sits at a lower offset.
            (key[1], debezium("u", 1, "c@x", 30), 0),
            (key[1], debezium("c", 1, "a@x", 10), 1),
            (key[1], debezium("u", 1, "b@x", 20), 1),
            # Key 2: created, deleted, tombstoned in one batch.
            (key[2], debezium("c", 2, "d@x", 40), 1),
            (key[2], debezium("d", 2, "d@x", 41), 1),
            (key[2], None, 1),
            # Key 3: a delete of a row never seen, then a create.
            (key[3], debezium("d", 3, "e@x", 50), 0),
            (key[3], debezium("c", 3, "f@x", 51), 0),
        ],
    )
    config = scenario.config(
        **{
            "decode.envelope": "debezium",
            "decode.key_format": "json",
            "decode.source_columns": ["lsn"],
            "tables.mode": "changelog",
            "tables.order_by": "_source_lsn",
        }
    )
    Job(spark, config).run()

    table = scenario.table("customers")
    rows = spark.sql(f"SELECT id, email, _op, _source_lsn FROM {table} ORDER BY id").collect()
    assert [(r.id, r.email, r._op, r._source_lsn) for r in rows] == [(1, "c@x", "U", 30), (3, "f@x", "I", 51)]

    produce_keyed(topic, [(key[1], debezium("d", 1, "c@x", 60), 0), (key[3], debezium("u", 3, "g@x", 61), 0)])
    Job(spark, config).run()
    rows = spark.sql(f"SELECT id, email FROM {table} ORDER BY id").collect()
    assert [(r.id, r.email) for r in rows] == [(3, "g@x")], "a later batch deletes and updates rows of earlier ones"
