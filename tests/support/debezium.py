"""Debezium in the tests: change events as Kafka Connect's JsonConverter writes them, and the
Debezium pipeline of `dev/stack up --with-debezium` (its PostgreSQL, and connectors on its Kafka Connect).

Events are written with the converter's defaults (`schemas.enable=true`, `decimal.format=BASE64`):
`{"schema": ..., "payload": ...}` keys and values.

A connector registered here captures the listed tables of the stack's database into Kafka topics
`{topic_prefix}.{schema}.{table}`, in the worker's converters (JSON with `schema`/`payload`).
Everything else is Debezium's defaults, so the tests see what a user's Debezium produces.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import psycopg
import requests

from dev.kit import debezium_avro as dbz
from dev.kit.changes import Change

# Change events as Connect's JSON: dev/kit/debezium_json.py (the benchmark writes them too).
from dev.kit.debezium_json import (
    DECIMAL,
    change,
    decimal_field,
    decimal_value,
    envelope_schema,
    field,
    key_schema,
    struct,
    wrapped,
)
from dev.kit.scenario import Scenario
from tests.support.values import avro_config, avro_keys, avro_values

__all__ = [
    "DECIMAL", "change", "decimal_field", "decimal_value", "envelope_schema", "field", "key_schema", "struct",
    "wrapped",
]  # fmt: skip


# ---------------------------------------------------------------- change events, as Debezium's Avro converter writes


def _semantic(avro: str, name: str) -> list[Any]:
    return ["null", {"type": avro, "connect.version": 1, "connect.name": name}]


AVRO_ROW: dict[str, Any] = {
    "type": "record",
    "name": "Value",
    "namespace": "shop.public.accounts",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "v", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "seen", "type": _semantic("long", "io.debezium.time.MicroTimestamp"), "default": None},
        {"name": "born", "type": _semantic("int", "io.debezium.time.Date"), "default": None},
        {"name": "updated", "type": _semantic("string", "io.debezium.time.ZonedTimestamp"), "default": None},
        {"name": "balance", "type": ["null", dbz.VARIABLE_DECIMAL], "default": None},
        {
            "name": "price",
            "type": [
                "null",
                {
                    "type": "bytes",
                    "scale": 2,
                    "precision": 10,
                    "connect.version": 1,
                    "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
                    "connect.name": DECIMAL,
                    "logicalType": "decimal",
                },
            ],
            "default": None,
        },
    ],
    "connect.name": "shop.public.accounts.Value",
}
AVRO_ENVELOPE = dbz.envelope(AVRO_ROW)
AVRO_KEY = dbz.key_schema("shop.public.accounts", [{"name": "id", "type": "long"}])
variable_decimal = dbz.variable_decimal


def avro_row(key: int, seq: int) -> dict[str, Any]:
    """A row image of AVRO_ROW: every semantic type set, some of them null now and then."""
    return {
        "id": key, "v": seq, "name": f"k{key}-{seq}" if seq % 7 else None,
        "seen": 1_700_000_000_000_000 + seq * 1_001, "born": seq % 20_000 - 5_000 if seq % 5 else None,
        "updated": f"2024-01-02T03:04:{seq % 60:02d}.{seq % 1000:03d}+02:00" if seq % 3 else None,
        "balance": variable_decimal(f"{seq}.{seq % 97:02d}") if seq % 4 else None,
        "price": Decimal(f"{seq % 10_000}.{seq % 100:02d}"),
    }  # fmt: skip


def avro_event(op: str, key: int, seq: int, lsn: int) -> dict[str, Any]:
    """A Debezium change event of `op` (I, U, D) for `key`: a delete carries the key's row as before."""
    return dbz.event(op, avro_row(key, seq), lsn)


def widened(columns: int) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    """AVRO_ENVELOPE with `columns` more nullable bigint columns (`c0`...), and a row image of
    AVRO_ROW widened alike: `c{k}` is v * k, null where bit k % 12 of v is set (`wide_value`): as
    many combinations of null columns as changes, nearly."""
    extra = [{"name": f"c{k}", "type": ["null", "long"], "default": None} for k in range(columns)]
    row = {**AVRO_ROW, "fields": [*AVRO_ROW["fields"], *extra]}

    def image(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, **{f"c{k}": wide_value(row["v"], k) for k in range(columns)}}

    return dbz.envelope(row), image


