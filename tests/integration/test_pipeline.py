"""The JSON pipeline end to end against the local stack, in the test session's SparkSession."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import SERDE_CONF, create_topics, end_offsets, produce, registry_client
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.model import TopicPartition
from icesink.runtime.timings import BatchTimings
from tests.support.spark import snapshots
from tests.support.trino import trino_reachable, trino_rows


def run_job(spark: SparkSession, scenario: Scenario, **overrides: object) -> Job:
    job = Job(spark, scenario.config(**overrides))
    job.run()
    return job


def event(i: int, day: str) -> dict[str, object]:
    return {"id": i, "name": f"n{i}", "amount": i * 0.5, "nested": {"k": i % 3}, "day": day}


# A column of distinct strings far beyond the writer's 64 KB dictionary limit (2,000 x ~41 bytes in
# each file): its pages start dictionary-encoded and fall back to plain. Readers must see every value.
DISTINCT = 4_000


def distinct_value(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-{i * 7919:012x}/{'x' * (i % 9)}"


@pytest.fixture(scope="module")
def distinct_strings(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    scenario = Scenario.new(Path(tmp_path_factory.mktemp("distinct")))
    topic = scenario.topic("sessions")
    create_topics(topic, partitions=1)
    kinds = ("view", "cart", "purchase")
    produce(topic, [{"id": i, "session": distinct_value(i), "kind": kinds[i % 3]} for i in range(DISTINCT)])
    run_job(spark, scenario)
    return scenario.table("sessions")


def test_a_column_of_distinct_strings_past_the_dictionary_limit_reads_back_in_spark(
    spark: SparkSession, distinct_strings: str
) -> None:
    rows = spark.sql(f"SELECT id, session, kind FROM {distinct_strings}").collect()
    assert sorted((r.id, r.session, r.kind) for r in rows) == [
        (i, distinct_value(i), ("view", "cart", "purchase")[i % 3]) for i in range(DISTINCT)
    ]
    counts = [r.record_count for r in spark.sql(f"SELECT record_count FROM {distinct_strings}.files").collect()]
    # Each file's column chunk past the limit (values of 37 bytes and more; the one-pass job
    # writes a file per task).
    assert min(counts) * 37 > 64 * 1024, counts


@pytest.mark.trino
def test_a_column_of_distinct_strings_past_the_dictionary_limit_reads_back_in_trino(distinct_strings: str) -> None:
    if not trino_reachable():
        pytest.fail("Trino is not running: `dev/stack up --with-trino`", pytrace=False)
    _, namespace, name = distinct_strings.split(".")
    rows = trino_rows(f'SELECT id, session FROM iceberg."{namespace}"."{name}"')
    assert sorted(rows) == [(i, distinct_value(i)) for i in range(DISTINCT)]


def test_two_daily_topics_land_in_one_table(spark: SparkSession, scenario: Scenario) -> None:
    day1, day2 = scenario.topic("events.20240102"), scenario.topic("events_20240103")
    create_topics(day1, day2)
    produce(day1, [event(i, "d1") for i in range(300)])
    # The second day adds a field and writes `amount` as an integer: types unify to double.
    produce(day2, [{**event(i, "d2"), "amount": i, "extra": f"x{i}"} for i in range(300, 500)])

    run_job(spark, scenario)

    table = scenario.table("events")
    rows = spark.sql(f"SELECT id, name, amount, nested.k AS k, day, extra FROM {table}").collect()
    got = sorted((r.id, r.name, r.amount, r.k, r.day, r.extra) for r in rows)
    want = sorted(
        [(i, f"n{i}", i * 0.5, i % 3, "d1", None) for i in range(300)]
        + [(i, f"n{i}", float(i), i % 3, "d2", f"x{i}") for i in range(300, 500)]
    )
    assert got == want
    props = spark.sql(f"SHOW TBLPROPERTIES {table} ('format-version')").collect()
    assert props[0].value == "2"


def test_one_snapshot_per_batch_with_the_consumed_offsets(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("clicks.20240105")
    create_topics(topic)
    produce(topic, [{"id": i} for i in range(0, 90)], partition=0)
    produce(topic, [{"id": i} for i in range(90, 150)], partition=1)

    job = Job(spark, scenario.config(**{"kafka.max_offsets_per_trigger": 50}))
    timings: list[BatchTimings] = []
    job.handler.on_timings = timings.append
    job.run()

    snaps = snapshots(spark, scenario.table("clicks"))
    # Each batch's timings count its Spark jobs and catalog requests (at least: load, commit).
    assert len(timings) == len(snaps)
    assert all(t.spark_jobs and t.spark_jobs >= 1 for t in timings), [t.spark_jobs for t in timings]
    assert all(t.catalog_requests and t.catalog_requests >= 2 for t in timings), [t.catalog_requests for t in timings]
    # Once the table exists a batch is one pass: one Spark job (read, decode, write), and two
    # catalog requests (the commit's refresh and its commit): no load, the table is planned on as
    # the last commit's answer left it (catalog.keep_tables_s).
    later = timings[1:]
    assert [(t.spark_jobs, t.catalog_requests) for t in later] == [(1, 2)] * len(later)
    assert len(snaps) >= 3, "150 records at 50 per trigger take at least 3 batches"
    assert all(s["operation"] == "append" for s in snaps)
    batch_ids = [int(s["summary"][codec.BATCH_ID_KEY]) for s in snaps]
    assert batch_ids == sorted(set(batch_ids)), "one snapshot per batch, in batch order"
    assert {s["summary"][codec.QUERY_ID_KEY] for s in snaps} == {str(job._query.id)}  # type: ignore[union-attr]
    previous: dict[TopicPartition, int] = {}
    for s in snaps:
        offsets = codec.decode(s["summary"][codec.OFFSETS_KEY])
        advanced = sum(off - previous.get(tp, 0) for tp, off in offsets.items())
        assert advanced == int(s["summary"]["added-records"]), "each snapshot holds exactly its offset range"
        previous = offsets
    assert previous == end_offsets(topic)
    assert spark.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM {scenario.table('clicks')}").first() == (
        150,
        150,
    )


def test_deleted_checkpoint_restarts_from_earliest_without_duplicates(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("orders.20240107")
    create_topics(topic)
    produce(topic, [{"id": i} for i in range(100)])
    run_job(spark, scenario)
    table = scenario.table("orders")
    before = snapshots(spark, table)

    shutil.rmtree(scenario.checkpoint)
    run_job(spark, scenario)  # reads everything again from earliest
    assert snapshots(spark, table) == before, "a replay of committed offsets commits nothing"

    produce(topic, [{"id": i} for i in range(100, 130)])
    run_job(spark, scenario)
    counts = spark.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS d FROM {table}").first()
    assert counts == (130, 130)
    assert len(snapshots(spark, table)) == len(before) + 1


def test_confluent_framed_json_and_bad_values_as_dead_letters(spark: SparkSession, scenario: Scenario) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = scenario.topic("signups.20240108")
    create_topics(topic, partitions=1)
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "email": {"type": "string"}}}
    ser = JSONSerializer(json.dumps(schema), registry_client(), conf=SERDE_CONF)
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = [ser({"id": i, "email": f"u{i}@x.org"}, ctx) for i in range(5)]
    assert framed[0][0] == 0, "JSONSerializer frames values like Avro"
    stream = [framed[0], framed[1], b'{"id": "not a number"}', framed[2], b"[1, 2]", b"{broken", framed[3], framed[4]]
    produce(topic, stream)

    # Two records per batch: the first creates the table (id: bigint), later ones must fit it.
    run_job(spark, scenario, **{"kafka.max_offsets_per_trigger": 2})

    rows = spark.sql(f"SELECT id, email FROM {scenario.table('signups')}").collect()
    assert sorted((r.id, r.email) for r in rows) == [(i, f"u{i}@x.org") for i in range(5)]
    letters = spark.sql(
        f"SELECT offset, stage, error_class, value FROM icesink.{scenario.namespace}.dead_letters"
    ).collect()
    assert {r.offset: (r.stage, r.error_class) for r in letters} == {
        2: ("convert", "TypeMismatch"),
        4: ("decode", "JsonTypeError"),
        5: ("decode", "JsonParseError"),
    }
    assert all(r.value == stream[r.offset] for r in letters)
