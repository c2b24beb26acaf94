"""Debezium's change events as its Avro converter writes them with its defaults (PostgreSQL
connector): the envelope of a table's row (`before`, `after`, the source block, `transaction`,
`op`, `ts_ms`), the key record of its primary key, and the events themselves. Shared by the tests
and the benchmark."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

OPS = {"I": "c", "U": "u", "D": "d"}  # the change stream's words -> Debezium's op
# Debezium's VariableScaleDecimal, as its Avro converter declares it (a PostgreSQL numeric without scale).
VARIABLE_DECIMAL: dict[str, Any] = {
    "type": "record",
    "name": "VariableScaleDecimal",
    "namespace": "io.debezium.data",
    "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
    "connect.doc": "Variable scaled decimal",
    "connect.version": 1,
    "connect.name": "io.debezium.data.VariableScaleDecimal",
}
SOURCE: dict[str, Any] = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "snapshot", "type": ["null", {"type": "string", "connect.name": "io.debezium.data.Enum"}]},
        {"name": "db", "type": "string"},
        {"name": "sequence", "type": ["null", "string"], "default": None},
        {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
        {"name": "xmin", "type": ["null", "long"], "default": None},
    ],
}
TRANSACTION: dict[str, Any] = {
    "type": "record",
    "name": "block",
    "namespace": "event",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "total_order", "type": "long"},
        {"name": "data_collection_order", "type": "long"},
    ],
}


def envelope(row: dict[str, Any]) -> dict[str, Any]:
    """The envelope schema of a row record (named `Value` in its table's namespace)."""
    namespace = row["namespace"]
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": namespace,
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": SOURCE},
            {"name": "transaction", "type": ["null", TRANSACTION], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
        "connect.version": 2,
        "connect.name": f"{namespace}.Envelope",
    }


def key_schema(namespace: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The key record of a table's primary key."""
    return {
        "type": "record",
        "name": "Key",
        "namespace": namespace,
        "fields": fields,
        "connect.name": f"{namespace}.Key",
    }


def event(op: str, row: dict[str, Any], lsn: int, table: str = "accounts") -> dict[str, Any]:
    """A change event of `op` (I, U, D) of `row`: a delete carries the row as before."""
    source = {
        "version": "3.6.1.Final", "connector": "postgresql", "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false",
        "db": "shop", "sequence": f'["{lsn - 1}","{lsn}"]', "table": table, "txId": lsn // 3, "lsn": lsn,
        "xmin": None,
    }  # fmt: skip
    before, after = (row, None) if op == "D" else (None, row)
    return {"before": before, "after": after, "source": source, "transaction": None, "op": OPS[op], "ts_ms": lsn}


def variable_decimal(text: str) -> dict[str, Any]:
    """A VariableScaleDecimal value: the scale and the unscaled value's two's-complement bytes."""
    d = Decimal(text)
    scale = -int(d.as_tuple().exponent)
    unscaled = int(d.scaleb(scale))
    return {"scale": scale, "value": unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)}