def wide_value(v: int, k: int) -> int | None:
    """Column `c{k}` of the row of `v` (`widened`)."""
    return None if v >> (k % 12) & 1 else v * k


def spelled(names: dict[str, str]) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    """AVRO_ENVELOPE with its row's fields renamed (`names`: old -> new, as a database that
    upper-cases names spells them), and a row image of AVRO_ROW renamed alike."""
    row = {**AVRO_ROW, "fields": [{**f, "name": names.get(f["name"], f["name"])} for f in AVRO_ROW["fields"]]}
    return dbz.envelope(row), lambda image: {names.get(k, k): v for k, v in image.items()}


def debezium_changes(
    topic: str, changes: list[Change], names: dict[str, str] | None = None, columns: int = 0
) -> list[tuple[bytes | None, bytes | None, int]]:  # fmt: skip
    """(key, value, partition) of each change as Debezium writes it in Avro with its defaults: the
    key an Avro record of the id, a delete carrying its row as before; a T (a delete Debezium
    follows with a tombstone, `tombstones.on.delete`) both the delete and the tombstone. With
    `names`, the row's fields renamed (`spelled`); with `columns`, that many more (`widened`)."""
    schema, rename = spelled(names) if names else widened(columns) if columns else (AVRO_ENVELOPE, lambda image: image)
    events = [
        dbz.event("D" if c.op == "T" else c.op, rename(avro_row(c.key, c.seq)), c.seq + 1) for c in changes
    ]  # fmt: skip
    values = avro_values(topic, schema, events)
    keys = avro_keys(topic, AVRO_KEY, [{"id": c.key} for c in changes])
    out: list[tuple[bytes | None, bytes | None, int]] = []
    for c, key, value in zip(changes, keys, values, strict=True):
        out.append((key, value, c.partition))
        if c.op == "T":
            out.append((key, None, c.partition))
    return out


def plain_json_changes(changes: list[Change]) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, partition) of each change as Debezium writes it with the JsonConverter's
    schemas off: `{"id": ...}` keys, envelopes without the schema/payload wrapper; a delete's
    before image holds the key's columns only (the default replica identity), the rest null; a T
    is the delete and its tombstone."""
    out: list[tuple[bytes | None, bytes | None, int]] = []
    for c in changes:
        row = {"id": c.key, "v": c.seq, "name": f"k{c.key}-{c.seq}"}
        op = {"I": "c", "U": "u"}.get(c.op, "d")
        before, after = ({"id": c.key, "v": None, "name": None}, None) if op == "d" else (None, row)
        source = {"version": "3.6.1.Final", "connector": "postgresql", "lsn": c.seq + 1, "ts_ms": 1_700_000_000_000}
        event = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_001}
        key = json.dumps({"id": c.key}).encode()
        out.append((key, json.dumps(event).encode(), c.partition))
        if c.op == "T":
            out.append((key, None, c.partition))
    return out


def debezium_config(scenario: Scenario, **overrides: Any) -> dict[str, Any]:
    """A changelog table of Debezium events in Avro, keyed by the Avro record key's fields."""
    return avro_config(
        scenario,
        **{
            "decode.envelope": "debezium",
            "decode.key_format": "avro",
            "decode.source_columns": ["ts_ms", "lsn"],
            "tables.mode": "changelog",
            "tables.partition_by": ["bucket(4, id)"],
            **overrides,
        },
    )


# ---------------------------------------------------------------- the stack's PostgreSQL and Kafka Connect

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
_HTTP_TIMEOUT_S = 30.0


class ConnectorError(RuntimeError):
    """A connector that failed, or did not reach the state waited for in time."""


def postgres_dsn() -> str:
    """The stack's PostgreSQL as a libpq URI (`dev/stack env` exports it; the default is the stack's)."""
    return os.environ.get("ICESINK_POSTGRES_DSN", "postgresql://icesink@127.0.0.1:5433/icesink")


