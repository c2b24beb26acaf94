"""Routing rules: named groups, fan-out, static routing by a field, dynamic table names."""

from __future__ import annotations

from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import CATALOG, Scenario
from icesink.job.query import Job
from tests.support.spark import table_exists


def ids(spark: SparkSession, table: str) -> list[int]:
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())


def letters(spark: SparkSession, scenario: Scenario) -> list[tuple[str, int, str, str]]:
    rows = spark.sql(
        f"SELECT topic, offset, error_class, error_message FROM {CATALOG}.{scenario.namespace}.dead_letters"
    ).collect()
    return sorted((r.topic, r.offset, r.error_class, r.error_message) for r in rows)


def test_named_groups_fan_out_and_static_routing(spark: SparkSession, scenario: Scenario) -> None:
    orders, mixed = scenario.topic("orders.20240102"), scenario.topic("mixed")
    create_topics(orders, mixed, partitions=1)
    produce(orders, [{"id": i} for i in range(3)])
    produce(
        mixed,
        [
            {"id": 10, "kind": "click"},
            {"id": 11, "kind": "buy"},
            {"id": 12, "kind": "refund"},  # no value routes it
            {"id": 13},  # no kind at all
            "not json",
            {"id": 14, "kind": "click"},
        ],
    )
    ns = scenario.namespace
    rules = [
        {"topics": rf"{scenario.prefix}_(?P<table>[a-z]+)\.\d{{8}}", "tables": ["{table}", "{table}_audit"]},
        {"topics": mixed, "field": "kind", "values": {"click": ["clicks"], "buy": ["buys", "orders_audit"]}},
    ]
    Job(spark, scenario.config(**{"routing.rules": rules})).run()

    assert ids(spark, f"{CATALOG}.{ns}.orders") == [0, 1, 2]
    assert ids(spark, f"{CATALOG}.{ns}.orders_audit") == [0, 1, 2, 11], "fan-out, and two topics into one table"
    assert ids(spark, f"{CATALOG}.{ns}.clicks") == [10, 14]
    assert ids(spark, f"{CATALOG}.{ns}.buys") == [11]
    assert letters(spark, scenario) == [
        (mixed, 2, "Unrouted", "field kind = 'refund' matches none of the rule's values"),
        (mixed, 3, "Unrouted", "no value in field kind"),
        (mixed, 4, "JsonParseError", "not valid JSON"),
    ]

    # A replay of the same offsets adds nothing anywhere.
    Job(spark, scenario.config(**{"routing.rules": rules})).run()
    assert ids(spark, f"{CATALOG}.{ns}.orders_audit") == [0, 1, 2, 11]
    assert len(letters(spark, scenario)) == 3


def test_dynamic_table_names_are_validated_and_unknown_tables_policed(spark: SparkSession, scenario: Scenario) -> None:
    inbox, strict = scenario.topic("inbox"), scenario.topic("strict")
    create_topics(inbox, strict, partitions=1)
    produce(
        inbox,
        [
            {"id": 1, "target": "alpha"},
            {"id": 2, "target": "Beta"},
            {"id": 3, "target": "../../warehouse/evil"},
            {"id": 4, "target": "other_ns.alpha"},
            {"id": 5, "target": "dead_letters"},
            {"id": 6, "target": "alpha"},
        ],
    )
    ns = scenario.namespace
    rules = [
        {"topics": inbox, "field": "target", "dynamic": True},
        {"topics": strict, "field": "target", "dynamic": True, "unknown_tables": "dead-letter"},
    ]
    Job(spark, scenario.config(**{"routing.rules": rules})).run()
    assert ids(spark, f"{CATALOG}.{ns}.alpha") == [1, 6]
    assert ids(spark, f"{CATALOG}.{ns}.beta") == [2]
    assert not table_exists(spark, f"{CATALOG}.other_ns.alpha")
    assert letters(spark, scenario) == [
        (inbox, 2, "InvalidTableName", "field target = '../../warehouse/evil' is not a valid table name"),
        (inbox, 3, "InvalidTableName", "field target = 'other_ns.alpha' is not a valid table name"),
        (inbox, 4, "InvalidTableName", f"field target names the dead-letter table {ns}.dead_letters"),
    ]

    produce(strict, [{"id": 7, "target": "alpha"}, {"id": 8, "target": "gamma"}])
    Job(spark, scenario.config(**{"routing.rules": rules})).run()
    assert ids(spark, f"{CATALOG}.{ns}.alpha") == [1, 6, 7]
    assert not table_exists(spark, f"{CATALOG}.{ns}.gamma")
    assert letters(spark, scenario)[-1] == (
        strict,
        1,
        "UnknownTable",
        f"table {ns}.gamma does not exist (routing unknown_tables: dead-letter)",
    )
