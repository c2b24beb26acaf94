"""Tables of field-routed topics written in one pass (batch/direct_routing.py, tasks/routing.py):
static and dynamic routing, an upsert table among them, the same rows and dead letters as Spark's
path writes, no record twice after a crash between the files and the commit, nor after a replay."""

from __future__ import annotations

import logging
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.bench.workloads import SCHEMA, event
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.job.query import Job
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.jobs import timed_run
from tests.support.spark import letters, rows, snapshots, table_offsets
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]

KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)
SIDES = {"direct": True, "spark": False}


def ids(spark: SparkSession, table: str) -> list[int]:
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())


def steps(timings: list[BatchTimings]) -> list[tuple[bool, bool]]:
    """Per batch: (went through the one-pass job, went through Spark's decoder)."""
    return [("direct" in t.steps, "decode" in t.steps) for t in timings]


def test_json_tables_routed_by_a_field_take_the_one_pass_job(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mixed, inbox = scenario.topic("mixed"), scenario.topic("inbox")
    create_topics(mixed, inbox, partitions=2)
    rules = [
        {"topics": mixed, "field": "kind", "values": {"click": ["clicks"], "buy": ["buys", "audit"]}},
        {"topics": inbox, "field": "target", "dynamic": True},
    ]

    def settings(side: str, **more: Any) -> dict[str, Any]:
        return {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": SIDES[side],
            "routing.rules": rules,
            "tables.per_table": {"buys": {"mode": "upsert", "key_columns": ["id"]}},
            **more,
        }

    def run(side: str, **more: Any) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**settings(side, **more)))

    def tables(side: str) -> dict[str, list[tuple[Any, ...]]]:
        names = ("clicks", "buys", "audit", "alpha", "beta")
        return {n: rows(spark, f"{CATALOG}.{scenario.namespace}_{side}.{n}") for n in names}

    def schemas(side: str) -> dict[str, Any]:
        return {n: spark.table(f"{CATALOG}.{scenario.namespace}_{side}.{n}").schema for n in tables(side)}

    # Batch 0 creates the tables, each with the columns of its own records (alpha's and beta's
    # differ), inferred on the driver from the records the table takes.
    produce(mixed, [{"id": 1, "kind": "click", "n": "a"}, {"id": 2, "kind": "buy", "n": "b", "qty": 1}])
    produce(inbox, [{"id": 1, "target": "alpha", "a": 1}, {"id": 2, "target": "beta", "b": "x"}])
    assert steps(run("direct")) == [(True, False)], "new tables in one pass"
    run("spark")
    assert schemas("direct") == schemas("spark")

    # Batch 1: each table's records among others' (of other columns), an update of an upsert
    # key, records no table takes, poison, and a click of a new field (clicks is evolved for its
    # own records' columns, not the others').
    produce(
        mixed,
        [
            {"id": 3, "kind": "click", "n": "c"},
            {"id": 8, "kind": "click", "n": "h", "extra": True},
            {"id": 2, "kind": "buy", "n": "b2", "qty": 5},  # an update of key 2 of buys
            {"id": 4, "kind": "refund", "why": "late"},  # no value routes it: a dead letter
            {"id": 5},  # no kind: a dead letter
            "not json",
            {"id": 6, "kind": "buy", "n": "f", "qty": 2},
        ],
    )
    produce(
        inbox, [{"id": 3, "target": "beta", "b": "y"}, {"id": 4, "target": "../evil"}, {"id": 5, "target": "Alpha"}]
    )
    caplog.set_level(logging.INFO, logger="icesink.batch")
    caplog.clear()
    timings = {side: run(side) for side in SIDES}
    assert steps(timings["direct"]) == [(True, False)], "every table in one pass, none through Spark's decoder"
    assert steps(timings["spark"]) == [(False, True)]
    # A new job: the values of a sample plan the batch, the one-pass job's tasks route every record.
    routed = "batch 1: 2 field-routed topic(s) routed in the one-pass job (4 value(s), 4 dead letter(s))"
    assert routed in caplog.text, "the routing too: no Spark decode of the batch"
    assert "routed in the Python tasks" not in caplog.text, "no routing pass"
    assert schemas("direct") == schemas("spark")
    assert tables("direct") == tables("spark")
    assert ids(spark, f"{CATALOG}.{scenario.namespace}_direct.buys") == [2, 6], "key 2 updated in place"
    assert letters(spark, f"{scenario.namespace}_direct") == letters(spark, f"{scenario.namespace}_spark")
    assert len(letters(spark, f"{scenario.namespace}_direct")) == 4, "each once: refund, no kind, not json, ../evil"

    # Batch 2, killed after the one-pass job wrote every table's files and before any commit; the
    # restart writes it once.
    produce(mixed, [{"id": 7, "kind": "click", "n": "g"}, {"id": 6, "kind": "buy", "n": "f2", "qty": 3}])
    produce(inbox, [{"id": 6, "target": "alpha", "a": 6}, {"id": 7, "target": "beta", "b": "z"}])
    config = scenario.write_config(tmp_path / "job.yaml", **settings("direct"))
    before = {n: len(snapshots(spark, f"{CATALOG}.{scenario.namespace}_direct.{n}")) for n in ("clicks", "alpha")}
    crashed = run_cli(config, env={faults.ENV: "mid-write:2"})
    assert crashed.returncode in KILLED, crashed.stderr[-3000:]
    assert "SIGKILL at mid-write of batch 2" in crashed.stderr
    after = {n: len(snapshots(spark, f"{CATALOG}.{scenario.namespace}_direct.{n}")) for n in ("clicks", "alpha")}
    assert after == before, "nothing committed"
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"batch 2 timings: .*direct", resumed.stderr), "the replay took the one-pass job too"
    run("spark")
    assert tables("direct") == tables("spark")
    assert letters(spark, f"{scenario.namespace}_direct") == letters(spark, f"{scenario.namespace}_spark")
    for name, topic in (("clicks", mixed), ("alpha", inbox)):
        ends = {tp: end for tp, end in end_offsets(topic).items() if end}  # an empty partition has none
        assert table_offsets(spark, f"{CATALOG}.{scenario.namespace}_direct.{name}") == ends

    # A lost checkpoint: from the earliest offsets again, nothing is added anywhere.
    kept = (tables("direct"), letters(spark, f"{scenario.namespace}_direct"))
    run("direct", **{"job.checkpoint_location": str(tmp_path / "lost"), "kafka.starting_offsets": "earliest"})
    assert (tables("direct"), letters(spark, f"{scenario.namespace}_direct")) == kept


