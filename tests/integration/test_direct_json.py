"""Plain JSON tables written in one pass (batch/direct.py): the same tables and dead letters as
through Spark's decoder, new tables created with their first snapshot, records it declines still
decoded, replays without a duplicate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.batch import direct_json
from icesink.runtime.timings import BatchTimings
from tests.support.jobs import timed_run
from tests.support.spark import letters, partitions, rows, snapshots, table_offsets

pytestmark = [pytest.mark.slow]

NAMES = ("clean", "newcol", "poison", "mismatch", "late")


def test_one_pass_tables_match_sparks_decoding_and_a_replay_adds_nothing_twice(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics = {n: scenario.topic(n) for n in NAMES}
    create_topics(*topics.values(), partitions=1)
    for n, t in topics.items():
        if n != "late":
            produce(t, [{"id": i, "name": f"n{i}", "amount": i * 0.5} for i in range(3)])
    # The sample a new table's columns are inferred from (2 records here) has no w and only whole
    # v: the one-pass job declines the third record; the table is staged again with the columns
    # inferred from all three, and a second one-pass job writes it (batch/direct_rounds.py).
    monkeypatch.setattr(direct_json, "SAMPLE_RECORDS", 2)
    produce(topics["late"], [{"id": 1, "v": 1}, {"id": 2, "v": 2}, {"id": 3, "v": 2.5, "w": "x"}])
    sides = {"direct": True, "spark": False}

    def namespace(side: str) -> str:
        return f"{scenario.namespace}_{side}"

    def run(side: str, **overrides: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": namespace(side),
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": sides[side],
            # A new table of two partition fields: its tasks compute both (tasks/partition_values.py).
            "tables.per_table": {f"{scenario.prefix}_clean": {"partition_by": ["bucket(4, id)", "name"]}},
            **overrides,
        }
        return timed_run(spark, scenario.config(**settings))

    for side in sides:  # batch 0 creates the tables, with their first snapshot in one commit
        steps = [("direct" in t.steps, "decode" in t.steps) for t in run(side)]
        assert steps == [(True, False)] if side == "direct" else [(False, True)], "late's second job is one-pass too"
    tables = {side: {n: f"{CATALOG}.{namespace(side)}.{scenario.prefix}_{n}" for n in NAMES} for side in sides}
    for n in NAMES:
        assert spark.table(tables["direct"][n]).schema == spark.table(tables["spark"][n]).schema, n
        assert len(snapshots(spark, tables["direct"][n])) == 1, n
    assert spark.table(tables["direct"]["late"]).dtypes == [("id", "bigint"), ("v", "double"), ("w", "string")]

    produce(topics["clean"], [{"id": i, "name": f"n{i}", "amount": i * 0.5} for i in range(3, 6)])
    produce(topics["newcol"], [{"id": 3, "name": "x", "amount": 1.5, "extra": "e"}, {"id": 4}])
    produce(topics["poison"], [{"id": 3, "name": None, "amount": -0.0}, "not json {", {"id": 5, "amount": 7}])
    produce(topics["mismatch"], [{"id": "four", "name": "m"}, {"id": 5, "amount": 2}])
    timings = {side: run(side) for side in sides}
    assert ["direct" in t.steps for t in timings["direct"]] == [True], "batch 1 took the one-pass job"
    assert ["direct" in t.steps for t in timings["spark"]] == [False]

    for n in NAMES:
        assert rows(spark, tables["direct"][n]) == rows(spark, tables["spark"][n]), n
        assert table_offsets(spark, tables["direct"][n]) == end_offsets(topics[n]), n
    assert letters(spark, namespace("direct")) == letters(spark, namespace("spark"))
    assert [r[1] for r in rows(spark, tables["direct"]["clean"])] == list(range(6))
    clean_partitions = partitions(spark, tables["direct"]["clean"])
    assert clean_partitions == partitions(spark, tables["spark"]["clean"]), "filed as Spark's path files them"
    assert len({p for _, p in clean_partitions}) == 6, "a partition per name"
    assert ("e", 3) in {(r[1], r[2]) for r in rows(spark, tables["direct"]["newcol"])}, (
        "a new column, by the second pass"
    )
    assert (topics["poison"], 4, "JsonParseError") in letters(spark, namespace("direct"))

    # New checkpoints from the earliest offsets: the one-pass job writes only what each table
    # lacks, nothing twice, also when two tables of one topic hold different offsets of it.
    clean, copy = f"{scenario.prefix}_clean", f"{scenario.prefix}_clean_copy"
    both = [{"topics": topics["clean"], "tables": [clean, copy]}]
    runs = iter(range(100))

    def again(rules: list[dict[str, Any]] | None = None) -> list[BatchTimings]:
        overrides: dict[str, Any] = {
            "job.checkpoint_location": str(tmp_path / f"replay{next(runs)}"),
            "kafka.starting_offsets": "earliest",
        }
        if rules:
            overrides["routing.rules"] = rules
        return run("direct", **overrides)

    def ids(name: str) -> list[int]:
        table = f"{CATALOG}.{namespace('direct')}.{name}"
        spark.sql(f"REFRESH TABLE {table}")
        return sorted(r.id for r in spark.table(table).select("id").collect())

    before = {n: rows(spark, tables["direct"][n]) for n in NAMES if n != "clean"}
    produce(topics["clean"], [{"id": 6, "name": "n6", "amount": 3.0}])
    assert ["direct" in t.steps for t in again()] == [True]
    assert ids(clean) == list(range(7)), "each record once"
    assert ["direct" in t.steps for t in again(both)] == [True], "clean_copy is created from all of the topic"
    produce(topics["clean"], [{"id": 7, "name": "n7", "amount": 3.5}])
    again()  # clean holds offset 8 now, clean_copy 7
    produce(topics["clean"], [{"id": 8, "name": "n8", "amount": 4.0}])
    assert ["direct" in t.steps for t in again(both)] == [True]
    assert ids(clean) == list(range(9)), "each record once"
    assert ids(copy) == list(range(9)), "each record once"
    for name in (clean, copy):
        assert table_offsets(spark, f"{CATALOG}.{namespace('direct')}.{name}") == end_offsets(topics["clean"])
    assert {n: rows(spark, tables["direct"][n]) for n in before} == before


def test_nested_json_takes_the_one_pass_job_for_a_new_table_and_after(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Events with a struct and an array of structs (the demo's shape): batch 0 creates the table
    (its columns inferred in Python from a sample: no Spark job but the one-pass job's) and batch 1
    appends to it, both in the one-pass job with no Spark decode or write step; the table equals
    Spark's path's. A record with a nested field the table lacks in batch 2: the first one-pass job
    declines the table, which is widened and written by a second (batch/direct_rounds.py), as
    Spark's path widens and writes it."""
    topic = scenario.topic("clicks")
    create_topics(topic, partitions=2)

    def event(i: int) -> dict[str, Any]:
        return {
            "id": i,
            "kind": ("view", "cart", "purchase")[i % 3],
            "amount": i * 0.5 if i % 3 == 2 else None,
            "device": {"os": ("ios", "android", "web")[i % 3], "app": f"3.{i % 10}"},
            "items": [{"sku": f"s{i}", "n": i % 4}] if i % 2 else [],
        }

    produce(topic, [event(i) for i in range(100)])
    sides = {"direct": True, "spark": False}

    def run(side: str) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": sides[side],
        }
        return timed_run(spark, scenario.config(**settings))

    def by_id(table: str) -> dict[int, dict[str, Any]]:
        """Each row, nested values as dicts and lists (a struct's None does not sort against a string)."""
        spark.sql(f"REFRESH TABLE {table}")
        found = [r.asDict(recursive=True) for r in spark.table(table).collect()]
        assert len(found) == len({r["id"] for r in found}), "each record once"
        return {r["id"]: r for r in found}

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_clicks" for side in sides}
    for batch in range(3):
        timings = {side: run(side) for side in sides}
        one_pass = [("direct" in t.steps, "decode" in t.steps or "write" in t.steps) for t in timings["direct"]]
        assert one_pass == [(True, False)], f"batch {batch}: the one-pass job alone"
        # Batch 0 too: the new table's columns come from a sample inferred in Python, no Spark job.
        # Batch 2: a second one-pass job, after the table evolved.
        assert timings["direct"][0].spark_jobs == (1 if batch < 2 else 2), "Spark jobs: the one-pass job's"
        assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
        assert by_id(tables["direct"]) == by_id(tables["spark"])
        assert table_offsets(spark, tables["direct"]) == end_offsets(topic)
        produce(topic, [event(i) for i in range(100 * (batch + 1), 100 * (batch + 2))])
        if batch == 1:
            produce(topic, [{"id": 999, "device": {"os": "tv", "screen": 55}}])
    device = spark.table(tables["direct"]).schema["device"].dataType
    assert device.simpleString() == "struct<app:string,os:string,screen:bigint>", "widened"
