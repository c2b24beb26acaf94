"""Schema evolution while the job runs: new columns (nested too), type widening, policies, and
case-insensitive and flattened column matching."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import Scenario
from icesink.errors import SchemaConflictError
from icesink.job.query import Job
from tests.support.spark import snapshots, table_exists
from tests.support.values import avro_config, avro_values
from tests.support.wait import wait_until


def record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "it.evolution", "fields": fields}


USER_V1 = record("User", [{"name": "name", "type": "string"}])
USER_V2 = record(
    "User", [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}]
)
V1 = record("Visit", [{"name": "id", "type": "int"}, {"name": "n", "type": "int"}, {"name": "user", "type": USER_V1}])
V2 = record(
    "Visit",
    [
        {"name": "id", "type": "int"},
        {"name": "n", "type": "int"},
        {"name": "user", "type": USER_V2},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
)
V3 = record(
    "Visit",
    [
        {"name": "id", "type": "int"},
        {"name": "n", "type": "long"},
        {"name": "user", "type": USER_V2},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
)


def columns(spark: SparkSession, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}


@pytest.mark.slow
def test_avro_v1_v2_v3_across_daily_topics_while_the_job_runs(spark: SparkSession, scenario: Scenario) -> None:
    days = [scenario.topic(f"visits.2024010{d}") for d in (1, 2, 3)]
    create_topics(days[0], partitions=1)
    produce(days[0], avro_values(days[0], V1, [{"id": i, "n": i, "user": {"name": f"u{i}"}} for i in range(5)]))
    config = scenario.config(
        **avro_config(scenario),
        **{
            "job.trigger.mode": "processing-time",
            "job.trigger.interval": "2 seconds",
            "kafka.metadata_max_age_ms": 2000,
        },
    )
    table = scenario.table("visits")
    query = Job(spark, config).start()
    try:

        def rows() -> int:
            if not table_exists(spark, table):
                return 0
            try:
                return int(spark.sql(f"SELECT count(*) FROM {table}").first()[0])
            except AnalysisException as e:
                # The job evolved the table between this query's analysis and its run (its commits
                # update the table object this session reads too): not there yet, ask again.
                if "INCOMPATIBLE_TABLE_CHANGE_AFTER_ANALYSIS" in str(e):
                    return -1
                raise

        wait_until(lambda: rows() == 5, 180, "v1 rows")
        assert columns(spark, table) == {"id": "int", "n": "int", "user": "struct<name:string>"}

        # A new daily topic appears while the job runs, with a new top-level and a new nested field.
        create_topics(days[1], partitions=1)
        v2 = [{"id": i, "n": i, "user": {"name": f"u{i}", "age": 30 + i}, "note": f"n{i}"} for i in range(5, 10)]
        produce(days[1], avro_values(days[1], V2, v2))
        wait_until(lambda: rows() == 10, 180, "v2 rows from the new daily topic")
        assert columns(spark, table) == {
            "id": "int",
            "n": "int",
            "user": "struct<name:string,age:int>",
            "note": "string",
        }

        # int -> long.
        create_topics(days[2], partitions=1)
        big = 2**40
        produce(
            days[2],
            avro_values(days[2], V3, [{"id": 10, "n": big, "user": {"name": "u10", "age": None}, "note": None}]),
        )
        wait_until(lambda: rows() == 11, 180, "v3 rows")
    finally:
        query.stop()

    assert columns(spark, table)["n"] == "bigint"
    got = spark.sql(f"SELECT id, n, user.name AS name, user.age AS age, note FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [
        *[(i, i, f"u{i}", None, None) for i in range(5)],
        *[(i, i, f"u{i}", 30 + i, f"n{i}") for i in range(5, 10)],
        (10, 2**40, "u10", None, None),
    ]
    ops = [s["operation"] for s in snapshots(spark, table)]
    assert ops == ["append"] * len(ops), "schema changes are metadata commits, never extra data snapshots"


def test_json_gaining_fields_and_the_incompatible_change_policies(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("signups")
    create_topics(topic, partitions=1)
    table = scenario.table("signups")
    produce(topic, [{"id": 1, "plan": "free", "profile": {"city": "Oslo"}}])
    Job(spark, scenario.config()).run()
    produce(
        topic,
        [{"id": 2, "plan": "pro", "profile": {"city": "Lima", "zip": "15001"}, "tags": {"a": 1}, "dropped": None}],
    )
    Job(spark, scenario.config()).run()

    assert columns(spark, table) == {
        "id": "bigint",
        "plan": "string",
        "profile": "struct<city:string,zip:string>",
        "tags": "struct<a:bigint>",
    }, "a field null in every record of a batch is not a column yet"
    got = spark.sql(f"SELECT id, plan, profile.city, profile.zip, tags.a FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(1, "free", "Oslo", None, None), (2, "pro", "Lima", "15001", 1)]

    # A string where the table has bigint: the fail policy names table, column and both types.
    produce(topic, [{"id": "three", "plan": "pro"}])
    before = len(snapshots(spark, table))
    job = Job(spark, scenario.config(**{"tables.on_incompatible": "fail"}))
    with pytest.raises(StreamingQueryException):
        job.run()
    error = job.handler.failure
    assert isinstance(error, SchemaConflictError), repr(error)
    assert f"table {scenario.namespace}.{scenario.prefix}_signups" in str(error)
    assert "column id is bigint in the table, string in the record" in str(error)
    assert len(snapshots(spark, table)) == before, "nothing committed"

    # The dead-letter policy (the default) diverts the record and goes on.
    produce(topic, [{"id": 4, "plan": "team"}])
    Job(spark, scenario.config()).run()
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == [1, 2, 4]
    letters = spark.sql(f"SELECT offset, stage, error_class FROM icesink.{scenario.namespace}.dead_letters").collect()
    assert [(r.offset, r.stage, r.error_class) for r in letters] == [(2, "convert", "TypeMismatch")]
    assert columns(spark, table)["id"] == "bigint", "the table's type stays"


def test_case_insensitive_and_flattened_columns(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("devices")
    create_topics(topic, partitions=1)
    table = scenario.table("devices")
    options = {"tables.flatten_separator": "_", "tables.case_insensitive": True}
    produce(topic, [{"Id": 1, "Meta": {"OS": "linux", "cpu": {"cores": 4}}}])
    Job(spark, scenario.config(**options)).run()
    produce(topic, [{"ID": 2, "meta": {"os": "mac", "cpu": {"cores": 8, "arch": "arm"}}, "extra": True}])
    Job(spark, scenario.config(**options)).run()

    assert columns(spark, table) == {
        "Id": "bigint",
        "Meta_OS": "string",
        "Meta_cpu_cores": "bigint",
        "meta_cpu_arch": "string",
        "extra": "boolean",
    }
    got = spark.sql(f"SELECT Id, Meta_OS, Meta_cpu_cores, meta_cpu_arch, extra FROM {table} ORDER BY Id").collect()
    assert [tuple(r) for r in got] == [(1, "linux", 4, None, None), (2, "mac", 8, "arm", True)]

    # A batch where cores is a number in one record and text in another: the batch's type (string)
    # conflicts with the flat column's (bigint). What converts is written, the rest is a dead letter.
    produce(topic, [{"Id": 3, "Meta": {"cpu": {"cores": 16}}}, {"Id": 4, "Meta": {"cpu": {"cores": "many"}}}])
    Job(spark, scenario.config(**options)).run()
    got = spark.sql(f"SELECT Id, Meta_cpu_cores FROM {table} WHERE Id > 2").collect()
    assert [tuple(r) for r in got] == [(3, 16)]
    letters = spark.sql(
        f"SELECT offset, stage, error_class, error_message FROM icesink.{scenario.namespace}.dead_letters "
        f"WHERE topic = '{topic}'"
    ).collect()
    assert [tuple(r) for r in letters] == [
        (3, "convert", "IncompatibleType", "field Meta.cpu.cores is string, column Meta_cpu_cores is bigint")
    ]
