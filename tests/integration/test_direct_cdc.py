"""Changelog tables of Avro records written in one pass (batch/direct.py, tasks/change_rows.py):
each task reduces the changes of the topic-partitions it reads to the last per key and writes
equality deletes and rows. The same table as Spark's path across batches and a replay; a key whose
changes are in two tasks' topic-partitions has its table written again in one task; changes that
cannot be applied still become dead letters; a crash replays once."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.batch import write
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.tables import IcebergCatalog
from icesink.job.query import Job
from icesink.model import TableRef
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.debezium import plain_json_changes
from tests.support.jobs import timed_run
from tests.support.spark import dead_letters, letters, partitions, rows, snapshots, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import avro_config, avro_values, table_state

pytestmark = [pytest.mark.slow]

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Account",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "v", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "op", "type": "string"},
    ],
}


def avro_changes(topic: str, changes: list[Change]) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, partition) of each change: keyed by its id, an Avro value with its operation."""
    items = [{"id": c.key, "v": c.seq, "name": f"k{c.key}-{c.seq}", "op": c.op} for c in changes]
    values = avro_values(topic, SCHEMA, items)
    return [(str(c.key).encode(), v, c.partition) for c, v in zip(changes, values, strict=True)]


def changelog(scenario: Scenario, **overrides: Any) -> dict[str, Any]:
    return avro_config(
        scenario,
        **{
            "decode.operation_column": "op",
            "tables.mode": "changelog",
            "tables.key_columns": ["id"],
            **overrides,
        },
    )


def run_job(spark: SparkSession, scenario: Scenario, **overrides: Any) -> list[BatchTimings]:
    return timed_run(spark, scenario.config(**changelog(scenario, **overrides)))


def both_sides_equal(
    spark: SparkSession, timings: dict[str, list[BatchTimings]], tables: dict[str, str], expected: dict[int, int],
    topic: str,
) -> None:  # fmt: skip
    """Three batches of changes written in one pass (side direct) and through Spark's path (side
    spark): every direct batch took the one-pass job, no spark one did; both tables equal the
    oracle, hold the topic's end offsets, and equal each other row for row, in schema and in the
    partition each row is filed in."""
    assert ["direct" in t.steps for t in timings["direct"]] == [True] * 3, "every batch in one pass, batch 0 too"
    assert ["direct" in t.steps for t in timings["spark"]] == [False] * 3
    for table in tables.values():
        state, count = table_state(spark, table)
        assert count == len(state), "no key twice"
        assert state == expected
        assert table_offsets(spark, table) == end_offsets(topic)
    assert rows(spark, tables["direct"]) == rows(spark, tables["spark"])
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
    assert partitions(spark, tables["direct"]) == partitions(spark, tables["spark"]), "filed as Spark's path does"