def test_a_batch_planned_with_the_values_met_before_is_planned_again_for_a_new_one(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Batches of a field-routed topic planned without a routing pass (batch/route_guess.py): the
    first from a sample, the next with the values met before; a new value refutes the guess, the
    batch is planned again (killed right then, then restarted): each record once, in its table."""
    topic = scenario.topic("inbox")
    create_topics(topic, partitions=1)
    rules = [{"topics": topic, "field": "target", "dynamic": True}]

    def settings(side: str) -> dict[str, Any]:
        return {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": SIDES[side],
            "routing.rules": rules,
            "kafka.max_offsets_per_trigger": 4,  # a batch per line below
        }

    produce(topic, [{"id": 1, "target": "alpha", "a": 1}, {"id": 2, "target": "beta", "b": "x"}, "not json",
                    {"id": 3, "target": "alpha", "a": 3}])  # fmt: skip
    produce(topic, [{"id": 4, "target": "alpha", "a": 4}, {"id": 5}, {"id": 6, "target": "alpha", "a": 6},
                    {"id": 7, "target": "alpha", "a": 7}])  # fmt: skip
    produce(topic, [{"id": 8, "target": "alpha", "a": 8}, {"id": 9, "target": "gamma", "g": True},
                    {"id": 10, "target": "../x"}, {"id": 11, "target": "beta", "b": "z"}])  # fmt: skip
    config = scenario.write_config(tmp_path / "job.yaml", **settings("direct"))
    crashed = run_cli(config, env={faults.ENV: "guess-refuted:2"})
    assert crashed.returncode in KILLED, crashed.stderr[-3000:]
    log = crashed.stderr
    assert "batch 0: 1 field-routed topic(s) routed in the one-pass job (2 value(s), 1 dead letter(s))" in log
    assert (
        "batch 1: 1 field-routed topic(s) routed in the one-pass job (1 value(s), 1 dead letter(s)); 1 table(s) "
        "planned for values not met" in log
    ), "beta's, met in batch 0"
    assert f"batch 2: topic {topic} holds value(s) 'gamma' of field target the batch was not planned with" in log
    assert "routed in the Python tasks" not in log, "no routing pass: the one-pass job's tasks routed every batch"
    assert "SIGKILL at guess-refuted of batch 2" in log
    namespace = f"{CATALOG}.{scenario.namespace}_direct"
    assert ids(spark, f"{namespace}.alpha") == [1, 3, 4, 6, 7], "batch 2: nothing committed"
    assert len(snapshots(spark, f"{namespace}.beta")) == 1, "batch 1 held no beta: no commit"
    assert not spark.catalog.tableExists(f"{namespace}.gamma"), "nor created"

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"batch 2 timings: .*direct", resumed.stderr), resumed.stderr[-3000:]
    assert "batch 2: 1 field-routed topic(s) routed in the one-pass job (3 value(s), 1 dead letter(s))" in (
        resumed.stderr
    ), "a new job: its sample held gamma"
    job = Job(spark, scenario.config(**settings("spark")))
    job.run()
    for name in ("alpha", "beta", "gamma"):
        assert rows(spark, f"{namespace}.{name}") == rows(spark, f"{CATALOG}.{scenario.namespace}_spark.{name}")
        assert table_offsets(spark, f"{namespace}.{name}") == {tp: end for tp, end in end_offsets(topic).items()}
    assert ids(spark, f"{namespace}.alpha") == [1, 3, 4, 6, 7, 8]
    assert letters(spark, f"{scenario.namespace}_direct") == letters(spark, f"{scenario.namespace}_spark")
    assert len(letters(spark, f"{scenario.namespace}_direct")) == 3, "each once: not json, no target, ../x"


def test_avro_tables_routed_by_a_field_take_the_one_pass_job(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = scenario.topic("events")
    create_topics(topic, partitions=2)
    # view -> views, purchase -> purchases (upsert by id); cart records are skipped by the rule.
    rules = [
        {"topics": topic, "field": "event_type", "values": {"view": ["views"], "purchase": ["purchases"]},
         "unmatched": "skip"},
    ]  # fmt: skip

    def run(side: str, **more: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_avro": SIDES[side],
            "routing.rules": rules,
            "tables.per_table": {"purchases": {"mode": "upsert", "key_columns": ["id"]}},
            **more,
        }
        return timed_run(spark, scenario.config(**avro_config(scenario, **settings)))

    def tables(side: str) -> dict[str, list[tuple[Any, ...]]]:
        return {n: rows(spark, f"{CATALOG}.{scenario.namespace}_{side}.{n}") for n in ("views", "purchases")}

    produce(topic, avro_values(topic, SCHEMA, [event(i) for i in range(6)]))
    caplog.set_level(logging.INFO, logger="icesink.batch")
    assert steps(run("direct")) == [(True, False)], "new tables in one pass"
    routed = "batch 0: 1 field-routed topic(s) routed in the one-pass job (2 value(s), 0 dead letter(s))"
    assert routed in caplog.text, "the routing too, planned from a sample (carts skipped, as the rule says)"
    run("spark")
    for name in ("views", "purchases"):
        assert spark.table(f"{CATALOG}.{scenario.namespace}_direct.{name}").schema == (
            spark.table(f"{CATALOG}.{scenario.namespace}_spark.{name}").schema
        )
    # Purchases of keys 2 and 5 again (upserts), new views, carts skipped, poison.
    produce(topic, [*avro_values(topic, SCHEMA, [event(i, key=i % 6) for i in range(6, 18)]), b"\x00\x00"])
    caplog.clear()
    timings = {side: run(side) for side in SIDES}
    assert steps(timings["direct"]) == [(True, False)], "every table in one pass, none through Spark's decoder"
    assert f"batch 1: topic(s) {topic}: a record the routing pass in the Python tasks cannot judge" in caplog.text, (
        "the poison is routed (dead-lettered) by Spark's pass"
    )
    assert tables("direct") == tables("spark")
    assert ids(spark, f"{CATALOG}.{scenario.namespace}_direct.purchases") == [2, 5], "upserted"
    assert letters(spark, f"{scenario.namespace}_direct") == letters(spark, f"{scenario.namespace}_spark")
    assert len(letters(spark, f"{scenario.namespace}_direct")) == 1, "the poison, once"

    kept = tables("direct")
    run("direct", **{"job.checkpoint_location": str(tmp_path / "lost"), "kafka.starting_offsets": "earliest"})
    assert tables("direct") == kept, "a lost checkpoint adds nothing"
