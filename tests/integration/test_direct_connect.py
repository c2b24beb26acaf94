"""Kafka Connect JSON (JsonConverter with schemas on, Debezium's default) written in one pass
(tasks/decode_connect.py): Debezium's change events with its default types (a precise Decimal, a
VariableScaleDecimal, zoned and micro timestamps, dates, a required field's default), Connect
JSON record keys and tombstones after deletes, into a partitioned changelog table: the same table
as Spark's path with no Spark decode job, once and only once after a crash between the write and
the commit; the events that path makes dead letters of are the same dead letters, made by the
tasks, through a kill after their commit; a schema with a new column sends its batch that way."""

from __future__ import annotations

import base64
import json
import random
import signal
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.debezium_avro import variable_decimal
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support import debezium as ce
from tests.support.cli import run_cli
from tests.support.jobs import timed_run
from tests.support.spark import dead_letters, partitions, rows, table_exists, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import table_state

pytestmark = [pytest.mark.slow]

PREFIX = "shop.public.accounts"
ROW = [
    ce.field("id", "int64", optional=False),
    ce.field("v", "int64", optional=False),
    ce.field("grade", "int32", optional=False, default=7),
    ce.field("name", "string"),
    ce.decimal_field("price", 10, 2),
    ce.struct(
        "io.debezium.data.VariableScaleDecimal",
        [ce.field("scale", "int32", optional=False), ce.field("value", "bytes", optional=False)],
        optional=True, field="balance", version=1,
    ),
    ce.field("updated", "string", name="io.debezium.time.ZonedTimestamp", version=1),
    ce.field("seen", "int64", name="io.debezium.time.MicroTimestamp", version=1),
    ce.field("born", "int32", name="io.debezium.time.Date", version=1),
    ce.field("ratio", "double"),
    ce.field("tags", "array", items={"type": "string", "optional": True}),
]  # fmt: skip
SCHEMA = ce.envelope_schema(PREFIX, ROW)
KEY = ce.key_schema(PREFIX, [ce.field("id", "int64", optional=False)])


def image(key: int, seq: int) -> dict[str, Any]:
    vsd = variable_decimal(f"{seq}.{seq % 97:02d}")
    return {
        "id": key, "v": seq, "grade": None if seq % 3 else seq % 5, "name": f"k{key}-{seq}" if seq % 7 else None,
        "price": ce.decimal_value(f"{seq % 10_000}.{seq % 100:02d}", 2),
        "balance": {"scale": vsd["scale"], "value": base64.b64encode(vsd["value"]).decode()} if seq % 4 else None,
        "updated": f"2024-01-02T03:04:{seq % 60:02d}.{seq % 1000:03d}Z" if seq % 3 else None,
        "seen": 1_700_000_000_000_000 + seq * 1_001, "born": seq % 20_000 - 5_000 if seq % 5 else None,
        "ratio": seq / 8, "tags": [f"t{seq % 3}", None] if seq % 2 else [],
    }  # fmt: skip