@pytest.mark.parametrize(
    "partition_by",
    [pytest.param([], id="unpartitioned"), pytest.param(["bucket(4, id)"], id="bucket", marks=pytest.mark.trino)],
)
def test_one_pass_changes_match_sparks_path_across_batches_and_a_replay(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, partition_by: list[str]
) -> None:
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=3)
    changes = list(random_changes(6_000, 600, 3, seed=21, tombstones=False))
    produce_keyed(topic, avro_changes(topic, changes))
    sides = {"direct": True, "spark": False}

    def run(side: str, **more: Any) -> list[BatchTimings]:
        return run_job(
            spark,
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "kafka.max_offsets_per_trigger": 2_500,
                "tables.partition_by": partition_by,
                **more,
            },
        )

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_accounts" for side in sides}
    both_sides_equal(spark, {side: run(side) for side in sides}, tables, oracle(changes), topic)
    if partition_by:
        assert len({p for _, p in partitions(spark, tables["direct"])}) == 4
        deletes = spark.sql(
            f"SELECT DISTINCT partition FROM {tables['direct']}.delete_files WHERE content = 2"
        ).collect()
        assert len(deletes) == 4, "equality deletes per partition"
        read = trino_rows(f'SELECT id, v FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_accounts"')
        assert len(read) == len(dict(read)), "no key twice, through Trino"
        assert dict(read) == oracle(changes), "Trino reads the partitioned one-pass table as Spark does"
    snaps = snapshots(spark, tables["direct"])
    assert len(snaps) == 3, "one snapshot per batch"
    assert {s["operation"] for s in snaps} == {"overwrite"}, "RowDelta commits"
    assert all(int(s["summary"]["added-equality-deletes"]) > 0 for s in snaps)
    catalog = IcebergCatalog(spark, CATALOG)
    table = catalog.load(TableRef(f"{scenario.namespace}_direct", f"{scenario.prefix}_accounts"))
    assert catalog.identifier_columns(table) == ["id"], "created with its key, as Spark's path creates it"

    # A new checkpoint from the earliest offsets: the job writes only what the table lacks.
    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(900, 600, 3, seed=22)]
    more = [c for c in more if c.op != "T"]
    produce_keyed(topic, avro_changes(topic, more))
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "replay"), "kafka.starting_offsets": "earliest"})
    assert ["direct" in t.steps for t in again] == [False, False, True], "batches the table holds are skipped"
    state, count = table_state(spark, tables["direct"])
    assert count == len(state), "no key twice"
    assert state == oracle(changes + more), "each change applied once"
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)


def test_json_changes_in_one_pass_match_sparks_path_and_a_replay(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """A JSON changelog table keyed from the value, partitioned by bucket(3, id), new in batch 0:
    written in one pass (each task the last change per key of its topic-partitions, the records'
    coordinates carried through the JSON decoder) and through Spark's path, equal to each other and
    to the oracle; records that are not JSON objects among them are the same dead letters on both
    sides, and the table stays on the one path; a replay from the earliest offsets applies only
    what the table lacks."""
    topic = scenario.topic("wallets")
    create_topics(topic, partitions=3)
    changes = list(random_changes(3_000, 300, 3, seed=31, tombstones=False))
    half = len(changes) // 2
    produce_keyed(topic, [(None, c.kafka_value(), c.partition) for c in changes[:half]])
    produce_keyed(topic, [(None, b"not json", 0), (None, b"[1, 2]", 1), (None, b"", 2), (None, b"42", 0)])
    produce_keyed(topic, [(None, c.kafka_value(), c.partition) for c in changes[half:]])
    sides = {"direct": True, "spark": False}

    def run(side: str, **more: Any) -> list[BatchTimings]:
        job = Job(
            spark,
            scenario.config(
                **{
                    "tables.namespace": f"{scenario.namespace}_{side}",
                    "job.checkpoint_location": str(tmp_path / side),
                    "decode.direct_json": sides[side],
                    "decode.operation_column": "op",
                    "tables.mode": "changelog",
                    "tables.key_columns": ["id"],
                    "tables.partition_by": ["bucket(3, id)"],
                    "kafka.max_offsets_per_trigger": 1_200,
                    **more,
                }
            ),
        )
        seen: list[BatchTimings] = []
        job.handler.on_timings = seen.append
        job.run()
        return seen

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_wallets" for side in sides}
    timings = {side: run(side) for side in sides}
    both_sides_equal(spark, timings, tables, oracle(changes), topic)
    assert all(one_pass(t) for t in timings["direct"]), "the bad records did not send the table Spark's way"
    found = {side: letters(spark, f"{scenario.namespace}_{side}") for side in sides}
    assert found["direct"] == found["spark"]
    assert sorted(r[2] for r in found["direct"]) == ["EmptyValue", "JsonParseError", "JsonTypeError", "JsonTypeError"]
    assert {s["operation"] for s in snapshots(spark, tables["direct"])} == {"overwrite"}, "RowDelta commits"

    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(600, 300, 3, seed=32)]
    more = [c for c in more if c.op != "T"]
    produce_keyed(topic, [(None, c.kafka_value(), c.partition) for c in more])
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "replay"), "kafka.starting_offsets": "earliest"})
    assert [t.records > 0 and "direct" in t.steps for t in again][-1], "the new changes in one pass"
    state, count = table_state(spark, tables["direct"])
    assert count == len(state), "no key twice"
    assert state == oracle(changes + more), "each change applied once"
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)


