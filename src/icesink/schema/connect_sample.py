"""Which Connect schemas a sample of JSON records carries, found in the driver's Python (a new
table's columns: batch/direct_json.py), as Spark's aggregate over `get_json_object(..., '$.schema')`
finds them (batch/decode/json.py `connect_rows`), or None where the two readings may differ. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from icesink.kafka import wire
from icesink.schema.connect import is_connect_schema


class UnsureRecordError(ValueError):
    """A record Spark's JSON functions may read otherwise than Python's strict parser."""


# Jackson's default read limits (StreamReadConstraints), which Spark's JSON functions keep: past
# them Jackson refuses the record (`get_json_object` gives null) where Python would read it.
_MAX_NUMBER_CHARS = 1000
_MAX_NAME_CHARS = 50_000
_MAX_DEPTH = 1000


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise UnsureRecordError("a duplicate key")  # Jackson and Python may keep different ones
    if any(len(k) > _MAX_NAME_CHARS for k in out):
        raise UnsureRecordError("a name longer than Jackson reads")
    return out


def _no_constant(name: str) -> Any:
    raise UnsureRecordError(f"non-standard JSON {name}")


def _integer(token: str) -> int:
    if len(token) > _MAX_NUMBER_CHARS:
        raise UnsureRecordError("a number longer than Jackson reads")
    return int(token)


def _real(token: str) -> float:
    value = float(token)
    if len(token) > _MAX_NUMBER_CHARS or not math.isfinite(value):
        # 1e400 is inf to Python, which a schema's text then spells Infinity; Jackson's copy of it
        # another way again: only Spark's reading says what Spark's path makes of it.
        raise UnsureRecordError("a number Jackson reads otherwise")
    return value


def sample_schemas(values: Iterable[bytes]) -> tuple[list[str], int] | None:
    """The distinct top-level `schema` values of JSON records that look like Connect schemas (as
    JSON texts, in order of first appearance), and how many records carry none: what the batch
    decoder's aggregate over `schema_text` finds (batch/decode/json.py `connect_rows`), found in
    this process. Values framed by Confluent's JSONSerializer are unframed first, as `json_text`
    does. None when a record is not strict JSON in UTF-8 (not valid, trailing text, NaN, a
    duplicate key, numbers or names past Jackson's limits, more brackets than its depth limit),
    or its `schema` is a string holding a Connect schema (`get_json_object` unquotes it): Spark's
    reading might take it otherwise, so only Spark says."""
    texts: dict[str, None] = {}
    others = 0
    for value in values:
        data = wire.json_text(value)
        if data.count(b"{") + data.count(b"[") > _MAX_DEPTH:  # maybe nested past Jackson's limit
            return None
        try:
            record = json.loads(
                data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
                parse_int=_integer, parse_float=_real,
            )  # fmt: skip
        except (ValueError, RecursionError):
            return None
        schema = record.get("schema") if isinstance(record, dict) else None
        if isinstance(schema, dict) and isinstance(schema.get("type"), str):
            texts.setdefault(json.dumps(schema, sort_keys=True), None)
        elif isinstance(schema, str) and is_connect_schema(schema):
            return None
        else:
            others += 1
    return list(texts), others
