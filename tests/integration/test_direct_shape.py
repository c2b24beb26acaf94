"""A flattened, case-insensitive Avro table written in one pass (batch/direct_shape.py): created,
then evolved for a producer's new writer schema (a field spelled otherwise, a new nested field),
with no Spark decode job, equal to Spark's path's table in columns and rows, read by Trino; a
worker killed after writing the evolved batch's files replays it once."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime import faults
from icesink.runtime.timings import BatchTimings
from tests.support import jobs
from tests.support.cli import run_cli
from tests.support.jobs import one_pass
from tests.support.spark import snapshots, table_offsets
from tests.support.trino import trino_rows
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]


def device(version: int) -> dict[str, Any]:
    """v1: Id, price, Meta (null or os, cpu {Cores, seen}, tags); v2 spells Id as ID and adds Meta.cpu.Arch."""
    cpu = [
        {"name": "Cores", "type": "int"},
        {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    ]
    if version == 2:
        cpu.append({"name": "Arch", "type": ["null", "string"], "default": None})
    meta = {
        "type": "record",
        "name": "Meta",
        "fields": [
            {"name": "os", "type": "string"},
            {"name": "cpu", "type": {"type": "record", "name": "Cpu", "fields": cpu}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
    return {
        "type": "record",
        "name": "Device",
        "fields": [
            {"name": "Id" if version == 1 else "ID", "type": "long"},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
            {"name": "Meta", "type": ["null", meta]},
        ],
    }


SEEN = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)


def record(i: int, version: int) -> dict[str, Any]:
    cpu: dict[str, Any] = {"Cores": i, "seen": SEEN + dt.timedelta(seconds=i) if i % 3 else None}
    if version == 2:
        cpu["Arch"] = "arm" if i % 2 else None
    meta = {"os": f"os{i}", "cpu": cpu, "tags": [str(i)] * (i % 3)} if i % 4 else None
    return {"Id" if version == 1 else "ID": i, "price": Decimal(i) / 100, "Meta": meta}


def timed_run(spark: SparkSession, scenario: Scenario, settings: dict[str, Any]) -> list[BatchTimings]:
    """The job run once (available-now) with `settings`; its batches' timings."""
    return jobs.timed_run(spark, scenario.config(**settings))


@pytest.mark.trino
@pytest.mark.faults
def test_a_flattened_case_insensitive_table_in_one_pass_matches_sparks_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    day1, day2 = scenario.topic("devices.20240101"), scenario.topic("devices.20240102")
    create_topics(day1, day2, partitions=1)
    produce(day1, avro_values(day1, device(1), [record(i, 1) for i in range(12)]))
    sides = {"direct": True, "spark": False}

    def settings(side: str) -> dict[str, Any]:
        return avro_config(
            scenario,
            **{
                "tables.namespace": f"{scenario.namespace}_{side}",
                "job.checkpoint_location": str(tmp_path / side),
                "decode.direct_avro": sides[side],
                "tables.flatten_separator": "_",
                "tables.case_insensitive": True,
            },
        )

    def run(side: str) -> list[BatchTimings]:
        return timed_run(spark, scenario, settings(side))

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_devices" for side in sides}
    assert one_pass(run("direct")) == [(True, [])], "batch 0 creates the flat table in one pass"
    assert one_pass(run("spark")) == [(False, ["decode", "prepare", "write"])]

    # Batch 1, the next day's topic: v2 (ID for Id, a new Meta.cpu.Arch). Planned with the
    # registry's latest for the new topic, the table gains Meta_cpu_Arch before the one-pass job
    # writes it; its worker dies after writing its files. The restart writes batch 1 once.
    produce(day2, avro_values(day2, device(2), [record(i, 2) for i in range(12, 24)]))
    config = scenario.write_config(tmp_path / "direct.yaml", **settings("direct"))
    crashed = run_cli(config, env={faults.ENV: "executor-write:1"})
    assert crashed.returncode == 1, crashed.stderr[-3000:]
    assert "evolved for the rows of writer schema(s)" in crashed.stderr
    assert "through Spark's decoder" not in crashed.stderr
    spark.sql(f"REFRESH TABLE {tables['direct']}")
    assert "Meta_cpu_Arch" in spark.table(tables["direct"]).columns, "evolved before the kill"
    assert len(snapshots(spark, tables["direct"])) == 1, "nothing of batch 1 committed"
    assert one_pass(run("direct")) == [(True, [])], "the replay of batch 1 in one pass"
    assert one_pass(run("spark")) == [(False, ["decode", "prepare", "write"])]

    columns = {}
    for side, table in tables.items():
        spark.sql(f"REFRESH TABLE {table}")
        columns[side] = [(f.name, f.dataType.simpleString(), f.nullable) for f in spark.table(table).schema.fields]
        assert table_offsets(spark, table) == {**end_offsets(day1), **end_offsets(day2)}
    assert columns["direct"] == columns["spark"] == [
        ("Id", "bigint", True), ("price", "decimal(6,2)", True), ("Meta_os", "string", True),
        ("Meta_cpu_Cores", "int", True), ("Meta_cpu_seen", "timestamp", True), ("Meta_tags", "array<string>", True),
        ("Meta_cpu_Arch", "string", True),
    ]  # fmt: skip
    by_id = [{r.Id: r.asDict() for r in spark.table(t).collect()} for t in tables.values()]
    assert sorted(by_id[0]) == list(range(24)), "each record once"
    assert by_id[0] == by_id[1], "every value as Spark's path flattens it"
    assert by_id[0][4]["Meta_cpu_Cores"] is None
    assert by_id[0][13]["Meta_cpu_Arch"] == "arm"

    read = trino_rows(
        "SELECT Id, CAST(price AS varchar), Meta_os, Meta_cpu_Cores, Meta_cpu_Arch, cardinality(Meta_tags) "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_devices"'
    )
    expected = []
    for i in range(24):
        meta = record(i, 2)["Meta"]
        arch = meta["cpu"]["Arch"] if meta and i >= 12 else None
        expected.append((i, f"{Decimal(i) / 100:.2f}", *((f"os{i}", i, arch, i % 3) if meta else (None,) * 4)))
    assert sorted(read) == expected, "Trino reads the one-pass table as written"