def one_pass(t: BatchTimings) -> bool:
    """Whether the one-pass job wrote the whole batch (no table declined to Spark's decode)."""
    return "direct" in t.steps and "decode" not in t.steps


def plain_event(op: str | None, before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
    source = {"version": "3.6.1.Final", "connector": "postgresql", "lsn": 1, "ts_ms": 1_700_000_000_000}
    event = {"before": before, "after": after, "source": source, "ts_ms": 1_700_000_000_001}
    return json.dumps(event if op is None else {**event, "op": op}).encode()


# Events Spark's path makes dead letters of: a truncate, an insert without `op`, an update without its image.
BAD_EVENTS = [
    (b'{"id": 9}', plain_event("t", None, None), 0),
    (b'{"id": 10}', plain_event(None, None, {"id": 10, "v": 1, "name": "x"}), 0),
    (b'{"id": 11}', plain_event("u", {"id": 11, "v": 1, "name": "y"}, None), 0),
]


def plain_debezium(**overrides: Any) -> dict[str, Any]:
    """The seed's pipeline with the JsonConverter's schemas off: Debezium envelopes and record keys
    in plain JSON (tests/support/debezium.plain_json_changes)."""
    return {
        "decode.envelope": "debezium",
        "decode.key_format": "json",
        "decode.source_columns": ["lsn"],
        "tables.mode": "changelog",
        "tables.partition_by": ["bucket(4, id)"],
        **overrides,
    }


def test_debezium_json_without_schemas_in_one_pass_matches_sparks_path_and_a_replay(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Plain JSON change events keyed by `{"id": ...}`, on one partition as Debezium writes a
    table's (the lsn order then holds across batches), every batch written in one pass: batch 0
    creates the table with the columns Spark infers from a sample of its events and keys (staged,
    created once its files are written), then the image, `_op`, `_source_lsn` and the key's
    struct, tombstones deleting their key; equal to Spark's path's twin (schema, rows, the
    partition of each row) and to the oracle; a run from a lost checkpoint applies only what the
    table lacks."""
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=1)
    changes = list(random_changes(1_000, 300, 1, seed=41))
    events = plain_json_changes(changes)
    # Dead letters, on the one path: not JSON, not an object, and events Spark's path makes dead
    # letters of (an op Debezium does not write, no op, an update without its image).
    events[500:500] = [(b'{"id": 7}', b"not json", 0), (b'{"id": 8}', b"[1]", 0), *BAD_EVENTS]
    produce_keyed(topic, events)
    sides = {"direct": True, "spark": False}

    def run(side: str, **more: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": sides[side],
            "kafka.max_offsets_per_trigger": 360,
            "tables.order_by": "_source_lsn",
        }
        return timed_run(spark, scenario.config(**plain_debezium(**{**settings, **more})))

    timings = {side: run(side) for side in sides}
    assert [one_pass(t) for t in timings["direct"]] == [True, True, True], "no decode step, batch 0's neither"
    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_accounts" for side in sides}
    both_sides_equal(spark, timings, tables, oracle(changes), topic)
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in sides}
    assert found["direct"] == found["spark"], "the same dead letters, in the same words"
    assert [(r[-2], r[-1]) for r in found["direct"]] == [
        ("JsonParseError", "not valid JSON"), ("JsonTypeError", "a JSON value that is not an object"),
        ("DebeziumEnvelopeError", "unknown op t"), ("DebeziumEnvelopeError", "no op in the change event"),
        ("DebeziumEnvelopeError", "op u without its row image"),
    ]  # fmt: skip

    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(300, 300, 1, seed=42)]
    produce_keyed(topic, plain_json_changes(more))
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "lost")})
    # From the offsets the tables hold, the dead-letter table's among them (its letters' batch: an
    # earlier one), so the run may take a batch the table already holds first.
    assert again
    assert all(one_pass(t) for t in again), "the new changes in one pass"
    state, count = table_state(spark, tables["direct"])
    assert count == len(state), "no key twice"
    assert state == oracle(changes + more), "each change applied once"
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)
    assert dead_letters(spark, f"{scenario.namespace}_direct") == found["direct"], "each dead letter once"

    # A batch of a truncate alone: a dead letter of the one-pass job, the table unchanged (Spark's
    # path fails such a batch: its events give no image to infer).
    produce_keyed(topic, BAD_EVENTS[:1])
    last = run("direct", **{"job.checkpoint_location": str(tmp_path / "lost")})
    assert [one_pass(t) for t in last] == [True]
    assert table_state(spark, tables["direct"])[0] == oracle(changes + more)
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)
    added = sorted(set(dead_letters(spark, f"{scenario.namespace}_direct")) - set(found["direct"]))
    assert [(r[2], r[-1]) for r in added] == [(max(end_offsets(topic).values()) - 1, "unknown op t")]


# SCHEMA with the time of each change, as a table ordered by a timestamp column (`updated_at`) has it.
TIMED: dict[str, Any] = {
    **SCHEMA,
    "name": "TimedAccount",
    "fields": [*SCHEMA["fields"], {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}],
}
AT0 = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def timed_changes(topic: str, changes: list[Change], at: dt.datetime | None = None) -> list[tuple[bytes, bytes, int]]:
    """`avro_changes` with each change's time: AT0 plus its seq in milliseconds, or `at`."""
    items = [
        {
            "id": c.key,
            "v": c.seq,
            "name": f"k{c.key}-{c.seq}",
            "op": c.op,
            "at": at or AT0 + dt.timedelta(milliseconds=c.seq),
        }
        for c in changes
    ]
    values = avro_values(topic, TIMED, items)
    return [(str(c.key).encode(), v, c.partition) for c, v in zip(changes, values, strict=True)]


def test_changes_ordered_by_a_timestamp_in_one_pass_across_batches(spark: SparkSession, scenario: Scenario) -> None:
    """`order_by` a timestamp column: each batch's changes against the table's greatest time (read
    once as microseconds, then carried from the job's own commits), in one pass while none is older
    (the same table as Spark's path's for integer order values: test_debezium.py); a change older
    than the row the table holds for its key is dropped (the row does not move back) by a second
    round against the rows the table holds (batch/direct_held.py), in one pass too."""
    topic = scenario.topic("timed")
    create_topics(topic, partitions=1)
    changes = list(random_changes(1_500, 200, 1, seed=61, tombstones=False))
    produce_keyed(topic, timed_changes(topic, changes))

    def run() -> list[BatchTimings]:
        return run_job(spark, scenario, **{"kafka.max_offsets_per_trigger": 500, "tables.order_by": "at"})

    table = scenario.table("timed")
    assert ["direct" in t.steps and "decode" not in t.steps for t in run()] == [True] * 3, "batches 1, 2 by the bound"
    state, count = table_state(spark, table)
    assert count == len(state), "no key twice"
    assert state == oracle(changes)

    held = sorted(oracle(changes))[0]
    stale = Change(held, "U", 99_999, 0)  # the newest v, at the oldest time: older than the table's row
    produce_keyed(topic, timed_changes(topic, [stale], at=AT0 - dt.timedelta(days=1)))
    stale_batch = run()
    assert ["direct" in t.steps and "decode" not in t.steps for t in stale_batch] == [True], "in one pass, held apart"
    newer = [Change(c.key, c.op, c.seq + 10_000, 0) for c in random_changes(300, 200, 1, seed=62, tombstones=False)]
    produce_keyed(topic, timed_changes(topic, newer))
    assert ["direct" in t.steps and "decode" not in t.steps for t in run()] == [True], "one pass again"
    state, count = table_state(spark, table)
    assert count == len(state), "no key twice"
    assert state == oracle(changes + newer), "the stale change dropped, every other applied once"
    assert table_offsets(spark, table) == end_offsets(topic)


def test_changes_older_than_the_tables_greatest_order_in_one_pass_and_a_crash_before_their_commit(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """`order_by` an integer column across batches: a batch whose changes reach below the greatest
    v the table holds is written again in one pass against the rows the table holds above its
    oldest change (batch/direct_held.py), as Spark's path's join would: a change or delete older
    than its key's row is dropped, one newer than its key's row (older than other keys') applies,
    a new key's is inserted. Killed once that second round's files are written, before anything of
    the batch is committed (one-pass-again): the restart writes the batch once, in one pass."""
    topic = scenario.topic("ordered")
    create_topics(topic, partitions=1)
    changes = list(random_changes(1_200, 120, 1, seed=71, tombstones=False))
    produce_keyed(topic, avro_changes(topic, changes))
    settings = {"kafka.max_offsets_per_trigger": 600, "tables.order_by": "v"}
    table = scenario.table("ordered")
    assert ["direct" in t.steps and "decode" not in t.steps for t in run_job(spark, scenario, **settings)] == [True] * 2
    held = oracle(changes)
    assert table_state(spark, table)[0] == held

    top = max(c.seq for c in changes)
    newer = [Change(c.key, c.op, c.seq + 10_000, 0) for c in random_changes(100, 120, 1, seed=72, tombstones=False)]
    # Keys the newer changes leave alone, so that what the older ones do shows.
    by_age = sorted(set(held) - {c.key for c in newer}, key=held.__getitem__)
    young, old, old_deleted, young_deleted = by_age[-1], by_age[0], by_age[1], by_age[-2]
    assert held[old_deleted] + 1 < top - 1, "room below the table's greatest v"
    assert held[young_deleted] > held[old] + 1, "the oldest change is older than the rows of two keys"
    crafted = [
        Change(young, "U", held[young] - 1, 0),  # older than its row: dropped
        Change(young_deleted, "D", held[young_deleted] - 1, 0),  # an older delete: dropped
        Change(old, "U", held[old] + 1, 0),  # newer than its row, older than the greatest v: applied
        Change(old_deleted, "D", top - 1, 0),  # a delete newer than its row: applied
        Change(10_000, "I", 5, 0),  # a key the table lacks, at the oldest v: inserted
    ]
    produce_keyed(topic, avro_changes(topic, crafted + newer))
    expected = {**held, old: held[old] + 1, 10_000: 5}
    del expected[old_deleted]
    expected = oracle([Change(k, "I", v, 0) for k, v in expected.items()] + newer)

    config = scenario.write_config(tmp_path / "job.yaml", **changelog(scenario, **settings))
    crashed = run_cli(config, env={faults.ENV: "one-pass-again:2"})
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "writes it again against the" in crashed.stderr, "the second round ran before the kill"
    assert len(snapshots(spark, table)) == 2, "nothing of batch 2 committed"
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    timed = re.findall(r"batch 2 timings: (.*)", resumed.stderr)
    assert len(timed) == 1, resumed.stderr[-3000:]
    assert "direct" in timed[0], "in one pass"
    assert "decode" not in timed[0], "no Spark decode"
    assert "Spark's decoder" not in resumed.stderr
    state, count = table_state(spark, table)
    assert count == len(state), "no key twice"
    assert state == expected, "the older changes dropped, the others applied once"
    assert len(snapshots(spark, table)) == 3, "one snapshot for the batch"
    assert table_offsets(spark, table) == end_offsets(topic)


VALUE_ONLY: dict[str, Any] = {**SCHEMA, "name": "Balance", "fields": [f for f in SCHEMA["fields"] if f["name"] != "id"]}


@pytest.mark.parametrize("value_format", ["avro", "json"])
def test_string_keys_and_tombstones_in_one_pass_match_sparks_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, value_format: str
) -> None:
    """Changes keyed by the record key only (`decode.key_format: string`, the key column `_key`),
    deletes as tombstones (a null value), into a table partitioned by bucket(3, _key): written in
    one pass (the tasks read the keys, a tombstone a delete of its key) and through Spark's path,
    equal to each other and to the oracle, also after a replay from the earliest offsets."""
    topic = scenario.topic("balances")
    create_topics(topic, partitions=3)
    changes = list(random_changes(3_000, 300, 3, seed=41))
    assert {"T", "D"} <= {c.op for c in changes}

    def produced(batch: list[Change]) -> None:
        items = [{"v": c.seq, "name": f"k{c.key}-{c.seq}", "op": c.op} for c in batch]
        if value_format == "avro":
            values: list[bytes | None] = list(avro_values(topic, VALUE_ONLY, items))
        else:
            values = [json.dumps(item).encode() for item in items]
        produce_keyed(
            topic,
            [
                (str(c.key).encode(), None if c.op == "T" else v, c.partition)
                for c, v in zip(batch, values, strict=True)
            ],
        )

    produced(changes)
    sides = {"direct": True, "spark": False}

    def run(side: str, **more: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            f"decode.direct_{value_format}": sides[side],
            "decode.key_format": "string",
            "decode.operation_column": "op",
            "tables.mode": "changelog",
            "tables.partition_by": ["bucket(3, _key)"],
            "kafka.max_offsets_per_trigger": 1_200,
            **more,
        }
        return timed_run(
            spark, scenario.config(**(avro_config(scenario, **settings) if value_format == "avro" else settings))
        )

    def state(table: str) -> dict[int, int]:
        spark.sql(f"REFRESH TABLE {table}")
        found = spark.sql(f"SELECT _key, v FROM {table}").collect()
        assert len(found) == len({r._key for r in found}), "no key twice"
        return {int(r._key): r.v for r in found}

    def filed(table: str) -> list[tuple[str, str]]:
        return sorted((r._key, str(r.p)) for r in spark.sql(f"SELECT _key, _partition AS p FROM {table}").collect())

    timings = {side: run(side) for side in sides}
    assert ["direct" in t.steps for t in timings["direct"]] == [True] * 3, "every batch in one pass, batch 0 too"
    assert ["direct" in t.steps for t in timings["spark"]] == [False] * 3
    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_balances" for side in sides}
    for table in tables.values():
        assert state(table) == oracle(changes)
        assert table_offsets(spark, table) == end_offsets(topic)
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
    assert filed(tables["direct"]) == filed(tables["spark"]), "filed as Spark's path files them"
    catalog = IcebergCatalog(spark, CATALOG)
    made = catalog.load(TableRef(f"{scenario.namespace}_direct", f"{scenario.prefix}_balances"))
    assert catalog.identifier_columns(made) == ["_key"], "keyed by the record key, as Spark's path creates it"

    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(600, 300, 3, seed=42)]
    produced(more)
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "replay"), "kafka.starting_offsets": "earliest"})
    assert "direct" in again[-1].steps, "the new changes in one pass"
    assert state(tables["direct"]) == oracle(changes + more), "each change applied once"
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)