def connect_url() -> str:
    """The REST API of the stack's Kafka Connect worker, without a trailing slash."""
    return os.environ.get("ICESINK_CONNECT_URL", "http://127.0.0.1:8083").rstrip("/")


def connect_log() -> Path:
    """The worker's log file, where `dev/stack` writes it."""
    cache = Path(os.environ.get("ICESINK_CACHE", Path.home() / ".cache" / "icesink"))
    return Path(os.environ.get("ICESINK_STACK_DIR", cache / "stack")) / "logs" / "connect.log"


def pg_exec(sql: str, *params: Any) -> None:
    """Runs one statement (or, without params, several separated by `;`) in its own autocommit session.

    Placeholders are psycopg's (`%s`); several statements in ONE transaction: `BEGIN; ...; COMMIT`.
    """
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        conn.execute(sql, params or None)


def pg_query(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """All rows of one query, as tuples of psycopg's Python values."""
    with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
        return list(conn.execute(sql, params or None).fetchall())


def slot_name(connector: str) -> str:
    """The replication slot (and, with `_pub`, the publication) of a connector: a valid, unique PostgreSQL slot name."""
    name = "dbz_" + re.sub(r"[^a-z0-9_]", "_", connector.lower())
    if len(name) > 59:  # slots: 63 characters at most; leave room for `_pub`
        name = name[:50] + "_" + hashlib.sha1(connector.encode()).hexdigest()[:8]
    return name


def connector_status(name: str) -> dict[str, Any] | None:
    """`GET /connectors/{name}/status`, or None when the worker does not know the connector."""
    response = requests.get(f"{connect_url()}/connectors/{name}/status", timeout=_HTTP_TIMEOUT_S)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    status: dict[str, Any] = response.json()
    return status


def register_postgres_connector(
    name: str, topic_prefix: str, tables: list[str], *, timeout_s: float = 90.0, **overrides: str
) -> None:
    """Creates (or reconfigures) a Debezium PostgreSQL connector and waits until it and its task are RUNNING.

    `tables` are `schema.table` (regular expressions, as Debezium's `table.include.list`); a name
    without a schema is in `public`. The replication slot and the publication are named after the
    connector (`slot_name`), so connectors never share them. Overrides are Debezium or Connect keys:
    a key with a dot is taken as is, in others `_` stands for `.` (`snapshot_mode="no_data"` is
    `snapshot.mode`). When the task is RUNNING its slot exists: changes from then on are captured.
    Raises ConnectorError (status JSON and the tail of the worker's log) when the connector or its
    task FAILED, or after `timeout_s`.
    """
    dsn = urlparse(postgres_dsn())
    slot = slot_name(name)
    config = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "database.hostname": dsn.hostname or "127.0.0.1",
        "database.port": str(dsn.port or 5432),
        "database.user": unquote(dsn.username or "icesink"),
        "database.password": unquote(dsn.password or ""),
        "database.dbname": dsn.path.lstrip("/") or "icesink",
        "topic.prefix": topic_prefix,
        "table.include.list": ",".join(t if "." in t else f"public.{t}" for t in tables),
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": "filtered",
    }
    config.update({key if "." in key else key.replace("_", "."): value for key, value in overrides.items()})
    deadline = time.monotonic() + timeout_s
    while True:
        response = requests.put(f"{connect_url()}/connectors/{name}/config", json=config, timeout=_HTTP_TIMEOUT_S)
        if response.ok:
            break
        # 409: the worker is rebalancing (e.g. just started); anything else is a bad config.
        if response.status_code != 409 or time.monotonic() > deadline:
            raise ConnectorError(
                f"PUT /connectors/{name}/config: HTTP {response.status_code} {response.text}"
                f"{_validation_errors(name, config)}"
            )
        time.sleep(0.5)
    _wait_for(name, "RUNNING", deadline, timeout_s)
    while not pg_query("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", slot):
        if time.monotonic() > deadline:
            raise ConnectorError(f"connector {name} is RUNNING but its replication slot {slot} does not exist")
        time.sleep(0.2)


