"""Avro schema helpers for decoding. Pure: JSON schema text in, JSON schema text out.

Spark's from_avro in PERMISSIVE mode turns a body that does not decode into a row of nulls, which
cannot be told apart from a record whose fields are all null. So the reader schema gets one more
field, non-null with a default: Avro's schema resolution fills it for every record that decodes,
and it stays null exactly for the ones that failed.
"""

from __future__ import annotations

import json
from typing import Any

SENTINEL = "__icesink_decoded"


class AvroSchemaError(ValueError):
    """A writer schema icesink cannot turn into table rows."""


def parse(schema_text: str) -> dict[str, Any]:
    try:
        schema = json.loads(schema_text)
    except ValueError as e:
        raise AvroSchemaError(f"not a JSON Avro schema: {e}") from e
    if not isinstance(schema, dict) or schema.get("type") != "record":
        kind = schema.get("type") if isinstance(schema, dict) else schema
        raise AvroSchemaError(f"top-level type is {kind!r}, not a record")
    return schema


def reader_with_sentinel(schema_text: str) -> str:
    schema = parse(schema_text)
    fields = [f for f in schema.get("fields", []) if f.get("name") != SENTINEL]
    fields.append({"name": SENTINEL, "type": "boolean", "default": True})
    return json.dumps({**schema, "fields": fields})