def gadget(i: int) -> dict[str, Any]:
    """Day one's records: Id, Meta (null in every fourth: no value for its columns), price, tags."""
    meta = {"OS": f"os{i}", "cpu": {"cores": i}} if i % 4 else None
    return {"Id": i, "Meta": meta, "price": i / 4, "tags": [str(i)] * (i % 3)}


def gadget_v2(i: int) -> dict[str, Any]:
    """Day two's: ID and meta spelled otherwise, a new nested field (meta.cpu.arch) and a new column."""
    return {"ID": i, "meta": {"os": f"os{i}", "cpu": {"cores": i, "arch": "arm" if i % 2 else None}}, "extra": i > 15}


@pytest.mark.trino
def test_a_flattened_case_insensitive_json_table_in_one_pass_matches_sparks_path(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Plain JSON (tasks/json_shape.py): created in one pass from a sample's columns, flattened;
    then records spelling two columns otherwise and bringing a new nested field and a new column:
    the first job declines, the driver infers their columns, shapes them as the table spells them
    and evolves it, a second job writes them. Equal to Spark's path's table; a lost checkpoint
    writes nothing twice."""
    day1, day2 = scenario.topic("gadgets.20240101"), scenario.topic("gadgets.20240102")
    create_topics(day1, day2, partitions=1)
    produce(day1, [gadget(i) for i in range(12)])
    sides = {"direct": True, "spark": False}

    def run(side: str, **more: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": f"{scenario.namespace}_{side}", "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_json": sides[side], "tables.flatten_separator": "_", "tables.case_insensitive": True,
            **more,
        }  # fmt: skip
        return timed_run(spark, scenario, settings)

    tables = {side: f"{CATALOG}.{scenario.namespace}_{side}.{scenario.prefix}_gadgets" for side in sides}
    assert one_pass(run("direct")) == [(True, [])], "batch 0 creates the flat table in one pass"
    assert one_pass(run("spark")) == [(False, ["decode", "prepare", "write"])]
    produce(day2, [gadget_v2(i) for i in range(12, 20)])
    evolved = run("direct")
    assert one_pass(evolved) == [(True, [])], "batch 1 evolves the table and stays in one pass"
    assert evolved[0].spark_jobs == 2, "a second job for the evolved table"
    assert one_pass(run("spark")) == [(False, ["decode", "prepare", "write"])]

    columns = {}
    for side, table in tables.items():
        spark.sql(f"REFRESH TABLE {table}")
        columns[side] = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
        assert table_offsets(spark, table) == {**end_offsets(day1), **end_offsets(day2)}
    assert columns["direct"] == columns["spark"] == {
        "Id": "bigint", "Meta_OS": "string", "Meta_cpu_cores": "bigint", "price": "double", "tags": "array<string>",
        "meta_cpu_arch": "string", "extra": "boolean",
    }  # fmt: skip
    by_id = [{r.Id: r.asDict() for r in spark.table(t).collect()} for t in tables.values()]
    assert sorted(by_id[0]) == list(range(20)), "each record once"
    assert by_id[0] == by_id[1], "every value as Spark's path flattens and matches it"
    assert by_id[0][4]["Meta_OS"] is None
    assert by_id[0][13]["Meta_OS"] == "os13"
    assert by_id[0][13]["meta_cpu_arch"] == "arm"

    read = trino_rows(
        "SELECT Id, Meta_OS, Meta_cpu_cores, meta_cpu_arch, extra "
        f'FROM iceberg."{scenario.namespace}_direct"."{scenario.prefix}_gadgets" ORDER BY Id'
    )
    assert read == [tuple(by_id[0][i][c] for c in ("Id", "Meta_OS", "Meta_cpu_cores", "meta_cpu_arch", "extra"))
                    for i in range(20)], "Trino reads the one-pass table as written"  # fmt: skip

    held = len(snapshots(spark, tables["direct"]))
    run("direct", **{"job.checkpoint_location": str(tmp_path / "lost"), "kafka.starting_offsets": "earliest"})
    spark.sql(f"REFRESH TABLE {tables['direct']}")
    assert len(snapshots(spark, tables["direct"])) == held, "a lost checkpoint: the tables hold every offset"
    assert sorted(r.Id for r in spark.table(tables["direct"]).collect()) == list(range(20)), "nothing twice"