def test_a_key_with_changes_in_two_tasks_partitions_is_written_by_one_task_a_bad_change_is_a_dead_letter(
    spark: SparkSession, scenario: Scenario, caplog: pytest.LogCaptureFixture, every_core: None, tmp_path: Path
) -> None:
    """Key 1 changes in partition 0 and again in partition 1, which the other task reads: each task
    alone would keep a row for it, so a second one-pass job writes the table in one task (no Spark
    decode job). And a topic with a change of an unknown operation: the one-pass job makes it the
    dead letter Spark's path makes, its table staying on the one-pass path. A lost checkpoint then
    adds nothing."""
    split, bad = scenario.topic("split"), scenario.topic("bad")
    create_topics(split, bad, partitions=2)
    ones = [Change(1, "I", 0, 0), Change(1, "U", 1, 1)]
    filler = [Change(k, "I", k, k % 2) for k in range(10, 30)]
    produce_keyed(split, avro_changes(split, filler[:10] + ones + filler[10:]))
    good = [Change(k, "I", k, k % 2) for k in range(10)]
    unknown = [{"id": 99, "v": 1, "name": "x", "op": "X"}]
    produce_keyed(bad, avro_changes(bad, good))
    produce_keyed(bad, [(b"99", avro_values(bad, SCHEMA, unknown)[0], 0)])
    caplog.set_level(logging.INFO, logger="icesink.batch")

    timings = run_job(spark, scenario, **{"job.checkpoint_location": str(tmp_path / "first")})
    assert [("direct" in t.steps, "decode" in t.steps) for t in timings] == [(True, False)], "no Spark decode job"
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "its records go through Spark's decoder" in m], said
    [again] = [m for m in said if "writes them again, in one task" in m]
    # The message's list of tables, compared whole: the names carry a random hex tag that may spell "bad".
    assert f"({scenario.namespace}.{scenario.topic('split')})" in again, again
    state, count = table_state(spark, scenario.table("split"))
    assert count == len(state), "key 1 once"
    assert state == oracle(filler + ones)
    assert state[1] == 1, "partition 1's change is key 1's last"
    assert table_state(spark, scenario.table("bad"))[0] == oracle(good)
    dead = letters(spark, scenario.namespace)
    assert [(t, o) for t, o, _ in dead] == [(bad, 5)], dead
    [letter] = spark.sql(
        f"SELECT stage, error_class, error_message FROM {CATALOG}.{scenario.namespace}.dead_letters"
    ).collect()
    assert tuple(letter) == ("change", "UnknownOperation", "operation column op holds 'X', not I, U or D")

    before = {name: len(snapshots(spark, scenario.table(name))) for name in ("split", "bad")}
    run_job(spark, scenario, **{"job.checkpoint_location": str(tmp_path / "lost")})
    assert {name: len(snapshots(spark, scenario.table(name))) for name in ("split", "bad")} == before
    assert table_state(spark, scenario.table("split")) == (state, len(state)), "nothing read again"


