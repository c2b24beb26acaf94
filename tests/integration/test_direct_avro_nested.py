"""Avro values of arrays and maps at any depth (of primitives, logical types, records; a map behind
a union) written in one pass (batch/direct_avro.py, tasks/avro_maps.py): a new partitioned table
created and filled with no Spark decode job, equal to Spark's path's in rows, schema and
partitions, read by Trino; a kill after the tasks wrote a batch's files, and a lost checkpoint,
replay without a duplicate or a loss."""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.job.query import Job
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support.baskets import BASKET, basket
from tests.support.cli import run_cli
from tests.support.jobs import one_pass, timed_run
from tests.support.spark import partitions, snapshots, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]


@pytest.mark.trino
@pytest.mark.faults
def test_arrays_and_maps_in_one_pass_match_sparks_path_and_survive_a_crash(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("baskets")
    create_topics(topic, partitions=2)
    produce(topic, avro_values(topic, BASKET, [basket(i) for i in range(60)]))
    sides = {"direct": True, "spark": False}

    def settings(side: str, **overrides: Any) -> dict[str, Any]:
        return avro_config(
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "tables.partition_by": ["bucket(3, id)"],
                **overrides,
            },
        )

    def run(side: str, **overrides: Any) -> list[BatchTimings]:
        return timed_run(spark, scenario.config(**settings(side, **overrides)))

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_baskets" for side in sides}
    assert one_pass(run("direct")) == [(True, [])], "batch 0 creates the table in one pass"
    assert [("direct" in t.steps) for t in run("spark")] == [False]

    # Batch 1: killed after a task wrote its files, before any commit; the restart writes it once.
    produce(topic, avro_values(topic, BASKET, [basket(i) for i in range(60, 100)]))
    config = scenario.write_config(tmp_path / "direct.yaml", **settings("direct"))
    crashed = run_cli(config, env={faults.ENV: "executor-write:1"})
    assert crashed.returncode == 1, crashed.stderr[-3000:]
    assert "in one pass failed" in crashed.stderr
    assert len(snapshots(spark, tables["direct"])) == 1, "only batch 0 was committed"
    assert one_pass(run("direct")) == [(True, [])], "the replay of batch 1 in one pass"
    assert [("direct" in t.steps) for t in run("spark")] == [False]

    for table in tables.values():
        spark.sql(f"REFRESH TABLE {table}")
        ids = [r.id for r in spark.table(table).select("id").collect()]
        assert sorted(ids) == list(range(100)), "each record once"
        assert table_offsets(spark, table) == end_offsets(topic)
    assert spark.table(tables["direct"]).schema == spark.table(tables["spark"]).schema
    by_id = [{r.id: r.asDict(recursive=True) for r in spark.table(t).collect()} for t in tables.values()]
    assert by_id[0] == by_id[1], "every array, map (as a dict: entries have no order) and record"
    assert partitions(spark, tables["direct"]) == partitions(spark, tables["spark"])

    read = trino_rows(
        "SELECT id, tags, element_at(attrs, 'k'), cardinality(attrs), element_at(lines, 1).sku, "
        "element_at(lines, 2).qty, element_at(scores, 'm'), cardinality(grid), element_at(element_at(grid, 1), 2), "
        "element_at(meta.by_sku, 'x').qty, CAST(element_at(meta.days, 1) AS varchar) "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_baskets"'
    )
    expected = []
    for i in range(100):
        b = basket(i)
        lines, grid, by_sku, days = b["lines"], b["grid"], b["meta"]["by_sku"], b["meta"]["days"]
        expected.append((
            i, b["tags"], b["attrs"].get("k"), len(b["attrs"]),
            lines[0]["sku"] if lines else None, lines[1]["qty"] if len(lines) > 1 else None,
            (b["scores"] or {}).get("m"), len(grid), grid[0][1] if grid else None,
            by_sku["x"]["qty"] if "x" in by_sku else None, str(days[0]) if days else None,
        ))  # fmt: skip
    assert sorted(read) == expected, "Trino reads the one-pass table as written"

    # A lost checkpoint: from the earliest offsets the one-pass job writes only what the table lacks.
    produce(topic, avro_values(topic, BASKET, [basket(i) for i in range(100, 110)]))
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "lost"), "kafka.starting_offsets": "earliest"})
    assert one_pass(again) == [(True, [])]
    spark.sql(f"REFRESH TABLE {tables['direct']}")
    ids = [r.id for r in spark.table(tables["direct"]).select("id").collect()]
    assert sorted(ids) == list(range(110)), "each record once"
    assert table_offsets(spark, tables["direct"]) == end_offsets(topic)


