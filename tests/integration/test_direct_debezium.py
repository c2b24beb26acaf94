"""Debezium change events in Avro, as Debezium writes them with its defaults (the registry's
envelopes and record keys, Debezium's semantic types, a tombstone after a delete), written in one
pass (batch/direct_avro.py, batch/direct_keys.py, tasks/envelope_rows.py): the same changelog
table as Spark's path, with no Spark decode job; an event that path makes a dead letter sends its
batch that way."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime.timings import BatchTimings
from tests.support.debezium import AVRO_ENVELOPE, AVRO_KEY, avro_event, debezium_changes, debezium_config
from tests.support.jobs import timed_run
from tests.support.spark import letters, partitions, rows, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import avro_keys, avro_values, table_state

pytestmark = [pytest.mark.slow]


@pytest.mark.trino
def test_debezium_avro_changes_in_one_pass_match_sparks_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=3)
    changes = list(random_changes(1_600, 300, 3, seed=51))
    assert {"T", "D"} <= {c.op for c in changes}, "deletes, some followed by a tombstone"
    produce_keyed(topic, debezium_changes(topic, changes))
    sides = {"direct": True, "spark": False}

    def run(side: str) -> list[BatchTimings]:
        config = debezium_config(
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "kafka.max_offsets_per_trigger": 900,
            },
        )
        return timed_run(spark, scenario.config(**config))

    timings = {side: run(side) for side in sides}
    spark_steps = {"decode", "prepare", "write"}
    assert [("direct" in t.steps, sorted(spark_steps & set(t.steps))) for t in timings["direct"]] == [(True, [])] * 2, (
        "every batch in the one-pass job alone: no decode, prepare or write step of Spark's path"
    )
    assert ["direct" in t.steps for t in timings["spark"]] == [False] * 2
    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_accounts" for side in sides}
    for table in tables.values():
        state, count = table_state(spark, table)
        assert count == len(state), "no key twice"
        assert state == oracle(changes)
        assert table_offsets(spark, table) == end_offsets(topic)
    assert rows(spark, tables["direct"]) == rows(spark, tables["spark"]), "every column, semantic types too"
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
    assert partitions(spark, tables["direct"]) == partitions(spark, tables["spark"])
    read = trino_rows(
        f"SELECT id, v, CAST(balance AS varchar), CAST(updated AS varchar) "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_accounts"'
    )
    assert {r[0]: r[1] for r in read} == oracle(changes), "Trino reads the one-pass table as the oracle"
    theirs = spark.sql(
        f"SELECT id, v, CAST(balance AS string) AS b FROM {tables['spark']} WHERE balance IS NOT NULL"
    ).collect()
    assert {(r[0], r[1], r[2]) for r in read if r[2] is not None} == {(r.id, r.v, r.b) for r in theirs}

    # An event Spark's path makes a dead letter (an op Debezium does not write): that batch goes
    # Spark's way, its other changes applied, and the next batch is one-pass again.
    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(600, 300, 3, seed=52)]
    produce_keyed(topic, debezium_changes(topic, more[:300]))
    bad = {**avro_event("I", 7, 99_999, 99_999), "op": "x"}
    key = avro_keys(topic, AVRO_KEY, [{"id": 7}])[0]
    produce_keyed(topic, [(key, avro_values(topic, AVRO_ENVELOPE, [bad])[0], 1)])
    assert ["decode" in t.steps for t in run("direct")] == [True], "the bad batch through Spark's decoder"
    produce_keyed(topic, debezium_changes(topic, more[300:]))
    assert ["decode" in t.steps for t in run("direct")] == [False], "the next one in one pass"
    state, count = table_state(spark, tables["direct"])
    assert count == len(state)
    assert state == oracle(changes + more)
    dead = letters(spark, f"{scenario.namespace}_direct")
    assert [(t, c) for t, _, c in dead] == [(topic, "DebeziumEnvelopeError")], dead
