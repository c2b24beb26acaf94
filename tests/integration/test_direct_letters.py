"""Dead letters of the one-pass job (tasks/dead_letters.py): the null values, unframed values and
bodies that do not decode of an Avro append table, the unframed values and undecodable bodies of
an Avro changelog table, the null, empty, not-JSON and not-object values of a JSON one, become
the dead letters Spark's path makes of them, byte for byte (key, value, headers, timestamp,
stage, class, message), while the table's other records stay on the one-pass path; once and only
once after a crash between the dead-letter table's commit and the table's."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.bench.workloads import CDC_SCHEMA, SCHEMA, cdc_changes, event
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.cli import run_cli
from tests.support.jobs import timed_run
from tests.support.spark import rows, snapshots, table_offsets
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]

SIDES = ("direct", "spark")


def dead_letters(spark: SparkSession, namespace: str) -> list[tuple[Any, ...]]:
    """The dead letters as a user compares them: every column but the batch's own ids and time."""
    table = f"{CATALOG}.{namespace}.dead_letters"
    spark.sql(f"REFRESH TABLE {table}")
    return sorted(
        (
            r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers or ()),
            r.stage, r.error_class, r.error_message, r.target_table.rsplit(".", 1)[-1],
        )
        for r in spark.table(table).collect()
    )  # fmt: skip


def run(spark: SparkSession, scenario: Scenario, settings: dict[str, Any]) -> list[BatchTimings]:
    return timed_run(spark, scenario.config(**settings))


def one_pass(timings: list[BatchTimings]) -> list[bool]:
    """Whether each batch was written by the one-pass job alone (no decode step of Spark's path)."""
    return ["direct" in t.steps and "decode" not in t.steps for t in timings]