def delete_connector(name: str, *, timeout_s: float = 60.0) -> None:
    """Deletes a connector with its Connect offsets, replication slot and publication; a missing one is fine.

    The offsets go too (the connector is stopped first, as Connect requires), so a connector
    registered again under the same name starts afresh, with a snapshot.
    """
    deadline = time.monotonic() + timeout_s
    url = f"{connect_url()}/connectors/{name}"
    if connector_status(name) is not None:
        requests.put(f"{url}/stop", timeout=_HTTP_TIMEOUT_S).raise_for_status()
        _wait_for(name, "STOPPED", deadline, timeout_s)
        requests.delete(f"{url}/offsets", timeout=_HTTP_TIMEOUT_S).raise_for_status()
        response = requests.delete(url, timeout=_HTTP_TIMEOUT_S)
        if response.status_code != 404:
            response.raise_for_status()
        # The status topic forgets the connector a moment later (until then: UNASSIGNED, type unknown).
        while (status := connector_status(name)) is not None:
            if time.monotonic() > deadline:
                raise ConnectorError(_describe(name, f"still known {timeout_s:.0f}s after DELETE", status))
            time.sleep(0.1)
    slot = slot_name(name)
    while True:
        # A stopped task may hold the slot a moment longer; end its walsender, then drop.
        rows = pg_query("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", slot)
        if not rows:
            break
        try:
            if rows[0][0] is not None:
                pg_exec("SELECT pg_terminate_backend(%s)", rows[0][0])
            pg_exec("SELECT pg_drop_replication_slot(%s)", slot)
            break
        except psycopg.errors.UndefinedObject:  # gone meanwhile
            break
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    pg_exec(f'DROP PUBLICATION IF EXISTS "{slot}_pub"')


def _wait_for(name: str, state: str, deadline: float, timeout_s: float) -> None:
    """Until the connector and all its tasks are in `state` (RUNNING: at least one task; STOPPED: none).

    A FAILED connector or task ends a wait for RUNNING at once; a stopped FAILED one becomes STOPPED.
    """
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = connector_status(name)
        if status is not None:
            states = [status["connector"]["state"]] + [task["state"] for task in status["tasks"]]
            if state == "RUNNING" and "FAILED" in states:
                raise ConnectorError(_describe(name, "FAILED", status))
            tasks_ready = bool(status["tasks"]) if state == "RUNNING" else not status["tasks"]
            if tasks_ready and all(s == state for s in states):
                return
        time.sleep(0.25)
    raise ConnectorError(_describe(name, f"not {state} after {timeout_s:.0f}s", status))


def _validation_errors(name: str, config: dict[str, str]) -> str:
    """The config's errors as Connect's validate endpoint lists them, one a line (or nothing).

    Connect 4.1 answers a PUT of an invalid Debezium config with HTTP 500 and a NullPointerException
    (AbstractHerder.maybeAddConfigErrors expects a value for every key of the connector's ConfigDef,
    and Debezium's validate() does not return one for all), not with the errors.
    """
    try:
        response = requests.put(
            f"{connect_url()}/connector-plugins/{config['connector.class']}/config/validate",
            json={**config, "name": name},
            timeout=_HTTP_TIMEOUT_S,
        )
        configs = response.json()["configs"] if response.ok else []
    except (requests.RequestException, ValueError, KeyError):
        return ""
    errors = [f"\n  {c['value']['name']}: {e}" for c in configs if c.get("value") for e in c["value"]["errors"]]
    return "\nvalidation errors:" + "".join(errors) if errors else ""


def _describe(name: str, what: str, status: dict[str, Any] | None, log_lines: int = 40) -> str:
    try:
        tail = "".join(connect_log().read_text(errors="replace").splitlines(keepends=True)[-log_lines:])
    except OSError as exc:
        tail = f"(no worker log: {exc})\n"
    return (
        f"connector {name}: {what}\nstatus: {json.dumps(status, indent=2)}\n"
        f"last {log_lines} lines of {connect_log()}:\n{tail}"
    )
