"""Schema evolution without leaving the one-pass path (batch/direct_rounds.py): a producer's new
writer schema mid-stream (a new column, a new nested field, an int widened to a long), a new table
over a topic holding several versions, JSON records with new fields (nested too), and a kill after
the table was evolved and its files written, before the commit. Each batch takes the one-pass job
alone (no Spark decode step), and the table holds every record once with the topics' end offsets
(JSON: the same table as Spark's path makes of the same records)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.jobs import timed_run
from tests.support.spark import rows, snapshots, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]


def record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "it.direct_evolution", "fields": fields}


USER_V1 = record("User", [{"name": "name", "type": "string"}])
USER_V2 = record(
    "User", [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}]
)
V1 = record("Visit", [{"name": "id", "type": "int"}, {"name": "n", "type": "int"}, {"name": "user", "type": USER_V1}])
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
V2 = record("Visit", [*V1["fields"][:2], {"name": "user", "type": USER_V2}, NOTE])
V3 = record("Visit", [V1["fields"][0], {"name": "n", "type": "long"}, {"name": "user", "type": USER_V2}, NOTE])


def visit(i: int, version: int) -> dict[str, Any]:
    if version == 1:
        return {"id": i, "n": i, "user": {"name": f"u{i}"}}
    return {"id": i, "n": i if version == 2 else 2**40 + i, "user": {"name": f"u{i}", "age": i}, "note": f"n{i}"}


def expected(i: int, version: int) -> tuple[Any, ...]:
    v = visit(i, version)
    return (i, v["n"], f"u{i}", v["user"].get("age"), v.get("note"))


def values(topic: str, versions: list[tuple[int, int]], subject_of: str | None = None) -> list[bytes]:
    """(id, schema version) -> the Avro value, each version registered under the subject of
    `subject_of` (default: the topic's): the frames name the registry's global ids, so records of a
    version registered elsewhere leave the topic's latest version as it was."""
    schemas = {1: V1, 2: V2, 3: V3}
    return [avro_values(subject_of or topic, schemas[v], [visit(i, v)])[0] for i, v in versions]


def table_rows(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    spark.sql(f"REFRESH TABLE {table}")
    got = spark.sql(f"SELECT id, n, user.name, user.age, note FROM {table} ORDER BY id").collect()
    return [tuple(r) for r in got]


def columns(spark: SparkSession, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}


def one_pass_alone(t: BatchTimings, jobs: int) -> bool:
    """The batch took the one-pass job, `jobs` of them, and no step of Spark's path."""
    return "direct" in t.steps and not {"decode", "prepare", "write"} & set(t.steps) and t.spark_jobs == jobs


@pytest.mark.trino
def test_new_writer_schemas_evolve_the_table_in_one_pass(spark: SparkSession, scenario: Scenario) -> None:
    """archive: a new table over a topic already holding v1 and v2 records: planned with the
    registry's latest (v2), its first job meets v1 too, and a second creates it with both. visits,
    one job over three batches: v1 (the table created), then v1 and v2 mixed (a new column and a
    new nested field), then v3 (n: int -> long); v2 and v3 reach the registry as a producer's new
    versions would for the running job (not the subject's latest when it planned): each time the
    first job declines, the table evolves, a second job writes it."""
    archive, visits = scenario.topic("archive"), scenario.topic("visits")
    create_topics(archive, partitions=1)
    produce(archive, values(archive, [(i, 1 if i % 2 else 2) for i in range(6)]))

    def run(**settings: Any) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**avro_config(scenario, **settings)))

    assert [one_pass_alone(t, 2) for t in run()] == [True], "archive: a second job for v1's records"

    create_topics(visits, partitions=1)
    elsewhere = scenario.topic("elsewhere")
    batches = [
        [(i, 1) for i in range(5)],
        [(i, 2 if i % 2 else 1) for i in range(5, 10)],
        [(i, 3) for i in range(10, 15)],
    ]
    produce(visits, values(visits, batches[0]))
    produce(visits, [v for b in batches[1:] for v in values(visits, b, subject_of=elsewhere)])
    timings = run(**{"kafka.max_offsets_per_trigger": 5})
    assert [t.records for t in timings] == [5, 5, 5]
    assert [one_pass_alone(t, jobs) for t, jobs in zip(timings, (1, 2, 2), strict=True)] == [True] * 3

    table = scenario.table("visits")
    assert columns(spark, table) == {
        "id": "int", "n": "bigint", "user": "struct<name:string,age:int>", "note": "string"
    }  # fmt: skip
    versions = [v for b in batches for _, v in b]
    assert table_rows(spark, table) == [expected(i, v) for i, v in enumerate(versions)], "every record once"
    read = trino_rows(
        f'SELECT id, n, "user".name, "user".age, note FROM iceberg."{scenario.namespace}"."{scenario.prefix}_visits" '
        "ORDER BY id"
    )
    assert read == [expected(i, v) for i, v in enumerate(versions)], "Trino reads the evolved table alike"
    assert [s["operation"] for s in snapshots(spark, table)] == ["append"] * 3, "a snapshot per batch"
    assert table_offsets(spark, table) == end_offsets(visits)

    archived = scenario.table("archive")
    assert columns(spark, archived) == {
        "id": "int", "n": "int", "user": "struct<name:string,age:int>", "note": "string"
    }  # fmt: skip
    assert table_rows(spark, archived) == [expected(i, 1 if i % 2 else 2) for i in range(6)]
    assert table_offsets(spark, archived) == end_offsets(archive)


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_a_kill_after_the_table_was_evolved_and_its_files_written_replays_once(
    fmt: str, spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Batch 1 evolves visits (Avro: for v2's writer schema; JSON: for v2's fields, inferred on the
    driver), writes it in a second one-pass job, writes plain's files, and the job dies before any
    commit (mid-write): the table has v2's columns and none of batch 1's rows. The restart (Avro:
    no schema known to it, it plans with the registry's latest, v2, and meets v1 again) writes
    batch 1 once."""
    visits, plain = scenario.topic("visits"), scenario.topic("plain")
    create_topics(visits, plain, partitions=1)

    def produced(topic: str, versions: list[tuple[int, int]]) -> None:
        produce(topic, values(topic, versions) if fmt == "avro" else [visit(i, v) for i, v in versions])

    produced(visits, [(i, 1) for i in range(5)])
    produced(plain, [(i, 1) for i in range(5)])
    config = scenario.write_config(tmp_path / "job.yaml", **(avro_config(scenario) if fmt == "avro" else {}))
    assert run_cli(config).returncode == 0
    produced(visits, [(i, 2 if i % 2 else 1) for i in range(5, 11)])
    produced(plain, [(i, 1) for i in range(5, 8)])
    table = scenario.table("visits")

    crashed = run_cli(config, env={faults.ENV: "mid-write:1"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "the one-pass job writes 1 of them again, evolved" in crashed.stderr
    assert "note" in columns(spark, table), "evolved before the kill"
    assert len(snapshots(spark, table)) == 1, "nothing of batch 1 committed"

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "through Spark's decoder" not in resumed.stderr
    versions = [1] * 5 + [2 if i % 2 else 1 for i in range(5, 11)]
    assert table_rows(spark, table) == [expected(i, v) for i, v in enumerate(versions)], "no loss, no duplicate"
    assert table_offsets(spark, table) == end_offsets(visits)
    assert sorted(r.id for r in spark.table(scenario.table("plain")).collect()) == list(range(8))
    assert table_offsets(spark, scenario.table("plain")) == end_offsets(plain)


def test_json_records_with_new_fields_evolve_the_table_in_one_pass(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Batch 1's records add a column, a field of a struct column and of an array's structs, and
    carry an integer for a double column: the first job declines the table, the driver infers the
    batch's columns again, the table evolves, a second job writes it. The same table, row for row
    and column for column, as Spark's path makes of the same records; a record of a type that
    conflicts with a column (a string for a long) still goes Spark's way."""
    events, clash = scenario.topic("events"), scenario.topic("clash")
    create_topics(events, clash, partitions=1)
    first = [{"id": i, "x": i + 0.5, "user": {"name": f"u{i}"}, "items": [{"sku": "a"}]} for i in range(3)]
    produce(events, first)
    produce(clash, [{"id": i} for i in range(3)])
    sides = {"direct": True, "spark": False}

    def run(side: str) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": sides[side],
        }
        return timed_run(spark, scenario.config(**settings))

    assert [one_pass_alone(t, 1) for t in run("direct")] == [True]
    run("spark")
    later = [
        {"id": 3, "x": 4, "user": {"name": "u3", "age": 30}, "items": [{"sku": "b", "qty": 2}], "note": "n3"},
        {"id": 4, "x": 4.5, "user": {"name": "u4"}, "items": []},
    ]
    produce(events, later)
    produce(clash, [{"id": "three"}, {"id": 4, "more": True}])
    caplog.set_level(logging.INFO, logger="icesink")
    timings = run("direct")
    assert ["decode" in t.steps for t in timings] == [True], "clash's string id goes Spark's way"
    assert "1 of them again, evolved" in caplog.text, "events: a second one-pass job"
    assert f"table {scenario.namespace}_direct.{scenario.prefix}_events: evolved for its JSON" in caplog.text
    run("spark")

    table = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_events" for side in sides}
    assert spark.table(table["direct"]).dtypes == [
        ("id", "bigint"), ("items", "array<struct<sku:string,qty:bigint>>"), ("user", "struct<name:string,age:bigint>"),
        ("x", "double"), ("note", "string"),
    ]  # fmt: skip
    assert spark.table(table["direct"]).schema == spark.table(table["spark"]).schema
    assert rows(spark, table["direct"]) == rows(spark, table["spark"])
    assert sorted(r.id for r in spark.table(table["direct"]).collect()) == list(range(5)), "every record once"
    assert table_offsets(spark, table["direct"]) == end_offsets(events)
    clashed = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_clash" for side in sides}
    assert rows(spark, clashed["direct"]) == rows(spark, clashed["spark"])
    assert table_offsets(spark, clashed["direct"]) == end_offsets(clash)
