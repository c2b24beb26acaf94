"""Debezium change events (Avro and JSON with schema/payload) into a changelog table."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession

from dev.kit.debezium_avro import VARIABLE_DECIMAL, variable_decimal
from dev.kit.endpoints import REGISTRY_URL
from dev.kit.kafka import create_topics, end_offsets, produce, produce_keyed
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.runtime.timings import BatchTimings
from tests.support import debezium as ce
from tests.support.spark import snapshots
from tests.support.values import avro_values

VALUE = {
    "type": "record",
    "name": "Value",
    "namespace": "dbserver1.inventory.customers",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "email", "type": "string"},
        # Debezium's semantic types, as its Avro converter writes them.
        {"name": "born", "type": ["null", {"type": "int", "connect.name": "io.debezium.time.Date"}], "default": None},
        {
            "name": "seen",
            "type": ["null", {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"}],
            "default": None,
        },
        {
            "name": "updated",
            "type": ["null", {"type": "string", "connect.name": "io.debezium.time.ZonedTimestamp"}],
            "default": None,
        },
        {"name": "balance", "type": ["null", VARIABLE_DECIMAL], "default": None},
    ],
}


SOURCE = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "ts_ms", "type": "long"},
        {"name": "db", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "lsn", "type": ["null", "long"], "default": None},
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.customers",
    "fields": [
        {"name": "before", "type": ["null", VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": SOURCE},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}
# (op, before, after): a snapshot read, an insert, two updates, a delete, and a bad op.
CHANGES: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = [
    ("r", None, {"id": 1, "email": "a@x.org"}),
    ("c", None, {"id": 2, "email": "b@x.org"}),
    ("u", {"id": 1, "email": "a@x.org"}, {"id": 1, "email": "a2@x.org"}),
    ("u", {"id": 2, "email": "b@x.org"}, {"id": 2, "email": "b2@x.org"}),
    ("d", {"id": 1, "email": "a2@x.org"}, None),
]
EXPECTED = [
    (0, 1, "a@x.org", "I", 1000, 10),
    (1, 2, "b@x.org", "I", 1001, 11),
    (2, 1, "a2@x.org", "U", 1002, 12),
    (3, 2, "b2@x.org", "U", 1003, 13),
    (4, 1, "a2@x.org", "D", 1004, 14),
]


def event(i: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    source = {"ts_ms": 1000 + i, "db": "inventory", "table": "customers", "lsn": 10 + i}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 2000 + i}


def changelog(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    # The table has no offset column; Kafka order is kept by the source lsn here.
    rows = spark.sql(f"SELECT id, email, _op, _source_ts_ms, _source_lsn FROM {table} ORDER BY _source_lsn").collect()
    return [(i, r.id, r.email, r._op, r._source_ts_ms, r._source_lsn) for i, r in enumerate(rows)]


def config(scenario: Scenario, fmt: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "decode.envelope": "debezium",
        "decode.source_columns": ["ts_ms", "lsn"],
        "decode.format": fmt,
    }
    if fmt == "avro":
        out["decode.registry"] = {"url": REGISTRY_URL}
    return out


def test_debezium_avro_changes_land_as_a_changelog(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("customers")
    create_topics(topic, partitions=1)
    events = [event(i, op, b, a) for i, (op, b, a) in enumerate(CHANGES)]
    born = (dt.date(1990, 5, 17) - dt.date(1970, 1, 1)).days
    seen = int(
        (dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
        / dt.timedelta(microseconds=1)
    )
    events[1]["after"] = {
        **events[1]["after"], "born": born, "seen": seen, "balance": variable_decimal("12345.678"),
        "updated": "2024-01-02T03:04:05.5+02:00",
    }  # fmt: skip
    events[3]["after"] = {**events[3]["after"], "balance": variable_decimal("-0.05")}
    values = avro_values(topic, ENVELOPE, events)
    bad_op = event(9, "x", None, {"id": 9, "email": "?"})
    too_precise = event(10, "c", None, {"id": 10, "email": "?", "balance": variable_decimal("1." + "1" * 25)})
    bad_time = event(11, "c", None, {"id": 11, "email": "?", "updated": "yesterday"})
    produce(topic, [*values, *avro_values(topic, ENVELOPE, [bad_op, too_precise, bad_time])])

    Job(spark, scenario.config(**config(scenario, "avro"))).run()

    table = scenario.table("customers")
    assert changelog(spark, table) == EXPECTED
    types = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert types["born"] == "date"
    assert types["seen"] == "timestamp_ntz"
    assert types["updated"] == "timestamp"
    special = spark.sql(f"SELECT born, seen, updated FROM {table} WHERE born IS NOT NULL").collect()
    assert [(r.born, r.seen, r.updated) for r in special] == [
        (dt.date(1990, 5, 17), dt.datetime(2024, 1, 2, 3, 4, 5, 123456), dt.datetime(2024, 1, 2, 1, 4, 5, 500000))
    ]
    assert types["balance"] == "decimal(38,18)"
    balances = spark.sql(
        f"SELECT id, _op, balance FROM {table} WHERE balance IS NOT NULL ORDER BY _source_lsn"
    ).collect()
    assert [(r.id, r._op, r.balance) for r in balances] == [(2, "I", Decimal("12345.678")), (2, "U", Decimal("-0.05"))]
    letters = spark.sql(f"SELECT offset, error_class, error_message FROM icesink.{scenario.namespace}.dead_letters")
    assert sorted((r.offset, r.error_class, r.error_message) for r in letters.collect()) == [
        (5, "DebeziumEnvelopeError", "unknown op x"),
        (6, "DecimalOverflow", "a VariableScaleDecimal does not fit decimal(38, 18)"),
        (7, "ConversionFailed", "a ZonedTimestamp that does not parse"),
    ]


def test_debezium_json_with_schema_and_payload(spark: SparkSession, scenario: Scenario) -> None:
    topic = scenario.topic("customers_json")
    create_topics(topic, partitions=1)
    row = [ce.field("id", "int64", optional=False), ce.field("email", "string")]
    schema = ce.envelope_schema("dbserver1.inventory.customers", row)
    values = [ce.wrapped(schema, event(i, op, b, a)) for i, (op, b, a) in enumerate(CHANGES)]
    produce(topic, values)

    Job(spark, scenario.config(**config(scenario, "json"))).run()

    assert changelog(spark, scenario.table("customers_json")) == EXPECTED


# Debezium's defaults: JsonConverter with schemas for keys and values, decimal.handling.mode=precise
# (Connect Decimal, base64), time.precision.mode=adaptive, tombstones after deletes.
ROW = [
    ce.field("id", "int32", optional=False, default=0),
    ce.field("name", "string"),
    ce.decimal_field("balance", 12, 2),
    ce.field("created_at", "string", name="io.debezium.time.ZonedTimestamp", version=1),
    ce.field("born", "int32", name="io.debezium.time.Date", version=1),
    ce.field("active", "boolean"),
    ce.field("score", "int32"),
]
KEY = [ce.field("id", "int32", optional=False)]


def customer(i: int, name: str, balance: str, **extra: Any) -> dict[str, Any]:
    row = {
        "id": i, "name": name, "balance": ce.decimal_value(balance, 2), "created_at": "2024-01-02T03:04:05.123456Z",
        "born": 19000 + i, "active": i % 2 == 0, "score": i * 10,
    }  # fmt: skip
    return {**row, **extra}


def test_debezium_json_defaults_types_keys_tombstones_order(spark: SparkSession, scenario: Scenario) -> None:
    """The Connect schema decides the column types (a decimal stays exact), schema-wrapped keys are
    the table's key, tombstones delete by key (or are dead letters without one), and a redelivered
    older change never moves a row backwards, across batches."""
    topic = scenario.topic("shop.customers")
    create_topics(topic, partitions=1)
    prefix = "shop.public.customers"
    schema, kschema = ce.envelope_schema(prefix, ROW), ce.key_schema(prefix, KEY)

    def key(i: int) -> bytes:
        return ce.wrapped(kschema, {"id": i})

    a1, b1 = customer(1, "ann", "6909183708.39"), customer(2, "bob", "-0.01")
    a2 = customer(1, "ann v2", "12.30")
    c1 = customer(3, "cid", "0.00")
    first = [
        (key(1), ce.change(schema, "r", None, a1, 10), 0),
        (key(2), ce.change(schema, "c", None, b1, 11), 0),
        (key(1), ce.change(schema, "u", a1, a2, 12), 0),
        (key(2), ce.change(schema, "d", {"id": 2}, None, 13), 0),
        (key(2), None, 0),  # the tombstone after the delete
        (key(3), ce.change(schema, "c", None, c1, 14), 0),
        (ce.wrapped(kschema, {}), None, 0),  # a tombstone whose key lacks the key column: a dead letter
        (None, None, 0),  # no key, no value: a dead letter
    ]
    produce_keyed(topic, first)

    def run(settings: dict[str, Any]) -> list[bool]:
        """Whether each batch took Spark's decoder."""
        job = Job(spark, scenario.config(**settings))
        seen: list[BatchTimings] = []
        job.handler.on_timings = seen.append
        job.run()
        return ["decode" in t.steps for t in seen]

    settings = {
        **config(scenario, "json"),
        "decode.source_columns": ["lsn"],
        "decode.key_format": "json",
        "tables.mode": "changelog",
        "tables.order_by": "_source_lsn",
    }
    assert run(settings) == [False], "its dead letters made in one pass too (tasks/change_rows.change_problems)"

    table = scenario.table("shop_customers")
    types = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert types == {
        "id": "int", "name": "string", "balance": "decimal(12,2)", "created_at": "timestamp", "born": "date",
        "active": "boolean", "score": "int", "_op": "string", "_source_lsn": "bigint", "_key": "struct<id:int>",
    }  # fmt: skip

    def rows() -> list[tuple[Any, ...]]:
        spark.sql(f"REFRESH TABLE {table}")
        columns = "id, name, balance, created_at, born, _source_lsn, _key.id AS k"
        got = spark.sql(f"SELECT {columns} FROM {table} ORDER BY id")
        return [tuple(r) for r in got.collect()]

    created = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert rows() == [
        (1, "ann v2", Decimal("12.30"), created, dt.date(2022, 1, 9), 12, 1),
        (3, "cid", Decimal("0.00"), created, dt.date(2022, 1, 11), 14, 3),
    ]
    letters = spark.sql(f"SELECT offset, error_class FROM icesink.{scenario.namespace}.dead_letters ORDER BY offset")
    assert [tuple(r) for r in letters.collect()] == [(6, "MissingKey"), (7, "NullValue")]

    # Redelivered after a connector crash: older changes of ids 1 and 3 come again, then a newer one of 3.
    again = [
        (key(1), ce.change(schema, "u", a1, customer(1, "stale", "1.00"), 11), 0),
        (key(3), ce.change(schema, "u", c1, customer(3, "stale", "2.00"), 13), 0),
        (key(3), ce.change(schema, "u", c1, customer(3, "cid v2", "99.99"), 20), 0),
        (key(1), ce.change(schema, "u", a1, customer(1, "stale again", "3.00"), 9), 0),
    ]
    produce_keyed(topic, again)
    assert run(settings) == [False], "older than rows the table holds: compared with them in one pass"

    assert rows() == [
        (1, "ann v2", Decimal("12.30"), created, dt.date(2022, 1, 9), 12, 1),
        (3, "cid v2", Decimal("99.99"), created, dt.date(2022, 1, 11), 20, 3),
    ]
    summaries = [s["summary"] for s in snapshots(spark, table) if codec.OFFSETS_KEY in s["summary"]]
    assert codec.decode(summaries[-1][codec.OFFSETS_KEY]) == end_offsets(topic)

    # Three batches in one job: newer than every row the table holds (its files' bounds of
    # _source_lsn: read from the table), the one-pass job; then an older change of id 1 than that
    # batch wrote (not than the table held before it: the bound carried from the job's own commit
    # declines it, the second round against the rows held drops it: batch/direct_held.py); then
    # newer ones again, one pass.
    a3, e1 = customer(1, "ann v3", "4.00"), customer(5, "eve", "5.00")
    newer = [
        (key(1), ce.change(schema, "u", a2, a3, 40), 0),
        (key(3), ce.change(schema, "d", {"id": 3}, None, 41), 0),
        (key(3), None, 0),
        (key(1), ce.change(schema, "u", a2, customer(1, "stale", "5.00"), 35), 0),
        (key(5), ce.change(schema, "c", None, e1, 43), 0),
        (key(5), ce.change(schema, "u", e1, customer(5, "eve v2", "6.00"), 44), 0),
        (key(5), ce.change(schema, "u", e1, customer(5, "eve v3", "7.00"), 50), 0),
        (key(1), ce.change(schema, "d", {"id": 1}, None, 51), 0),
        (key(1), None, 0),
    ]
    produce_keyed(topic, newer)
    job = Job(spark, scenario.config(**settings, **{"kafka.max_offsets_per_trigger": 3}))
    seen: list[BatchTimings] = []
    job.handler.on_timings = seen.append
    job.run()
    assert ["decode" in t.steps for t in seen] == [False, False, False]
    assert seen[1].spark_jobs == 3, "the first round, the rows held above lsn 35, the second round"
    # The last batch's bound came from the second batch's commit: its one Spark job is the one pass.
    assert seen[2].spark_jobs == 1, seen[2].line()
    assert rows() == [(5, "eve v3", Decimal("7.00"), created, dt.date(2022, 1, 13), 50, 5)]
    second = snapshots(spark, table)[-2]["snapshot_id"]
    at_second = spark.sql(f"SELECT id, name, _source_lsn FROM {table} VERSION AS OF {second} ORDER BY id")
    assert [tuple(r) for r in at_second.collect()] == [(1, "ann v3", 40), (5, "eve v2", 44)]
    summaries = [s["summary"] for s in snapshots(spark, table) if codec.OFFSETS_KEY in s["summary"]]
    assert codec.decode(summaries[-1][codec.OFFSETS_KEY]) == end_offsets(topic)