@pytest.mark.parametrize("capped", [True, False])
def test_more_changes_than_the_tasks_would_hold(
    capped: bool, spark: SparkSession, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task holds every change it reads (CHANGES_PER_TASK per core, 2 cores, here 10 per core):
    a batch with more, which only a job's own cap above that lets in, is shuffled by key instead;
    without a cap of its own, the job reads no more than that a batch, every batch in one pass."""
    monkeypatch.setattr(write, "CHANGES_PER_TASK", 10)
    topic = scenario.topic("many")
    create_topics(topic, partitions=2)
    changes = list(random_changes(30, 12, 2, seed=5, tombstones=False))
    produce_keyed(topic, avro_changes(topic, changes))
    timings = run_job(spark, scenario, **({"kafka.max_offsets_per_trigger": 1_000} if capped else {}))
    if capped:
        assert ["direct" in t.steps for t in timings] == [False]
    else:
        assert len(timings) >= 2
        assert all(t.records <= 20 for t in timings), [t.records for t in timings]
        assert all("direct" in t.steps for t in timings)
    state, count = table_state(spark, scenario.table("many"))
    assert count == len(state)
    assert state == oracle(changes)


@pytest.mark.faults
@pytest.mark.parametrize(
    ("point", "shape"), [("executor-write", "debezium-json"), ("executor-write", "json"), ("after-commit", "plain")]
)
def test_a_crash_around_the_one_pass_changes_replays_without_doubling_or_losing(
    point: str, shape: str, spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Killed while a task has written its reduced changes and nothing of batch 1 is committed
    (executor-write), or after batch 1's RowDelta committed and before Spark's commit log
    (after-commit): the restart applies every change once. A partitioned table, as users run them;
    its changes as Debezium events in plain JSON at one point (batch 0 creates the table through
    Spark's path, batch 1 is the first in one pass), as Avro rows with an operation column at the
    other (what the tasks decode differs; the files and the commit after them are the same; Avro
    Debezium events in one pass: test_direct_debezium.py), and at the first as plain JSON rows with
    an operation column too (each batch of the task's records parsed whole: tasks/decode_json.py).
    The Debezium events come with a second source table's, as a capture of a database writes
    them (a topic per table, one job): each topic's batches parsed whole apart
    (tasks/json_batches.py, tasks/plain_changes.py)."""
    topic = scenario.topic("ledger")
    orders = [scenario.topic("orders")] if shape == "debezium-json" else []
    create_topics(topic, *orders, partitions=3)
    # Debezium's deletes are followed by tombstones (T); the other shapes have no record keys to delete by.
    changes = [c for c in random_changes(3_000, 300, 3, seed=11) if shape == "debezium-json" or c.op != "T"]
    ordered = list(random_changes(600, 100, 3, seed=13))
    for other in orders:
        produce_keyed(other, plain_json_changes(ordered))

    def encode(changes: list[Change]) -> list[tuple[bytes | None, bytes | None, int]]:
        if shape == "json":
            return [(None, c.kafka_value(), c.partition) for c in changes]
        return plain_json_changes(changes) if shape == "debezium-json" else avro_changes(topic, changes)

    produce_keyed(topic, encode(changes))
    settings = {"kafka.max_offsets_per_trigger": 1_200, "tables.partition_by": ["bucket(4, id)"]}
    json_rows = {"decode.operation_column": "op", "tables.mode": "changelog", "tables.key_columns": ["id"]}
    configs = {
        "debezium-json": plain_debezium(**settings),
        "json": {**json_rows, **settings},
        "plain": changelog(scenario, **settings),
    }
    config = scenario.write_config(tmp_path / "job.yaml", **configs[shape])
    table = scenario.table("ledger")

    crashed = run_cli(config, env={faults.ENV: f"{point}:1"})
    if point == "executor-write":
        assert crashed.returncode == 1, crashed.stderr[-3000:]
        assert "in one pass failed" in crashed.stderr
        assert len(snapshots(spark, table)) == 1, "only batch 0 was committed"
    else:
        assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
        assert len(snapshots(spark, table)) == 2, "batches 0 and 1 were committed"
    assert not (scenario.checkpoint / "commits" / "1").exists(), "killed before Spark's commit log"

    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(800, 300, 3, seed=12)]
    more = [c for c in more if shape == "debezium-json" or c.op != "T"]
    produce_keyed(topic, encode(more))
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"batch \d+ timings: .*direct", resumed.stderr), "the replay took the one-pass job too"
    if point == "after-commit":
        assert "already holds these offsets" in resumed.stderr
    state, count = table_state(spark, table)
    assert count == len(state), "no key twice"
    assert state == oracle(changes + more), "no delete lost, no update doubled"
    assert codec.decode(snapshots(spark, table)[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(topic)
    for other in orders:
        state, count = table_state(spark, scenario.table("orders"))
        assert count == len(state), "no key twice"
        assert state == oracle(ordered)
        assert table_offsets(spark, scenario.table("orders")) == end_offsets(other)
