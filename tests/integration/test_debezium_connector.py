"""A real Debezium PostgreSQL connector (`dev/stack up --with-debezium`) into a changelog table.

PostgreSQL -> Kafka Connect (JsonConverter with schemas, Debezium's defaults unless a test says
otherwise) -> icesink. After inserts, updates, deletes with tombstones, a re-insert of a deleted
id, a primary-key change, a large transaction and an ADD COLUMN mid-stream, the table read
through Spark SQL and through Trino equals `SELECT *` in PostgreSQL, value by value.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dev.kit.kafka import end_offsets
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.routing import route
from tests.support.debezium import delete_connector, pg_exec, pg_query, register_postgres_connector
from tests.support.spark import snapshots, table_exists
from tests.support.trino import trino_rows
from tests.support.wait import wait_until

pytestmark = [pytest.mark.debezium, pytest.mark.trino]

COLUMNS = ["id", "name", "email", "balance", "amount", "created_at", "born", "active", "tags", "doc", "uid"]
ADDED = "loyalty"


@pytest.fixture
def source(scenario: Scenario) -> Iterator[str]:
    """A PostgreSQL table of this test's own, with a few rows before the connector starts."""
    name = f"customers_{scenario.prefix}"
    pg_exec(
        f"""CREATE TABLE {name} (
            id serial PRIMARY KEY, name text, email text, balance numeric(12, 2), amount numeric,
            created_at timestamptz, born date, active boolean, tags text, doc jsonb, uid uuid)"""
    )
    insert(name, range(1, 21))
    yield name
    pg_exec(f"DROP TABLE IF EXISTS {name}")


def insert(table: str, ids: range, loyalty: bool = False) -> None:
    extra = f", {ADDED}" if loyalty else ""
    values = ", ".join(
        f"({i}, 'name {i}', 'u{i}@x.org', {i * 1000 + 0.25 * (i % 4) - 5000:.2f}, {Decimal(i) / 7:.6f}, "
        f"'2024-01-02 03:04:05.123456+02'::timestamptz + interval '{i} hours', DATE '2000-01-01' + {i}, "
        f'{"true" if i % 2 else "false"}, \'tag-{i % 3}\', \'{{"tier": "t{i % 3}", "n": [{i}, 2]}}\', '
        f"'{uuid.UUID(int=i)}'{f', {i % 5}' if loyalty else ''})"
        for i in ids
    )
    pg_exec(f"INSERT INTO {table} (id, {', '.join(COLUMNS[1:])}{extra}) VALUES {values}")


