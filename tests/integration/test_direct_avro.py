"""Avro tables written in one pass (batch/direct.py, tasks/decode_avro.py): the same tables, types
and dead letters as through Spark's from_avro, a new table created by the one-pass job, records it
declines still decoded, replays without a duplicate."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pyspark.sql import SparkSession

from dev.bench.workloads import SCHEMA, event
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.runtime.timings import BatchTimings
from tests.support.jobs import timed_run
from tests.support.spark import letters, partitions, rows, table_offsets
from tests.support.values import avro_config, avro_values

pytestmark = [pytest.mark.slow]

NAMES = ("clean", "newschema", "poison")
# A later version of SCHEMA: one more optional field (backward compatible).
V2: dict[str, Any] = {
    **SCHEMA,
    "fields": [*SCHEMA["fields"], {"name": "extra", "type": ["null", "long"], "default": None}],
}
# SCHEMA with room for larger amounts: its bodies read as SCHEMA's carry a decimal beyond SCHEMA's precision.
WIDE: dict[str, Any] = {
    **SCHEMA,
    "fields": [{**f, "type": {**f["type"], "precision": 20}} if f["name"] == "amount" else f for f in SCHEMA["fields"]],
}


def body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def test_one_pass_avro_tables_match_sparks_decoding_and_a_replay_adds_nothing_twice(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topics = {n: scenario.topic(n) for n in NAMES}
    create_topics(*topics.values(), partitions=1)
    for t in topics.values():
        produce(t, avro_values(t, SCHEMA, [event(i) for i in range(4)]))
    sides = {"direct": True, "spark": False}

    def namespace(side: str) -> str:
        return f"{scenario.namespace}_{side}"

    def run(side: str, **overrides: Any) -> list[BatchTimings]:
        settings = {
            "tables.namespace": namespace(side),
            "job.checkpoint_location": str(tmp_path / side),
            "decode.direct_avro": sides[side],
            # Its tasks compute the partition values (tasks/partition_values.py).
            "tables.per_table": {
                f"{scenario.prefix}_clean": {"partition_by": ["days(day)", "bucket(3, id)", "hours(ts)"]}
            },
            **overrides,
        }
        return timed_run(spark, scenario.config(**avro_config(scenario, **settings)))

    # Batch 0 creates the tables: the one-pass job creates them with the registry's latest schema.
    assert ["direct" in t.steps for t in run("direct")] == [True]
    assert ["direct" in t.steps for t in run("spark")] == [False]

    good = avro_values(topics["poison"], SCHEMA, [event(i) for i in range(4, 8)])
    schema_id = struct.unpack(">I", good[0][1:5])[0]
    frame = good[0][:5]
    note = good[0].index(b"\x0cnote 4")  # event 4's note: union index 1 (0x02), then the string
    assert good[0][note - 1] == 2
    poison: list[bytes | None] = [
        good[0],
        good[1][:-4],  # truncated
        good[0][: note - 1] + b"\x0a" + good[0][note:],  # a union index beyond the union
        frame + body(WIDE, {**event(9), "amount": event(9)["amount"] + 10**10}),  # beyond decimal(12, 2)
        b"\x00" + struct.pack(">I", schema_id + 1000) + good[2][5:],  # an id the registry does not know
        b'{"id": 1}',  # not framed
        None,  # a tombstone
        good[2],
        good[3],
    ]
    produce(topics["clean"], avro_values(topics["clean"], SCHEMA, [event(i) for i in range(4, 8)]))
    v1 = avro_values(topics["newschema"], SCHEMA, [event(i) for i in range(4, 6)])
    v2 = avro_values(topics["newschema"], V2, [{**event(i), "extra": i * 10} for i in range(6, 8)])
    produce(topics["newschema"], [v1[0], v2[0], v1[1], v2[1]])
    produce(topics["poison"], poison)
    timings = {side: run(side) for side in sides}
    assert ["direct" in t.steps for t in timings["direct"]] == [True], "batch 1 took the one-pass job"
    assert ["direct" in t.steps for t in timings["spark"]] == [False]

    tables = {side: {n: f"{CATALOG}.{namespace(side)}.{scenario.prefix}_{n}" for n in NAMES} for side in sides}
    for n in NAMES:
        direct, through_spark = tables["direct"][n], tables["spark"][n]
        assert spark.table(direct).schema == spark.table(through_spark).schema, n
        assert rows(spark, direct) == rows(spark, through_spark), n
        assert table_offsets(spark, direct) == end_offsets(topics[n]), n
    assert letters(spark, namespace("direct")) == letters(spark, namespace("spark"))
    assert sorted(r.id for r in spark.table(tables["direct"]["clean"]).collect()) == list(range(8))
    clean_partitions = partitions(spark, tables["direct"]["clean"])
    assert clean_partitions == partitions(spark, tables["spark"]["clean"]), "filed as Spark's path files them"
    assert len({p for _, p in clean_partitions}) > 3, "several days and buckets"
    extra = {r.id: r.extra for r in spark.table(tables["direct"]["newschema"]).collect()}
    assert extra == {0: None, 1: None, 2: None, 3: None, 4: None, 5: None, 6: 60, 7: 70}, "v2's column, second pass"
    assert sorted(r.id for r in spark.table(tables["direct"]["poison"]).collect()) == [0, 1, 2, 3, 4, 6, 7]
    poisoned = [(topic, offset) for topic, offset, _ in letters(spark, namespace("direct"))]
    assert poisoned == [(topics["poison"], offset) for offset in (5, 6, 7, 8, 9, 10)]

    # A new checkpoint from the earliest offsets: the one-pass job writes only what each table
    # lacks (nothing), then the new records once.
    produce(topics["clean"], avro_values(topics["clean"], SCHEMA, [event(8)]))
    again = run("direct", **{"job.checkpoint_location": str(tmp_path / "replay"), "kafka.starting_offsets": "earliest"})
    assert ["direct" in t.steps for t in again] == [True]
    table = tables["direct"]["clean"]
    spark.sql(f"REFRESH TABLE {table}")
    assert sorted(r.id for r in spark.table(table).collect()) == list(range(9)), "each record once"
    assert table_offsets(spark, table) == end_offsets(topics["clean"])