def events(changes: list[Change], schema: dict[str, Any] = SCHEMA) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, partition) of each change as Debezium's JsonConverter writes it with its
    defaults: the key Connect JSON of the id, a delete carrying the key's row as `before`; a T (a
    delete Debezium follows with a tombstone) both the delete and the tombstone."""
    ops = {"I": "c", "U": "u", "D": "d", "T": "d"}
    out: list[tuple[bytes | None, bytes | None, int]] = []
    for c in changes:
        row, key = image(c.key, c.seq), ce.wrapped(KEY, {"id": c.key})
        before, after = (row, None) if c.op in ("D", "T") else (None, row)
        out.append((key, ce.change(schema, ops[c.op], before, after, c.seq + 1), c.partition))
        if c.op == "T":
            out.append((key, None, c.partition))
    return out


def config(scenario: Scenario, side: str, tmp_path: Path) -> dict[str, Any]:
    return {
        "decode.format": "json",
        "decode.envelope": "debezium",
        "decode.source_columns": ["lsn"],
        "decode.key_format": "json",
        "decode.direct_json": side == "direct",
        "tables.mode": "changelog",
        "tables.partition_by": ["bucket(4, id)"],
        "tables.namespace": f"{scenario.namespace}_{side}",
        "job.checkpoint_location": str(tmp_path / side),
        # Two batches one-pass (the first creates the table), one for Spark's path.
        "kafka.max_offsets_per_trigger": 900 if side == "direct" else 10_000,
    }


@pytest.mark.trino
def test_debezium_connect_json_in_one_pass_matches_sparks_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("accounts")
    create_topics(topic, partitions=3)
    changes = list(random_changes(1_600, 300, 3, seed=61))
    assert {"I", "U", "D", "T"} <= {c.op for c in changes}
    produce_keyed(topic, events(changes))
    sides = ("direct", "spark")

    def run(side: str) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**config(scenario, side, tmp_path)))

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_accounts" for side in sides}
    # The worst moment: a Python worker dies after writing batch 0's files, before reporting them.
    # The table was staged (its location and field ids), to be created once its files are written.
    crashed = run_cli(
        scenario.write_config(tmp_path / "direct.yaml", **config(scenario, "direct", tmp_path)),
        env={faults.ENV: "executor-write:0"},
    )
    assert crashed.returncode == 1, crashed.stderr[-3000:]
    assert f"batch 0: writing tables {scenario.namespace}_direct.{scenario.prefix}_accounts" in crashed.stderr
    assert "in one pass failed" in crashed.stderr
    assert "set decode.direct_json: false" in crashed.stderr, "the switch of the table's decoder"
    assert not table_exists(spark, tables["direct"]), "a table is created once its files are written"
    timings = {side: run(side) for side in sides}
    spark_steps = {"decode", "prepare", "write"}
    assert [("direct" in t.steps, sorted(spark_steps & set(t.steps))) for t in timings["direct"]] == [(True, [])] * 2, (
        "batch 0 again and batch 1, in the one-pass job alone: no decode, prepare or write step of Spark's path"
    )
    assert [t.spark_jobs for t in timings["direct"]] == [1, 1], (
        "the one-pass job alone: the new table's columns from the Connect schemas of a sample the driver read"
    )
    assert ["direct" in t.steps for t in timings["spark"]] == [False]
    for table in tables.values():
        state, count = table_state(spark, table)
        assert count == len(state), "no key twice"
        assert state == oracle(changes)
        assert table_offsets(spark, table) == end_offsets(topic)
    assert rows(spark, tables["direct"]) == rows(spark, tables["spark"]), "every column, every type"
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
    assert partitions(spark, tables["direct"]) == partitions(spark, tables["spark"])
    # A required field's null takes its default (7); decimals stay exact.
    found = spark.sql(f"SELECT v, grade, price, balance FROM {tables['direct']}").collect()
    assert {r.grade for r in found if r.v % 3} == {7}
    assert all(r.price == Decimal(f"{r.v % 10_000}.{r.v % 100:02d}") for r in found)
    assert all(r.balance == (Decimal(f"{r.v}.{r.v % 97:02d}") if r.v % 4 else None) for r in found)
    read = trino_rows(
        f"SELECT id, v, CAST(price AS varchar), CAST(updated AS varchar) "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_accounts"'
    )
    assert {r[0]: r[1] for r in read} == oracle(changes), "Trino reads the one-pass table as the oracle"

    # Events Spark's path makes dead letters of (an op Debezium does not write, a truncate, an
    # update without its image, no op) among changes: the tasks make the same letters, in its
    # words, and the batch stays one-pass. The worst moment first: killed once the dead letters are
    # committed, the table not; the replay adds each letter and change once.
    rng = random.Random(62)
    more = [Change(c.key, c.op, c.seq + 10_000, c.partition) for c in random_changes(300, 300, 3, seed=62)]
    no_op = json.loads(ce.change(SCHEMA, "c", None, image(10, 99_996), 99_996))
    del no_op["payload"]["op"]
    bad = [
        (7, ce.change(SCHEMA, "x", None, image(7, 99_999), 99_999)),
        (8, ce.change(SCHEMA, "t", None, None, 99_998)),
        (9, ce.change(SCHEMA, "u", image(9, 99_997), None, 99_997)),
        (10, json.dumps(no_op, separators=(",", ":")).encode()),
    ]
    produce_keyed(topic, [*events(more[:100]), *((ce.wrapped(KEY, {"id": k}), v, rng.randrange(3)) for k, v in bad)])
    crashed = run_cli(
        scenario.write_config(tmp_path / "bad.yaml", **config(scenario, "direct", tmp_path)),
        env={faults.ENV: "after-dead-letters:2"},
    )
    assert crashed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), crashed.stderr[-3000:]
    assert "SIGKILL at after-dead-letters of batch 2" in crashed.stderr
    timings = {side: run(side) for side in sides}
    assert [(t.steps.keys() & {"direct", "decode"}) for t in timings["direct"]] == [{"direct"}], (
        "the replay: the bad events dead letters of the one-pass job, no Spark decode job"
    )
    for table in tables.values():
        state, count = table_state(spark, table)
        assert count == len(state)
        assert state == oracle(changes + more[:100])
        assert table_offsets(spark, table) == end_offsets(topic)
    found = {side: dead_letters(spark, f"{scenario.namespace}_{side}") for side in sides}
    assert found["direct"] == found["spark"], "the same dead letters as Spark's path, once each"
    assert sorted(r[-1] for r in found["direct"]) == [
        "no op in the change event", "op u without its row image", "unknown op t", "unknown op x",
    ]  # fmt: skip

    # A schema with a new column: that batch goes Spark's way (the table evolved); the next batch
    # is one-pass again.
    wider = ce.envelope_schema(PREFIX, [*ROW, ce.field("loyalty", "int32")])
    produce_keyed(topic, events(more[100:200], wider))
    assert ["decode" in t.steps for t in run("direct")] == [True], "the new column through Spark's decoder"
    produce_keyed(topic, events(more[200:], wider))
    assert ["decode" in t.steps for t in run("direct")] == [False], "the next batch in one pass"
    state, count = table_state(spark, tables["direct"])
    assert count == len(state)
    assert state == oracle(changes + more)
    assert "loyalty" in spark.table(tables["direct"]).columns
    assert dead_letters(spark, f"{scenario.namespace}_direct") == found["direct"]
