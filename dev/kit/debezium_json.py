"""Debezium's change events as Kafka Connect's JsonConverter writes them with its defaults
(`schemas.enable=true`: every record `{"schema": ..., "payload": ...}`; decimals precise, as the
base64 of their unscaled bytes), for the tests and the benchmark."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

DECIMAL = "org.apache.kafka.connect.data.Decimal"


def field(column: str, kind: str, optional: bool = True, **extra: Any) -> dict[str, Any]:
    """A struct field's schema; `name=` in `extra` is a logical type's name."""
    return {"type": kind, "optional": optional, "field": column, **extra}


def decimal_field(column: str, precision: int, scale: int) -> dict[str, Any]:
    params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return field(column, "bytes", name=DECIMAL, version=1, parameters=params)


def decimal_value(text: str, scale: int) -> str:
    """Connect's Decimal in JSON: base64 of the unscaled value's big-endian two's complement."""
    unscaled = int(Decimal(text).scaleb(scale))
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


def struct(name: str, fields: list[dict[str, Any]], optional: bool = False, **extra: Any) -> dict[str, Any]:
    return {"type": "struct", "fields": fields, "optional": optional, "name": name, **extra}


def envelope_schema(prefix: str, row_fields: list[dict[str, Any]]) -> dict[str, Any]:
    row = struct(f"{prefix}.Value", row_fields, optional=True)
    source = struct(
        "io.debezium.connector.postgresql.Source",
        [field("ts_ms", "int64", optional=False), field("db", "string", optional=False), field("lsn", "int64")],
        field="source",
    )
    return struct(
        f"{prefix}.Envelope",
        [
            {**row, "field": "before"},
            {**row, "field": "after"},
            source,
            field("op", "string", optional=False),
            field("ts_ms", "int64"),
        ],
        version=2,
    )


def key_schema(prefix: str, key_fields: list[dict[str, Any]]) -> dict[str, Any]:
    return struct(f"{prefix}.Key", key_fields)


def wrapped(schema: dict[str, Any], payload: Any, spaced: bool = False) -> bytes:
    """A record as JsonConverter writes it (compact: no spaces), or `spaced` as another writer might."""
    separators = None if spaced else (",", ":")
    return json.dumps({"schema": schema, "payload": payload}, separators=separators).encode()


def change(
    schema: dict[str, Any], op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int
) -> bytes:
    source = {"ts_ms": 1_700_000_000_000 + lsn, "db": "shop", "lsn": lsn}
    return wrapped(schema, {"before": before, "after": after, "source": source, "op": op, "ts_ms": lsn})