def test_avro_null_unframed_and_undecodable_values_are_dead_letters_of_the_one_pass_job(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("events")
    create_topics(topic, partitions=2)
    good = avro_values(topic, SCHEMA, [event(i) for i in range(48)])
    cut = good[1][:-30]  # a body cut short: Avro's reader cannot decode it
    junk: list[bytes | None] = [b'{"id": 1}', b"\x00\x01", None, b"", b"\x01" + good[0][1:], cut]
    records: list[tuple[bytes | None, bytes | None, int]] = []
    for i, value in enumerate(good):
        records.append((f"k{i}".encode(), value, i % 2))
        if i % 8 == 3:
            records.append((b"bad", junk[i // 8], i % 2))
    produce_keyed(topic, records)

    def settings(side: str) -> dict[str, Any]:
        return avro_config(
            scenario, **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": side == "direct",
            },
        )  # fmt: skip

    # The worst moment: the dead letters committed, the table not (the job staged and created it).
    crashed = run_cli(scenario.write_config(tmp_path / "direct.yaml", **settings("direct")),
                      env={faults.ENV: "after-dead-letters:0"})  # fmt: skip
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "SIGKILL at after-dead-letters of batch 0" in crashed.stderr
    assert len(dead_letters(spark, f"{scenario.namespace}_direct")) == 6
    table = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_events" for side in SIDES}
    assert not snapshots(spark, table["direct"]), "created, nothing committed"

    timings = {side: run(spark, scenario, settings(side)) for side in SIDES}
    assert one_pass(timings["direct"]) == [True], "the replay: its good records in one pass, no decode job"
    assert one_pass(timings["spark"]) == [False]
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in SIDES}
    assert found["direct"] == found["spark"], "the same dead letters, once each"
    assert {(r[5], r[8]) for r in found["direct"]} == {
        (b'{"id": 1}', "NotConfluentFramed"), (b"\x00\x01", "NotConfluentFramed"), (None, "NullValue"),
        (b"", "NotConfluentFramed"), (b"\x01" + good[0][1:], "NotConfluentFramed"), (cut, "AvroDecodeError"),
    }  # fmt: skip
    assert sorted(r.id for r in spark.table(table["direct"]).collect()) == list(range(48))
    assert rows(spark, table["direct"]) == rows(spark, table["spark"])
    assert table_offsets(spark, table["direct"]) == end_offsets(topic)


def test_bad_values_of_an_avro_changelog_table_are_dead_letters_and_its_changes_stay_on_the_one_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """A changelog table keyed from the value, by bucket(4, id): unframed values and a body cut
    short among its changes are the dead letters Spark's path makes of them (the changes of their
    keys before and after them apply, as there); killed after the dead-letter commit, the replay
    writes the changes once, in one pass."""
    topic = scenario.topic("changes")
    create_topics(topic, partitions=2)
    changes = cdc_changes(60, seed=3)
    good = avro_values(topic, CDC_SCHEMA, [{**event(i, key), "op": op} for i, (key, op) in enumerate(changes)])
    cut = good[5][:-40]
    junk: list[bytes] = [b'{"id": 1}', b"\x00\x01", cut, b"", b"\x02" + good[7][1:]]
    records: list[tuple[bytes | None, bytes | None, int]] = []
    for i, ((key, _), value) in enumerate(zip(changes, good, strict=True)):
        records.append((str(key).encode(), value, key % 2))
        if i % 12 == 6:
            records.append((b"bad", junk[i // 12], i % 2))
    produce_keyed(topic, records)

    def settings(side: str) -> dict[str, Any]:
        return avro_config(
            scenario, **{
                "tables.namespace": f"{scenario.namespace}_{side}", "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": side == "direct", "decode.operation_column": "op", "tables.mode": "changelog",
                "tables.key_columns": ["id"], "tables.partition_by": ["bucket(4, id)"],
            },
        )  # fmt: skip

    crashed = run_cli(scenario.write_config(tmp_path / "direct.yaml", **settings("direct")),
                      env={faults.ENV: "after-dead-letters:0"})  # fmt: skip
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert len(dead_letters(spark, f"{scenario.namespace}_direct")) == 5
    table = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_changes" for side in SIDES}
    assert not snapshots(spark, table["direct"]), "created, nothing committed"

    timings = {side: run(spark, scenario, settings(side)) for side in SIDES}
    assert one_pass(timings["direct"]) == [True], "the replay: its changes in one pass, no decode job"
    assert one_pass(timings["spark"]) == [False]
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in SIDES}
    assert found["direct"] == found["spark"], "the same dead letters, once each"
    assert sorted(r[8] for r in found["direct"]) == ["AvroDecodeError"] + ["NotConfluentFramed"] * 4
    assert rows(spark, table["direct"]) == rows(spark, table["spark"]), "every key's last change, as Spark's path"
    assert sorted(r.id for r in spark.table(table["direct"]).collect()) == sorted(oracle(changes))
    assert table_offsets(spark, table["direct"]) == end_offsets(topic)


def oracle(changes: list[tuple[int, str]]) -> set[int]:
    """The keys whose last change is not a delete."""
    last: dict[int, str] = {}
    for key, op in changes:
        last[key] = op
    return {k for k, op in last.items() if op != "D"}


def test_json_records_that_are_not_objects_are_dead_letters_of_the_one_pass_job(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("clicks")
    create_topics(topic, partitions=1)
    framed_empty = b"\x00\x00\x00\x00\x07"
    junk: list[bytes | None] = [None, b"", b"not json", b'{"id": 99, "page": "p', b"42", b"[1, 2]", framed_empty]
    records = [(None, f'{{"id": {i}, "page": "p{i}"}}'.encode(), 0) for i in range(20)]
    for n, value in enumerate(junk):
        records.insert(3 * n + 1, (b"bad", value, 0))
    produce_keyed(topic, records)

    def settings(side: str) -> dict[str, Any]:
        return {
            "tables.namespace": f"{scenario.namespace}_{side}",
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": side == "direct",
        }

    # Batch 0 creates the table: its columns inferred beside the bad records, which add none.
    timings = {side: run(spark, scenario, settings(side)) for side in SIDES}
    assert one_pass(timings["direct"]) == [True], "the bad records did not send the table Spark's way"
    assert one_pass(timings["spark"]) == [False]
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in SIDES}
    assert found["direct"] == found["spark"]
    assert [(r[5], r[8]) for r in found["direct"]] == [
        (None, "NullValue"), (b"", "EmptyValue"), (b"not json", "JsonParseError"),
        (b'{"id": 99, "page": "p', "JsonParseError"), (b"42", "JsonTypeError"), (b"[1, 2]", "JsonTypeError"),
        (framed_empty, "EmptyValue"),
    ]  # fmt: skip

    # Batch 1 brings a new field beside bad records: the table evolves and stays on the one path.
    # The worst moment: its dead letters committed, the evolved table's data not.
    more = [(None, f'{{"id": {i}, "page": "p{i}", "ref": "r{i}"}}'.encode(), 0) for i in range(20, 30)]
    more[2:2] = [(b"bad", b"<click/>", 0)]
    more[6:6] = [(b"bad", b"true", 0)]
    produce_keyed(topic, more)
    crashed = run_cli(scenario.write_config(tmp_path / "direct.yaml", **settings("direct")),
                      env={faults.ENV: "after-dead-letters:1"})  # fmt: skip
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "SIGKILL at after-dead-letters of batch 1" in crashed.stderr
    timings = {side: run(spark, scenario, settings(side)) for side in SIDES}
    assert one_pass(timings["direct"]) == [True], "the replay: evolved and written in one pass"
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in SIDES}
    assert found["direct"] == found["spark"], "the same dead letters, once each"
    assert [r[8] for r in found["direct"]].count("JsonParseError") == 3
    table = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_clicks" for side in SIDES}
    got = spark.table(table["direct"])
    assert got.columns == ["id", "page", "ref"]
    assert sorted(r.id for r in got.collect()) == list(range(30))
    assert rows(spark, table["direct"]) == rows(spark, table["spark"])
    assert table_offsets(spark, table["direct"]) == end_offsets(topic)
