"""Debezium change events in Avro, as Debezium writes them with its defaults (the registry's
envelopes and record keys, Debezium's semantic types, a tombstone after a delete), written in one
pass (batch/direct_avro.py, batch/direct_keys.py, tasks/envelope_rows.py): the same changelog
table as Spark's path, with no Spark decode job; the events that path makes dead letters of are
the same dead letters, made by the tasks, through a kill after their commit."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.debezium import (
    AVRO_ENVELOPE,
    AVRO_KEY,
    avro_event,
    debezium_changes,
    debezium_config,
    wide_value,
)
from tests.support.jobs import timed_run
from tests.support.spark import dead_letters, partitions, rows, table_offsets
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

    def config(side: str, per_trigger: int = 900) -> dict[str, Any]:
        return debezium_config(
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "kafka.max_offsets_per_trigger": per_trigger,
            },
        )

    def run(side: str, per_trigger: int = 900) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**config(side, per_trigger)))

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

    # Events Spark's path makes dead letters of (an op Debezium does not write, a truncate, an
    # update without its image) among changes: the tasks make the same letters, in its words, and
    # the batch's changes stay on the one-pass path. The worst moment first: killed once the dead
    # letters are committed, the table not; the replay adds each letter and change once.
    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(600, 300, 3, seed=52)]
    produce_keyed(topic, debezium_changes(topic, more[:300]))
    bad = [{**avro_event("I", 7, 99_999, 99_999), "op": "x"}, {**avro_event("I", 8, 99_998, 99_998), "op": "t"},
           {**avro_event("U", 9, 99_997, 99_997), "after": None}]  # fmt: skip
    keys = avro_keys(topic, AVRO_KEY, [{"id": 7}, {"id": 8}, {"id": 9}])
    values = avro_values(topic, AVRO_ENVELOPE, bad)
    produce_keyed(topic, [(k, v, n) for n, (k, v) in enumerate(zip(keys, values, strict=True))])
    produce_keyed(topic, debezium_changes(topic, more[300:]))
    crashed = run_cli(scenario.write_config(tmp_path / "direct.yaml", **config("direct", 10_000)),
                      env={faults.ENV: "after-dead-letters:2"})  # fmt: skip
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "SIGKILL at after-dead-letters of batch 2" in crashed.stderr
    timings = {side: run(side, 10_000) for side in sides}
    assert [("direct" in t.steps, "decode" in t.steps) for t in timings["direct"]] == [(True, False)], (
        "the replay: the bad events dead letters of the one-pass job, no Spark decode job"
    )
    for table in tables.values():
        state, count = table_state(spark, table)
        assert count == len(state)
        assert state == oracle(changes + more)
        assert table_offsets(spark, table) == end_offsets(topic)
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in sides}
    assert found["direct"] == found["spark"], "the same dead letters as Spark's path, once each"
    assert sorted(r[-1] for r in found["direct"]) == [
        "op u without its row image", "unknown op t", "unknown op x",
    ]  # fmt: skip


def test_a_case_insensitive_debezium_table_takes_events_spelled_otherwise_in_one_pass(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """`tables.case_insensitive`: a changelog table of Debezium Avro events, keyed by their Avro
    record key, created by events of one spelling, then fed events whose image spells `v` and
    `name` upper-case (a database that upper-cases names): the same columns, every batch in one
    pass with no Spark decode job, the same table as Spark's path's and the oracle."""
    topic = scenario.topic("ledger")
    create_topics(topic, partitions=2)
    first = list(random_changes(400, 80, 2, seed=61))
    second = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(400, 80, 2, seed=62)]
    produce_keyed(topic, debezium_changes(topic, first))
    sides = {"direct": True, "spark": False}

    def run(side: str) -> list[BatchTimings]:
        config = debezium_config(
            scenario, **{
                "tables.namespace": f"{scenario.namespace}_{side}", "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side], "tables.case_insensitive": True,
            },
        )  # fmt: skip
        return timed_run(spark, scenario.config(**config))

    before = {side: run(side) for side in sides}
    produce_keyed(topic, debezium_changes(topic, second, names={"v": "V", "name": "NAME"}))
    after = {side: run(side) for side in sides}
    assert [("direct" in t.steps, "decode" in t.steps) for t in before["direct"] + after["direct"]] == [
        (True, False), (True, False),
    ], "both batches in one pass, the second of the other spelling too"  # fmt: skip
    assert not any("direct" in t.steps for t in before["spark"] + after["spark"])
    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_ledger" for side in sides}
    for table in tables.values():
        assert [f.name for f in spark.table(table).schema.fields][:3] == ["id", "v", "name"]
        state, count = table_state(spark, table)
        assert count == len(state)
        assert state == oracle(first + second)
        assert table_offsets(spark, table) == end_offsets(topic)
    assert rows(spark, tables["direct"]) == rows(spark, tables["spark"]), "every column, as Spark's path"
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema


@pytest.mark.trino
def test_a_wide_debezium_table_of_more_unions_than_a_word_holds_in_one_pass(
    spark: SparkSession, scenario: Scenario
) -> None:
    """40 more nullable columns, null in hundreds of combinations: the envelope has over 100 unions
    (each nullable column twice, before and after), which the union check once capped at 62, and
    it checked a block's records once per combination of null fields, up to 32 (Spark's decoder
    beyond either)."""
    topic = scenario.topic("wide")
    create_topics(topic, partitions=2)
    changes = list(random_changes(400, 100, 2, seed=53))
    produce_keyed(topic, debezium_changes(topic, changes, columns=40))
    timings = timed_run(spark, scenario.config(**debezium_config(scenario, **{"kafka.max_offsets_per_trigger": 300})))
    assert [("direct" in t.steps, "decode" in t.steps) for t in timings] == [(True, False)] * 2
    table = scenario.table("wide")
    state, count = table_state(spark, table)
    assert count == len(state)
    assert state == oracle(changes)
    assert table_offsets(spark, table) == end_offsets(topic)
    want = {key: tuple(wide_value(v, k) for k in (0, 1, 39)) for key, v in state.items()}
    assert {r[0]: tuple(r[1:]) for r in spark.sql(f"SELECT id, c0, c1, c39 FROM {table}").collect()} == want
    read = trino_rows(f'SELECT id, c0, c1, c39 FROM iceberg."{scenario.namespace}"."{scenario.prefix}_wide"')
    assert {r[0]: tuple(r[1:]) for r in read} == want, "Trino reads it as the oracle"