def expected(table: str, columns: list[str]) -> list[dict[str, Any]]:
    """PostgreSQL's rows, normalised: timestamps as naive UTC, uuids as text, json as Python values."""
    rows = pg_query(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id")
    return [dict(zip(columns, (_norm(v) for v in r), strict=True)) for r in rows]


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def _value(column: str, v: Any) -> Any:
    """A table value as PostgreSQL's, for `expected`: decimals (or their text, with
    decimal.handling.mode=string) as normalised Decimals, json text parsed."""
    if v is None:
        return None
    if column in ("balance", "amount"):
        return Decimal(v).normalize()
    if column == "doc":
        return json.loads(v)
    return _norm(v)


MISSING = "<no such column yet>"


def spark_rows(spark: SparkSession, table: str, columns: list[str]) -> list[dict[str, Any]]:
    have = set(spark.table(table).columns) if table_exists(spark, table) else set()
    select = ", ".join(c if c in have else f"'{MISSING}' AS {c}" for c in columns)
    rows = spark.sql(f"SELECT {select} FROM {table} ORDER BY id").collect() if have else []
    return [{c: _value(c, r[c]) if c in have else MISSING for c in columns} for r in rows]


def trino_table_rows(table: str, columns: list[str]) -> list[dict[str, Any]]:
    _, namespace, name = table.split(".")
    rows = trino_rows(f'SELECT {", ".join(columns)} FROM iceberg."{namespace}"."{name}" ORDER BY id')
    return [{c: _value(c, v) for c, v in zip(columns, r, strict=True)} for r in rows]


def until_equal(
    run: Callable[[], None], want: Callable[[], Any], got: Callable[[], Any], timeout_s: float = 120.0
) -> None:
    """Runs the job (available-now) until the table equals PostgreSQL: Debezium delivers within a
    second or so, so a run may end before the last changes reach Kafka."""
    last: dict[str, Any] = {}

    def equal() -> bool:
        run()
        last["want"], last["got"] = want(), got()
        return bool(last["got"] == last["want"])

    wait_until(equal, timeout_s, lambda: f"the table to equal PostgreSQL: {last['got']} != {last['want']}")


@pytest.mark.parametrize("decimal_mode", ["precise", "string"])
def test_debezium_connector_changes_mirror_postgres(
    spark: SparkSession, scenario: Scenario, source: str, decimal_mode: str
) -> None:
    connector = f"icesink-{scenario.prefix}"
    topic_prefix = f"{scenario.prefix}_pg"
    overrides = {} if decimal_mode == "precise" else {"decimal.handling.mode": "string"}
    register_postgres_connector(connector, topic_prefix, [source], **overrides)
    try:
        _mirror(spark, scenario, source, topic_prefix)
    finally:
        delete_connector(connector)


def _mirror(spark: SparkSession, scenario: Scenario, source: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.public.{source}"
    table = f"icesink.{route(topic, scenario.namespace)}"
    # The README's CDC example: Debezium's defaults, the key's fields as the table's key.
    config = scenario.config(
        **{
            "decode.format": "json",
            "decode.envelope": "debezium",
            "decode.key_format": "json",
            "decode.source_columns": ["lsn"],
            "tables.mode": "changelog",
            "tables.order_by": "_source_lsn",
        }
    )

    def run() -> None:
        Job(spark, config).run()

    # Inserts, updates, deletes (each followed by a tombstone), a re-insert of a deleted id and a
    # primary-key change (Debezium: a delete of the old key, a create of the new one).
    insert(source, range(21, 51))
    pg_exec(f"UPDATE {source} SET name = name || ' v2', balance = balance + 0.01 WHERE id % 5 = 0")
    pg_exec(f"DELETE FROM {source} WHERE id BETWEEN 3 AND 7")
    insert(source, range(5, 6))
    pg_exec(f"UPDATE {source} SET id = 10000, email = 'moved@x.org' WHERE id = 10")
    until_equal(run, lambda: expected(source, COLUMNS), lambda: spark_rows(spark, table, COLUMNS))

    # ADD COLUMN mid-stream, then one large transaction and a few single changes after it.
    pg_exec(f"ALTER TABLE {source} ADD COLUMN {ADDED} integer")
    pg_exec(
        "BEGIN;"
        + f"INSERT INTO {source} (id, name, {ADDED}) SELECT g, 'bulk ' || g, g % 7 FROM generate_series(100, 599) g;"
        + f"UPDATE {source} SET {ADDED} = id % 3, amount = amount * 3 WHERE id <= 40;"
        + f"DELETE FROM {source} WHERE id BETWEEN 41 AND 45 OR id BETWEEN 500 AND 549;"
        + "COMMIT"
    )
    insert(source, range(41, 43), loyalty=True)
    pg_exec(f"DELETE FROM {source} WHERE id = 10000")
    pg_exec(f"UPDATE {source} SET doc = NULL, tags = NULL, balance = -0.01 WHERE id = 1")
    columns = [*COLUMNS, ADDED]
    until_equal(run, lambda: expected(source, columns), lambda: spark_rows(spark, table, columns))

    types = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    decimal_types = (types["balance"], types["amount"])
    assert decimal_types in [("decimal(12,2)", "decimal(38,18)"), ("string", "string")]
    assert (types["id"], types["created_at"], types["born"], types[ADDED]) == ("int", "timestamp", "date", "int")
    assert spark.sql(f"SELECT count(*) - count(DISTINCT id) FROM {table}").first()[0] == 0
    assert not table_exists(spark, f"icesink.{scenario.namespace}.dead_letters")
    summaries = [s["summary"] for s in snapshots(spark, table) if codec.OFFSETS_KEY in s["summary"]]
    assert codec.decode(summaries[-1][codec.OFFSETS_KEY]) == end_offsets(topic)

    # Trino applies the equality deletes the same way.
    assert trino_table_rows(table, columns) == expected(source, columns)