def test_a_schema_the_one_pass_decoder_does_not_take_is_said_once_and_its_rows_land(
    spark: SparkSession, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    """A union inside an array (its elements' branch indexes are not checked): the job says once,
    naming the table and the writer schema, that the table's records go through Spark's decoder,
    and every batch lands there."""
    topic = scenario.topic("sparse")
    create_topics(topic, partitions=1)
    schema = {
        "type": "record",
        "name": "Sparse",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "xs", "type": {"type": "array", "items": ["null", "long"]}},
        ],
    }
    values = avro_values(topic, schema, [{"id": i, "xs": [i, None]} for i in range(6)])
    produce(topic, values)
    job = Job(spark, scenario.config(**avro_config(scenario, **{"kafka.max_offsets_per_trigger": 3})))
    seen: list[BatchTimings] = []
    job.handler.on_timings = seen.append
    with caplog.at_level(logging.INFO, logger="icesink.batch.direct_item"):
        job.run()
    assert one_pass(seen) == [(False, ["decode", "prepare", "write"])] * 2, "both batches through Spark's decoder"
    said = [r.getMessage() for r in caplog.records if "go through Spark's decoder" in r.getMessage()]
    sid = int.from_bytes(values[0][1:5], "big")
    assert said == [
        f"table {scenario.namespace}.{scenario.prefix}_sparse: its records go through Spark's decoder: writer schema "
        f"{sid} has a type the one-pass Avro decoder does not take (a union beyond one type and null, a fixed of "
        "no byte or with a logical type but a decimal, a decimal on a fixed of more than 16 bytes or of more "
        "digits than its size holds, a union or a Debezium semantic type inside an array or map, or no Debezium "
        "envelope where decode.envelope says one)"
    ], "said once, for two batches"
    table = scenario.table("sparse")
    assert sorted((r.id, r.xs) for r in spark.table(table).collect()) == [(i, [i, None]) for i in range(6)]


DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}
# A decimal on a fixed, as Spark's to_avro writes decimals (and many Java producers do).
FIXED = {"type": "fixed", "name": "Amount", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 4}
ORDER: dict[str, Any] = {
    "type": "record",
    "name": "PricedOrder",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "fees", "type": {"type": "map", "values": DECIMAL}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "PricedLine",
            "fields": [{"name": "sku", "type": "string"}, {"name": "price", "type": DECIMAL},
                       {"name": "tax", "type": {**FIXED, "name": "Tax"}}]}}},
        {"name": "total", "type": ["null", FIXED]},
        {"name": "placed", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "closes", "type": {"type": "int", "logicalType": "time-millis"}},
    ],
}  # fmt: skip


@pytest.mark.trino
def test_decimals_and_times_are_written_in_one_pass_as_sparks_path_writes_them(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Line items priced in decimals, on bytes and on fixed (each element's precision checked by
    the tasks), placed at a local time, closing at a time of day: a new table created and filled in
    one pass, equal to Spark's path's, read by Trino."""
    topic = scenario.topic("priced")
    create_topics(topic, partitions=2)
    orders = [
        {"id": i, "fees": {"ship": Decimal(i) / 4} if i % 2 else {},
         "lines": [{"sku": f"s{j}", "price": Decimal(i * 100 + j) / 100, "tax": Decimal(i * j) / 10_000}
                   for j in range(i % 3)],
         "total": None if i % 5 == 0 else Decimal(i * 10**13 - 7) / 10_000 * (-1) ** i,
         "placed": dt.datetime(2024, 3, 31, 1, 30) + dt.timedelta(minutes=17 * i, milliseconds=i),
         "closes": 3_600_000 * (i % 24) + i}
        for i in range(40)
    ]  # fmt: skip
    produce(topic, avro_values(topic, ORDER, orders))
    sides = {"direct": True, "spark": False}
    timings = {}
    for side, direct in sides.items():
        job = Job(spark, scenario.config(**avro_config(scenario, **{
            "tables.namespace": f"{scenario.namespace}_{side}", "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_avro": direct,
        })))  # fmt: skip
        seen: list[BatchTimings] = []
        job.handler.on_timings = seen.append
        job.run()
        timings[side] = one_pass(seen)
    assert timings == {"direct": [(True, [])], "spark": [(False, ["decode", "prepare", "write"])]}
    tables = [f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_priced" for side in sides]
    assert spark.table(tables[0]).schema == spark.table(tables[1]).schema
    by_id = [{r.id: r.asDict(recursive=True) for r in spark.table(t).collect()} for t in tables]
    assert by_id[0] == by_id[1]
    assert by_id[0][5]["lines"] == [
        {"sku": "s0", "price": Decimal("5.00"), "tax": Decimal("0.0000")},
        {"sku": "s1", "price": Decimal("5.01"), "tax": Decimal("0.0005")},
    ]
    assert by_id[0][5]["fees"] == {"ship": Decimal("1.25")}
    assert [by_id[0][i]["total"] for i in (0, 1, 39)] == [
        None, Decimal("-999999999.9993"), Decimal("-38999999999.9993")
    ]  # fmt: skip
    read = trino_rows(
        "SELECT id, total, element_at(lines, 2).tax, placed, closes "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_priced"'
    )
    assert sorted(read) == [
        (o["id"], o["total"], o["lines"][1]["tax"] if len(o["lines"]) > 1 else None, o["placed"], o["closes"])
        for o in orders
    ], "Trino reads the decimals, the local times and the times of day (their milliseconds) as written"
    assert str(spark.table(tables[0]).schema["placed"].dataType) == "TimestampNTZType()"
